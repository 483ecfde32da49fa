"""The domain path (`optsched.domain`, solver `domain`, and `cpsat`'s start plan at scale): every plan
passes the validator, the domain model's value LP bounds every valid plan, and its decisions keep
quota and eviction rules the validator judges."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import load_cluster, solve
from optsched.budget import Budget
from optsched.bundled import DATA_DIR
from optsched.check import check_problem
from optsched.domain.assign import Assigned, assign
from optsched.domain.model import DomainSolution, build_model, lost_bound, solve_model, value_bound
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Queue
from optsched.objective import Objective
from optsched.problem import compile_problem
from optsched.solvers.domain import NO_EVICTION_PRICE, least_lost_within, lost_price, run_domain, solve_domain
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from optsched.solvers.kueue import solve_kueue
from tests.strategies import busy_rounds, contended_rounds, rounds
from tests.test_cpsat import brute_force, tiny_rounds
from tests.test_tenancy import CPU, cluster, job, running, tenant

ROUNDS = st.one_of(rounds(max_nodes=8, max_jobs=8), busy_rounds(max_nodes=8, max_jobs=6),
                   contended_rounds(max_nodes=4, max_jobs=10))
"""Idle, busy and contended clusters (tenants, cohorts, trees, ResourceFlavors, provisionable pools
where the cluster strategy draws them)."""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=ROUNDS, objective=st.sampled_from([None, {"admitted_value": 1.0, "disruption": 2.0},
                                               {"lexicographic": ["admitted_value", "disruption"], "tolerance": 0.1}]))
def test_every_domain_plan_passes_the_check(data: tuple[Cluster, Queue], objective: object) -> None:
    cluster_, queue = data
    p = compile_problem(cluster_, queue)
    plan = solve_domain(p, objective=objective, time_limit=5.0)
    assert not check_problem(p, plan), plan.solver.reason
    assert plan.solver.name == "domain"
    if plan.solver.status != "fallback":
        assert plan.solver.domain is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=tiny_rounds())
def test_domain_bound_holds_against_the_brute_force_optimum(data: tuple[Cluster, Queue]) -> None:
    """value <= optimum <= bound; a plan the path calls optimal is the optimum."""
    cluster_, queue = data
    p = compile_problem(cluster_, queue)
    best = brute_force(p)["admitted_value"]
    m = build_model(p)
    bound = value_bound(m, 10.0)
    assert bound is not None
    assert bound >= best - 1e-6
    plan = solve_domain(p, time_limit=5.0)
    value = evaluate_problem(p, plan).admitted_value
    assert value <= best + 1e-6
    if plan.solver.status == "optimal" and not p.pool_max_nodes.sum():
        assert value >= best - 1e-6


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=ROUNDS)
def test_domain_bound_holds_for_every_solver(data: tuple[Cluster, Queue]) -> None:
    """Plans that evict, borrow and reclaim included (`kueue`), and the domain path's own."""
    cluster_, queue = data
    p = compile_problem(cluster_, queue)
    if any(v.migratable for v in p.running):
        return  # the bound is not claimed where running jobs may migrate
    bound = value_bound(build_model(p), 10.0)
    assert bound is not None
    plans = [solve_greedy(p, name) for name in STRATEGIES]
    plans += [solve_kueue(p), solve_domain(p, time_limit=5.0)]
    for plan in plans:
        assert bound >= evaluate_problem(p, plan).admitted_value - 1e-6, plan.solver.name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=ROUNDS)
def test_lost_bound_holds_for_every_solver(data: tuple[Cluster, Queue]) -> None:
    """`lost_bound` at a plan's own value is at most its lost work, for plans that evict (`kueue`,
    the domain path with evictions free of charge) and those that do not; and above the value
    bound no point remains (the bound is infinite)."""
    cluster_, queue = data
    p = compile_problem(cluster_, queue)
    if any(v.migratable for v in p.running):
        return  # the bound is not claimed where running jobs may migrate
    m = build_model(p)
    plans = [solve_greedy(p, "best-fit"), solve_kueue(p), solve_domain(p, time_limit=5.0),
             solve_domain(p, objective={"admitted_value": 1.0, "disruption": 0.0}, time_limit=5.0)]
    for plan in plans:
        got = evaluate_problem(p, plan)
        least = lost_bound(m, got.admitted_value - 1e-6, 10.0)
        assert least is not None
        assert least <= got.disruption + 1e-6, plan.solver.name
    value = value_bound(m, 10.0)
    assert value is not None
    assert lost_bound(m, value * 1.01 + 1.0, 10.0) == math.inf


