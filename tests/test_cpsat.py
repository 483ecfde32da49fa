"""CP-SAT round: valid plans, at least the hint's value, exact on tiny instances, terms = metrics."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import solve
from optsched.check import check_problem
from optsched.concerns.devices import pick
from optsched.ledger import Ledger
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Placement, Plan, Queue
from optsched.model.plan import Deferred
from optsched.objective import Objective
from optsched.problem import Problem, compile_problem
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from tests.strategies import busy_rounds, clusters, rounds

VALUE_TOL = 1e-3  # CP-SAT works in 1/10,000 of a value unit per replica


def test_example_is_optimal_and_valid(example: Any) -> None:
    c, q, _ = example
    p = compile_problem(c, q)
    plan = solve_cpsat(p, time_limit=5.0)
    assert check_problem(p, plan) == []
    assert plan.solver.status == "optimal" and plan.solver.gap == 0.0
    best_greedy = max(evaluate_problem(p, solve_greedy(p, n)).admitted_value for n in STRATEGIES)
    assert plan.objective["admitted_value"] >= best_greedy - 1e-9


def test_solve_entry_point(example: Any) -> None:
    c, q, _ = example
    plan = solve(c, q, solver="cpsat", time_limit=5.0)
    assert plan.solver.name == "cpsat"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(rounds(max_nodes=6, max_jobs=6), busy_rounds(max_nodes=6, max_jobs=5)))
def test_plans_are_valid_and_no_worse_than_the_hint(data: tuple[Cluster, Queue]) -> None:
    cluster, queue = data
    p = compile_problem(cluster, queue)
    plan = solve_cpsat(p, time_limit=5.0)
    assert check_problem(p, plan) == [], plan.solver
    assert (plan.solver.reason or "").find("bug") < 0, plan.solver
    hint = evaluate_problem(p, solve_greedy(p, "best-fit")).objective()
    assert not Objective.parse(None).better(hint, plan.objective)
    if plan.solver.model is not None and plan.solver.model.terms:  # CP-SAT's plan (returned, or the hint kept on a tie)
        model = plan.solver.model.terms
        actual = plan.solver.model.plan_terms or plan.objective
        assert model["admitted_value"] == pytest.approx(actual["admitted_value"], abs=VALUE_TOL * 64)
        assert model["topology"] == actual["topology"]
        assert model["queue_delay"] == pytest.approx(actual["queue_delay"], abs=VALUE_TOL * 8)
        assert model.get("disruption", 0.0) == pytest.approx(actual["disruption"], abs=1e-3 * 8)


# ---------------------------------------------------------------------------- brute force
@st.composite
def tiny_rounds(draw: st.DrawFn) -> tuple[Cluster, Queue]:
    """<= 3 nodes, <= 3 single-group jobs with whole GPUs, no affinity: small enough to enumerate."""
    cluster = draw(clusters(max_nodes=3))
    jobs = []
    for i in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 2))
        group: dict[str, Any] = {"name": "w", "replicas": {"min": n, "max": n},
                                 "request": {"gpu": draw(st.sampled_from([0, 1, 2, 4])),
                                             "cpu": draw(st.sampled_from([1000, 16000, 48000]))},
                                 "tolerations": [{"key": "spot"}]}
        job: dict[str, Any] = {"id": f"j{i}", "priority": draw(st.sampled_from([0, 50, 100])), "groups": [group],
                               "gang": draw(st.booleans()), "bandwidth_gbps": draw(st.sampled_from([0, 100, 500]))}
        if cluster.tenants:
            job["tenant"] = draw(st.sampled_from([t.name for t in cluster.tenants]))
        if draw(st.booleans()):
            job["topology"] = {"level": draw(st.sampled_from(["spine", "leaf"])),
                               "mode": draw(st.sampled_from(["required", "preferred"]))}
        jobs.append(job)
    queue = Queue.model_validate({"jobs": jobs})
    from optsched.model.references import queue_problems

    if queue_problems(queue, cluster):
        queue = Queue(jobs=[])
    return cluster, queue


def brute_force(p: Problem) -> dict[str, float]:
    """Best (admitted value, then topology) over every assignment of replicas to nodes."""
    nodes = [v for v in range(p.n_nodes) if not p.node_provisioned[v]]
    options: list[list[tuple[int, ...] | None]] = []
    for job in p.jobs:
        g = job.groups[0]
        counts = [g.rmin] if job.gang else list(range(1, g.rmax + 1))
        opts: list[tuple[int, ...] | None] = [None]
        for c in counts:
            opts.extend(itertools.combinations_with_replacement(nodes, c))
        options.append(opts)
    goal = Objective.parse(None)
    best: dict[str, float] | None = None
    for choice in itertools.product(*options):
        ledger = Ledger.with_running(p)
        placements, deferred, ok = [], [], True
        for job, nodes_of in zip(p.jobs, choice, strict=True):
            if nodes_of is None:
                deferred.append(Deferred(job=job.id, reason="other"))
                continue
            g = job.groups[0]
            for i, v in enumerate(nodes_of):
                got = pick(p, ledger, v, g, "first")
                if got is None:
                    ok = False
                    break
                ledger.add(job, g, v, got[0], got[1])
                placements.append(Placement(job=job.id, group=g.name, replica=i, node=p.node_ids[v],
                                            devices=[int(p.dev_local[d]) for d in got[0]]))
            if not ok:
                break
        if not ok:
            continue
        plan = Plan(placements=placements, deferred=deferred)
        if check_problem(p, plan):
            continue
        terms = evaluate_problem(p, plan).objective()
        if best is None or goal.better(terms, best):
            best = terms
    assert best is not None  # deferring everything is always valid
    return best


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=tiny_rounds())
def test_matches_brute_force_on_tiny_instances(data: tuple[Cluster, Queue]) -> None:
    cluster, queue = data
    p = compile_problem(cluster, queue)
    plan = solve_cpsat(p, time_limit=10.0)
    assert check_problem(p, plan) == []
    best = brute_force(p)
    assert plan.objective["admitted_value"] == pytest.approx(best["admitted_value"], abs=1e-9)
    assert plan.objective["topology"] == best["topology"]


def test_deterministic_for_a_seed(example: Any) -> None:
    c, q, _ = example
    p = compile_problem(c, q)
    a = solve_cpsat(p, seed=7, num_workers=2, time_limit=5.0, deterministic=True)
    b = solve_cpsat(p, seed=7, num_workers=2, time_limit=5.0, deterministic=True)
    assert a.placements == b.placements and a.deferred == b.deferred


def test_time_limit_respected_on_a_large_instance() -> None:
    """A generous bound, not a benchmark: 1,280 nodes and 400 jobs with a 1 s limit stay under 2 s."""
    import time

    from optsched.generate import NodeGroup, fat_tree_cluster, generate_queue

    g = NodeGroup(1280, "H100-SXM", 8, [list(range(8))], {"cpu": 192000, "memory": 2097152, "rdma_nics": 8}, "p")
    c = fat_tree_cluster([g], nodes_per_leaf=32, leaves_per_spine=10, oversubscription=2.0)
    q = generate_queue(c, "mixed", jobs=400, load=2.0, seed=3)
    p = compile_problem(c, q)
    start = time.perf_counter()
    plan = solve_cpsat(p, time_limit=1.0)
    assert time.perf_counter() - start < 2.0
    assert check_problem(p, plan) == []


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(rounds(max_nodes=6, max_jobs=6), busy_rounds(max_nodes=6, max_jobs=5)))
def test_greedy_hint_is_complete_and_feasible(data: tuple[Cluster, Queue]) -> None:
    """Every valid greedy plan is a solution of the model: the completed hint covers every variable."""
    from optsched.roundmodel.build import ENCODINGS
    from optsched.roundmodel.hint import complete_hint
    from optsched.roundmodel.variables import RoundModel

    cluster, queue = data
    p = compile_problem(cluster, queue)
    for name in ("best-fit", "topo-best-fit", "spread"):
        r = RoundModel(p, Ledger.with_running(p), list(p.jobs), hint=solve_greedy(p, name))
        r.build_variables()
        for _, encode in ENCODINGS:
            encode(r)
        status, values = complete_hint(r, 10.0, 0)
        assert status in ("OPTIMAL", "FEASIBLE"), (name, status)
        assert values is not None and len(values) == len(r.model.proto.variables)


def test_lexicographic_with_tolerance_trades_value_for_topology() -> None:
    """Leaf l0 has n0 (zone a) and n1; leaf l1 has n2; 8 GPUs each.

    Job `a` (2 x 8 GPUs, prefers one leaf) and job `b` (8 GPUs, zone a only) all fit only with
    `a` split over both leaves (value 24, topology 1). Exact lexicographic keeps value 24; a 50%
    tolerance lets the value drop to 16 (b deferred) to keep `a` inside l0 (topology 0).
    """
    nodes = [{"id": f"n{i}", "domain": leaf, "capacity": {"cpu": 8000},
              "devices": {"model": "G", "count": 8}, **({"labels": {"zone": "a"}} if i == 0 else {})}
             for i, leaf in enumerate(["l0", "l0", "l1"])]
    cluster = Cluster.model_validate({
        "topology": {"levels": ["spine", "leaf"], "domains": [
            {"id": "s", "level": "spine"}, {"id": "l0", "level": "leaf", "parent": "s"},
            {"id": "l1", "level": "leaf", "parent": "s"}]},
        "device_models": {"G": {}}, "nodes": nodes})
    queue = Queue.model_validate({"jobs": [
        {"id": "a", "topology": {"level": "leaf"},
         "groups": [{"name": "w", "replicas": {"min": 2, "max": 2}, "request": {"gpu": 8}}]},
        {"id": "b", "groups": [{"name": "w", "request": {"gpu": 8}, "node_selector": {"zone": "a"}}]}]})
    p = compile_problem(cluster, queue)
    exact = solve_cpsat(p, time_limit=10.0)
    assert (exact.objective["admitted_value"], exact.objective["topology"]) == (24.0, 1.0)
    loose = solve_cpsat(p, time_limit=10.0, objective={"lexicographic": ["admitted_value", "topology"],
                                                       "tolerance": 0.5})
    assert check_problem(p, loose) == []
    assert (loose.objective["admitted_value"], loose.objective["topology"]) == (16.0, 0.0)
    assert loose.solver.model is not None and loose.solver.model.phases == 2


# ---------------------------------------------------------------------------- neighbourhood search
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(rounds(max_nodes=8, max_jobs=8), busy_rounds(max_nodes=8, max_jobs=6)))
def test_neighbourhood_plans_are_valid_and_no_worse_than_the_hint(data: tuple[Cluster, Queue]) -> None:
    cluster, queue = data
    p = compile_problem(cluster, queue)
    plan = solve_cpsat(p, time_limit=0.3, neighbourhoods=True)
    assert check_problem(p, plan) == [], plan.solver
    assert all("bug" not in row.result for row in plan.solver.steps)
    hint = evaluate_problem(p, solve_greedy(p, "best-fit")).objective()
    assert not Objective.parse(None).better(hint, plan.objective)
    if plan.solver.bound is not None:
        assert plan.solver.bound >= plan.objective["admitted_value"] - 1e-6


def test_neighbourhood_search_moves_a_flexible_job_off_the_device_another_needs() -> None:
    """Job `any` (H100 or L40S) is first in line and every baseline puts it on the H100 node,
    which `h100-only` then needs; the neighbourhood search moves it to the L40S node and admits both."""
    cluster = Cluster.model_validate({
        "device_models": {"H100": {"memory_gib": 80}, "L40S": {"memory_gib": 48}},
        "topology": {"levels": ["leaf"], "domains": [{"id": "leaf-0", "level": "leaf"},
                                                     {"id": "leaf-1", "level": "leaf"}]},
        "pools": [{"name": "res", "pricing": "reserved", "price_per_hour": 10.0}],
        "nodes": [
            {"id": "h100", "domain": "leaf-0", "pool": "res", "capacity": {"cpu": 64000, "memory": 512000},
             "devices": {"model": "H100", "count": 8}},
            {"id": "l40s", "domain": "leaf-1", "pool": "res", "capacity": {"cpu": 64000, "memory": 512000},
             "devices": {"model": "L40S", "count": 8}},
        ],
    })
    queue = Queue.model_validate({"jobs": [
        {"id": "any", "priority": 100, "groups": [{"name": "w", "replicas": {"min": 1, "max": 1},
                                                   "request": {"gpu": 8, "cpu": 8000},
                                                   "models": {"H100": 1.0, "L40S": 0.9}}]},
        {"id": "h100-only", "groups": [{"name": "w", "replicas": {"min": 1, "max": 1},
                                        "request": {"gpu": 8, "cpu": 8000}, "models": {"H100": 1.0}}]},
    ]})
    p = compile_problem(cluster, queue)
    greedy = max((solve_greedy(p, n) for n in STRATEGIES), key=lambda pl: evaluate_problem(p, pl).admitted_value)
    assert len(greedy.deferred) == 1
    plan = solve_cpsat(p, time_limit=2.0, neighbourhoods=True)
    assert check_problem(p, plan) == []
    assert plan.deferred == [] and plan.solver.status == "feasible", plan.solver
    assert {pl.job: pl.node for pl in plan.placements} == {"any": "l40s", "h100-only": "h100"}
