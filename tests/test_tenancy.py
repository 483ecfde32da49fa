"""Tenancy: Kueue's documented borrowing, lending and preemption examples, and properties.

Every scenario runs with the `kueue` baseline and with `cpsat`, which must give the same outcome.

Each scenario reproduces an example of the Kueue documentation (kubernetes-sigs/kueue,
site/content/en/docs/concepts/cluster_queue.md and preemption.md): ClusterQueues are tenants,
`cpu` quotas are in millicores (Kueue's "9 CPUs" is 9000), and a Workload is a one-replica job.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from optsched.check import check_problem
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Plan, Queue
from optsched.problem import Problem, compile_problem
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.kueue import solve_kueue
from tests.strategies import contended_rounds

CPU = 1000
"""Millicores per CPU."""


def tenant(name: str, nominal: float, cohort: str | None = "team-ab", borrowing_limit: float | None = None,
           lending_limit: float | None = None, **preemption: Any) -> dict[str, Any]:
    quota: dict[str, Any] = {"nominal": nominal * CPU}
    if borrowing_limit is not None:
        quota["borrowing_limit"] = borrowing_limit * CPU
    if lending_limit is not None:
        quota["lending_limit"] = lending_limit * CPU
    return {"name": name, "cohort": cohort, "quotas": {"cpu": quota}, "preemption": preemption}


def job(id_: str, team: str, cpus: float = 1, priority: int = 0, submitted_at: float = 0.0,
        preemptible: bool = True) -> dict[str, Any]:
    return {"id": id_, "tenant": team, "priority": priority, "submitted_at": submitted_at,
            "preemptible": preemptible,
            "groups": [{"name": "w", "replicas": {"min": 1, "max": 1}, "request": {"cpu": cpus * CPU}}]}


def running(spec: dict[str, Any], node: str, started_at: float = 0.0, checkpoint_age_s: float = 600.0) -> dict[str, Any]:
    return {"job": spec, "started_at": started_at, "checkpoint_age_s": checkpoint_age_s,
            "placements": [{"group": "w", "replica": 0, "node": node}]}


def cluster(tenants: list[dict[str, Any]], run: list[dict[str, Any]] | None = None, nodes: int = 4,
            cpus_per_node: int = 16) -> Cluster:
    return Cluster.model_validate({
        "topology": {"levels": ["zone"], "domains": [{"id": "z0", "level": "zone"}]},
        "pools": [{"name": "res", "pricing": "reserved"}],
        "nodes": [{"id": f"n{i}", "domain": "z0", "pool": "res",
                   "capacity": {"cpu": cpus_per_node * CPU, "memory": 1 << 20}} for i in range(nodes)],
        "tenants": tenants, "running": run or [],
    })


@pytest.fixture(params=["kueue", "cpsat"])
def solver(request: pytest.FixtureRequest) -> str:
    """Every scenario runs with the `kueue` baseline and with `cpsat`: both must reproduce it."""
    name: str = request.param
    return name


def solve(solver: str, c: Cluster, jobs: list[dict[str, Any]]) -> tuple[Problem, Plan]:
    p = compile_problem(c, Queue.model_validate({"jobs": jobs}))
    plan = solve_kueue(p) if solver == "kueue" else solve_cpsat(p, time_limit=5.0)
    assert check_problem(p, plan) == []
    assert "bug" not in str(plan.solver.reason or "")
    return p, plan


def admitted(plan: Plan) -> Counter[str]:
    """Admitted jobs per tenant prefix (`a-*`, `b-*`)."""
    return Counter(pl.job.split("-")[0] for pl in plan.placements)


def evicted(plan: Plan) -> dict[str, tuple[str, str | None]]:
    return {ev.job: (ev.reason, ev.by) for ev in plan.evictions}


# ---------------------------------------------------------------------------- borrowing and lending
def test_borrowing_example_team_a_admits_up_to_21_cpus(solver: str) -> None:
    """cluster_queue.md "Borrowing example": team-a-cq (9 CPUs) and team-b-cq (12 CPUs) in cohort
    team-ab; with no workloads in team-b-cq, team-a-cq can admit up to 12+9=21 CPUs."""
    c = cluster([tenant("a", 9), tenant("b", 12)])
    _, plan = solve(solver, c, [job(f"a-{i}", "a", submitted_at=i) for i in range(25)])
    assert admitted(plan) == {"a": 21}
    assert {d.reason for d in plan.deferred} == {"quota"}
    assert all("cpu" in d.detail for d in plan.deferred)  # the binding flavor is named


def test_borrowing_example_team_b_first_once_team_a_uses_its_nominal(solver: str) -> None:
    """cluster_queue.md "Borrowing example": if team-b-cq has pending Workloads and team-a-cq has
    all its nominal quota used, Kueue admits team-b-cq's Workloads before any new one of
    team-a-cq, so team-b-cq's nominal quota is met (even though team-a's were submitted first)."""
    run = [running(job(f"ra-{i}", "a"), "n0") for i in range(9)]
    c = cluster([tenant("a", 9), tenant("b", 12)], run)
    jobs = [job(f"a-{i}", "a", submitted_at=i) for i in range(12)]
    jobs += [job(f"b-{i}", "b", submitted_at=100 + i) for i in range(12)]
    _, plan = solve(solver, c, jobs)
    assert admitted(plan) == {"b": 12}


def test_borrowing_limit_example(solver: str) -> None:
    """cluster_queue.md "BorrowingLimit": team-a-cq (9 CPUs, borrowingLimit 1) can admit up to 9+1=10
    CPUs when team-b-cq is empty; team-b-cq, without a borrowingLimit, up to 12+9."""
    c = cluster([tenant("a", 9, borrowing_limit=1), tenant("b", 12)])
    _, plan = solve(solver, c, [job(f"a-{i}", "a", submitted_at=i) for i in range(25)])
    assert admitted(plan) == {"a": 10}
    _, plan = solve(solver, c, [job(f"b-{i}", "b", submitted_at=i) for i in range(25)])
    assert admitted(plan) == {"b": 21}


def test_lending_limit_example(solver: str) -> None:
    """cluster_queue.md "LendingLimit": team-b-cq (12 CPUs, lendingLimit 1) lends at most 1 CPU, so
    team-a-cq (9 CPUs) can admit up to 9+1=10 CPUs; without the lendingLimit, up to 9+12."""
    c = cluster([tenant("a", 9), tenant("b", 12, lending_limit=1)])
    _, plan = solve(solver, c, [job(f"a-{i}", "a", submitted_at=i) for i in range(25)])
    assert admitted(plan) == {"a": 10}
    c = cluster([tenant("a", 9), tenant("b", 12)])
    _, plan = solve(solver, c, [job(f"a-{i}", "a", submitted_at=i) for i in range(25)])
    assert admitted(plan) == {"a": 21}


def test_fair_sharing_admits_the_tenant_with_the_lower_share_first(solver: str) -> None:
    """Fair sharing (Kueue's fair_sharing.md: "Kueue admits jobs with a lower share value first";
    share value = borrowed share of the cohort's lendable quota / weight). Teams a and b (2 CPUs
    nominal each) borrow from team c (12 CPUs, idle); a already runs 6 CPUs (borrows 4), b runs
    2. Their 1-CPU jobs have equal priority and a's are older, so FIFO would give a six of the 8
    CPUs left; fair sharing admits b until both borrow the same, then alternates: a gets 2, b 6.
    With weight 3 for a (b: 1), a's share counts a third: a gets 5 and b 3 (a borrows 9 CPUs, b 3:
    share values 9/12/3 = 3/12/1 = 0.25)."""
    run = [running(job(f"ra-{i}", "a"), "n0") for i in range(6)]
    run += [running(job(f"rb-{i}", "b"), "n1") for i in range(2)]
    jobs = [job(f"a-{i}", "a", submitted_at=i) for i in range(8)] + [job(f"b-{i}", "b", submitted_at=10 + i)
                                                                       for i in range(8)]
    c = cluster([tenant("a", 2), tenant("b", 2), tenant("c", 12)], run)
    _, plan = solve(solver, c, jobs)
    assert admitted(plan) == {"a": 2, "b": 6}
    heavy = cluster([{**tenant("a", 2), "weight": 3.0}, tenant("b", 2), tenant("c", 12)], run)
    _, plan = solve(solver, heavy, jobs)
    assert admitted(plan) == {"a": 5, "b": 3}


def test_node_capacity_binds_as_well_as_quota(solver: str) -> None:
    """Quota allows 21 CPUs, the nodes hold 16: the rest is deferred for capacity, not quota."""
    c = cluster([tenant("a", 9), tenant("b", 12)], nodes=1)
    _, plan = solve(solver, c, [job(f"a-{i}", "a", submitted_at=i) for i in range(25)])
    assert admitted(plan) == {"a": 16}
    assert {d.reason for d in plan.deferred} == {"capacity"}


# ---------------------------------------------------------------------------- preemption in a tenant
def _full_team_a(within_tenant: str, victim_priority: int = 0, victim_submitted: float = 0.0) -> Cluster:
    run = [running(job(f"ra-{i}", "a", priority=victim_priority, submitted_at=victim_submitted), "n0",
                   started_at=10.0 * i) for i in range(9)]
    return cluster([tenant("a", 9, cohort=None, within_tenant=within_tenant)], run)


def test_within_cluster_queue_lower_priority_preempts_the_fewest_newest(solver: str) -> None:
    """cluster_queue.md "Preemption", withinClusterQueue: LowerPriority: a pending Workload that does
    not fit in the nominal quota preempts lower-priority Workloads of its ClusterQueue, the most
    recently admitted first, as few as possible (preemption.md "Targets")."""
    _, plan = solve(solver, _full_team_a("lower_priority"), [job("a-new", "a", cpus=2, priority=100)])
    assert admitted(plan) == {"a": 1}
    assert evicted(plan) == {"ra-8": ("preempted", "a-new"), "ra-7": ("preempted", "a-new")}
    assert all(ev.lost_gpu_hours == 0.0 for ev in plan.evictions)  # CPU-only jobs lose no GPU time


def test_within_cluster_queue_never_does_not_preempt(solver: str) -> None:
    """withinClusterQueue: Never (Kueue's default): nothing is preempted, the Workload waits."""
    _, plan = solve(solver, _full_team_a("never"), [job("a-new", "a", cpus=2, priority=100)])
    assert not plan.evictions
    assert [d.reason for d in plan.deferred] == ["quota"]


def test_within_cluster_queue_lower_priority_spares_equal_priority(solver: str) -> None:
    """LowerPriority only preempts lower priorities; LowerOrNewerEqualPriority also preempts
    Workloads of equal priority that are newer than the pending one."""
    _, plan = solve(solver, _full_team_a("lower_priority", victim_priority=100, victim_submitted=50.0),
                    [job("a-new", "a", cpus=1, priority=100, submitted_at=0.0)])
    assert not plan.evictions
    if solver == "kueue":  # the binding reason: equal-priority work the policy protects
        assert [d.reason for d in plan.deferred] == ["priority"]
    _, plan = solve(solver, _full_team_a("lower_or_newer_equal_priority", victim_priority=100, victim_submitted=50.0),
                    [job("a-new", "a", cpus=1, priority=100, submitted_at=0.0)])
    assert list(evicted(plan).values()) == [("preempted", "a-new")]
    _, plan = solve(solver, _full_team_a("lower_or_newer_equal_priority", victim_priority=100, victim_submitted=0.0),
                    [job("a-new", "a", cpus=1, priority=100, submitted_at=50.0)])
    assert not plan.evictions  # the victims are older


def test_targets_are_minimised_in_reverse_order(solver: str) -> None:
    """preemption.md "Targets": candidates are taken greedily (lowest priority, most recently
    admitted first) until the Workload fits, then a target is given back when the Workload still
    fits without evicting it. Here the newest candidate (1 CPU) is tried first, but the 4-CPU one
    alone frees enough: only it is evicted."""
    run = [running(job("ra-big", "a", cpus=4), "n0", started_at=100.0),
           running(job("ra-small", "a", cpus=1), "n0", started_at=200.0)]
    c = cluster([tenant("a", 5, cohort=None, within_tenant="lower_priority")], run)
    _, plan = solve(solver, c, [job("a-new", "a", cpus=4, priority=10)])
    assert evicted(plan) == {"ra-big": ("preempted", "a-new")}


# ---------------------------------------------------------------------------- reclaim in a cohort
def _team_b_borrows(victim_priority: int, **policy: Any) -> Cluster:
    """team-b-cq runs 21 CPUs (12 nominal + 9 borrowed from team-a-cq), started one by one."""
    run = [running(job(f"rb-{i}", "b", priority=victim_priority), f"n{i // 16}", started_at=10.0 * i)
           for i in range(21)]
    return cluster([tenant("a", 9, **policy), tenant("b", 12)], run)


def test_reclaim_within_cohort_any_takes_back_borrowed_quota(solver: str) -> None:
    """cluster_queue.md "Preemption", reclaimWithinCohort: Any: a pending Workload that fits in its
    ClusterQueue's nominal quota preempts Workloads of a ClusterQueue in the cohort that uses more
    than its nominal quota, whatever their priority."""
    c = _team_b_borrows(victim_priority=100, reclaim_within_cohort="any")
    _, plan = solve(solver, c, [job(f"a-{i}", "a", submitted_at=i) for i in range(3)])
    assert admitted(plan) == {"a": 3}
    assert sorted(evicted(plan)) == ["rb-18", "rb-19", "rb-20"]  # the most recently admitted
    assert {r for r, _ in evicted(plan).values()} == {"reclaimed"}


def test_reclaim_within_cohort_only_takes_borrowed_quota(solver: str) -> None:
    """Reclaim stops at the nominal quota: team-a-cq asks for 12 CPUs but only 9 are borrowed."""
    c = _team_b_borrows(victim_priority=100, reclaim_within_cohort="any")
    _, plan = solve(solver, c, [job(f"a-{i}", "a", submitted_at=i) for i in range(12)])
    assert len(plan.evictions) == 9
    assert admitted(plan) == {"a": 9}


def test_reclaim_within_cohort_lower_priority_and_never(solver: str) -> None:
    """reclaimWithinCohort: LowerPriority preempts only lower-priority Workloads; Never, none."""
    c = _team_b_borrows(victim_priority=100, reclaim_within_cohort="lower_priority")
    _, plan = solve(solver, c, [job("a-0", "a", priority=50)])
    assert not plan.evictions and not plan.placements
    c = _team_b_borrows(victim_priority=10, reclaim_within_cohort="lower_priority")
    _, plan = solve(solver, c, [job("a-0", "a", priority=50)])
    assert list(evicted(plan).values()) == [("reclaimed", "a-0")]
    c = _team_b_borrows(victim_priority=10, reclaim_within_cohort="never")
    _, plan = solve(solver, c, [job("a-0", "a", priority=50)])
    assert not plan.evictions


def _borrow_within_cohort(threshold: int | None) -> Cluster:
    """team-a-cq uses its 9 CPUs; team-b-cq runs 15 (12 + 3 borrowed from team-c-cq, which lends
    its 3): a new team-a-cq Workload must borrow, and only a preemption can make room."""
    run = [running(job(f"ra-{i}", "a", priority=200, preemptible=False), "n0") for i in range(9)]
    run += [running(job(f"rb-{i}", "b", priority=10 if i < 13 else 60), "n1", started_at=10.0 * i)
            for i in range(15)]
    bwc: dict[str, Any] = {"policy": "lower_priority"}
    if threshold is not None:
        bwc["max_priority_threshold"] = threshold
    return cluster([tenant("a", 9, reclaim_within_cohort="any", borrow_within_cohort=bwc), tenant("b", 12),
                    tenant("c", 3)], run)


def test_borrow_within_cohort_respects_max_priority_threshold(solver: str) -> None:
    """cluster_queue.md "Preemption", borrowWithinCohort (LowerPriority, maxPriorityThreshold): a
    pending Workload that requires borrowing preempts lower-priority Workloads of borrowing
    ClusterQueues in the cohort, only those at or below the threshold."""
    _, plan = solve(solver, _borrow_within_cohort(threshold=50), [job("a-new", "a", priority=100)])
    assert admitted(plan) == {"a": 1}
    ((victim, (reason, by)),) = evicted(plan).items()
    assert reason == "reclaimed" and by == "a-new" and int(victim.split("-")[1]) < 13  # priority 10
    _, plan = solve(solver, _borrow_within_cohort(threshold=5), [job("a-new", "a", priority=100)])
    assert not plan.evictions and not plan.placements


def test_without_borrow_within_cohort_a_borrowing_job_does_not_reclaim(solver: str) -> None:
    """Classic preemption: a Workload that needs borrowing preempts in the cohort only with
    borrowWithinCohort enabled (preemption.md "Classic Preemption")."""
    c = _borrow_within_cohort(threshold=None)
    tenants = [t.model_copy(update={"preemption": t.preemption.model_copy(update={"borrow_within_cohort": None})})
               for t in c.tenants]
    _, plan = solve(solver, c.model_copy(update={"tenants": tenants}), [job("a-new", "a", priority=100)])
    assert not plan.evictions


# ---------------------------------------------------------------------------- properties
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=contended_rounds())
def test_kueue_plans_keep_every_tenancy_rule(data: tuple[Cluster, Queue]) -> None:
    """No plan exceeds quota, evicts a non-preemptible job, evicts for an equal or lower priority
    job unless a policy allows it, or reclaims more than borrowed capacity: the validator checks
    each, and the plain facts are asserted here as well."""
    c, q = data
    p = compile_problem(c, q)
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    running_by_id = {r.job.id: r.job for r in c.running}
    queued = {j.id: j for j in q.jobs}
    policy = {t.name: t.preemption for t in c.tenants}
    for ev in plan.evictions:
        victim, by = running_by_id[ev.job], queued[ev.by or ""]
        assert victim.preemptible
        assert any(pl.job == by.id for pl in plan.placements)
        if ev.reason == "preempted":
            assert victim.tenant == by.tenant
            newer_equal = victim.priority == by.priority and victim.submitted_at > by.submitted_at
            assert victim.priority < by.priority or (
                newer_equal and policy[by.tenant].within_tenant == "lower_or_newer_equal_priority")
        else:
            assert ev.reason == "reclaimed" and victim.tenant != by.tenant
            assert policy[by.tenant].reclaim_within_cohort != "never"
            if policy[by.tenant].reclaim_within_cohort == "lower_priority":
                assert victim.priority < by.priority


