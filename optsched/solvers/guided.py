"""LP-guided greedy: a baseline's placement with the value bound's admission as the tie-break.

Every greedy baseline admits jobs in priority order and, within a priority, by submit time. On a
full cluster that order decides which of many equal-priority jobs get in, and a job that packs
badly (a gang needing whole free nodes of a scarce model, a group whose CPU strands GPUs) can
push out several that would have fitted. The aggregate relaxation of `optsched.solvers.bound`
knows, per job kind, how much of it an optimal aggregate plan admits. The guided order keeps the
priority order (so no higher-priority job waits behind a lower one) and, within a priority,
tries first the jobs the relaxation admits, then the rest, each part in submit order.

Ordering by the relaxation alone (ignoring priority) was tried and rejected: the relaxation
ignores node-level packing and quota, and on mixed-cloud-10k at 4x load that order kept only 0.85
of the best baseline's value. The guided order beat the best plain baseline on 13 of 27 reference
rounds, by up to 4.3% (12 of the 13 on dgx-h100-1k and ascend-910b-4k), and fell below it on
mixed-cloud-10k (down to 0.978; benchmarks/results/guided.md): it is one more candidate for the
CP-SAT round's hint, kept only when it is better.
"""

from __future__ import annotations

from collections.abc import Sequence

from optsched import clock
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan
from optsched.objective import Objective
from optsched.problem import JobSpec, Problem
from optsched.solvers.bound import ValueBound
from optsched.solvers.greedy import solve_greedy

ADMITTED_DIGITS = 3
"""The relaxation's admitted share is rounded to this many digits before ordering (LP noise)."""


def guided_order(p: Problem, admitted: dict[str, float]) -> list[JobSpec]:
    """Priority descending; within a priority, the relaxation's admitted share descending, then
    submit time (kube-scheduler's PrioritySort with the LP as tie-break)."""
    return sorted(p.jobs, key=lambda j: (-j.priority, -round(admitted.get(j.id, 0.0), ADMITTED_DIGITS),
                                         j.submitted_at, j.index))


def guided_plan(p: Problem, bound: ValueBound, strategies: Sequence[str], *, deadline: float,
                incumbent: Plan, goal: Objective, seed: int = 0) -> tuple[Plan, dict[str, float | None]]:
    """Run each strategy in the guided order while the last run's time still fits before
    `deadline` (`clock.now()` seconds); return the best of `incumbent` and the guided plans, and
    the admitted value of each guided run (by label; None for a run cut by the deadline, which is
    discarded)."""
    tried: dict[str, float | None] = {}
    if not bound.admitted:
        return incumbent, tried
    order = guided_order(p, bound.admitted)
    best = incumbent
    best_terms = incumbent.objective or evaluate_problem(p, incumbent).objective()
    last = incumbent.solver.wall_s
    portfolio = incumbent.solver.portfolio  # seconds per baseline, when the greedy portfolio made the incumbent
    timed = {} if portfolio is None else portfolio.seconds
    for name in dict.fromkeys(strategies):
        begin = clock.now()
        if begin + float(timed.get(name, last)) > deadline:
            break
        plan = solve_greedy(p, name, time_limit=deadline - begin, seed=seed, order=order, label=f"{name}+lp")
        last = clock.now() - begin
        if any(d.reason == "time_limit" for d in plan.deferred):
            tried[f"{name}+lp"] = None
            break
        terms = evaluate_problem(p, plan).objective()
        tried[f"{name}+lp"] = terms["admitted_value"]
        if goal.better(terms, best_terms):
            best, best_terms = plan.model_copy(update={"objective": terms}), terms
    return best, tried
