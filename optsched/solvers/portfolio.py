"""The greedy portfolio: the best of the placement baselines within the time limit.

`greedy` runs the baselines of `GREEDY_ORDER` while time is left (the first always runs) and
returns the best by the objective; a single baseline name runs that baseline alone. Model solvers
take their start plan from here too (`optsched.solvers.incumbent`).
"""

from __future__ import annotations

from optsched import clock
from optsched.budget import EVALUATE_RESERVE, EVALUATE_SECONDS_PER_JOB, Budget
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan
from optsched.model.stats import PortfolioStats
from optsched.objective import Objective, ObjectiveSpec
from optsched.problem import Problem
from optsched.solvers.contract import RunSpec, SolverInfo
from optsched.solvers.greedy import NAMED_STRATEGIES, solve_greedy

GREEDY_ORDER = ("best-fit", "volcano", "topo-best-fit", "first-fit", "tetris", "spread")
"""Baselines `greedy` tries, in order, while time is left (at least the first always runs); the
order is by admitted value in benchmarks/results/baselines.md."""


def solve_portfolio(p: Problem, names: tuple[str, ...] = GREEDY_ORDER, *, objective: ObjectiveSpec = None,
                    time_limit: float = 1.0, seed: int = 0, started: float | None = None,
                    more_within: float | None = None, as_portfolio: bool = True) -> Plan:
    """The best plan of the baselines `names` (each run to completion or to the limit, in order),
    named ``greedy:<baseline>`` with what each gave (`as_portfolio`), else by the baseline's name.

    `more_within` (seconds from `started`): the first baseline may use the whole time limit,
    further ones run only if they would finish within this (a caller keeps the rest).
    """
    budget = Budget.from_now(time_limit, started)
    soft_end = budget.end if more_within is None else min(budget.end, budget.start + more_within)
    goal = Objective.parse(objective)
    best: Plan | None = None
    tried: dict[str, float] = {}
    seconds: dict[str, float] = {}
    reserve = max(EVALUATE_RESERVE * time_limit, EVALUATE_SECONDS_PER_JOB * (len(p.jobs) + len(p.running)))
    last = 0.0
    for name in names:
        left = budget.end - reserve - clock.now()
        if best is not None and soft_end - reserve - clock.now() < last:  # it would be cut short
            break
        t_run = clock.now()
        plan = solve_greedy(p, name, time_limit=max(left, 0.0), seed=seed)
        last = seconds[name] = clock.now() - t_run
        t_eval = clock.now()
        plan = plan.model_copy(update={"objective": evaluate_problem(p, plan).objective()})
        reserve = clock.now() - t_eval
        tried[name] = plan.objective["admitted_value"]
        if best is None or goal.better(plan.objective, best.objective):
            best = plan
    assert best is not None
    many = as_portfolio
    stats = best.solver.model_copy(update={
        "name": f"greedy:{best.solver.name}" if many else best.solver.name,
        "wall_s": budget.elapsed(), "seed": seed,
        "portfolio": PortfolioStats(tried=tried, seconds=seconds) if many else None,
    })
    return best.model_copy(update={"solver": stats})




def _run_portfolio(p: Problem, run: RunSpec) -> Plan:
    return solve_portfolio(p, GREEDY_ORDER, objective=run.objective, time_limit=run.time_limit, seed=run.seed,
                           started=run.started)


def _baseline(name: str) -> SolverInfo:
    def run_one(p: Problem, run: RunSpec) -> Plan:
        return solve_portfolio(p, (name,), objective=run.objective, time_limit=run.time_limit, seed=run.seed,
                               started=run.started, as_portfolio=False)

    return SolverInfo(name, NAMED_STRATEGIES[name].source, run_one)


SOLVERS = [SolverInfo("greedy", "the best of the placement baselines within the time limit", _run_portfolio),
           *(_baseline(name) for name in NAMED_STRATEGIES)]
"""`greedy` and every placement baseline by its name (`optsched.solvers.registry`)."""

__all__ = ["GREEDY_ORDER", "SOLVERS", "solve_portfolio"]