@pytest.mark.parametrize("seed", [0, 1])
def test_kueue_on_a_contended_reference_round_is_valid(seed: int) -> None:
    from optsched.bundled import DATA_DIR
    from optsched.generate import generate_queue
    from optsched.model import load_cluster

    c = load_cluster(DATA_DIR / "clusters" / "dgx-h100-1k.yaml")
    p = compile_problem(c, generate_queue(c, "mixed", jobs=150, load=2.0, seed=seed))
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    assert len(plan.placements) > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=contended_rounds())
def test_cpsat_on_contended_rounds_is_valid_and_no_worse_than_kueue(data: tuple[Cluster, Queue]) -> None:
    """CP-SAT's evictions pass the same rules; its plan admits at least Kueue's value, and at equal
    value loses no more work; the model's disruption equals the metric's."""
    from optsched.metrics import evaluate_problem
    from optsched.objective import Objective

    c, q = data
    p = compile_problem(c, q)
    plan = solve_cpsat(p, time_limit=3.0)
    assert check_problem(p, plan) == [], plan.solver
    assert "bug" not in str(plan.solver.reason or ""), plan.solver
    kueue = evaluate_problem(p, solve_kueue(p)).objective()
    assert not Objective.parse(None).better(kueue, plan.objective)
    if plan.solver.model is not None and plan.solver.model.terms:
        actual = plan.solver.model.plan_terms or plan.objective
        assert plan.solver.model.terms.get("disruption", 0.0) == pytest.approx(
            actual["disruption"], abs=1e-3 * (1 + len(plan.evictions)))


