"""The `nsga2` solver: the plan an objective selects from the round's Pareto set."""

from __future__ import annotations

import time

from optsched.model.plan import Plan
from optsched.model.stats import ParetoStats
from optsched.objective import ObjectiveSpec
from optsched.pareto import pareto_problem, select_for
from optsched.problem import Problem
from optsched.solvers.contract import RunSpec, SolverInfo


def solve_nsga2(p: Problem, *, objective: ObjectiveSpec, time_limit: float, seed: int, started: float) -> Plan:
    """The plan `objective` selects from the round's Pareto set (see `select_for`)."""
    names, rule = select_for(objective)
    front = pareto_problem(p, names, time_limit=time_limit, seed=seed, started=started)
    plan = front.select(rule)
    stats = plan.solver.model_copy(update={
        "name": "nsga2", "wall_s": time.perf_counter() - started, "seed": seed,
        "pareto": ParetoStats(objectives=list(names), selected_by=rule, front_size=len(front),
                              search=dict(front.stats))})
    return plan.model_copy(update={"solver": stats})


def _run(p: Problem, run: RunSpec) -> Plan:
    return solve_nsga2(p, objective=run.objective, time_limit=run.time_limit, seed=run.seed, started=run.started)


SOLVERS = [SolverInfo("nsga2", "the plan the objective selects from the round's Pareto set (NSGA-II, pymoo)", _run)]
"""The `nsga2` solver (`optsched.solvers.registry`)."""


__all__ = ["SOLVERS", "solve_nsga2"]
