"""The value bounds (aggregate LP / MILP over node classes, HiGHS on the round model) are bounds:
never below a valid plan."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.concerns.value import VALUE_SCALE
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Queue
from optsched.problem import compile_problem
from optsched.solvers.bound import value_bound
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from optsched.solvers.milp import model_bound
from tests.strategies import busy_rounds, contended_rounds, rounds
from tests.test_cpsat import brute_force, tiny_rounds


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=tiny_rounds())
def test_bound_is_at_least_the_optimum_on_tiny_instances(data: tuple[Cluster, Queue]) -> None:
    cluster, queue = data
    p = compile_problem(cluster, queue)
    best = brute_force(p)["admitted_value"]
    for integral in (False, True):
        bound = value_bound(p, integral=integral)
        assert bound.value is not None, bound.status
        assert bound.value >= best - 1e-6
    tight, status = model_bound(p, time_limit=10.0)
    assert tight is not None, status
    assert tight >= best - 1e-6
    # the round model is exact: proven optimal, its bound is the optimum up to the rounding slack
    if status == "Optimal":
        slack = sum(g.rmax for j in p.jobs for g in j.groups) * 0.5 / VALUE_SCALE
        assert tight <= best + slack + 1e-4 * max(1.0, best)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(rounds(max_nodes=8, max_jobs=8), busy_rounds(max_nodes=8, max_jobs=6)))
def test_bound_is_at_least_every_baseline(data: tuple[Cluster, Queue]) -> None:
    cluster, queue = data
    p = compile_problem(cluster, queue)
    bound = value_bound(p)
    assert bound.value is not None, bound.status
    for name in STRATEGIES:
        assert bound.value >= evaluate_problem(p, solve_greedy(p, name)).admitted_value - 1e-6, name


def _one_node_two_gangs(nodes: int = 1) -> tuple[Cluster, Queue]:
    cluster = Cluster.model_validate({
        "device_models": {"H100": {"memory_gib": 80}},
        "topology": {"levels": ["leaf"], "domains": [{"id": "leaf-0", "level": "leaf"}]},
        "pools": [{"name": "res", "pricing": "reserved", "price_per_hour": 64.0}],
        "nodes": [{"id": f"n{i}", "domain": "leaf-0", "pool": "res", "capacity": {"cpu": 64000, "memory": 512000},
                   "devices": {"model": "H100", "count": 8}} for i in range(nodes)],
    })
    gang = {"replicas": {"min": 1, "max": 1}, "request": {"gpu": 8, "cpu": 8000}}
    queue = Queue.model_validate({"jobs": [
        {"id": "a", "groups": [{"name": "w", **gang}]},
        {"id": "b", "groups": [{"name": "w", **gang}]},
    ]})
    return cluster, queue


def test_bound_counts_whole_nodes_not_just_free_devices() -> None:
    """Two 8-GPU jobs, one 8-GPU node: the bound is one job's value (8), not both (16)."""
    cluster, queue = _one_node_two_gangs()
    p = compile_problem(cluster, queue)
    assert value_bound(p).value == pytest.approx(8.0, abs=1e-5)


def test_identical_jobs_are_aggregated_without_changing_the_bound(example: Any) -> None:
    c, q, _ = example
    doubled = Queue.model_validate({"jobs": [j.model_dump() for j in q.jobs] +
                                    [{**j.model_dump(), "id": f"{j.id}-copy"} for j in q.jobs]})
    one = value_bound(compile_problem(c, q)).value
    two = value_bound(compile_problem(c, doubled)).value
    assert one is not None and two is not None
    assert one <= two + 1e-6  # more work can only raise the bound


def test_public_bound_holds_for_every_solver_and_says_how_far_each_is(example: Any) -> None:
    """`optsched.bound`: at least the admitted value of every solver's plan (evicting ones too),
    and `gap` = (bound - value) / bound for each."""
    import optsched

    c, q, _ = example
    b = optsched.bound(c, q)
    assert b.term == "admitted_value" and b.status == "optimal" and b.value is not None
    for name in optsched.solver_names():
        plan = optsched.solve(c, q, solver=name, time_limit=2.0)
        value = plan.objective["admitted_value"]
        assert b.value >= value - 1e-6, name
        assert b.gap(value) == pytest.approx((b.value - value) / b.value)


def test_bound_needs_admitted_value_first(example: Any) -> None:
    import optsched

    c, q, _ = example
    assert optsched.bound(c, q, objective=["admitted_value", "disruption"]).value is not None
    with pytest.raises(optsched.InputError) as err:
        optsched.bound(c, q, objective=["topology", "admitted_value"])
    assert err.value.problems[0].path == "objective"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=contended_rounds())
