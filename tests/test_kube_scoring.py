"""kube-scheduler's NodeResourcesFit scoring table tests, ported: `best-fit` (MostAllocated) and
`spread` (LeastAllocated) rank nodes as kube-scheduler scores them.

Source: kubernetes/kubernetes, pkg/scheduler/framework/plugins/noderesources/most_allocated_test.go
(`TestMostAllocatedScoringStrategy`) and least_allocated_test.go (`TestLeastAllocatedScoringStrategy`),
the cases on cpu and memory with the default weights (1, 1). kube-scheduler floors each resource's
score to an integer of 0-100 and then their mean; optsched's score is the exact mean of the
fractions, so the test compares floor(100 x fraction) per resource, then the floored mean, with
the case's expected score. Units as in the cases: cpu in the cases' units (all ratios), memory too;
an existing pod or the incoming pod with a request left unset is what kube-scheduler's non-zero
rule pads (100 millicores, 200 MiB: `optsched.problem.NONZERO_CPU`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from optsched.ledger import Ledger
from optsched.model import Cluster, Queue
from optsched.problem import compile_problem
from optsched.scores import score_least_allocated, score_most_allocated

Pod = dict[str, float]
"""A pod's requests (a key left out is unset)."""


def _round(nodes: list[tuple[float, float]], existing: list[tuple[int, Pod]], incoming: Pod) -> Any:
    cluster = Cluster.model_validate({
        "topology": {"levels": ["zone"], "domains": [{"id": "z", "level": "zone"}]},
        "nodes": [{"id": f"node{i + 1}", "domain": "z", "capacity": {"cpu": c, "memory": m}}
                  for i, (c, m) in enumerate(nodes)],
        "running": [{"job": {"id": f"e{k}", "groups": [{"name": "w", "request": req}]},
                     "placements": [{"group": "w", "replica": 0, "node": f"node{n + 1}"}]}
                    for k, (n, req) in enumerate(existing)]})
    queue = Queue.model_validate({"jobs": [{"id": "in", "groups": [{"name": "w", "request": incoming}]}]})
    return compile_problem(cluster, queue, validate=False)


def _kube_scores(fractions: np.ndarray) -> list[int]:
    """kube-scheduler's integer scores from per-node (cpu, memory) fractions in [0, 1]."""
    per = np.floor(np.clip(fractions, 0.0, 1.0) * 100 + 1e-9)
    return [int(x) for x in np.floor(per.sum(axis=1) / 2)]


def _fractions(p: Any, least: bool) -> np.ndarray:
    """Per node the (cpu, memory) fractions after placing the incoming pod, as kube-scheduler counts
    requests: the ledger's usage and non-zero padding plus the pod's (LeastAllocated: what is left)."""
    ledger = Ledger.with_running(p)
    group = p.jobs[0].groups[0]
    used = ledger.used[:, :2] + ledger.score_pad + group.req[:2] + np.asarray(group.nonzero_pad)
    frac = used / p.cap[:, :2]
    return 1.0 - frac if least else frac


CASES: list[tuple[str, str, list[tuple[float, float]], list[tuple[int, Pod]], Pod, list[int]]] = [
    ("most", "nothing scheduled, resources requested, differently sized nodes", [(4000, 10000), (6000, 10000)], [],
     {"cpu": 3000, "memory": 5000}, [62, 50]),
    ("most", "no resources requested, pods scheduled with resources", [(10000, 20000), (10000, 20000)],
     [(0, {"cpu": 3000, "memory": 0}), (0, {"cpu": 3000, "memory": 0}), (1, {"cpu": 3000, "memory": 0}),
      (1, {"cpu": 3000, "memory": 5000})], {"cpu": 0, "memory": 0}, [30, 42]),
    ("most", "resources requested, pods scheduled with resources", [(10000, 20000), (10000, 20000)],
     [(0, {"cpu": 3000, "memory": 0}), (1, {"cpu": 3000, "memory": 5000})], {"cpu": 3000, "memory": 5000}, [42, 55]),
    ("most", "resources requested equal node capacity", [(5000, 10000), (10000, 9000)], [],
     {"cpu": 5000, "memory": 9000}, [95, 75]),
    ("most", "no resources requested, pods scheduled, nonzero request for resource", [(250, 1000), (250, 1000)],
     [(0, {}), (0, {})], {}, [80, 30]),
    ("least", "nothing scheduled, resources requested, differently sized nodes", [(4000, 10000), (6000, 10000)], [],
     {"cpu": 3000, "memory": 5000}, [37, 50]),
    ("least", "no resources requested, pods scheduled with resources", [(10000, 20000), (10000, 20000)],
     [(0, {"cpu": 3000, "memory": 0}), (0, {"cpu": 3000, "memory": 0}), (1, {"cpu": 3000, "memory": 0}),
      (1, {"cpu": 3000, "memory": 5000})], {"cpu": 0, "memory": 0}, [70, 57]),
    ("least", "resources requested, pods scheduled with resources", [(10000, 20000), (10000, 20000)],
     [(0, {"cpu": 3000, "memory": 0}), (1, {"cpu": 3000, "memory": 5000})], {"cpu": 3000, "memory": 5000}, [57, 45]),
    ("least", "resources requested, pods scheduled with resources, differently sized nodes",
     [(10000, 20000), (10000, 50000)], [(0, {"cpu": 3000, "memory": 0}), (1, {"cpu": 3000, "memory": 5000})],
     {"cpu": 3000, "memory": 5000}, [57, 60]),
]
"""(strategy, kube-scheduler's case name, node (cpu, memory), existing pods (node, requests), incoming
pod, expected scores). The non-zero case: capacities "250m" and "1000Mi" as 250 millicores and
1000 MiB, pods with one container and no requests (100 millicores, 200 MiB each)."""


@pytest.mark.parametrize(("kind", "name", "nodes", "existing", "incoming", "expected"), CASES,
                         ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_kube_scheduler_scoring_case(kind: str, name: str, nodes: list[tuple[float, float]],
                                     existing: list[tuple[int, Pod]], incoming: Pod, expected: list[int]) -> None:
    """The case's scores, from the fractions optsched's score averages; and the score itself is
    their mean, so it ranks the nodes as kube-scheduler does where the scores differ."""
    p = _round(nodes, existing, incoming)
    least = kind == "least"
    fractions = _fractions(p, least)
    assert _kube_scores(fractions) == expected
    score = (score_least_allocated if least else score_most_allocated)(
        p, Ledger.with_running(p), p.jobs[0].groups[0], np.arange(p.n_nodes))
    assert np.allclose(score, fractions.mean(axis=1))
    if expected[0] != expected[1]:
        assert (score[0] > score[1]) == (expected[0] > expected[1])
