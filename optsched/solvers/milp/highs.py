"""Solving the translated round with HiGHS (highspy): one objective, or a lexicographic chain.

A lexicographic order is solved level by level (preemptive goal programming): maximise level 1;
add the row ``c_1 x >= best_1 - slack`` (slack 0 for an exact order, else the tolerance's share of
``|best_1|``, never below the hint's value); maximise level 2 from the previous solution; and so
on. Each level starts from the previous level's solution (`setSolution`), so a level cut by the
clock still returns a plan at least as good as the hint. HiGHS reports every improving solution
and its dual bound through a callback: the trace gives the time to the first plan and to a gap.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import highspy
import numpy as np

from optsched import clock
from optsched.budget import HIGHS_FIRST_LEVEL_SHARE
from optsched.problem import FArray, IArray
from optsched.solvers.milp.translate import INFINITE, MilpArrays

PRESOLVE = "off"
"""HiGHS's presolve is off: on dgx-h100-1k rounds (`mixed`, load 2, seed 0; a profile) it took
1.04 s on the 100-job model (18k columns) without stopping at a 0.3 s time limit, and with it
HiGHS proved the 100-job optimum in 3.83 s vs 0.67 s without, and the 300-job one not at all in
8 s (13.0 s wall: the limit overshot by 5 s) vs 2.32 s without. On 25 jobs (8 s, neither proved)
the incumbent was 0.03% better without it and the bound 0.3% weaker."""


@dataclass
class Level:
    """One objective to maximise: ``coef x + constant``."""

    name: str
    coef: FArray
    constant: float = 0.0
    tolerance: float = 0.0
    """Relative share of this level's best value the next levels may give up (0: exact)."""
    floor: float | None = None
    """The next levels keep this level at least here (the hint's value, for a tolerance)."""


@dataclass
class Outcome:
    """What HiGHS returned for the chain of levels."""

    values: FArray | None
    """Column values of the last solution (None: no solution at all)."""
    status: str
    """HiGHS's model status of the first level (``Optimal``, ``Time limit reached``, ...)."""
    optimal: bool
    """Every level solved to optimality (within `mip_gap`)."""
    bound: float | None
    """HiGHS's dual bound of the first level (in its units)."""
    gap: float | None
    """HiGHS's relative MIP gap of the first level."""
    levels_solved: int
    trace: list[tuple[float, float, float]] = field(default_factory=list)
    """First level: (seconds, incumbent, dual bound) at each improving solution and at the end."""


def quiet_highs() -> highspy.Highs:
    """A `Highs` with output off before its first message: HiGHS prints a banner to stdout when
    the first one is made, which would corrupt a plan written to stdout."""
    try:
        h = highspy.Highs.__new__(highspy.Highs)
        highspy._core._Highs.__init__(h)
        h.setOptionValue("output_flag", False)
        h.callbacks = [highspy.HighsCallback(highspy.cb.HighsCallbackType(i), h)
                       for i in range(int(highspy.cb.HighsCallbackType.kCallbackMax) + 1)]
        h.enableCallbacks()
    except (AttributeError, TypeError):  # another highspy layout: the banner is harmless elsewhere
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
    return h


def load(h: highspy.Highs, m: MilpArrays) -> None:
    """Pass the arrays to HiGHS (row-wise CSR, every column integer, maximise)."""
    a = m.a
    inf = highspy.kHighsInf
    lo = np.where(m.row_lo <= -INFINITE, -inf, m.row_lo)
    hi = np.where(m.row_hi >= INFINITE, inf, m.row_hi)
    h.passModel(m.n_cols, m.n_rows, int(a.nnz), int(highspy.MatrixFormat.kRowwise), int(highspy.ObjSense.kMaximize),
                0.0, np.zeros(m.n_cols), m.lb, m.ub, lo, hi, a.indptr.astype(np.int32), a.indices.astype(np.int32),
                a.data.astype(np.float64), np.ones(m.n_cols, dtype=np.int32))


def run_until(h: highspy.Highs, end: float) -> bool:
    """`h.run()` in a thread; True when it returned by `end` (`clock.now()` seconds) plus a grace.

    HiGHS checks its time limit too rarely in some root heuristics: on a 100-job dgx-h100-1k model
    its line-search rounding ran 19.8 s past a 5.5 s limit, and its interrupt callbacks were not
    called meanwhile (a profile; HiGHS issues #885, #2226). A run past the grace is abandoned: it
    goes on in its daemon thread until its next time check, and the caller keeps the incumbent it
    reported last. (HiGHS releases the GIL while it runs.)
    """
    done = threading.Event()

    def target() -> None:
        try:
            h.run()
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name="highs").start()
    if clock.deterministic():  # its iteration and node limits end it (`set_limits`)
        done.wait()
        charge_run(h)
        return True
    return done.wait(max(0.0, end - clock.now()) + RUN_GRACE)


def set_limits(h: highspy.Highs, seconds: float) -> None:
    """HiGHS's limits for `seconds` of budget: its time limit; on the work clock (`optsched.clock`)
    simplex iterations and branch-and-bound nodes instead, with the time limit a safety cap."""
    h.setOptionValue("time_limit", clock.wall_limit(max(0.01, seconds)))
    if clock.deterministic():
        per_iteration = clock.highs_iteration_s(float(h.getNumNz()))
        h.setOptionValue("simplex_iteration_limit", max(1, int(seconds / per_iteration)))
        h.setOptionValue("mip_max_nodes", max(1, int(seconds / clock.HIGHS_SECONDS_PER_NODE)))


