"""The value bound (aggregate LP / MILP over node classes) is a bound: never below a valid plan."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Queue
from optsched.problem import compile_problem
from optsched.solvers.bound import value_bound
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from tests.strategies import busy_rounds, rounds
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


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(rounds(max_nodes=8, max_jobs=8), busy_rounds(max_nodes=8, max_jobs=6)))
def test_bound_is_at_least_every_baseline(data: tuple[Cluster, Queue]) -> None:
    cluster, queue = data
    p = compile_problem(cluster, queue)
    bound = value_bound(p)
    assert bound.value is not None, bound.status
    for name in STRATEGIES:
        assert bound.value >= evaluate_problem(p, solve_greedy(p, name)).admitted_value - 1e-6, name


def _one_node_two_gangs() -> tuple[Cluster, Queue]:
    cluster = Cluster.model_validate({
        "device_models": {"H100": {"memory_gib": 80}},
        "topology": {"levels": ["leaf"], "domains": [{"id": "leaf-0", "level": "leaf"}]},
        "pools": [{"name": "res", "pricing": "reserved", "price_per_hour": 64.0}],
        "nodes": [{"id": "n0", "domain": "leaf-0", "pool": "res", "capacity": {"cpu": 64000, "memory": 512000},
                   "devices": {"model": "H100", "count": 8}}],
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