def _saved_round(name: str) -> Problem:
    """A round the hypothesis test above found (tests/data/rounds/<name>.json)."""
    import json
    from pathlib import Path

    doc = json.loads((Path(__file__).parent / "data" / "rounds" / f"{name}.json").read_text())
    return compile_problem(Cluster.model_validate(doc["cluster"]), Queue.model_validate(doc["queue"]))


def test_a_preemptor_that_is_not_a_gang_uses_only_the_flavors_its_placed_replicas_do() -> None:
    """A job that is not a gang may be admitted without any replica of one of its groups
    (`preemption.sure_flavors` requires none of them): here the model reclaimed GPU quota for a
    preemptor admitted with its CPU group alone, which the validator refuses, and the round fell
    back with "decode failed (a model bug)" (a cohort tree under fair sharing)."""
    p = _saved_round("tree-fair-nongang-preemptor")
    plan = solve_cpsat(p, time_limit=3.0)
    assert check_problem(p, plan) == []
    assert plan.solver.status in ("feasible", "optimal") and "bug" not in str(plan.solver.reason or ""), plan.solver


def test_a_start_plan_served_by_a_cohort_tree_quota_break_is_named_a_restriction() -> None:
    """The Kueue start plan reclaims for a preemptor that sits beside none of the victim's nodes,
    served by the cohort tree's quota (putting the victim back breaks it); the model's serving
    rule states no cohort-tree break (S3, docs/formulation.md), so it cannot complete the start
    plan, and the fallback says so rather than calling it a model bug."""
    p = _saved_round("tree-fair-quota-served-reclaim")
    plan = solve_cpsat(p, time_limit=3.0)
    assert check_problem(p, plan) == []
    reason = str(plan.solver.reason or "")
    assert "quota rule the model leaves out" in reason and "bug" not in reason, plan.solver


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=contended_rounds())
def test_eviction_neighbourhoods_are_valid_and_no_worse_than_kueue(data: tuple[Cluster, Queue]) -> None:
    """Large rounds re-decide the Kueue plan's evictions in a neighbourhood (solvers/cpsat/evictions.py):
    the merged plan passes every rule and is never worse than the Kueue plan."""
    from optsched.metrics import evaluate_problem
    from optsched.objective import Objective

    c, q = data
    p = compile_problem(c, q)
    plan = solve_cpsat(p, time_limit=3.0, neighbourhoods=True)
    assert check_problem(p, plan) == [], plan.solver
    rows = plan.solver.steps
    assert not any("bug" in row.result for row in rows), rows
    kueue = evaluate_problem(p, solve_kueue(p)).objective()
    assert not Objective.parse(None).better(kueue, plan.objective)


