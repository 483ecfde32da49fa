"""`solve(cluster, queue) -> Plan`: the one pure call every back end sits behind.

No I/O and no global state: the inputs are validated (an `InputError` lists every problem), the
round is compiled once, the chosen solver runs within `time_limit`, and the returned plan carries
its objective terms as `optsched.metrics` computes them.
"""

from __future__ import annotations

import time

from optsched.errors import InputError, InputIssue
from optsched.metrics import evaluate_problem
from optsched.model.cluster import Cluster
from optsched.model.plan import Plan, SolverStats
from optsched.model.queue import Queue
from optsched.objective import Objective, ObjectiveSpec
from optsched.problem import Problem as Compiled
from optsched.problem import compile_problem
from optsched.solvers.greedy import STRATEGIES, solve_greedy

AUTO_ORDER = ("topo-best-fit", "volcano", "best-fit", "tetris", "first-fit", "spread")
"""Baselines `auto` tries, in order, while time is left (at least the first always runs)."""


def solver_names() -> list[str]:
    """Names accepted by `solve(..., solver=...)`."""
    return ["auto", *STRATEGIES]


def _with_objective(p: Compiled, plan: Plan, stats: SolverStats) -> Plan:
    terms = evaluate_problem(p, plan).objective()
    return plan.model_copy(update={"objective": terms, "solver": stats})


def solve_problem(p: Compiled, *, solver: str = "auto", objective: ObjectiveSpec = None,
                  time_limit: float = 1.0, seed: int = 0) -> Plan:
    """`solve` on an already compiled problem."""
    start = time.perf_counter()
    goal = Objective.parse(objective)
    if solver not in solver_names():
        raise InputError([InputIssue("solver", "unknown_solver", f"{solver!r}; known: {solver_names()}")])
    names = AUTO_ORDER if solver == "auto" else (solver,)
    best: Plan | None = None
    tried: dict[str, float] = {}
    for name in names:
        left = time_limit - (time.perf_counter() - start)
        if best is not None and left <= 0:
            break
        plan = solve_greedy(p, name, time_limit=max(left, 0.0) if best is not None else time_limit, seed=seed)
        plan = plan.model_copy(update={"objective": evaluate_problem(p, plan).objective()})
        tried[name] = plan.objective["admitted_value"]
        if best is None or goal.better(plan.objective, best.objective):
            best = plan
    assert best is not None
    stats = best.solver.model_copy(update={
        "name": best.solver.name if solver != "auto" else f"auto:{best.solver.name}",
        "wall_s": time.perf_counter() - start, "seed": seed,
        "extra": {"tried": tried} if solver == "auto" else {},
    })
    return _with_objective(p, best, stats)


def solve(cluster: Cluster, queue: Queue, *, solver: str = "auto", objective: ObjectiveSpec = None,
          time_limit: float = 1.0, seed: int = 0) -> Plan:
    """Decide the round: which queued jobs run, where every replica goes.

    Parameters
    ----------
    cluster, queue:
        The validated input documents (`optsched.load_cluster`, `optsched.load_queue`).
    solver:
        ``"auto"`` (the best greedy plan found within the time limit) or a baseline name
        (``first-fit``, ``best-fit``, ``spread``, ``volcano``, ``tetris``, ``topo-best-fit``).
    objective:
        None (admitted value, then topology, then fragmentation), a mapping of term weights,
        or a sequence of term names for a lexicographic order.
    time_limit:
        Seconds for the whole call, compilation included.
    seed:
        Recorded in the plan; solvers with randomness use it.
    """
    p = compile_problem(cluster, queue)
    return solve_problem(p, solver=solver, objective=objective, time_limit=time_limit, seed=seed)
