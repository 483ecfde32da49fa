"""The clock every time-budgeted decision of a solve reads: the wall clock, or a work clock.

A solve decides by time: which baselines fit before the model, whether a whole model or
neighbourhoods, how many neighbourhood steps, how long each search runs. On the wall clock those
decisions depend on the machine's load, so the same call can return different plans. In
deterministic mode (`solve(..., deterministic=True)`) they read a *work clock* instead: it starts
at the call's start and advances only by the work charged to it (`charge`), each charge a fixed
function of the work done, so the same call takes the same decisions and returns the same plan:

- setting up a greedy engine, a job and a replica placement attempt (`ENGINE_S`, `JOB_S`,
  `KUEUE_JOB_S`, `REPLICA_S`: the baselines, Kueue, the guided reruns, the domain path's
  assignment);
- a trial placement of the `kueue` baseline's preemption search (`TRIAL_S`);
- reading and evaluating a plan (`VIEW_S`, `EVALUATE_S` per job);
- building the domain model (`NONZERO_S` per matrix nonzero);
- a CP-SAT search: its deterministic time (`solver.deterministic_time`), which CP-SAT's
  `max_deterministic_time` limits instead of the wall clock, times `CPSAT_SECONDS_PER_DET`;
- a HiGHS solve: its simplex iterations, MIP nodes and matrix size (`HIGHS_SECONDS_PER_ITERATION`,
  `HIGHS_SECONDS_PER_NODE`, `HIGHS_*_SECONDS_PER_NONZERO`), its iteration and node limits bounding
  it instead of the wall clock;
- building a model: its variables (`VARIABLE_S`).

What is not charged (compiling, decoding, checking) takes wall time the work clock does not see,
and the solvers' own limits are not exact (a CP-SAT search went 1.8-3.7x past its deterministic
limit on dgx-h100-1k's whole model; HiGHS does not apply its iteration limit inside a MIP's root),
so a deterministic call can end past its wall limit: benchmarks/results/deterministic.md measures
how often. An external solver stopped by its wall-clock safety cap (`SAFETY_FACTOR`) is the one
case where the plan may still differ between calls. The plan reports the call's wall time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

REPLICA_S = 4e-5
"""Work-clock seconds per replica placement attempt of the greedy engine: best-fit placed 36,662
replicas in 1.53-1.67 s on the 102,400-GPU round (42 us a replica, a profile on this machine)."""

JOB_S = 5e-5
"""Work-clock seconds per job a greedy engine takes up (ordering, job-level rules, growth): on
mixed-cloud-10k the baselines of a cpsat start plan tried 8,643 jobs and 22,501 replicas in about
1.7 s (a profile)."""

KUEUE_JOB_S = 1.5e-4
"""... and beyond it per job the `kueue` baseline admits (its queue order, flavor assignment and
share values: 0.18 s of wall the work clock missed on mixed-cloud-10k's 1,000 jobs at 1 s)."""

ENGINE_S = 1e-5
"""Work-clock seconds per node, queued and running job to set up a greedy engine (its ledger with
the running jobs, its node cursors): about 0.03 s on mixed-cloud-10k."""

VIEW_S = 3e-5
"""Work-clock seconds per queued and running job to read a plan (`PlanView`: the validator and the
metrics), 0.04 s for mixed-cloud-10k's 1,473 (a profile)."""

EVALUATE_S = 2e-5
"""... and per job to evaluate its terms beyond the view (`metrics.evaluate_problem`)."""

TRIAL_S = 8e-4
"""Work-clock seconds per trial placement of the `kueue` baseline's preemption search beyond its
replicas (releasing and restoring the candidates, re-scoring their nodes, the job's rules): about
1.2 ms a trial on mixed-cloud-10k with its share of the search around it (a profile)."""

NONZERO_S = 1.5e-6
"""Work-clock seconds per nonzero of the domain model's matrix to build it, its cells included
(about 0.19 s for the 125k of mixed-cloud-10k with 1,000 jobs on a first build)."""

CPSAT_SECONDS_PER_DET = 2.0
"""Work-clock seconds per unit of CP-SAT's deterministic time; a budget of T seconds becomes a
deterministic-time limit of T / 2 units. On this machine a unit took 0.8 s of wall on
mixed-cloud-10k's neighbourhoods and 1.85 s on dgx-h100-1k's whole model (2 workers, a profile),
whose search also went 1.8x past its deterministic limit."""

HIGHS_SECONDS_PER_ITERATION = 2e-5
"""Work-clock seconds per HiGHS simplex iteration, at least ..."""

HIGHS_SECONDS_PER_ITERATION_NONZERO = 2.5e-9
"""... this much per nonzero of the matrix: dgx-h100-1k's MILP (244k nonzeros) took 8.2 s for
13,205 iterations (a profile)."""

HIGHS_SECONDS_PER_NODE = 2e-3
"""Work-clock seconds per HiGHS branch-and-bound node."""

HIGHS_MIP_SECONDS_PER_NONZERO = 1e-5
"""Work-clock seconds per matrix nonzero of a HiGHS MIP run (presolve, root heuristics)..."""

HIGHS_LP_SECONDS_PER_NONZERO = 5e-7
"""... and of an LP run."""

VARIABLE_S = 2e-5
"""Work-clock seconds per model variable built."""


SAFETY_FACTOR = 3.0
SAFETY_S = 1.0
"""In deterministic mode an external solver's wall-clock limit is this many times its budget plus
these seconds (its deterministic limit decides; the wall limit only stops a runaway search, and a
search it stops is no longer reproducible)."""


@dataclass
class WorkClock:
    """A clock that advances only by the work charged to it (seconds)."""

    t: float


_WORK: ContextVar[WorkClock | None] = ContextVar("optsched_work_clock", default=None)


def now() -> float:
    """perf_counter seconds, or the work clock's time in deterministic mode."""
    work = _WORK.get()
    return time.perf_counter() if work is None else work.t


def charge(seconds: float) -> None:
    """Advance the work clock by `seconds` of work (nothing on the wall clock)."""
    work = _WORK.get()
    if work is not None:
        work.t += seconds


def deterministic() -> bool:
    """Whether decisions read the work clock (inside `work_clock`)."""
    return _WORK.get() is not None


def wall_limit(seconds: float) -> float:
    """The wall-clock limit to give an external solver for `seconds` of budget: the seconds, or in
    deterministic mode the safety cap (`SAFETY_FACTOR`)."""
    return seconds if not deterministic() else SAFETY_FACTOR * seconds + SAFETY_S


def scipy_highs_options(seconds: float) -> dict[str, object]:
    """Options of `scipy.optimize.milp` (HiGHS) for `seconds` of budget: its time limit; on the
    work clock a node limit too, the time limit a safety cap (an LP ends by itself)."""
    out: dict[str, object] = {"time_limit": wall_limit(max(0.01, seconds)), "disp": False}
    if deterministic():
        out["node_limit"] = max(1, int(seconds / HIGHS_SECONDS_PER_NODE))
    return out


def charge_cpsat(deterministic_time: float) -> None:
    """Charge a CP-SAT search by its deterministic time (`CPSAT_SECONDS_PER_DET`)."""
    charge(deterministic_time * CPSAT_SECONDS_PER_DET)


def highs_iteration_s(nonzeros: float) -> float:
    """Work-clock seconds per simplex iteration of a HiGHS model with `nonzeros` matrix entries."""
    return max(HIGHS_SECONDS_PER_ITERATION, HIGHS_SECONDS_PER_ITERATION_NONZERO * nonzeros)


def charge_highs(iterations: float, nodes: float, nonzeros: float, mip: bool) -> None:
    """Charge a HiGHS solve by its simplex iterations, branch-and-bound nodes and matrix size."""
    per_nonzero = HIGHS_MIP_SECONDS_PER_NONZERO if mip else HIGHS_LP_SECONDS_PER_NONZERO
    charge(max(0.0, iterations) * highs_iteration_s(nonzeros) + max(0.0, nodes) * HIGHS_SECONDS_PER_NODE
           + max(0.0, nonzeros) * per_nonzero)


@contextmanager
def work_clock(start: float) -> Iterator[WorkClock]:
    """Read the work clock, starting at `start`, within the block (deterministic mode)."""
    clock = WorkClock(start)
    token = _WORK.set(clock)
    try:
        yield clock
    finally:
        _WORK.reset(token)


@contextmanager
def wall_clock() -> Iterator[None]:
    """Read the wall clock within the block, even inside `work_clock` (work whose duration is
    measured, not budgeted)."""
    token = _WORK.set(None)
    try:
        yield
    finally:
        _WORK.reset(token)


__all__ = [
    "REPLICA_S",
    "VARIABLE_S",
    "charge",
    "charge_cpsat",
    "charge_highs",
    "deterministic",
    "now",
    "scipy_highs_options",
    "wall_clock",
    "wall_limit",
    "work_clock",
]