def test_eviction_neighbourhood_reproduces_the_reclaim_example() -> None:
    """The reclaim example above, solved by the neighbourhood path: the same three reclaims."""
    c = _team_b_borrows(victim_priority=100, reclaim_within_cohort="any")
    p = compile_problem(c, Queue.model_validate({"jobs": [job(f"a-{i}", "a", submitted_at=i) for i in range(3)]}))
    plan = solve_cpsat(p, time_limit=3.0, neighbourhoods=True)
    assert check_problem(p, plan) == []
    assert admitted(plan) == {"a": 3}
    assert sorted(evicted(plan)) == ["rb-18", "rb-19", "rb-20"]


# ---------------------------------------------------------------------------- lost work
LEAST_LOST = {"lexicographic": ["admitted_value", "disruption", "topology"], "tolerance": 0.02}


def _two_gpu_nodes_full() -> Cluster:
    """Two 8-GPU nodes, each running one preemptible 8-GPU job of tenant a: `r-new` (started last,
    3,600 s since its checkpoint) and `r-old` (started first, checkpointed 60 s ago)."""
    def gpu_job(id_: str) -> dict[str, Any]:
        return {"id": id_, "tenant": "a", "priority": 0, "preemptible": True,
                "groups": [{"name": "w", "replicas": {"min": 1, "max": 1}, "request": {"cpu": CPU, "gpu": 8}}]}

    def on(node: str, id_: str, started_at: float, age: float) -> dict[str, Any]:
        return {"job": gpu_job(id_), "started_at": started_at, "checkpoint_age_s": age,
                "placements": [{"group": "w", "replica": 0, "node": node, "devices": list(range(8))}]}

    return Cluster.model_validate({
        "topology": {"levels": ["zone"], "domains": [{"id": "z0", "level": "zone"}]},
        "device_models": {"H100": {"memory_gib": 80}},
        "pools": [{"name": "res", "pricing": "reserved"}],
        "nodes": [{"id": f"n{i}", "domain": "z0", "pool": "res", "capacity": {"cpu": 16 * CPU, "memory": 1 << 20},
                   "devices": {"model": "H100", "count": 8}} for i in range(2)],
        "tenants": [{"name": "a", "quotas": {"H100": {"nominal": 16}},
                     "preemption": {"within_tenant": "lower_priority"}}],
        "running": [on("n0", "r-new", 200.0, 3600.0), on("n1", "r-old", 100.0, 60.0)]})


