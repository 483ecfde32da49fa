"""The spread concern's two forms of one rule: `blocked_domains` (the list the greedy engine hides)
refuses exactly the domains `allowed_domains` (the mask the validator's rule and the model use) refuses."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.concerns import spread
from optsched.model import Cluster, Queue
from optsched.problem import compile_problem
from tests.strategies import rounds


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=rounds(), draw=st.data())
def test_blocked_domains_are_the_complement_of_allowed_domains(data: tuple[Cluster, Queue],
                                                               draw: st.DataObject) -> None:
    p = compile_problem(*data)
    spread_groups = [(j, g) for j in p.jobs for g in j.groups if g.spec.spread is not None]
    if not spread_groups:
        return
    job, group = draw.draw(st.sampled_from(spread_groups))
    assert group.spec.spread is not None
    level = p.level_index(group.spec.spread.level)
    doms = spread.eligible_domains(p, job, group, level).tolist()
    ids = sorted(set(p.node_domain_at(level).tolist()))  # also domains without an eligible node
    counts = draw.draw(st.dictionaries(st.sampled_from(ids), st.integers(1, 4), max_size=len(ids)))
    # every eligible domain holding replicas makes the lowest count positive: draw that case too
    if doms and draw.draw(st.booleans()):
        counts = {**{d: 1 for d in doms}, **counts}
    allowed = spread.allowed_domains(p, job, group, counts)
    refused = [d for i, d in enumerate(doms) if not allowed[i]]
    assert sorted(spread.blocked_domains(p, job, group, counts)) == refused
    assert not allowed[-1]  # nodes outside the eligible domains are refused as well


def test_a_full_domain_is_blocked_until_every_domain_holds_as_many() -> None:
    cluster = Cluster.model_validate({
        "topology": {"levels": ["leaf"], "domains": [{"id": f"l{i}", "level": "leaf"} for i in range(3)]},
        "nodes": [{"id": f"n{i}", "domain": f"l{i % 3}", "capacity": {"cpu": 8000, "memory": 32768}}
                  for i in range(6)]})
    queue = Queue.model_validate({"jobs": [{"id": "web", "groups": [{
        "name": "pod", "replicas": {"min": 3, "max": 3}, "request": {"cpu": 1000, "memory": 1024},
        "spread": {"level": "leaf", "max_skew": 1}}]}]})
    p = compile_problem(cluster, queue)
    job = p.jobs[0]
    group = job.groups[0]
    leaf = p.node_domain_at(p.level_index("leaf"))
    a, b, c = (int(leaf[i]) for i in range(3))
    assert spread.blocked_domains(p, job, group, {}) == []
    assert spread.blocked_domains(p, job, group, {a: 1}) == [a]
    assert sorted(spread.blocked_domains(p, job, group, {a: 1, b: 1})) == sorted([a, b])
    assert spread.blocked_domains(p, job, group, {a: 1, b: 1, c: 1}) == []  # the lowest count is now 1
    assert np.array_equal(spread.allowed_domains(p, job, group, {a: 2, b: 1, c: 1})[:-1],
                          [int(leaf[i]) != a for i in range(3)])
