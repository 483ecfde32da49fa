"""Node scores: the one-node forms equal the vectorised scores float for float, and both keep
kube-scheduler's definitions (the greedy engine uses the one-node form for the node a placement
changed, so any difference would change plans)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

from optsched.concerns.devices import pick
from optsched.ledger import Ledger
from optsched.model import Cluster, Queue
from optsched.problem import GroupSpec, Problem, compile_problem
from optsched.scores import (
    MONOTONE_SCORERS,
    SCALAR_SCORERS,
    Scorer,
    score_binpack,
    score_least_allocated,
    score_most_allocated,
)
from optsched.solvers.greedy import STRATEGIES, GreedyEngine
from tests.strategies import busy_rounds


def _used_ledgers(p: Problem) -> list[tuple[Ledger, list[tuple[GroupSpec, int]]]]:
    """The running jobs alone, and after a first-fit and a best-fit round on top of them; each with
    the (group, node) of every replica it holds."""
    running = [(j.groups[pl.group], pl.node) for j in p.running for pl in j.placements]
    out = [(Ledger.with_running(p), running)]
    for name in ("first-fit", "best-fit"):
        engine = GreedyEngine(p, STRATEGIES[name])
        placed, _ = engine.run()
        jobs = {j.id: j for j in p.jobs}
        out.append((engine.ledger, running + [(jobs[jid].groups[r.group], r.node)
                                              for jid, reps in placed.items() for r in reps]))
    return out


def _reference(p: Problem, ledger: Ledger, replicas: list[tuple[GroupSpec, int]], group: GroupSpec, node: int,
               kind: str) -> float:
    """NodeResourcesFit's definition: the mean, over cpu, memory and devices the node has, of the
    fraction in use after placing (LeastAllocated: free after placing), a replica whose cpu or
    memory request is unset counted as 100 millicores / 200 MiB (kube-scheduler's non-zero requests);
    Volcano's binpack: raw requests, only over what the replica requests."""
    count = int(p.node_dev_count[node])
    here = [g for g, n in replicas if n == node] + [group]
    if kind == "binpack":
        cpu, mem = float(ledger.used[node, 0] + group.req[0]), float(ledger.used[node, 1] + group.req[1])
    else:
        cpu = sum(float(g.req[0]) + (0.0 if "cpu" in g.spec.request.model_fields_set else 100.0) for g in here)
        mem = sum(float(g.req[1]) + (0.0 if "memory" in g.spec.request.model_fields_set else 200.0) for g in here)
    used = [cpu, mem, float(count - ledger.free_whole[node] + group.whole)]
    cap = [float(p.cap[node, 0]), float(p.cap[node, 1]), float(count)]
    scored = [i for i in range(3) if cap[i] > 0]
    if kind == "binpack":
        asked = [group.req[0] > 0, group.req[1] > 0, group.gpu > 0]
        scored = [i for i in scored if asked[i]]
    if not scored:
        return 0.0
    fractions = [used[i] / cap[i] for i in scored]
    if kind == "least":
        fractions = [1.0 - f for f in fractions]
    return sum(fractions) / len(scored)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=busy_rounds())
def test_one_node_scores_and_fits_equal_the_vectorised_ones(data: tuple[Cluster, Queue]) -> None:
    p = compile_problem(*data)
    nodes = np.arange(p.n_nodes)
    kinds = {score_most_allocated: "most", score_least_allocated: "least", score_binpack: "binpack"}
    for ledger, replicas in _used_ledgers(p):
        for job in p.jobs:
            for group in job.groups:
                fits = ledger.fits_at(group, nodes)
                assert [ledger.fits_one(group, n) for n in range(p.n_nodes)] == fits.tolist()
                for vectorised, one in SCALAR_SCORERS.items():
                    scores = vectorised(p, ledger, group, nodes)
                    assert [one(p, ledger, group, n) for n in range(p.n_nodes)] == scores.tolist()
                    kind = kinds.get(vectorised)
                    if kind is not None:
                        reference = [_reference(p, ledger, replicas, group, n, kind) for n in range(p.n_nodes)]
                        assert np.allclose(scores, reference, rtol=1e-12, atol=1e-12)


def test_one_node_scores_equal_on_a_reference_cluster_mid_round() -> None:
    """Float for float on ascend-910b-4k after a first-fit round of a generated queue (varied
    usage: a reordered sum shows here, where the small generated rounds above miss it)."""
    from optsched import load_cluster
    from optsched.bundled import DATA_DIR
    from optsched.generate import generate_queue

    cluster = load_cluster(DATA_DIR / "clusters" / "ascend-910b-4k.yaml")
    p = compile_problem(cluster, generate_queue(cluster, "mixed", jobs=200, load=1.0, seed=3))
    engine = GreedyEngine(p, STRATEGIES["first-fit"])
    engine.run()
    nodes = np.arange(p.n_nodes)
    for job in p.jobs[:40]:
        for group in job.groups:
            assert [engine.ledger.fits_one(group, n) for n in nodes.tolist()] == \
                engine.ledger.fits_at(group, nodes).tolist()
            for vectorised, one in SCALAR_SCORERS.items():
                assert [one(p, engine.ledger, group, n) for n in nodes.tolist()] == \
                    vectorised(p, engine.ledger, group, nodes).tolist()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=busy_rounds())
def test_monotone_scores_never_fall_when_a_replica_is_added(data: tuple[Cluster, Queue]) -> None:
    """`MONOTONE_SCORERS`: on every node where a replica fits, adding it never lowers the node's
    score for a replica of the same shape (float for float); least-allocated, not among them,
    does fall (the check can fail)."""
    p = compile_problem(*data)
    fell: dict[Scorer, int] = {}
    rose = 0  # additions after which most-allocated rose: least-allocated falls there
    for ledger, _ in _used_ledgers(p):
        for job in p.jobs:
            for group in job.groups:
                for node in np.flatnonzero(ledger.fits_at(group, np.arange(p.n_nodes))).tolist():
                    got = pick(p, ledger, node, group, "best")
                    if got is None:
                        continue
                    here = np.array([node])
                    scorers = (*MONOTONE_SCORERS, score_least_allocated)
                    before = {s: float(s(p, ledger, group, here)[0]) for s in scorers}
                    ledger.add(job, group, node, *got)
                    after = {s: float(s(p, ledger, group, here)[0]) for s in before}
                    ledger.add(job, group, node, *got, sign=-1.0)
                    rose += int(after[score_most_allocated] > before[score_most_allocated])
                    for s in before:
                        if after[s] < before[s]:
                            fell[s] = fell.get(s, 0) + 1
    assert not set(fell) & MONOTONE_SCORERS
    if rose:
        assert fell.get(score_least_allocated, 0) > 0