def test_lost_bound_prices_the_eviction_a_value_needs() -> None:
    """One 16-CPU node, a's preemptible 16-CPU job on it (lost work > 0); a's higher-priority
    16-CPU job is queued. Its whole value needs the whole eviction (the bound is the running job's
    lost work; Kueue's plan pays it), a share of it a share (the LP's point), none of it nothing."""
    from optsched.concerns.tenancy import running as running_jobs

    victim = job("a-run", "a", cpus=16, preemptible=True)
    c = cluster([tenant("a", 32, within_tenant="lower_priority")], run=[running(victim, "n0")], nodes=1)
    p = compile_problem(c, Queue.model_validate({"jobs": [job("a-new", "a", cpus=16, priority=10)]}))
    m = build_model(p)
    lost = running_jobs.lost_work(p, p.running[0])
    assert lost > 0
    plan = solve_kueue(p)
    got = evaluate_problem(p, plan)
    assert [e.job for e in plan.evictions] == ["a-run"] and got.disruption == pytest.approx(lost)
    assert lost_bound(m, got.admitted_value, 5.0) == pytest.approx(lost, abs=1e-5)
    assert lost_bound(m, got.admitted_value / 2, 5.0) == pytest.approx(lost / 2, abs=1e-5)
    assert lost_bound(m, 0.0, 5.0) == pytest.approx(0.0, abs=1e-6)


def test_quota_counts_what_running_jobs_already_borrow() -> None:
    """Tenant a already borrows 8 of b's 16 CPUs (a job that may not be evicted). b's job of 12
    CPUs would leave b lending 4, less than a borrows: it is not admitted (the more valuable job),
    a's job of 4 more is (a then borrows 12 of 16), by the model and the plan alike."""
    a_run = job("a-run", "a", cpus=16, preemptible=False)
    c = cluster([tenant("a", 8), tenant("b", 16)], run=[running(a_run, "n0")], nodes=3)
    queue = Queue.model_validate({"jobs": [job("b-1", "b", cpus=12, priority=10),
                                           job("a-2", "a", cpus=4, priority=0)]})
    p = compile_problem(c, queue)
    sol = solve_model(build_model(p), 5.0)
    assert {p.jobs[j].id for j in sol.admitted} == {"a-2"}
    plan = solve_domain(p, time_limit=5.0)
    assert not check_problem(p, plan)
    assert {x.job for x in plan.placements} == {"a-2"}
    bound = value_bound(build_model(p), 5.0)  # the LP admits part of b-1, never all of both
    assert bound is not None and evaluate_problem(p, plan).admitted_value - 1e-9 <= bound < (12 + 4) / 32


def test_evictions_follow_the_preemption_rules() -> None:
    """A node full of a's low-priority preemptible jobs. b's job alone may not evict them (no
    cohort): it waits. With a's high-priority job in the queue, a's jobs may be preempted (by it:
    `within_tenant: lower_priority`), and every eviction names it."""
    low = [job(f"a-low-{i}", "a", cpus=8, priority=0) for i in range(2)]
    c = cluster([tenant("a", 32, cohort=None, within_tenant="lower_priority"), tenant("b", 32, cohort=None)],
                run=[running(spec, "n0") for spec in low], nodes=1)
    alone = compile_problem(c, Queue.model_validate({"jobs": [job("b-1", "b", cpus=8, priority=100)]}))
    plan = solve_domain(alone, time_limit=5.0)
    assert not check_problem(alone, plan)
    assert not plan.evictions and not plan.placements
    p = compile_problem(c, Queue.model_validate({"jobs": [job("a-high", "a", cpus=8, priority=100),
                                                          job("b-1", "b", cpus=8, priority=100)]}))
    plan = solve_domain(p, time_limit=5.0)
    assert not check_problem(p, plan)
    assert "a-high" in {x.job for x in plan.placements}
    assert plan.evictions and all(e.by == "a-high" and e.reason == "preempted" for e in plan.evictions)


def test_a_preemptor_is_placed_in_its_victims_room() -> None:
    """The serving pass (rule 10's room): n0 is full of a's low-priority job, n1 holds 4 CPUs of b's
    job that may not leave. a-high may evict a-low, b-1 may not (no cohort). Best-fit alone puts
    a-high, placed first, on n1 (the more allocated node) and b-1 in the victim's room, which it
    may not take: the victim would go back and b-1 wait. The pass places a-high on n0 first, so
    both are admitted and the eviction serves a-high."""
    a_low = job("a-low", "a", cpus=16, priority=0)
    b_run = job("b-run", "b", cpus=4, priority=0, preemptible=False)
    c = cluster([tenant("a", 32, cohort=None, within_tenant="lower_priority"), tenant("b", 32, cohort=None)],
                run=[running(a_low, "n0"), running(b_run, "n1")], nodes=2)
    p = compile_problem(c, Queue.model_validate({"jobs": [job("a-high", "a", cpus=12, priority=100, submitted_at=0.0),
                                                          job("b-1", "b", cpus=12, priority=100, submitted_at=1.0)]}))
    plan = solve_domain(p, time_limit=5.0)
    assert not check_problem(p, plan)
    on = {x.job: x.node for x in plan.placements}
    assert on == {"a-high": "n0", "b-1": "n1"}
    assert [(e.job, e.by, e.reason) for e in plan.evictions] == [("a-low", "a-high", "preempted")]