@pytest.mark.parametrize("objective", [None, LEAST_LOST], ids=["default", "least-lost"])
def test_cpsat_evicts_the_victim_that_loses_less_work(objective: Any) -> None:
    """Kueue evicts the most recently started candidate (preemption.md "Targets"): `r-new`, which
    loses 8 GPUs x 3,600 s = 8 GPU-h. Either victim frees the 8 GPUs the new job needs; CP-SAT
    admits the same job and evicts `r-old`: 8 x 60 s = 0.133 GPU-h."""
    c = _two_gpu_nodes_full()
    new = {"id": "a-new", "tenant": "a", "priority": 100,
           "groups": [{"name": "w", "replicas": {"min": 1, "max": 1}, "request": {"cpu": CPU, "gpu": 8}}]}
    p = compile_problem(c, Queue.model_validate({"jobs": [new]}))
    kueue = solve_kueue(p)
    assert evicted(kueue) == {"r-new": ("preempted", "a-new")}
    plan = solve_cpsat(p, time_limit=3.0, objective=objective)
    assert check_problem(p, plan) == []
    assert admitted(plan) == {"a": 1}
    assert evicted(plan) == {"r-old": ("preempted", "a-new")}
    assert plan.evictions[0].lost_gpu_hours == pytest.approx(8 * 60 / 3600)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=contended_rounds())
def test_least_lost_keeps_kueues_value_within_its_tolerance(data: tuple[Cluster, Queue]) -> None:
    """With "admitted value within 2%, then the least lost work", the plan is valid and neither
    admits less than Kueue's value by more than the tolerance nor, within it, loses more work."""
    from optsched.metrics import evaluate_problem
    from optsched.objective import Objective

    c, q = data
    p = compile_problem(c, q)
    plan = solve_cpsat(p, time_limit=3.0, objective=LEAST_LOST)
    assert check_problem(p, plan) == [], plan.solver
    rows = plan.solver.steps
    assert not any("bug" in row.result for row in rows), [r.result for r in rows]
    kueue = evaluate_problem(p, solve_kueue(p)).objective()
    assert plan.objective["admitted_value"] >= 0.98 * kueue["admitted_value"] - 1e-6
    assert not Objective.parse(LEAST_LOST).better(kueue, plan.objective)


# ---------------------------------------------------------------------------- fair share (DRF) term
def test_fairness_term_splits_a_node_by_weight() -> None:
    """Weighted DRF as an objective term: tenants a and b (weights 1 and 3) queue eight 1-GPU jobs
    each for one 8-GPU node. Value first admits 8 jobs in any split; fairness first, then value,
    gives a 2 and b 6 (dominant shares 2/8 and 6/8 = weights 1:3, deviation 0)."""
    def one_gpu(id_: str, team: str) -> dict[str, Any]:
        return {"id": id_, "tenant": team, "groups": [{"name": "w", "replicas": {"min": 1, "max": 1},
                                                       "request": {"cpu": CPU, "gpu": 1}}]}

    c = Cluster.model_validate({
        "topology": {"levels": ["zone"], "domains": [{"id": "z0", "level": "zone"}]},
        "device_models": {"H100": {"memory_gib": 80}},
        "pools": [{"name": "res", "pricing": "reserved"}],
        "nodes": [{"id": "n0", "domain": "z0", "pool": "res", "capacity": {"cpu": 64 * CPU, "memory": 1 << 20},
                   "devices": {"model": "H100", "count": 8}}],
        "tenants": [{"name": "a", "weight": 1.0}, {"name": "b", "weight": 3.0}]})
    p = compile_problem(c, Queue.model_validate({"jobs": [one_gpu(f"{t}-{i}", t) for t in "ab" for i in range(8)]}))
    plan = solve_cpsat(p, time_limit=5.0, objective=["fairness", "admitted_value"])
    assert check_problem(p, plan) == []
    assert admitted(plan) == {"a": 2, "b": 6}
    assert plan.objective["fairness"] == pytest.approx(0.0, abs=1e-9)
    assert plan.solver.model is not None and plan.solver.model.terms["fairness"] == pytest.approx(0.0, abs=1e-9)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=contended_rounds())
def test_fairness_term_matches_the_metric(data: tuple[Cluster, Queue]) -> None:
    """With fairness in the objective, the plan is valid and the model's fairness term equals the
    metric's (shares are rounded up to 1/10,000 of the cluster per tenant and dimension)."""
    c, q = data
    p = compile_problem(c, q)
    plan = solve_cpsat(p, time_limit=3.0, objective=["admitted_value", "fairness"])
    assert check_problem(p, plan) == [], plan.solver
    model = plan.solver.model
    if model is not None and "fairness" in model.terms:
        actual = model.plan_terms or plan.objective
        assert model.terms["fairness"] == pytest.approx(actual["fairness"], abs=4 * len(c.tenants) * 1e-4)


