"""The compiled problem: arrays agree with the documents and cannot be written."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from optsched.model.queue import Queue
from optsched.problem import compile_problem
from tests import strategies


def test_arrays(example: Any) -> None:
    c, q, _ = example
    p = compile_problem(c, q)
    assert p.n_real == 4 and p.n_nodes == 8  # 4 provisioning slots of spot-a100
    assert p.resources[:3] == ("cpu", "memory", "rdma_nics")
    assert p.cap[p.node_index["a100-0"], 0] == 96000
    assert list(p.node_dev_count[:4]) == [8, 8, 8, 8]
    a100 = p.node_index["a100-0"]
    groups = p.dev_group[p.node_dev_start[a100]: p.node_dev_start[a100] + 8]
    assert len(set(groups[:4])) == 1 and groups[0] != groups[4]
    assert p.node_max_group[a100] == 4 and p.node_max_group[0] == 8
    assert p.node_spot.tolist()[:4] == [False, False, False, True]
    leaf = p.node_dom[:, p.level_index("leaf")]
    assert p.domain_ids[leaf[0]] == "leaf-0" and p.domain_ids[leaf[2]] == "leaf-1"
    assert p.flavors == ("H100-SXM", "A100-SXM")
    r = p.tenant_index["research"]
    assert p.nominal[r, 0] == 8 and p.borrow_limit[r, 0] == 8 and p.lend_limit[r, 0] == 4
    assert np.isinf(p.borrow_limit[r, 1])
    assert p.running[0].placements[0].devices == (8, 9, 10, 11)  # flat indices on h100-1


def test_read_only(example: Any) -> None:
    c, q, _ = example
    p = compile_problem(c, q)
    with pytest.raises(ValueError):
        p.cap[0, 0] = 1.0


@settings(max_examples=60, deadline=None)
@given(strategies.clusters(max_nodes=8))
def test_device_arrays_read_each_node_as_its_document_says(c: Any) -> None:
    """The device arrays, built once per distinct node shape and spread in bulk, against the
    documents read node by node (slots of provisionable pools from their templates)."""
    p = compile_problem(c, Queue(now=0.0, jobs=[]))
    rows = [(n, n) for n in c.nodes]
    for pool in c.pools:
        if pool.provisionable:
            rows += [(None, c.node_templates[pool.provisionable.template])] * pool.provisionable.max_nodes
    assert p.n_nodes == len(rows)
    group = 0
    for i, (_, shape) in enumerate(rows):
        count = shape.devices.count if shape.devices else 0
        start = int(p.node_dev_start[i])
        assert p.node_dev_count[i] == count
        assert p.node_model[i] == (p.models.index(shape.devices.model) if shape.devices else -1)
        for r, name in enumerate(p.resources):
            assert p.cap[i, r] == shape.capacity.get(name, 0.0)
        listed = [list(g) for g in (shape.interconnect or [list(range(count))]) if g]
        named = {d for g in listed for d in g}
        groups = listed + [[d] for d in range(count) if d not in named] if count else []
        assert p.node_max_group[i] == max((len(g) for g in groups), default=0)
        for k, members in enumerate(groups):
            assert p.group_node[group + k] == i and p.group_size[group + k] == len(members)
            for d in members:
                assert p.dev_group[start + d] == group + k
        group += len(groups)
        for d in range(count):
            assert p.dev_node[start + d] == i and p.dev_local[start + d] == d
            assert p.dev_healthy[start + d] == (d not in (shape.devices.unhealthy if shape.devices else []))
    assert len(p.group_node) == group and len(p.dev_node) == int(p.node_dev_count.sum())


@settings(max_examples=60, deadline=None)
@given(strategies.rounds(max_nodes=6, max_jobs=8))
def test_shape_numbers_equal_exactly_where_the_shapes_do(r: Any) -> None:
    """`eligibility.shape_key` numbers the replica shapes of the problem's groups: two groups, of
    queued or running jobs, get one number exactly when their shape tuples (`SHAPE_KEY`, what
    decides the eligible nodes) are equal; a group from another compiled problem gets its tuple,
    equal to no number, and the mask of its shape."""
    from optsched.concerns import eligibility

    c, q = r
    p = compile_problem(c, q)
    groups = [(job, g) for job in (*p.jobs, *p.running) for g in job.groups]
    keys = [eligibility.shape_key(p, job, g) for job, g in groups]
    shapes = [p.derived(eligibility.SHAPE_KEY, job, g) for job, g in groups]
    assert all(isinstance(k, int) for k in keys)
    for a in range(len(groups)):
        for b in range(len(groups)):
            assert (keys[a] == keys[b]) == (shapes[a] == shapes[b])
    other = compile_problem(c, q)
    for (job, g), mine in zip(((j, g) for j in (*other.jobs, *other.running) for g in j.groups), groups, strict=True):
        key = eligibility.shape_key(p, job, g)
        assert key == p.derived(eligibility.SHAPE_KEY, job, g) and key not in keys
        assert np.array_equal(eligibility.mask(p, job, g), eligibility.mask(p, *mine))