def test_a_job_the_lp_rounded_in_short_of_its_minimum_is_placed_before_the_jobs_after_it() -> None:
    """An LP solution rounds a gang in with bins for 1 of its 2 replicas. Its second replica goes
    anywhere it may, at its turn: the lower-priority job after it does not take the node first
    (which left the gang deferred, for capacity, in the pass that retries it anywhere)."""
    gang = job("gang", "a", cpus=16, priority=100)
    gang["groups"][0]["replicas"] = {"min": 2, "max": 2}
    gang["gang"] = True
    c = cluster([tenant("a", 64, cohort=None)], nodes=2)
    p = compile_problem(c, Queue.model_validate({"jobs": [gang, job("small", "a", cpus=16, priority=0)]}))
    m = build_model(p)
    cell = int(m.cells.node_cell[p.node_index["n0"]])
    sol = DomainSolution(status="optimal", admitted={0, 1}, replicas={(0, 0): {cell: 1}, (1, 0): {cell: 1}},
                         value=1.0)
    got = assign(p, m.cells, sol, deadline=time.perf_counter() + 30)
    assert isinstance(got, Assigned)
    assert not check_problem(p, got.plan)
    assert sorted(x.node for x in got.plan.placements if x.job == "gang") == ["n0", "n1"]
    assert [(d.job, d.reason) for d in got.plan.deferred] == [("small", "capacity")]


def test_with_time_for_both_the_better_placed_of_the_lp_and_the_mip_solution_is_kept() -> None:
    """mixed-cloud-10k seed 4 (1,000 jobs, 2x load): the MIP's solution places to less value than
    the LP's rounding (benchmarks/results/domain-placement.md); with time for both placements the
    domain path keeps the LP's, and says so."""
    cluster = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    p = compile_problem(cluster, generate_queue(cluster, "mixed", jobs=1000, load=2.0, seed=4))
    budget = Budget.from_now(30.0)
    run = run_domain(p, Objective.parse(None), budget, until=budget.at(0.97))
    assert run.plan is not None and not check_problem(p, run.plan)
    m = run.model
    values = {}
    for integral in (False, True):
        sol = solve_model(m, 30.0, integral=integral)
        got = assign(p, m.cells, sol, deadline=time.perf_counter() + 60)
        assert isinstance(got, Assigned)
        values[integral] = evaluate_problem(p, got.plan).admitted_value
    assert values[False] > values[True]
    assert evaluate_problem(p, run.plan).admitted_value == pytest.approx(values[False])
    assert not run.integral and run.solution.status.startswith("LP, placed better than the MIP's")


def test_a_tight_mip_runs_where_only_its_estimate_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """ascend-910b-4k seed 2 (500 jobs, 2x load): the LP's rounding admits gangs bound to one
    domain that the domain cannot hold and places 4% below the bound, the MIP's solution 0.5%.
    With the MIP's estimate set so that twice it does not fit half the time left but the estimate
    does (`TIGHT_MIP`), the MIP runs and its plan is kept."""
    from optsched.solvers import domain as domain_solver

    cluster = load_cluster(DATA_DIR / "clusters" / "ascend-910b-4k.yaml")
    p = compile_problem(cluster, generate_queue(cluster, "mixed", jobs=500, load=2.0, seed=2))
    columns = len(build_model(p).cost)
    budget = Budget.from_now(30.0)  # about 28 s left after the LP: twice a 22 s estimate does not fit half of it
    monkeypatch.setattr(domain_solver, "MIP_SECONDS_PER_COLUMN", 11.0 / columns)
    run = run_domain(p, Objective.parse(None), budget, until=budget.at(0.97))
    assert run.plan is not None and not check_problem(p, run.plan)
    assert run.integral and run.solution.bound is not None
    assert evaluate_problem(p, run.plan).admitted_value >= 0.99 * run.solution.bound
    monkeypatch.setattr(domain_solver, "TIGHT_MIP", 1.0)  # without the tight MIP: the LP's rounding
    again = Budget.from_now(30.0)
    lp = run_domain(p, Objective.parse(None), again, until=again.at(0.97))
    assert not lp.integral and lp.plan is not None
    assert evaluate_problem(p, lp.plan).admitted_value < 0.97 * run.solution.bound