def test_jobs_the_model_leaves_out_get_their_binding_reason() -> None:
    """The CP-SAT model only says "not admitted"; `explain_deferred` names the quota rule a job's
    minimum replicas would break after the plan (the borrowing example: team-a-cq holds all 21
    CPUs of the cohort), and leaves `capacity` where quota would let the job in."""
    from optsched.model.plan import Deferred, Placement
    from optsched.roundmodel.decode import NOT_ADMITTED
    from optsched.solvers.incumbent import explain_deferred

    c = cluster([tenant("a", 9), tenant("b", 12)], nodes=2)
    jobs = [job(f"a-{i}", "a", submitted_at=i) for i in range(22)] + [job("c-0", "b", cpus=4)]
    p = compile_problem(c, Queue.model_validate({"jobs": jobs}))
    placed = [Placement(job=f"a-{i}", group="w", replica=0, node=f"n{i % 2}") for i in range(21)]
    plan = Plan(placements=placed, deferred=[Deferred(job=j, reason="capacity", detail=NOT_ADMITTED)
                                             for j in ("a-21", "c-0")])
    assert check_problem(p, plan) == []
    reasons = {d.job: (d.reason, d.detail) for d in explain_deferred(p, plan).deferred}
    assert reasons["a-21"][0] == "quota" and "cpu" in reasons["a-21"][1]
    assert reasons["c-0"][0] == "quota"  # b lends its 12 CPUs to a: taking 4 back needs a reclaim
    c2 = cluster([tenant("a", 9), tenant("b", 12)], nodes=1, cpus_per_node=16)
    p2 = compile_problem(c2, Queue.model_validate({"jobs": jobs[:17]}))
    plan2 = Plan(placements=[Placement(job=f"a-{i}", group="w", replica=0, node="n0") for i in range(16)],
                 deferred=[Deferred(job="a-16", reason="capacity", detail=NOT_ADMITTED)])
    assert check_problem(p2, plan2) == []
    assert [d.reason for d in explain_deferred(p2, plan2).deferred] == ["capacity"]  # the node is full


def _reclaim_plan(order: list[str]) -> dict[str, Any]:
    return {"placements": [{"job": "a-new", "group": "w", "replica": 0, "node": "n0"}],
            "evictions": [{"job": j, "reason": "reclaimed", "by": "a-new", "lost_gpu_hours": 0.0} for j in order]}


def _lender(second_cpus: int, base_cpus: int, cpus_per_node: int = 16) -> Problem:
    """team-b-cq (12 nominal) runs a non-preemptible base, a 3-CPU job and a second one on n0;
    team-a-cq (9 nominal, reclaim Any) queues a 5-CPU job."""
    run = [running(job("rb-base", "b", cpus=base_cpus, preemptible=False), "n0"),
           running(job("rb-large", "b", cpus=3), "n0", started_at=100.0),
           running(job("rb-second", "b", cpus=second_cpus), "n0", started_at=200.0)]
    c = cluster([tenant("a", 9, reclaim_within_cohort="any"), tenant("b", 12)], run, nodes=1,
                cpus_per_node=cpus_per_node)
    return compile_problem(c, Queue.model_validate({"jobs": [job("a-new", "a", cpus=5)]}))


def test_a_reclaim_may_take_the_lender_back_to_nominal() -> None:
    """Kueue checks that a victim's ClusterQueue still borrows before each removal, in its candidate
    order (pkg/scheduler/preemption/classical/candidate_generator.go `candidateIsValid`), so the last
    victim may take it back to nominal (issue 22, 2b). team-b-cq uses 11 + 3 + 1 = 15 CPUs of 12:
    the 1-CPU job first (15 > 12), then the 3-CPU one (14 > 12) is an order Kueue takes, so the
    pair is legal, however the plan lists it. (The earlier rule, each reclaim with all the others
    gone, refused it: 15 - 3 = 12.) With 9 + 3 + 3 no order works: the second removal finds
    team-b-cq at 12, within nominal; one of the two alone is legal."""
    p = _lender(second_cpus=1, base_cpus=11)
    for order in (["rb-second", "rb-large"], ["rb-large", "rb-second"]):
        assert check_problem(p, Plan.model_validate(_reclaim_plan(order))) == []
    p = _lender(second_cpus=3, base_cpus=9, cpus_per_node=20)
    problems = check_problem(p, Plan.model_validate(_reclaim_plan(["rb-second", "rb-large"])))
    assert sorted((v.rule, v.job) for v in problems) == [("preemption", "rb-large"), ("preemption", "rb-second")]
    assert all("in any order" in v.message for v in problems)
    assert check_problem(p, Plan.model_validate(_reclaim_plan(["rb-large"]))) == []


def test_kueue_and_cpsat_reclaim_down_to_nominal(solver: str) -> None:
    """The pair above is what Kueue evicts for the 5-CPU job (n0 has 1 CPU free; the most recently
    started 1-CPU job first, then the 3-CPU one); cpsat, with the same rule in its model, too."""
    p = _lender(second_cpus=1, base_cpus=11)
    plan = solve_kueue(p) if solver == "kueue" else solve_cpsat(p, time_limit=5.0)
    assert check_problem(p, plan) == []
    assert evicted(plan) == {"rb-second": ("reclaimed", "a-new"), "rb-large": ("reclaimed", "a-new")}
    if solver == "cpsat":
        assert "bug" not in str(plan.solver.reason or "") and plan.solver.model is not None
        assert plan.solver.model.hint_status != "INFEASIBLE"


# ---------------------------------------------------------------------------- rule 5: who may preempt
def _over_nominal(bwc: bool) -> tuple[Cluster, list[dict[str, Any]]]:
    """team-a-cq (6 CPUs nominal, 6 borrowable, within_tenant LowerPriority) runs a 4-CPU job of
    priority -1; a 10-CPU job of priority 1 arrives: 4 + 10 = 14 > 12, so it needs a preemption,
    and its request is above team-a-cq's nominal quota."""
    policy: dict[str, Any] = {"within_tenant": "lower_priority", "reclaim_within_cohort": "lower_priority"}
    if bwc:
        policy["borrow_within_cohort"] = {"policy": "lower_priority"}
    c = cluster([tenant("a", 6, borrowing_limit=6, **policy), tenant("b", 6)],
                [running(job("a-low", "a", cpus=4, priority=-1), "n0")])
    return c, [job("a-big", "a", cpus=10, priority=1)]


