"""The compiled problem: arrays agree with the documents and cannot be written."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from optsched.problem import compile_problem


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
