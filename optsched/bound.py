"""`bound(cluster, queue) -> Bound`: an upper bound on a round's admitted value, for any plan on
the existing nodes.

CP-SAT's proven bound only holds for the model it solved; this one holds for every valid plan of
the round, greedy or optimised, so that "how far from optimal is this heuristic?" is one number
reported the same way for all of them: ``gap = (bound - admitted value) / bound``. It is the
aggregate LP relaxation of `optsched.solvers.bound` (docs/formulation.md, "Value bound") solved by
HiGHS, with every running job that some queued job may evict treated as gone (a plan may evict
them, so the bound must not count their devices as taken). When the whole round model is cheap to
build (`optsched.budget.EXACT_BOUND_SHARE`), or when asked (`exact=True`), HiGHS also bounds the round model itself
(`optsched.solvers.milp.model_bound`: every eligible node a candidate, every evictable job free
to go), and the tighter of the two is returned. The domain model's LP (`optsched.domain.model`,
docs/formulation.md "Why it bounds every valid plan": who may preempt whom per Kueue's static
rules, the reclaim order, quota on final usage, required topology, per-node fit of each shape) is
solved too where time is left and taken where it is tighter (on mixed-cloud-10k seed 0, 11,642
against the aggregate's 11,729, one-off: the aggregate LP lets every evictable job go for anyone).
The aggregate and round-model bounds hold for plans on existing nodes: a plan that provisions
nodes (`karpenter`, or `cpsat`/`milp` where pools are provisionable) may admit more; the domain
model counts provisioning slots, so its bound holds for those too.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from optsched import clock
from optsched.arguments import require_time_limit
from optsched.budget import EXACT_BOUND_SHARE, estimate_build_s
from optsched.errors import InputError, InputIssue
from optsched.model.cluster import Cluster
from optsched.model.queue import Queue
from optsched.objective import MAXIMISED, Objective, ObjectiveSpec
from optsched.problem import Problem, compile_problem
from optsched.solvers.bound import relaxed_base, value_bound


class Bound(BaseModel):
    """An upper bound on the objective's first term (only `admitted_value` has one yet)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    term: str
    """The bounded objective term."""
    value: float | None
    """No plan of the round scores more on `term`; None when the relaxation failed (see status)."""
    method: str
    """How it was obtained: ``lp-aggregate`` (HiGHS on the aggregate relaxation), ``lp-domain``
    (HiGHS on the domain model's LP, when tighter) or ``milp-round`` (HiGHS's dual bound on the
    whole round model, when tighter)."""
    status: str
    """The LP's status (``optimal`` when the bound is valid)."""
    seconds: float
    """Wall time of the bound, compilation excluded."""
    lp_value: float | None = None
    """The aggregate LP's value (equal to `value` when that is the method)."""
    model_status: str | None = None
    """HiGHS's status on the round model, or why it was not tried (None: not tried)."""
    domain_value: float | None = None
    """The domain model's LP value (None: not tried for lack of time, or not claimed: a running job
    may migrate)."""

    def gap(self, achieved: float) -> float | None:
        """Relative gap of a plan scoring `achieved`: (bound - achieved) / bound, >= 0."""
        if self.value is None:
            return None
        return max(0.0, (self.value - achieved) / max(abs(self.value), 1e-9))


def bound_problem(p: Problem, objective: ObjectiveSpec = None, time_limit: float = 10.0,
                  exact: bool | None = None) -> Bound:
    """`bound` on a compiled problem."""
    goal = Objective.parse(objective)
    time_limit = require_time_limit(time_limit)
    first = goal.order[0] if goal.weights is None else (next(iter(goal.weights)) if len(goal.weights) == 1 else "")
    if first not in MAXIMISED:
        raise InputError([InputIssue("objective", "no_bound",
                                     "a bound exists for admitted_value only: use it alone or first in a "
                                     f"lexicographic order (got {objective!r})")])
    start = clock.now()
    got = value_bound(p, relaxed_base(p), time_limit=time_limit)
    value, method, model_status = got.value, "lp-aggregate", None
    left = start + time_limit - clock.now()
    build_s = estimate_build_s(p, p.n_nodes, provision=False)  # every eligible node a candidate
    if exact or (exact is None and build_s <= EXACT_BOUND_SHARE * left):
        from optsched.solvers.milp import model_bound  # lazy: HiGHS's MILP only when it runs

        tight, model_status = model_bound(p, left)
        if tight is not None and (value is None or tight < value):
            value, method = tight, "milp-round"
    domain = _domain_bound(p, start + time_limit)
    if domain is not None and (value is None or domain < value * (1 - 1e-6)):
        value, method = domain, "lp-domain"
    return Bound(term=first, value=value, method=method, status=got.status, seconds=clock.now() - start,
                 lp_value=got.value, model_status=model_status, domain_value=domain)


