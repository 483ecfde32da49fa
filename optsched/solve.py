"""`solve(cluster, queue) -> Plan`: the one pure call every back end sits behind.

No I/O and no global state: the inputs are validated (an `InputError` lists every problem), the
round is compiled once, the chosen solver runs within `time_limit`, and the returned plan carries
its objective terms as `optsched.metrics` computes them.
"""

from __future__ import annotations

import time

from optsched.errors import InputError, InputIssue
from optsched.latency import gc_paused
from optsched.metrics import evaluate_problem
from optsched.model.cluster import Cluster
from optsched.model.plan import Plan
from optsched.model.queue import Queue
from optsched.objective import Objective, ObjectiveSpec
from optsched.problem import Problem as Compiled
from optsched.problem import compile_problem
from optsched.solvers.greedy import NAMED_STRATEGIES, solve_greedy

GREEDY_ORDER = ("best-fit", "volcano", "topo-best-fit", "first-fit", "tetris", "spread")
"""Baselines `greedy` tries, in order, while time is left (at least the first always runs); the
order is by admitted value in benchmarks/results/baselines.md."""


def solver_names() -> list[str]:
    """Names accepted by `solve(..., solver=...)`."""
    return ["auto", "cpsat", "milp", "nsga2", "greedy", "kueue", "karpenter", *NAMED_STRATEGIES]


EVALUATE_RESERVE = 0.1
"""Share of the time limit kept back for evaluating the first plan (later: its measured time)."""


def solve_problem(p: Compiled, *, solver: str = "auto", objective: ObjectiveSpec = None,
                  time_limit: float = 1.0, seed: int = 0, started: float | None = None,
                  more_within: float | None = None) -> Plan:
    """`solve` on an already compiled problem; `started` is when the call began (perf_counter).

    `more_within` (seconds from `started`, greedy only): the first baseline may use the whole time
    limit, further ones run only if they would finish within this (a caller keeps the rest).
    The garbage collector is paused meanwhile (`optsched.latency`).
    """
    with gc_paused():
        return _solve_problem(p, solver=solver, objective=objective, time_limit=time_limit, seed=seed,
                              started=started, more_within=more_within)


def _solve_problem(p: Compiled, *, solver: str, objective: ObjectiveSpec, time_limit: float, seed: int,
                   started: float | None, more_within: float | None) -> Plan:
    start = time.perf_counter() if started is None else started
    end = start + time_limit
    soft_end = end if more_within is None else min(end, start + more_within)
    goal = Objective.parse(objective)
    if solver not in solver_names():
        raise InputError([InputIssue("solver", "unknown_solver", f"{solver!r}; known: {solver_names()}")])
    if solver == "auto":
        from optsched.solvers.backend import choose_backend  # lazy: OR-Tools loads only when asked for

        name, why = choose_backend(p, time_limit)
        plan = solve_problem(p, solver=name, objective=objective, time_limit=time_limit, seed=seed, started=start)
        stats = plan.solver.model_copy(update={"name": f"auto:{plan.solver.name}",
                                               "extra": {**plan.solver.extra, "auto": why}})
        return plan.model_copy(update={"solver": stats})
    if solver == "cpsat":
        from optsched.solvers.cpsat import solve_cpsat  # lazy: OR-Tools loads only when asked for

        return solve_cpsat(p, objective=objective, time_limit=time_limit, seed=seed, started=start)
    if solver == "milp":
        from optsched.solvers.milp import solve_milp  # lazy, as cpsat

        return solve_milp(p, objective=objective, time_limit=time_limit, seed=seed, started=start)
    if solver == "nsga2":
        from optsched.pareto import solve_nsga2  # lazy: pymoo loads only when asked for

        return solve_nsga2(p, objective=objective, time_limit=time_limit, seed=seed, started=start)
    if solver in ("kueue", "karpenter"):
        from optsched.solvers.karpenter import solve_karpenter
        from optsched.solvers.kueue import solve_kueue

        baseline = solve_kueue if solver == "kueue" else solve_karpenter
        plan = baseline(p, time_limit=max(0.0, end - time.perf_counter()), seed=seed)
        stats = plan.solver.model_copy(update={"wall_s": time.perf_counter() - start})
        return plan.model_copy(update={"objective": evaluate_problem(p, plan).objective(), "solver": stats})
    names = GREEDY_ORDER if solver == "greedy" else (solver,)
    best: Plan | None = None
    tried: dict[str, float] = {}
    seconds: dict[str, float] = {}
    reserve = EVALUATE_RESERVE * time_limit
    last = 0.0
    for name in names:
        left = end - reserve - time.perf_counter()
        if best is not None and soft_end - reserve - time.perf_counter() < last:  # it would be cut short
            break
        t_run = time.perf_counter()
        plan = solve_greedy(p, name, time_limit=max(left, 0.0), seed=seed)
        last = seconds[name] = time.perf_counter() - t_run
        t_eval = time.perf_counter()
        plan = plan.model_copy(update={"objective": evaluate_problem(p, plan).objective()})
        reserve = time.perf_counter() - t_eval
        tried[name] = plan.objective["admitted_value"]
        if best is None or goal.better(plan.objective, best.objective):
            best = plan
    assert best is not None
    stats = best.solver.model_copy(update={
        "name": f"greedy:{best.solver.name}" if solver == "greedy" else best.solver.name,
        "wall_s": time.perf_counter() - start, "seed": seed,
        "extra": {"tried": tried, "seconds": seconds} if solver == "greedy" else {},
    })
    return best.model_copy(update={"solver": stats})


def solve(cluster: Cluster, queue: Queue, *, solver: str = "auto", objective: ObjectiveSpec = None,
          time_limit: float = 1.0, seed: int = 0) -> Plan:
    """Decide the round: which queued jobs run, where every replica goes.

    Parameters
    ----------
    cluster, queue:
        The validated input documents (`optsched.load_cluster`, `optsched.load_queue`).
    solver:
        ``"auto"`` (the model back end for the round's size: `optsched.solvers.backend`),
        ``"cpsat"`` (the CP-SAT round, docs/formulation.md), ``"milp"`` (the same round model
        solved by HiGHS), ``"nsga2"`` (the plan the objective selects from the round's Pareto
        set: `optsched.pareto`), ``"greedy"`` (the best placement baseline within the time limit),
        ``"kueue"`` (Kueue's admission, borrowing and preemption), ``"karpenter"`` (best-fit, then
        the cheapest provisionable nodes for what is left: `optsched.solvers.karpenter`) or a placement baseline
        (``first-fit``, ``best-fit``, ``spread``, ``volcano``, ``tetris``, ``topo-best-fit``).
    objective:
        None (admitted value, then disruption, topology, fragmentation), a mapping of term weights,
        or a sequence of term names for a lexicographic order.
    time_limit:
        Seconds for the whole call, compilation included.
    seed:
        Recorded in the plan; solvers with randomness use it.
    """
    start = time.perf_counter()
    p = compile_problem(cluster, queue)
    return solve_problem(p, solver=solver, objective=objective, time_limit=time_limit, seed=seed, started=start)
