"""Warm starts and the solver registry: `solve(..., initial_plan=...)` keeps what of a previous
plan still holds, the model solvers start from it, and every registered solver keeps the contract
(a valid plan, its metrics, within the time limit)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from optsched import check, evaluate, solve
from optsched.model import Cluster, Plan, Queue
from optsched.problem import compile_problem
from optsched.solvers.registry import lookup, solver_names
from optsched.solvers.warmstart import WARM_START, adapt


def test_the_same_rounds_plan_is_kept_whole(example: Any) -> None:
    c, q, plan = example
    adapted = adapt(compile_problem(c, q), plan)
    assert adapted is not None and check(c, q, adapted) == []
    assert adapted.placements == plan.placements and adapted.evictions == plan.evictions


def test_a_previous_plan_loses_what_left_and_defers_what_came(example: Any) -> None:
    """The next round: one job of the plan started (it is no longer queued), a new one arrived."""
    c, q, plan = example
    gone = q.jobs[0].id
    new = q.jobs[1].model_copy(update={"id": "arrived-later"})
    nxt = Queue.model_validate({**q.model_dump(), "jobs": [j.model_dump() for j in q.jobs[1:]] + [new.model_dump()]})
    p = compile_problem(c, nxt)
    adapted = adapt(p, plan)
    assert adapted is not None and check(c, nxt, adapted) == []
    assert gone not in {pl.job for pl in adapted.placements} | {d.job for d in adapted.deferred}
    assert [d.detail for d in adapted.deferred if d.job == "arrived-later"] == [WARM_START]
    assert all(ev.by != gone for ev in adapted.evictions)  # its preemption went with it


def test_a_placement_the_cluster_no_longer_allows_defers_its_job(example: Any) -> None:
    """A node of the plan became unhealthy: the jobs on it are deferred, the rest is kept."""
    c, q, plan = example
    node = plan.placements[0].node
    sick = Cluster.model_validate({**c.model_dump(), "nodes": [
        {**n.model_dump(), "healthy": n.id != node} for n in c.nodes]})
    adapted = adapt(compile_problem(sick, q), plan)
    assert adapted is not None and check(sick, q, adapted) == []
    moved = {pl.job for pl in plan.placements if pl.node == node}
    assert moved and not moved & {pl.job for pl in adapted.placements}
    assert {pl.job for pl in plan.placements} - moved <= {pl.job for pl in adapted.placements}


@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_model_solvers_start_from_the_initial_plan(example: Any, solver: str) -> None:
    """The start plan is the warm start (no baselines run), and the result is no worse than it."""
    c, q, plan = example
    out = solve(c, q, solver=solver, time_limit=5.0, initial_plan=plan)
    assert check(c, q, out) == []
    start = out.solver.start
    assert start is not None and start.kueue is None and start.karpenter is None  # no baseline ran first
    hint = start.hint or ""
    assert hint == "warm-start" or hint.endswith("+lp")  # or a bound-guided rerun that beat it
    assert out.objective["admitted_value"] >= evaluate(c, q, plan).admitted_value - 1e-6


def test_a_plan_of_another_cluster_is_no_start_but_no_error(example: Any) -> None:
    c, q, _ = example
    foreign = Plan.model_validate({"placements": [{"job": q.jobs[0].id, "group": q.jobs[0].groups[0].name,
                                                   "replica": 0, "node": "no-such-node"}]})
    adapted = adapt(compile_problem(c, q), foreign)
    assert adapted is not None and adapted.placements == []
    assert check(c, q, solve(c, q, solver="cpsat", time_limit=2.0, initial_plan=foreign)) == []


@pytest.mark.parametrize("name", [n for n in solver_names() if n not in ("nsga2",)])
def test_every_registered_solver_keeps_the_contract(example: Any, name: str) -> None:
    """A valid plan with its metrics, within the time limit (generous: compile and first imports)."""
    c, q, _ = example
    start = time.perf_counter()
    plan = solve(c, q, solver=name, time_limit=2.0, num_workers=1)
    assert time.perf_counter() - start < 2.0 + 3.0
    assert check(c, q, plan) == []
    assert plan.objective == pytest.approx(evaluate(c, q, plan).objective())
    if name != "auto":
        assert lookup(name).name == name
