"""The contract every solver keeps: one signature, the neutral knobs, a registration record.

A solver is a `Solver`: ``(problem, run) -> Plan``, where `RunSpec` holds the neutral knobs
(objective, time limit, seed, when the call began, workers, an initial plan, determinism), mapped
to each solver's own options in its module, and nowhere else. A solver module lists its
`SolverInfo` records as `SOLVERS` for `optsched.solvers.registry`. Every solver respects the
time limit, returns a plan the validator accepts (a model answer that fails the check is a bug:
it falls back and says so), and reports its metrics and statistics (`SolverStats`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from optsched.model.plan import Plan
from optsched.objective import ObjectiveSpec
from optsched.problem import Problem

OPTIMAL_GAP = 1e-6
"""A plan whose gap to a bound of the whole round is at most this is reported `optimal`: no plan
admits more value (what the later terms of a lexicographic objective would decide is not claimed)."""


@dataclass(frozen=True)
class RunSpec:
    """The neutral knobs of one call, mapped to each solver's own in its module."""

    objective: ObjectiveSpec = None
    time_limit: float = 1.0
    """Seconds for the whole call, compiling included (counted from `started`)."""
    seed: int = 0
    started: float = 0.0
    """When the call began (`clock.now()` seconds)."""
    num_workers: int = 2
    """Search workers (CP-SAT's); solvers without parallel search ignore it."""
    initial_plan: Plan | None = None
    """A plan of this round to start from (a warm start, already adapted to the round:
    `optsched.solvers.warmstart`); solvers that start from a plan use it instead of their own
    start plan search."""
    deterministic: bool = False
    """Same inputs and seed give the same plan (CP-SAT's interleaved search; see docs/solvers.md)."""


class Solver(Protocol):
    """A search strategy over a compiled round."""

    def __call__(self, p: Problem, run: RunSpec) -> Plan: ...


@dataclass(frozen=True)
class SolverInfo:
    """A registered solver: its name, one line on what it is, the knobs it honours, the function."""

    name: str
    summary: str
    run: Solver
    honours: frozenset[str] = frozenset()
    """Which of `num_workers`, `initial_plan`, `deterministic` it uses (the others it ignores)."""


def stamped(p: Problem, plan: Plan, run: RunSpec) -> Plan:
    """A baseline's plan with its metrics and the call's wall time (from `run.started`)."""
    from optsched.metrics import evaluate_problem

    stats = plan.solver.model_copy(update={"wall_s": time.perf_counter() - run.started})
    return plan.model_copy(update={"objective": evaluate_problem(p, plan).objective(), "solver": stats})




__all__ = ["RunSpec", "Solver", "SolverInfo", "stamped"]
