"""Which model back end `solve(..., solver="auto")` runs on a round.

Measured in benchmarks/results/milp.md (dgx-h100-1k, 25-300 queued jobs, 2 and 10 s; ascend-910b-4k
and mixed-cloud-10k at their reference sizes): where the whole round model fits the time limit,
`milp` (HiGHS) reached its first model solution sooner than `cpsat` on every size, proved the
(candidate-capped) model optimal on the 200- and 300-job rounds at 10 s, and its plan was at least
`cpsat`'s on all but one round (3,264.1 vs 3,264.8). `cpsat` is the one that works where the model
does not fit (its neighbourhood search) and on rounds that may evict (its eviction steps; `milp`
has not been measured there). So:

- rounds whose whole model would take more than 40% of the limit to build go to `cpsat`
  (the estimate `cpsat` itself uses to choose between one model and neighbourhoods);
- rounds with running jobs a queued job may evict go to `cpsat`;
- the rest go to `milp`.
"""

from __future__ import annotations

from optsched.concerns.tenancy import preemption
from optsched.problem import Problem


def choose_backend(p: Problem, time_limit: float) -> tuple[str, str]:
    """(``"milp"`` or ``"cpsat"``, why) for the round and time limit (module docstring)."""
    from optsched.solvers.cpsat import SECONDS_PER_CANDIDATE, candidate_cap  # lazy: OR-Tools

    groups = sum(len(j.groups) for j in p.jobs)
    model_s = SECONDS_PER_CANDIDATE * candidate_cap(p) * groups
    if model_s > 0.4 * time_limit:
        return "cpsat", f"a whole model would take about {model_s:.1f} s to build: cpsat's neighbourhoods"
    if p.jobs and any(preemption.preemptors(p, v) for v in p.running):
        return "cpsat", "running jobs may be evicted: cpsat's eviction steps"
    return "milp", f"the whole model fits (about {model_s:.1f} s to build)"
