"""The karpenter baseline: placement on existing nodes first, then the cheapest new nodes."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import check, evaluate, solve
from optsched.model import Cluster, Plan, Queue
from optsched.model.plan import Placement, Provision
from tests.strategies import rounds

NODE = {"capacity": {"cpu": 64000, "memory": 512000}}


def _cluster(a100_slots: int = 2) -> Cluster:
    return Cluster.model_validate({
        "topology": {"levels": ["leaf"], "domains": [{"id": "l0", "level": "leaf"}, {"id": "l1", "level": "leaf"}]},
        "device_models": {"H100": {"speed": 1.0}, "A100": {"speed": 0.5}},
        "pools": [{"name": "res", "pricing": "reserved", "price_per_hour": 50.0},
                  {"name": "h100-od", "pricing": "on_demand", "price_per_hour": 98.0,
                   "provisionable": {"template": "h100", "domain": "l1", "max_nodes": 2, "startup_s": 600}},
                  {"name": "a100-od", "pricing": "on_demand", "price_per_hour": 32.0,
                   "provisionable": {"template": "a100", "domain": "l1", "max_nodes": a100_slots}}],
        "node_templates": {"h100": {**NODE, "devices": {"model": "H100", "count": 8}},
                           "a100": {**NODE, "devices": {"model": "A100", "count": 8}}},
        "nodes": [{"id": "r0", "domain": "l0", "pool": "res", **NODE, "devices": {"model": "H100", "count": 8}}],
    })


def _job(name: str, gpus: int, replicas: int = 1, models: list[str] | None = None, priority: int = 0) -> dict[str, Any]:
    group: dict[str, Any] = {"name": "w", "replicas": {"min": replicas, "max": replicas},
                             "request": {"gpu": gpus, "cpu": 1000}}
    if models:
        group["models"] = {m: 1.0 for m in models}
    return {"id": name, "priority": priority, "groups": [group]}


def test_existing_nodes_first_then_the_cheapest_pool_with_room() -> None:
    """a fits the reserved node: no node for it. b (any model) gets the cheaper A100 pool; c
    (H100 only) the H100 pool; d, a gang of 2 x 8 GPUs, needs 2 new nodes and each pool has one
    slot left: deferred. e (8 GPUs, any model) takes the last A100 slot."""
    q = Queue.model_validate({"jobs": [_job("a", 8, priority=9), _job("b", 8, priority=8),
                                       _job("c", 8, models=["H100"], priority=7), _job("d", 8, 2, priority=6),
                                       _job("e", 8, priority=5)]})
    c = _cluster()
    plan = solve(c, q, solver="karpenter")
    assert check(c, q, plan) == []
    where = {p.job: p.node for p in plan.placements}
    assert where["a"] == "r0"
    assert where["b"] == "a100-od/new-0" and where["c"] == "h100-od/new-0" and where["e"] == "a100-od/new-1"
    assert {d.job for d in plan.deferred} == {"d"}
    assert sorted(plan.provisioning, key=lambda x: x.pool) == [Provision(pool="a100-od", count=2),
                                                               Provision(pool="h100-od", count=1)]
    assert plan.objective["cost"] == evaluate(c, q, plan).cost == 2 * 32.0 + 98.0


def test_no_provisioning_for_work_that_fits() -> None:
    q = Queue.model_validate({"jobs": [_job("a", 4), _job("b", 4)]})
    plan = solve(_cluster(), q, solver="karpenter")
    assert plan.provisioning == [] and not plan.deferred


def test_new_nodes_are_shared_by_pending_jobs() -> None:
    """Two pending 4-GPU jobs share one new A100 node (bin packing onto new capacity)."""
    q = Queue.model_validate({"jobs": [_job("a", 8, priority=9), _job("b", 4), _job("c", 4)]})
    plan = solve(_cluster(), q, solver="karpenter")
    assert plan.provisioning == [Provision(pool="a100-od", count=1)]
    assert {p.node for p in plan.placements if p.job in "bc"} == {"a100-od/new-0"}


def test_the_validator_refuses_provisioning_beyond_what_pools_define() -> None:
    c = _cluster()
    q = Queue.model_validate({"jobs": [_job("a", 8)]})
    on = [Placement(job="a", group="w", replica=0, node="a100-od/new-0", devices=list(range(8)))]
    assert check(c, q, Plan(placements=on, provisioning=[Provision(pool="a100-od", count=1)])) == []
    rules = {v.rule for v in check(c, q, Plan(placements=on, provisioning=[Provision(pool="a100-od", count=3)]))}
    assert rules == {"provisioning"}  # max_nodes is 2
    rules = {v.rule for v in check(c, q, Plan(placements=on, provisioning=[Provision(pool="res", count=1)]))}
    assert "provisioning" in rules  # res has no template: not provisionable, and a100-od/new-0 is not created
    rules = {v.rule for v in check(c, q, Plan(placements=on, provisioning=[Provision(pool="nope", count=1)]))}
    assert "reference" in rules


@st.composite
def provisionable_rounds(draw: st.DrawFn) -> tuple[Cluster, Queue]:
    """A generated round whose cluster gains a provisionable on-demand pool of 8-GPU nodes."""
    cluster, _ = draw(rounds(max_nodes=4, max_jobs=0))
    leaf = next(d.id for d in cluster.topology.domains if d.level == "leaf")
    pool = {"name": "od", "pricing": "on_demand", "price_per_hour": draw(st.sampled_from([5.0, 40.0])),
            "provisionable": {"template": "t", "domain": leaf, "max_nodes": draw(st.integers(1, 3))}}
    doc = cluster.model_dump()
    doc["pools"].append(pool)
    doc["node_templates"] = {"t": {"capacity": {"cpu": 128000, "memory": 1048576, "rdma_nics": 8},
                                   "devices": {"model": "GPU-A", "count": 8}}}
    cluster = Cluster.model_validate(doc)
    from tests.strategies import queues

    return cluster, draw(queues(cluster, max_jobs=8))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(provisionable_rounds())
def test_karpenter_plans_are_valid_and_admit_at_least_best_fit(data: tuple[Cluster, Queue]) -> None:
    cluster, queue = data
    plan = solve(cluster, queue, solver="karpenter")
    assert check(cluster, queue, plan) == []
    base = solve(cluster, queue, solver="best-fit")
    assert {p.job for p in base.placements} <= {p.job for p in plan.placements}
    if not base.deferred:
        assert plan.provisioning == []


def test_the_optimiser_provisions_for_value_and_picks_the_cheaper_pool_for_cost() -> None:
    """CP-SAT (and the MILP) may create nodes: with value first it fills all four new nodes with
    a, b, c and the 16-GPU gang d (40 GPUs against karpenter's 32); with only b to place beyond
    r0, and b as fast on either model (its `models` speeds), value then cost creates one A100 node
    ($32/h) rather than an H100 one ($98/h)."""
    c = _cluster()
    q = Queue.model_validate({"jobs": [_job("a", 8, priority=9), _job("b", 8, priority=8),
                                       _job("c", 8, models=["H100"], priority=7), _job("d", 8, 2, priority=6),
                                       _job("e", 8, priority=5)]})
    for solver in ("cpsat", "milp"):
        plan = solve(c, q, solver=solver, time_limit=5.0)
        assert check(c, q, plan) == []
        assert {d.job for d in plan.deferred} == {"e"}
        assert sorted((x.pool, x.count) for x in plan.provisioning) == [("a100-od", 2), ("h100-od", 2)]
        assert plan.solver.bound is None or plan.solver.bound >= plan.objective["admitted_value"] - 1e-6
    q2 = Queue.model_validate({"jobs": [_job("a", 8, priority=9), _job("b", 8, models=["H100", "A100"])]})
    plan = solve(c, q2, solver="cpsat", objective=["admitted_value", "cost"], time_limit=5.0)
    assert check(c, q2, plan) == [] and not plan.deferred
    assert plan.provisioning == [Provision(pool="a100-od", count=1)] and plan.objective["cost"] == 32.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(provisionable_rounds())
def test_optimiser_plans_that_provision_are_valid(data: tuple[Cluster, Queue]) -> None:
    cluster, queue = data
    plan = solve(cluster, queue, solver="cpsat", objective=["admitted_value", "cost"], time_limit=2.0)
    assert check(cluster, queue, plan) == []
    assert plan.objective["admitted_value"] >= solve(cluster, queue, solver="best-fit").objective["admitted_value"] - 1e-6


def test_neighbourhoods_provision_too() -> None:
    """Started from best-fit's plan (only a, on r0), the neighbourhood search alone (no whole
    model, no karpenter hint) creates nodes for the deferred jobs: a valid plan that provisions
    and admits more than best-fit."""
    from optsched.problem import compile_problem
    from optsched.solvers.cpsat import solve_cpsat

    c = _cluster()
    q = Queue.model_validate({"jobs": [_job("a", 8, priority=9), _job("b", 8, priority=8),
                                       _job("c", 8, models=["H100"], priority=7), _job("e", 8, priority=5)]})
    p = compile_problem(c, q)
    base = solve(c, q, solver="best-fit")
    assert [pl.job for pl in base.placements] == ["a"]
    plan = solve_cpsat(p, hint=base, neighbourhoods=True, time_limit=3.0, objective=["admitted_value", "cost"])
    assert check(c, q, plan) == [] and plan.solver.status == "feasible"
    assert plan.provisioning and plan.objective["admitted_value"] > base.objective["admitted_value"]
    assert not plan.deferred  # b, c, e on 3 of the 4 new nodes: c on an H100 one


def test_slots_that_fixed_work_uses_are_created_anyway() -> None:
    """A model of job x alone, with work outside it on a100-od/new-1: slots new-0 and new-1 are
    created whatever the model does (their $64/h a constant of the cost), so x takes the free
    new-0 at no extra cost rather than an H100 slot."""
    from ortools.sat.python import cp_model

    from optsched.concerns import eligibility
    from optsched.ledger import Ledger
    from optsched.metrics import evaluate_problem
    from optsched.objective import Objective
    from optsched.problem import compile_problem
    from optsched.roundmodel.build import encode_all
    from optsched.roundmodel.decode import decode
    from optsched.roundmodel.variables import RoundModel
    from optsched.roundmodel.weights import objective_expression, objective_weights
    from optsched.view import PlanView

    c = _cluster()
    q = Queue.model_validate({"jobs": [_job("w", 8), _job("x", 8, models=["H100", "A100"])]})
    p = compile_problem(c, q)
    fixed = Plan(placements=[Placement(job="w", group="w", replica=0, node="a100-od/new-1", devices=list(range(8)))],
                 deferred=[{"job": "x", "reason": "capacity"}], provisioning=[Provision(pool="a100-od", count=2)])
    assert check(c, q, fixed) == []
    base = Ledger.with_running(p)
    base.add_replicas(p.jobs[p.job_index["w"]], PlanView(p, fixed).by_job["w"])
    # the model may use the slots only (keeps x off the free reserved r0)
    r = RoundModel(p, base, [p.jobs[p.job_index["x"]]], allowed=p.node_provisioned,
                   wanted=frozenset({"admitted_value", "cost"}), provision=True)
    encode_all(r, float("inf"), variables_by=float("inf"))
    assert r.slots_created == {0: 0, 1: 0, 2: 2}
    goal = Objective.parse(["admitted_value", "cost"])
    r.model.maximize(objective_expression(r, objective_weights(r, goal)[0]))
    solver = cp_model.CpSolver()
    assert solver.solve(r.model) == cp_model.OPTIMAL
    sub = decode(r, solver, fixed.solver)
    assert sub is not None and [pl.node for pl in sub.placements] == ["a100-od/new-0"]
    merged = Plan(placements=fixed.placements + sub.placements,
                  provisioning=eligibility.provisioning_of(p, [p.node_index["a100-od/new-1"], p.node_index["a100-od/new-0"]]))
    assert check(c, q, merged) == [] and evaluate_problem(p, merged).cost == 64.0
    assert solver.value(r.terms["cost"].expr) == 64_000