DOMAIN_BOUND_SECONDS_PER_JOB = 4e-4
"""Time the domain model's bound takes per queued job, its model built and its LP solved (one-off:
0.35 s for 1,000 jobs on mixed-cloud-10k, 1.8 s for 10,000 on the 102,400-GPU round): it is tried
only where this fits the time left."""


def _domain_bound(p: Problem, end: float) -> float | None:
    """The domain model's LP bound (`domain.model.value_bound`) if the time left by `end` (clock
    seconds) holds it (`DOMAIN_BOUND_SECONDS_PER_JOB`), else None."""
    from optsched.domain.model import build_model
    from optsched.domain.model import value_bound as domain_value_bound  # lazy: SciPy's HiGHS

    if not p.jobs or end - clock.now() < DOMAIN_BOUND_SECONDS_PER_JOB * len(p.jobs):
        return None
    m = build_model(p)
    left = end - clock.now()
    return domain_value_bound(m, left) if left > 0 else None


def bound(cluster: Cluster, queue: Queue, *, objective: ObjectiveSpec = None, time_limit: float = 10.0,
          exact: bool | None = None) -> Bound:
    """Upper bound on the admitted value of every valid plan for the round (module docstring).

    `objective` must put `admitted_value` first (the default does); `time_limit` caps the whole
    call; `exact`: bound the round model too (True), never (False), or when cheap (None).
    """
    return bound_problem(compile_problem(cluster, queue), objective, time_limit, exact)


class LostWorkBound(BaseModel):
    """A lower bound on the lost work (`disruption`) of every valid plan that admits at least a
    given value (`lost_work_bound`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    term: str = "disruption"
    """The bounded objective term (GPU-equivalent hours of work lost by evictions)."""
    admitted_value_at_least: float
    """The admitted value every plan counted reaches."""
    value: float | None
    """No valid plan admitting at least `admitted_value_at_least` loses less work; None when no
    plan reaches that value (status ``unreachable``) or no bound is claimed (see status)."""
    status: str
    """``optimal`` (the LP solved: `value` holds), ``unreachable`` (no plan admits that much),
    ``not claimed`` (a running job may migrate, which the model does not count), or HiGHS's
    status when it did not finish."""
    seconds: float
    """Wall time, compilation excluded."""


def lost_work_bound(cluster: Cluster, queue: Queue, *, admitted_value_at_least: float,
                    time_limit: float = 10.0) -> LostWorkBound:
    """The least lost work (GPU-equivalent hours) any valid plan of the round pays to admit at
    least `admitted_value_at_least` (a lower bound, `domain.model.lost_bound`: the domain model's
    LP with that value as a row, minimising lost work; docs/formulation.md, "What a value target
    costs in lost work"). With 0.97 x the value of a plan you have, it is what any plan within 3%
    of the optimum must disrupt; it holds for plans that provision nodes too."""
    floor = _value_floor(admitted_value_at_least)
    return lost_work_bound_problem(compile_problem(cluster, queue), floor, time_limit)


def _value_floor(floor: object) -> float:
    """`admitted_value_at_least` checked at the door: a finite number >= 0."""
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not math.isfinite(floor) or floor < 0:
        raise InputError([InputIssue("admitted_value_at_least", "out_of_range",
                                     f"{floor!r}: an admitted value is a finite number >= 0")])
    return float(floor)


def lost_work_bound_problem(p: Problem, admitted_value_at_least: float, time_limit: float = 10.0) -> LostWorkBound:
    """`lost_work_bound` on a compiled problem (`optsched evaluate --bound` asks it at the plan's
    own admitted value: how far the plan's disruption is from the least its value allows)."""
    floor = _value_floor(admitted_value_at_least)
    time_limit = require_time_limit(time_limit)
    start = clock.now()
    from optsched.domain.model import build_model, lost_bound  # lazy: SciPy's HiGHS

    m = build_model(p)
    got = lost_bound(m, floor, max(start + time_limit - clock.now(), 1e-3))
    status = "optimal"
    if not m.bound_valid:
        status = "not claimed"
    elif got is None:
        status = "not solved in time"
    elif math.isinf(got):
        status, got = "unreachable", None
    return LostWorkBound(admitted_value_at_least=floor, value=got, status=status,
                         seconds=clock.now() - start)