def test_public_bound_holds_for_plans_that_evict(data: tuple[Cluster, Queue]) -> None:
    """Evicting plans free devices: the bound treats every evictable running job as gone, so it
    stays at least the `kueue` plan's value."""
    import optsched
    from optsched.solvers.kueue import solve_kueue

    c, q = data
    b = optsched.bound(c, q, exact=True)
    assert b.value is not None, b.status
    p = compile_problem(c, q)
    assert b.value >= evaluate_problem(p, solve_kueue(p)).admitted_value - 1e-6
    assert b.lp_value is not None and b.value <= b.lp_value + 1e-9  # the tighter of the two


def test_round_model_bound_is_tighter_where_node_packing_binds() -> None:
    """Three 5-GPU jobs, two 8-GPU nodes: the aggregate LP shares the 16 free GPUs out (3.2 jobs'
    worth, capped by 3 jobs); the round model and the domain model know one such replica per node
    (2 jobs)."""
    import optsched

    c, _ = _one_node_two_gangs(nodes=2)
    q = Queue.model_validate({"jobs": [{"id": f"j{i}", "groups": [{"name": "w", "replicas": {"min": 1, "max": 1},
                                                                   "request": {"gpu": 5, "cpu": 8000}}]}
                                       for i in range(3)]})
    b = optsched.bound(c, q, exact=True)
    assert b.value is not None and b.lp_value is not None and b.value < b.lp_value - 1e-6
    assert b.value == pytest.approx(10.0, abs=1e-4)  # two of the three jobs
    from optsched.solvers.milp import model_bound

    tight, status = model_bound(compile_problem(c, q), 10.0)  # the round model's own bound
    assert status == "Optimal" and tight is not None and tight == pytest.approx(10.0, abs=1e-3)
    # the domain model counts one such replica per node as well (its fit per node): the tighter wins
    assert b.domain_value == pytest.approx(10.0, abs=1e-4) and b.method in ("milp-round", "lp-domain")


def test_public_bound_takes_the_domain_models_where_tighter() -> None:
    """On mixed-cloud-10k (400 jobs at 2x load) the domain model's LP, which knows who may preempt
    whom and the per-node fit of each shape, is below the aggregate LP, and `bound` returns it;
    with no time for it, the aggregate LP's."""
    import optsched
    from optsched.bundled import DATA_DIR
    from optsched.generate import generate_queue
    from optsched.model import load_cluster

    c = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    q = generate_queue(c, "mixed", jobs=400, load=2.0, seed=0)
    b = optsched.bound(c, q)
    assert b.method == "lp-domain", b
    assert b.value is not None and b.lp_value is not None and b.value < b.lp_value * 0.999
    assert b.value == b.domain_value
    p = compile_problem(c, q)
    assert b.value >= evaluate_problem(p, optsched.solve(c, q, solver="kueue")).admitted_value
    import importlib

    bound_module = importlib.import_module("optsched.bound")  # the module (`optsched.bound` is the function)
    saved = bound_module.DOMAIN_BOUND_SECONDS_PER_JOB
    try:
        bound_module.DOMAIN_BOUND_SECONDS_PER_JOB = 1.0  # 400 s: more than the call's 10 s
        short = optsched.bound(c, q)
    finally:
        bound_module.DOMAIN_BOUND_SECONDS_PER_JOB = saved
    assert short.method == "lp-aggregate" and short.domain_value is None and short.value == b.lp_value


def test_lost_work_bound_is_at_most_what_a_plan_at_that_value_loses() -> None:
    """`lost_work_bound` at the value of Kueue's plan on a mixed-cloud-10k round is at most its lost
    work, and positive (that value needs evictions); at 0 it is 0; above every plan's value the
    floor is unreachable."""
    import optsched
    from optsched.bundled import DATA_DIR
    from optsched.generate import generate_queue
    from optsched.model import load_cluster

    c = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    q = generate_queue(c, "mixed", jobs=300, load=2.0, seed=2)
    plan = optsched.solve(c, q, solver="kueue")
    got = evaluate_problem(compile_problem(c, q), plan)
    assert plan.evictions and got.disruption > 0
    b = optsched.lost_work_bound(c, q, admitted_value_at_least=got.admitted_value)
    assert b.status == "optimal" and b.value is not None
    assert 0 < b.value <= got.disruption + 1e-6
    zero = optsched.lost_work_bound(c, q, admitted_value_at_least=0)
    assert zero.value == pytest.approx(0.0, abs=1e-6)
    top = optsched.bound(c, q).value
    assert top is not None
    too_much = optsched.lost_work_bound(c, q, admitted_value_at_least=top * 1.01 + 1)
    assert too_much.status == "unreachable" and too_much.value is None


@pytest.mark.parametrize("floor", [-1.0, float("nan"), float("inf"), "10", True])
def test_lost_work_bound_refuses_a_bad_floor(example: Any, floor: Any) -> None:
    import optsched

    c, q, _ = example
    with pytest.raises(optsched.InputError) as err:
        optsched.lost_work_bound(c, q, admitted_value_at_least=floor)
    assert err.value.problems[0].path == "admitted_value_at_least"