def _evict_for_big() -> Plan:
    return Plan.model_validate({
        "placements": [{"job": "a-big", "group": "w", "replica": 0, "node": "n1"}],
        "evictions": [{"job": "a-low", "reason": "preempted", "by": "a-big", "lost_gpu_hours": 0.0}]})


def test_a_job_above_its_nominal_quota_may_not_preempt() -> None:
    """Rule 5 (Kueue flavorassigner.go `fitsResourceQuota`: a flavor resource that needs preemption
    is `noFit` unless the request is at most the nominal quota or `canPreemptWhileBorrowing`):
    the eviction is refused, naming the flavor and both amounts; with borrow_within_cohort
    LowerPriority the same plan is legal."""
    c, jobs = _over_nominal(bwc=False)
    p = compile_problem(c, Queue.model_validate({"jobs": jobs}))
    problems = check_problem(p, _evict_for_big())
    assert [(v.rule, v.job) for v in problems] == [("preemption", "a-low")]
    assert "requests 10000 cpu, above its tenant's nominal quota 6000" in problems[0].message
    c, jobs = _over_nominal(bwc=True)
    assert check_problem(compile_problem(c, Queue.model_validate({"jobs": jobs})), _evict_for_big()) == []


def test_solvers_preempt_above_nominal_only_with_borrow_within_cohort(solver: str) -> None:
    """Without borrow_within_cohort the 10-CPU job is deferred for quota and nothing is evicted;
    with it, the 4-CPU job is preempted and the 10-CPU one borrows 4 CPUs."""
    c, jobs = _over_nominal(bwc=False)
    _, plan = solve(solver, c, jobs)
    assert plan.evictions == [] and [d.reason for d in plan.deferred] == ["quota"]
    c, jobs = _over_nominal(bwc=True)
    _, plan = solve(solver, c, jobs)
    assert evicted(plan) == {"a-low": ("preempted", "a-big")} and admitted(plan) == {"a": 1}


def test_cpsat_keeps_an_elastic_preemptor_within_nominal_where_it_evicts() -> None:
    """An elastic 1-3 x 4-CPU job of team-a-cq (6 nominal, 6 borrowable from an idle team-b-cq)
    next to its running 4-CPU job of lower priority: 2 replicas fit without preemption (8 of 12);
    3 would need the eviction, and with it the job would request 12 CPUs, above nominal (rule 5:
    the model's P2b). cpsat admits 2 replicas and evicts nothing; evicting for 3 is refused by
    the validator."""
    policy: dict[str, Any] = {"within_tenant": "lower_priority"}
    c = cluster([tenant("a", 6, borrowing_limit=6, **policy), tenant("b", 6)],
                [running(job("a-low", "a", cpus=4, priority=-1), "n0")])
    elastic = job("a-el", "a", cpus=4, priority=1)
    elastic["groups"][0]["replicas"] = {"min": 1, "max": 3}
    p, plan = solve("cpsat", c, [elastic])
    assert plan.evictions == [] and len(plan.placements) == 2
    greedy = Plan.model_validate({
        "placements": [{"job": "a-el", "group": "w", "replica": i, "node": f"n{i + 1}", "elastic": i > 0}
                       for i in range(3)],
        "evictions": [{"job": "a-low", "reason": "preempted", "by": "a-el", "lost_gpu_hours": 0.0}]})
    assert [v.rule for v in check_problem(p, greedy)] == ["preemption"]


# ---------------------------------------------------------------------------- rule 9: disruption over every resource
def _equal_cost_victims() -> tuple[Cluster, list[dict[str, Any]]]:
    """team-a-cq (8 CPUs) runs a-low (priority 1, 4 CPUs); team-b-cq (8) runs a non-preemptible
    8-CPU base and b-borrow (priority 3, 4 CPUs), borrowing 4 of team-a-cq's. A priority-5 4-CPU job
    of team-a-cq needs one of the two 4-CPU jobs gone; both lose the same work."""
    run = [running(job("a-low", "a", cpus=4, priority=1), "n0"),
           running(job("b-base", "b", cpus=8, preemptible=False), "n1"),
           running(job("b-borrow", "b", cpus=4, priority=3), "n1")]
    c = cluster([tenant("a", 8, within_tenant="lower_priority", reclaim_within_cohort="lower_priority"),
                 tenant("b", 8)], run)
    return c, [job("a-new", "a", cpus=4, priority=5)]


def test_cpu_only_evictions_lose_work() -> None:
    """Rule 9: lost work is priced over every resource. On a CPU-only cluster one GPU-equivalent
    is an average node (16 CPUs here), so a 4-CPU job checkpointed 600 s ago loses
    600 / 3600 x 4 / 16 GPU-equivalent hours (it used to count 0: it holds no GPU)."""
    c, jobs = _equal_cost_victims()
    p, plan = solve("kueue", c, jobs)
    assert len(plan.evictions) == 1 and plan.evictions[0].lost_gpu_hours == 0.0
    assert evaluate_problem(p, plan).disruption == pytest.approx(600 / 3600 * 4 / 16)


def test_cpsat_evicts_the_lower_priority_of_equal_cost_victims() -> None:
    """Rule 9: at equal lost work the lower-priority victim goes (the `victim_priority` tie-break).
    Kueue reclaims b-borrow (other ClusterQueues' candidates come first); cpsat, at the same value
    and the same lost work, preempts a-low, of lower priority."""
    c, jobs = _equal_cost_victims()
    p, kueue = solve("kueue", c, jobs)
    _, cpsat = solve("cpsat", c, jobs)
    assert evicted(kueue) == {"b-borrow": ("reclaimed", "a-new")}
    assert evicted(cpsat) == {"a-low": ("preempted", "a-new")}
    k, s = evaluate_problem(p, kueue), evaluate_problem(p, cpsat)
    assert (s.admitted_value, s.disruption) == pytest.approx((k.admitted_value, k.disruption))


