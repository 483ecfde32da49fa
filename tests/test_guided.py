"""LP-guided greedy: priority order kept, plans valid, never worse than the incumbent, and a
case where the value bound's tie-break admits more than every baseline."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.check import check_problem
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Queue
from optsched.objective import Objective
from optsched.problem import compile_problem
from optsched.solvers.bound import value_bound
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from optsched.solvers.guided import guided_order, guided_plan
from tests.strategies import busy_rounds, rounds


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(rounds(max_nodes=8, max_jobs=8), busy_rounds(max_nodes=8, max_jobs=6)))
def test_guided_plans_keep_priority_order_are_valid_and_never_worse(data: tuple[Cluster, Queue]) -> None:
    cluster, queue = data
    p = compile_problem(cluster, queue)
    bound = value_bound(p)
    order = guided_order(p, bound.admitted)
    assert sorted(j.index for j in order) == list(range(len(p.jobs)))
    assert [j.priority for j in order] == sorted((j.priority for j in p.jobs), reverse=True)
    incumbent = solve_greedy(p, "best-fit")
    best, tried = guided_plan(p, bound, list(STRATEGIES), deadline=math.inf, incumbent=incumbent,
                              goal=Objective.parse(None))
    assert set(tried) == ({f"{s}+lp" for s in STRATEGIES} if p.jobs else set())
    assert not check_problem(p, best)
    assert evaluate_problem(p, best).admitted_value >= evaluate_problem(p, incumbent).admitted_value - 1e-9
    assert evaluate_problem(p, best).admitted_value <= (bound.value or 0.0) + 1e-6


def _elastic_job_blocks_a_gang() -> tuple[Cluster, Queue]:
    """One 8-GPU node. `elastic` (submitted first) takes 1 GPU plus up to 5 elastic ones (value
    1 + 5 x 0.5 = 3.5); `gang` needs all 8 GPUs (value 8). Same priority."""
    cluster = Cluster.model_validate({
        "device_models": {"H100": {"memory_gib": 80}},
        "topology": {"levels": ["leaf"], "domains": [{"id": "leaf-0", "level": "leaf"}]},
        "pools": [{"name": "res", "pricing": "reserved", "price_per_hour": 64.0}],
        "nodes": [{"id": "n0", "domain": "leaf-0", "pool": "res", "capacity": {"cpu": 64000, "memory": 512000},
                   "devices": {"model": "H100", "count": 8}}],
    })
    queue = Queue.model_validate({"jobs": [
        {"id": "elastic", "submitted_at": 0, "gang": False,
         "groups": [{"name": "w", "replicas": {"min": 1, "max": 6}, "request": {"gpu": 1, "cpu": 1000}}]},
        {"id": "gang", "submitted_at": 10,
         "groups": [{"name": "w", "replicas": {"min": 1, "max": 1}, "request": {"gpu": 8, "cpu": 8000}}]},
    ]})
    return cluster, queue


def test_the_bound_tie_break_admits_the_gang_that_every_baseline_blocks() -> None:
    cluster, queue = _elastic_job_blocks_a_gang()
    p = compile_problem(cluster, queue)
    plain = max(evaluate_problem(p, solve_greedy(p, s)).admitted_value for s in STRATEGIES)
    assert plain == pytest.approx(3.5)
    bound = value_bound(p)
    assert bound.admitted["gang"] == pytest.approx(1.0)
    assert bound.admitted["elastic"] < 1.0
    guided = solve_greedy(p, "first-fit", order=guided_order(p, bound.admitted), label="first-fit+lp")
    assert not check_problem(p, guided)
    assert evaluate_problem(p, guided).admitted_value == pytest.approx(8.0)
    plan = solve_cpsat(p, time_limit=2.0)
    assert not check_problem(p, plan)
    assert evaluate_problem(p, plan).admitted_value == pytest.approx(8.0)


def test_an_order_must_list_every_job_once(example: tuple[Cluster, Queue, object]) -> None:
    cluster, queue, _ = example
    p = compile_problem(cluster, queue)
    with pytest.raises(ValueError, match="exactly once"):
        solve_greedy(p, "first-fit", order=p.jobs[:-1])
