"""Which model back end `solve(..., solver="auto")` runs on a round.

Measured in benchmarks/results/milp.md (dgx-h100-1k, 25-300 queued jobs, 2 and 10 s, seeds 0-1;
ascend-910b-4k and mixed-cloud-10k at their reference sizes, 10 s): of 22 rounds, `milp`'s plan
was better on 2 (2,469.5 vs 2,467.4; 3,006.9 vs 3,000), `cpsat`'s on 1 (3,264.8 vs 3,264.1), and
they were equal on 19 (mostly both at the hint plan). Where both reached a model solution,
`milp` reached its first sooner on 13 of 14 (e.g. 2.59 vs 5.03 s on 300 jobs, 3.98 vs 5.62 s on
ascend-910b-4k), and it proved the candidate-capped model optimal on 3 of the four 200- and
300-job rounds at 10 s. `cpsat` is the one that works where the whole model does not fit
(its neighbourhood search) and on rounds that may evict (its eviction steps; `milp` has not
been measured there). So:

- rounds whose whole model would take more than `WHOLE_MODEL_SHARE` of the limit to build go to
  `cpsat` (`estimate_build_s`, the estimate `cpsat` itself uses to choose between one model and
  neighbourhoods);
- rounds with running jobs a queued job may evict go to `cpsat`;
- the rest go to `milp`.
"""

from __future__ import annotations

from optsched.budget import WHOLE_MODEL_SHARE, estimate_build_s
from optsched.concerns.tenancy import preemption
from optsched.problem import Problem


def choose_backend(p: Problem, time_limit: float) -> tuple[str, str]:
    """(``"milp"`` or ``"cpsat"``, why) for the round and time limit (module docstring)."""
    model_s = estimate_build_s(p)
    if model_s > WHOLE_MODEL_SHARE * time_limit:
        return "cpsat", f"a whole model would take about {model_s:.1f} s to build: cpsat's neighbourhoods"
    if p.jobs and any(preemption.preemptors(p, v) for v in p.running):
        return "cpsat", "running jobs may be evicted: cpsat's eviction steps"
    return "milp", f"the whole model fits (about {model_s:.1f} s to build)"