def test_lost_work_price_follows_the_objective() -> None:
    assert lost_price(Objective.parse(None)) < 0.01
    assert lost_price(Objective.parse({"admitted_value": 1.0, "disruption": 3.0})) == 3.0
    assert lost_price(Objective.parse(["disruption", "admitted_value"])) == NO_EVICTION_PRICE


def test_a_tolerance_on_value_buys_less_lost_work() -> None:
    """Two low-priority jobs fill the node; two high-priority jobs of the same tenant wait. Value
    first evicts both (two admitted); with a tolerance of 60% of the value the second level keeps
    one of them (least lost work), so one job waits and one eviction is made."""
    low = [job(f"a-low-{i}", "a", cpus=8, priority=0) for i in range(2)]
    c = cluster([tenant("a", 32, cohort=None, within_tenant="lower_priority")],
                run=[running(spec, "n0", checkpoint_age_s=3600.0) for spec in low], nodes=1)
    p = compile_problem(c, Queue.model_validate({"jobs": [job(f"a-high-{i}", "a", cpus=8, priority=100)
                                                          for i in range(2)]}))
    m = build_model(p)
    assert least_lost_within(Objective.parse(None), m) is None
    tolerant = Objective.parse({"lexicographic": ["admitted_value", "disruption"], "tolerance": 0.6})
    assert least_lost_within(tolerant, m) == pytest.approx(0.6)
    first = solve_domain(p, time_limit=5.0)
    second = solve_domain(p, time_limit=5.0, objective={"lexicographic": ["admitted_value", "disruption"],
                                                         "tolerance": 0.6})
    for plan in (first, second):
        assert not check_problem(p, plan)
    assert len(first.evictions) == 2 and len(second.evictions) == 1
    assert evaluate_problem(p, second).disruption < evaluate_problem(p, first).disruption


def test_required_topology_keeps_a_gang_in_one_leaf() -> None:
    """Two leaves with 4 free GPUs each; a required-leaf gang of 6 GPUs fits nowhere, one of 4 fits:
    the model admits only the one that fits in a leaf, and the bound says so (8 GPUs, not 10)."""
    spec = {
        "device_models": {"H100": {"memory_gib": 80}},
        "topology": {"levels": ["leaf"], "domains": [{"id": "l0", "level": "leaf"}, {"id": "l1", "level": "leaf"}]},
        "pools": [{"name": "res", "pricing": "reserved"}],
        "nodes": [{"id": f"n{i}", "domain": f"l{i % 2}", "pool": "res",
                   "capacity": {"cpu": 64 * CPU, "memory": 1 << 20}, "devices": {"model": "H100", "count": 2}}
                  for i in range(4)],
    }
    c = Cluster.model_validate(spec)

    def gang(id_: str, replicas: int) -> dict[str, object]:
        return {"id": id_, "gang": True, "topology": {"level": "leaf", "mode": "required"},
                "groups": [{"name": "w", "replicas": {"min": replicas, "max": replicas},
                            "request": {"gpu": 2, "cpu": 1000}}]}

    queue = Queue.model_validate({"jobs": [gang("six", 3), gang("four", 2)]})
    p = compile_problem(c, queue)
    bound = value_bound(build_model(p), 5.0)
    assert bound is not None and bound < 8 + 1e-3  # 4 GPUs x 2 leaves; the six never fits
    plan = solve_domain(p, time_limit=5.0)
    assert not check_problem(p, plan)
    assert {x.job for x in plan.placements} == {"four"}
    assert {x.node for x in plan.placements} in ({"n0", "n2"}, {"n1", "n3"})


def test_a_large_round_keeps_its_time_limit_and_starts_from_the_domain_plan() -> None:
    """mixed-cloud-10k, 1,000 queued jobs at 2x load (a generous bound, not a benchmark: the
    targets are measured in benchmarks/scale.py)."""
    c = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    queue = generate_queue(c, "mixed", jobs=1000, load=2.0, seed=0)
    start = time.perf_counter()
    plan = solve(c, queue, solver="cpsat", time_limit=1.0)
    wall = time.perf_counter() - start
    assert wall < 2.5
    p = compile_problem(c, queue)
    assert not check_problem(p, plan)
    assert plan.solver.domain is not None
    assert plan.solver.route is not None and plan.solver.route.startswith("domain model")
    assert plan.solver.status != "fallback"
    assert plan.solver.bound is not None and plan.solver.gap is not None
