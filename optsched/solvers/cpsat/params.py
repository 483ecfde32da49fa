"""CP-SAT's parameters: the neutral knobs mapped onto CP-SAT's names, in one place."""

from __future__ import annotations

import os

from ortools.sat.python import cp_model

from optsched import clock

PRESOLVE_MAX_VARIABLES = 5000
"""Above this many variables CP-SAT's presolve is switched off: on a 10,240-GPU round it spent the
whole time limit presolving and returned nothing, while without it the hint is improved at once
(benchmarks/results/cpsat-tuning.md)."""


def solver_parameters(solver: cp_model.CpSolver, *, time_limit: float, seed: int, num_workers: int,
                      deterministic: bool, n_variables: int = 0) -> None:
    """Map the neutral knobs onto CP-SAT's parameters (the one place that does).

    `deterministic` makes parallel workers interleave (CP-SAT's reproducible parallel mode): the
    same seed and worker count give the same plan whenever the search ends before the wall-clock
    limit (a search cut by the clock depends on how far it got). On the work clock
    (`optsched.clock`, `solve(..., deterministic=True)`) the limit is CP-SAT's deterministic time,
    so a search cut by it is reproducible too.
    """
    solver.parameters.max_time_in_seconds = clock.wall_limit(max(time_limit, 0.01))
    if clock.deterministic():  # the work clock's budget as CP-SAT's deterministic time
        solver.parameters.max_deterministic_time = max(time_limit, 0.01) / clock.CPSAT_SECONDS_PER_DET
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = num_workers
    solver.parameters.interleave_search = (deterministic or clock.deterministic()) and num_workers > 1
    solver.parameters.cp_model_presolve = n_variables <= PRESOLVE_MAX_VARIABLES
    solver.parameters.log_search_progress = bool(os.environ.get("OPTSCHED_CPSAT_LOG"))