def charge_run(h: highspy.Highs) -> None:
    """Charge the work clock with a HiGHS run: its iterations and nodes, and its model's size (a
    MIP's presolve and root heuristics dominate its time: 1.2 s for the 125k nonzeros of
    mixed-cloud-10k's domain MIP at one node and 544 iterations)."""
    if not clock.deterministic():
        return
    info = h.getInfo()
    mip = any(v == highspy.HighsVarType.kInteger for v in h.getLp().integrality_)
    clock.charge_highs(float(info.simplex_iteration_count), float(max(0, info.mip_node_count)),
                       float(h.getNumNz()), mip)


RUN_GRACE = 0.05
"""Seconds a HiGHS run may go past its level's end before it is abandoned."""


def solve_levels(m: MilpArrays, levels: list[Level], *, start_values: FArray, start_index: IArray | None = None,
                 deadline: float, mip_gap: float, seed: int, first_share: float = HIGHS_FIRST_LEVEL_SHARE) -> Outcome:
    """Maximise the levels in order by `deadline` (`clock.now()` seconds), from `start_values` (a
    feasible assignment of every column, or of the columns `start_index` only: HiGHS completes a
    partial start by solving the MIP with them fixed). The first level gets `first_share` of the
    time; each later one an equal part of what is left."""
    if m.n_cols == 0:  # nothing to decide (HiGHS calls the model empty): the empty solution is optimal
        return Outcome(np.zeros(0), "Optimal", True, 0.0, 0.0, len(levels))
    h = quiet_highs()
    load(h, m)
    h.setOptionValue("mip_rel_gap", float(mip_gap))
    h.setOptionValue("random_seed", int(seed))
    h.setOptionValue("presolve", PRESOLVE)
    trace: list[tuple[float, float, float]] = []
    t0 = clock.now()
    level = [0]
    latest: list[FArray | None] = [None]  # the last improving solution of the running level

    def improving(event: highspy.HighsCallbackEvent) -> None:
        out = event.data_out
        latest[0] = np.array(out.mip_solution, dtype=np.float64)
        if level[0] == 0:
            trace.append((clock.now() - t0, float(out.objective_function_value), float(out.mip_dual_bound)))

    level_end = [deadline]

    wall = not clock.deterministic()  # HiGHS calls back from its own thread, outside this context

    def past_end(event: highspy.HighsCallbackEvent) -> None:  # stops an abandoned run at its next check
        if wall and clock.now() > level_end[0]:
            event.interrupt()

    h.cbMipImprovingSolution.subscribe(improving)
    h.cbSimplexInterrupt.subscribe(past_end)
    h.cbMipInterrupt.subscribe(past_end)
    values = np.asarray(start_values, dtype=np.float64)
    status, bound, gap, optimal, solved = "Not solved", None, None, True, 0
    for i, goal in enumerate(levels):
        left = deadline - clock.now()
        if left <= 0.01:
            optimal = False
            break
        share = first_share if i == 0 and len(levels) > 1 else 1.0 / (len(levels) - i)
        level[0], latest[0] = i, None
        set_limits(h, left * share)
        level_end[0] = clock.now() + max(0.01, left * share)
        h.changeColsCost(m.n_cols, np.arange(m.n_cols, dtype=np.int32), goal.coef)
        if i == 0 and start_index is not None:
            h.setSolution(len(start_index), start_index.astype(np.int32), values)
        else:
            h.setSolution(m.n_cols, np.arange(m.n_cols, dtype=np.int32), values)
        if not run_until(h, level_end[0]):  # abandoned: keep what it reported
            found = latest[0]
            if i == 0:
                status = "Abandoned past the time limit"
                if found is None and start_index is not None:
                    return Outcome(None, status, False, None, None, 0, trace)
            if found is not None:
                values, solved = found, solved + 1
            optimal = False
            break
        model_status = h.getModelStatus()
        info = h.getInfo()
        level_optimal = model_status == highspy.HighsModelStatus.kOptimal
        if info.primal_solution_status != highspy.kSolutionStatusFeasible:
            if i == 0:
                return Outcome(None, h.modelStatusToString(model_status), False, None, None, 0, trace)
            optimal = False
            break
        values = np.asarray(h.getSolution().col_value, dtype=np.float64)
        solved += 1
        optimal = optimal and level_optimal
        if i == 0:
            status = "Time limit reached" if model_status == highspy.HighsModelStatus.kInterrupt \
                else h.modelStatusToString(model_status)
            bound, gap = float(info.mip_dual_bound), float(info.mip_gap)
            trace.append((clock.now() - t0, float(info.objective_function_value), bound))
        if i + 1 < len(levels):  # keep this level for the next ones
            best = float(goal.coef @ np.round(values))
            keep_at = math.ceil(best - goal.tolerance * abs(best) - 1e-6)
            if goal.floor is not None:
                keep_at = max(keep_at, math.ceil(goal.floor - 1e-6))
            nz = np.flatnonzero(goal.coef)
            h.addRow(float(min(keep_at, best)), highspy.kHighsInf, len(nz), nz.astype(np.int32), goal.coef[nz])
    return Outcome(values, status, optimal, bound, gap, solved, trace)