# ---------------------------------------------------------------------------- rule 10: an eviction serves its preemptor
def _evict_plan(victim: str, by: str, node: str, reason: str = "preempted") -> Plan:
    return Plan.model_validate({
        "placements": [{"job": by, "group": "w", "replica": 0, "node": node}],
        "evictions": [{"job": victim, "reason": reason, "by": by, "lost_gpu_hours": 0.0}]})


def test_an_eviction_must_serve_its_preemptor_by_room_or_by_quota() -> None:
    """Rule 10: team-a-cq (alone, 64 CPUs nominal) runs a-low (4 CPUs, priority -1) on n0; a-high
    (4 CPUs, priority 1) may preempt it. Placed beside it (n0) the eviction serves by room; placed
    on n1 with quota to spare it serves nobody and the validator names both the rule and the
    preemptor. With nominal 6 (no cohort) putting a-low back breaks the quota, so the eviction
    serves by quota wherever a-high runs."""
    policy: dict[str, Any] = {"within_tenant": "lower_priority"}
    jobs = [job("a-high", "a", cpus=4, priority=1)]
    c = cluster([tenant("a", 64, cohort=None, **policy)], [running(job("a-low", "a", cpus=4, priority=-1), "n0")])
    p = compile_problem(c, Queue.model_validate({"jobs": jobs}))
    assert check_problem(p, _evict_plan("a-low", "a-high", "n0")) == []
    problems = check_problem(p, _evict_plan("a-low", "a-high", "n1"))
    assert [(v.rule, v.job) for v in problems] == [("serving", "a-low")]
    assert "its preemptor a-high has no replica on the nodes the victim held" in problems[0].message
    c = cluster([tenant("a", 6, cohort=None, **policy)], [running(job("a-low", "a", cpus=4, priority=-1), "n0")])
    p = compile_problem(c, Queue.model_validate({"jobs": jobs}))
    assert check_problem(p, _evict_plan("a-low", "a-high", "n1")) == []


def test_a_reclaim_serves_only_where_the_cohort_needs_the_quota_back() -> None:
    """Rule 10 for reclaims: team-b-cq borrows 4 of team-a-cq's CPUs (b-borrow on n1). An 8-CPU
    a-new on n2 takes the cohort to 8 + 12 = 20 > 16 with b-borrow back: the reclaim serves. A
    4-CPU a-small leaves the cohort at 16 with b-borrow back: evicting it frees nothing a-small
    needs, so the validator refuses the plan (rule 10 alone: the reclaim is otherwise legal)."""
    run = [running(job("b-base", "b", cpus=8, preemptible=False), "n1"),
           running(job("b-borrow", "b", cpus=4, priority=3), "n1")]
    c = cluster([tenant("a", 8, reclaim_within_cohort="any"), tenant("b", 8)], run)
    p = compile_problem(c, Queue.model_validate({"jobs": [job("a-new", "a", cpus=8, priority=5)]}))
    assert check_problem(p, _evict_plan("b-borrow", "a-new", "n2", "reclaimed")) == []
    p = compile_problem(c, Queue.model_validate({"jobs": [job("a-small", "a", cpus=4, priority=5)]}))
    problems = check_problem(p, _evict_plan("b-borrow", "a-small", "n2", "reclaimed"))
    assert [(v.rule, v.job) for v in problems] == [("serving", "b-borrow")]


def test_solvers_evict_for_room_beside_the_victim(solver: str) -> None:
    """Rule 10 through the solvers: two 16-CPU nodes, n0 held by a-low (16 CPUs, preemptible) and
    n1 by a non-preemptible 12-CPU job; a 16-CPU a-high fits only where a-low ran, so both
    solvers evict a-low and place a-high on n0 (quota is ample: the room is the only reason)."""
    run = [running(job("a-low", "a", cpus=16, priority=-1), "n0"),
           running(job("a-keep", "a", cpus=12, preemptible=False), "n1")]
    c = cluster([tenant("a", 64, cohort=None, within_tenant="lower_priority")], run, nodes=2)
    _, plan = solve(solver, c, [job("a-high", "a", cpus=16, priority=1)])
    assert evicted(plan) == {"a-low": ("preempted", "a-high")}
    assert [(pl.job, pl.node) for pl in plan.placements] == [("a-high", "n0")]


BORROW_CLAUSE = "victim's tenant does not borrow a flavor that the victim and the preemptor use"
"""The message of rule 6's borrowing clause (`preemption.eviction_problems`)."""


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=contended_rounds())
def test_reclaimable_is_the_borrowing_clause_at_its_loosest(data: tuple[Cluster, Queue]) -> None:
    """`preemption.reclaimable(victim)` is rule 6's borrowing clause for a preemptor that uses
    every flavor, no other reclaim before it: where it is False the clause refuses the reclaim
    for every preemptor, within nominal or not, and every earlier reclaim of the tenant (the
    `kueue` baseline then stops a search that must end refused), and where it is True the
    loosest reclaim passes the clause."""
    from optsched.concerns.tenancy import preemption

    c, q = data
    p = compile_problem(c, q)
    flavors = len(p.flavors)
    for victim in p.running:
        may = preemption.reclaimable(p, victim)
        for job in p.jobs:
            if job.tenant == victim.tenant:
                continue
            for uses, within, others in ((np.ones(flavors), True, None), (np.ones(flavors), False, None),
                                         (np.ones(flavors), True, np.full(flavors, 2.0))):
                by = preemption.Preemptor(job, uses, within, frozenset(), np.zeros((len(p.tenant_names), flavors)))
                clause = any(m.startswith(BORROW_CLAUSE)
                             for m in preemption.eviction_problems(p, victim, "reclaimed", by, others))
                if not may:
                    assert clause
                elif others is None:
                    assert not clause
