"""`solve(cluster, queue) -> Plan`: the one pure call every solver sits behind.

No I/O and no global state: the inputs are validated (an `InputError` lists every problem), the
round is compiled once, the chosen solver (looked up in `optsched.solvers.registry`) runs within
`time_limit`, and the returned plan carries its objective terms as `optsched.metrics` computes
them. Importing this module loads the model back ends' libraries (OR-Tools, HiGHS, SciPy's LP:
0.93 s once per process, benchmarks/results/startup.md), so that no round spends its time limit
on imports; `optsched.check` and `optsched.evaluate` do not import it.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext

from optsched import clock
from optsched.arguments import require_seed, require_time_limit
from optsched.errors import InputError, InputIssue
from optsched.latency import gc_paused
from optsched.model.cluster import Cluster
from optsched.model.plan import Plan
from optsched.model.queue import Queue
from optsched.objective import Objective, ObjectiveSpec
from optsched.problem import Problem as Compiled
from optsched.problem import compile_problem
from optsched.solvers.contract import RunSpec
from optsched.solvers.registry import lookup, preload, solver_names

preload()  # the model back ends' libraries load with this module, never inside a round's time limit


def solve_problem(p: Compiled, *, solver: str = "auto", objective: ObjectiveSpec = None,
                  time_limit: float = 1.0, seed: int = 0, started: float | None = None, num_workers: int = 2,
                  initial_plan: Plan | None = None, deterministic: bool = False) -> Plan:
    """`solve` on an already compiled problem; `started` is when the call began (perf_counter).
    The garbage collector is paused meanwhile (`optsched.latency`)."""
    start = time.perf_counter() if started is None else started
    Objective.parse(objective)  # an InputError before any work
    time_limit = require_time_limit(time_limit)
    seed = require_seed(seed)
    if not (isinstance(num_workers, int) and num_workers >= 1):
        raise InputError([InputIssue("num_workers", "not_positive", f"{num_workers!r}: at least 1")])
    why: str | None = None
    name = solver
    if solver == "auto":
        from optsched.solvers.backend import choose_backend

        name, why = choose_backend(p, time_limit)
    info = lookup(name)
    start_plan = None
    if initial_plan is not None and "initial_plan" in info.honours:  # the baselines ignore it
        from optsched.solvers.warmstart import adapt

        start_plan = adapt(p, initial_plan)
    run = RunSpec(objective=objective, time_limit=time_limit, seed=seed, started=start, num_workers=num_workers,
                  initial_plan=start_plan, deterministic=deterministic)
    with gc_paused(), (clock.work_clock(start) if deterministic else nullcontext()):
        plan = info.run(p, run)
    if deterministic:  # the solver timed itself on the work clock: report the wall time
        wall = plan.solver.model_copy(update={"wall_s": time.perf_counter() - start})
        plan = plan.model_copy(update={"solver": wall})
    if why is not None:
        stats = plan.solver.model_copy(update={"name": f"auto:{plan.solver.name}", "auto": why})
        plan = plan.model_copy(update={"solver": stats})
    _log_round(plan, time_limit)
    return plan


LOG = logging.getLogger("optsched")
"""The library's diagnostics (nothing is printed): one INFO line per round, a WARNING when a model
back end had to fall back for a bug (its plan failed the check or would not decode), DEBUG
details. Silent unless the application configures logging."""


def _log_round(plan: Plan, time_limit: float) -> None:
    st = plan.solver
    LOG.info("round: %s %s, %d replicas placed, %d jobs deferred, %d evictions, %.3f s of %.3f s%s",
             st.name, st.status, len(plan.placements), len(plan.deferred), len(plan.evictions), st.wall_s,
             time_limit, f" ({st.reason})" if st.reason else "")
    if st.reason and "bug" in st.reason:
        LOG.warning("%s fell back to its start plan: %s (please report it with the round's documents)",
                    st.name, st.reason)
    if st.wall_s > 1.1 * time_limit:
        LOG.warning("%s took %.3f s for a %.3f s limit", st.name, st.wall_s, time_limit)


def solve(cluster: Cluster, queue: Queue, *, solver: str = "auto", objective: ObjectiveSpec = None,
          time_limit: float = 1.0, seed: int = 0, num_workers: int = 2, initial_plan: Plan | None = None,
          deterministic: bool = False) -> Plan:
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
        the cheapest provisionable nodes for what is left: `optsched.solvers.karpenter`) or a
        placement baseline (``first-fit``, ``best-fit``, ``spread``, ``volcano``, ``tetris``,
        ``topo-best-fit``, ``image-best-fit``); `optsched.solver_names()` lists them.
    objective:
        None (admitted value, then disruption, topology, fragmentation), a mapping of term weights,
        or a sequence of term names for a lexicographic order.
    time_limit:
        Seconds for the whole call, compilation included: finite, > 0 and at most a day
        (`optsched.arguments`), else InputError.
    seed:
        Recorded in the plan; solvers with randomness use it (0 <= seed <= 2^30).
    num_workers:
        Parallel search workers of CP-SAT (the other solvers ignore it).
    initial_plan:
        A plan to start from, e.g. the previous round's (a warm start): what of it is still a
        valid decision of this round is kept (`optsched.solvers.warmstart`) and the model solvers
        (`cpsat`, `milp`, `auto`) start from it instead of running the baselines first; the
        baselines ignore it.
    deterministic:
        The same inputs, seed and workers give the same plan: every decision that reads the time
        (which baselines run, whole model or neighbourhoods, how many steps, how long each search)
        reads a work clock that advances by the work done (`optsched.clock`), CP-SAT searches are
        limited by deterministic time and run their workers interleaved, HiGHS by iterations and
        nodes. The call can then end past `time_limit` on a loaded machine
        (benchmarks/results/timelimit.md). Without it, `seed` fixes the solvers' random choices
        but not how far a search gets in the time: plans can differ from call to call.
    """
    start = time.perf_counter()
    # paused from compiling to the plan: re-enabled between the two, the collector ran the
    # collection compiling had postponed inside the call's time limit (`optsched.latency`)
    with gc_paused():
        p = compile_problem(cluster, queue)
        return solve_problem(p, solver=solver, objective=objective, time_limit=time_limit, seed=seed,
                             started=start, num_workers=num_workers, initial_plan=initial_plan,
                             deterministic=deterministic)


__all__ = ["solve", "solve_problem", "solver_names"]
