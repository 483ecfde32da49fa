"""Concern: evictions, their legality and the work they lose (hard rules 6 and 9; disruption).

Kueue's classic preemption (docs/concepts/cluster_queue.md "Preemption", preemption.md), per
eviction with its preemptor `by` (a job this plan admits):
- ``preempted`` by a job of the same tenant, when the tenant's ``within_tenant`` policy allows
  it: ``lower_priority``, or ``lower_or_newer_equal_priority`` (also an equal-priority victim
  submitted later than the preemptor);
- ``reclaimed`` by a job of another tenant in the same cohort, from a tenant that borrows: the
  victim's tenant uses more than its nominal quota of a flavor that both the victim and the
  preemptor use. Allowed when the preemptor's tenant stays within its nominal quota of every
  flavor the preemptor uses and its ``reclaim_within_cohort`` is ``any`` (or ``lower_priority``
  and the victim's priority is lower); or, when the preemptor's tenant borrows, by
  ``borrow_within_cohort: lower_priority`` (with ``reclaim_within_cohort`` not ``never``) for a
  victim of lower priority, at most ``max_priority_threshold``; with fair sharing
  (`Cluster.fair_sharing`), instead of ``borrow_within_cohort``, by ``reclaim_within_cohort`` when
  one of Kueue's share strategies holds (`fairshare.strategy_problems`);
- reclaim takes only borrowed capacity: the reclaimed jobs of a tenant must have an order in
  which each, once those before it are gone, finds its tenant still borrowing such a flavor
  (`reclaim_order`). This is Kueue's rule (pkg/scheduler/preemption/classical/
  candidate_generator.go, `candidateIsValid`: a candidate of another ClusterQueue is skipped once
  that queue is within nominal in the resources needing preemption, checked before each removal
  in the candidates' order), so the last victim may take its tenant back to, or below, nominal.
  The CP-SAT encoding fixes the order to Kueue's candidate order (lowest priority, most recently
  started first: P3), which is one such order;
- who may preempt (both reasons): in each flavor whose quota needs preemption for the preemptor
  (its usage on top of the round's starting usage breaks its tenant's quota there), the
  preemptor's usage is at most its tenant's nominal quota, unless the tenant's
  ``borrow_within_cohort`` is ``lower_priority``, or fair sharing is on and its
  ``reclaim_within_cohort`` is not ``never`` (`over_nominal_problems`; Kueue's
  `fitsResourceQuota`);
- the eviction serves its preemptor: rule 10, `concerns.tenancy.serving`;
- ``migrated``: evicted and placed again in the same plan; the job must be ``migratable``.
Only ``preemptible`` jobs are preempted or reclaimed. Borrowing before the round is measured on
the running jobs as they stand. A job's lost work is the GPU-time since its last checkpoint plus
its restart time: ``(checkpoint_age_s + restart_s) x GPUs / 3600`` GPU-hours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from optsched.concerns import eligibility
from optsched.concerns.base import Violation
from optsched.concerns.tenancy import fairshare
from optsched.concerns.tenancy.running import (
    RunningTable,
    held_flavors,
    lost_gpu_hours,
    running_table,
    running_usage_before,
)
from optsched.ledger import EPS, counted_flavors, flavor_use, flavors_among, quota_broken
from optsched.model.plan import Plan
from optsched.problem import BArray, Derived, FArray, GroupSpec, JobSpec, Problem
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel


@dataclass(frozen=True)
class Preemptor:
    """What the legality of an eviction needs to know about its preemptor in the plan."""

    job: JobSpec
    uses: FArray
    """Quota usage per flavor of the preemptor's placements in the plan."""
    within_nominal: bool
    """Whether the preemptor's tenant ends the plan within its nominal quota of every flavor
    the preemptor uses (Kueue: the workload "fits within the nominal quota")."""
    nodes: frozenset[int]
    """The nodes the preemptor's replicas are placed on in the plan (`serving`)."""
    final: FArray
    """The plan's quota usage per tenant and flavor (tenants x flavors; shared by the plan's
    preemptors, not copied), which `serving` restores a victim into."""


def eviction_problems(p: Problem, victim: JobSpec, reason: str, by: Preemptor | None,
                      others_reclaimed: FArray | None = None, own_freed: FArray | None = None) -> list[str]:
    """Why evicting `victim` for `by` with `reason` is illegal (empty when legal).

    `by` is None when the named preemptor is unknown or not admitted; `others_reclaimed` is the
    quota usage of the jobs of the victim's tenant reclaimed before it (`reclaim_order`);
    `own_freed` the quota usage of the preemptor's own tenant's jobs it preempts (fair sharing).
    """
    if reason == "migrated":
        return [] if victim.migratable else ["job is not migratable"]
    out = []
    if not victim.preemptible:
        out.append("job is not preemptible")
    if by is None:
        out.append(f"{reason} eviction needs an admitted preemptor in `by`")
        return out
    job = by.job
    tenants = p.cluster.tenants
    policy = tenants[job.tenant].preemption if job.tenant < len(tenants) else None
    out.extend(over_nominal_problems(p, by))
    if reason == "preempted":
        if job.tenant != victim.tenant:
            out.append("preempted by another tenant's job (only `reclaimed` crosses tenants)")
        within = policy.within_tenant if policy else "lower_priority"
        newer = victim.submitted_at > job.submitted_at
        if within == "never":
            out.append("tenant policy within_tenant is never")
        elif not (job.priority > victim.priority
                  or (within == "lower_or_newer_equal_priority" and job.priority == victim.priority and newer)):
            out.append(f"preemptor priority {job.priority} does not exceed victim's {victim.priority}")
        return out
    # reclaimed
    if job.tenant == victim.tenant:
        out.append("reclaim within one tenant (use `preempted`)")
    if p.tenant_root[job.tenant] < 0 or p.tenant_root[job.tenant] != p.tenant_root[victim.tenant]:
        out.append("reclaim outside a shared cohort")
    reclaim = policy.reclaim_within_cohort if policy else "never"
    if reclaim == "never":
        out.append("tenant policy reclaim_within_cohort is never")
    elif by.within_nominal:
        if reclaim == "lower_priority" and job.priority <= victim.priority:
            out.append(f"preemptor priority {job.priority} does not exceed victim's {victim.priority}")
    elif fairshare.enabled(p):  # Kueue's fair sharing: a share comparison instead of borrow_within_cohort
        if reclaim == "lower_priority" and job.priority <= victim.priority:
            out.append(f"preemptor priority {job.priority} does not exceed victim's {victim.priority}")
        out.extend(fairshare.strategy_problems(p, victim, job.tenant, by.uses, others_reclaimed, own_freed))
    else:
        bwc = policy.borrow_within_cohort if policy else None
        if bwc is None or bwc.policy == "never":
            out.append("the preemptor's tenant borrows and its borrow_within_cohort policy is never")
        elif job.priority <= victim.priority:
            out.append(f"borrowing preemptor priority {job.priority} does not exceed victim's {victim.priority}")
        elif bwc.max_priority_threshold is not None and victim.priority > bwc.max_priority_threshold:
            out.append(f"victim priority {victim.priority} is above max_priority_threshold "
                       f"{bwc.max_priority_threshold}")
    used = running_usage_before(p)[victim.tenant]
    if others_reclaimed is not None:
        used = used - others_reclaimed
    borrowing = (used > p.nominal[victim.tenant] + 1e-9) & (held_flavors(p, victim) > 0) & (by.uses > 0)
    if not borrowing.any():
        out.append("victim's tenant does not borrow a flavor that the victim and the preemptor use"
                   + (" (in any order of its tenant's reclaimed jobs)" if others_reclaimed is not None
                      and others_reclaimed.any() else ""))
    return out


def reclaimable(p: Problem, victim: JobSpec) -> bool:
    """Whether any reclaim of the running job `victim` can pass the borrowing clause of
    `eviction_problems`: its tenant borrowed, at the start of the round, a flavor the victim
    holds. The clause reads that usage less the tenant's jobs reclaimed before it (never more)
    and asks the preemptor to use the flavor too (never looser), so where this is False every
    `reclaimed` eviction of the victim is illegal, in every plan and every reclaim order."""
    if victim.running and victim.index < len(p.running) and p.running[victim.index] is victim:
        return bool(reclaimable_running(p)[victim.index])
    used = running_usage_before(p)[victim.tenant]
    return bool(np.any((used > p.nominal[victim.tenant] + 1e-9) & (held_flavors(p, victim) > 0)))


def reclaimable_running(p: Problem) -> BArray:
    """`reclaimable` of every running job of the round, in `Problem.running` order (read-only)."""
    return p.derived(RECLAIMABLE)


def _reclaimable_running(p: Problem) -> BArray:
    table = running_table(p)
    used = running_usage_before(p)[table.tenant]
    out: BArray = np.any((used > p.nominal[table.tenant] + 1e-9) & (table.held > 0), axis=1)
    out.setflags(write=False)
    return out


RECLAIMABLE: Derived[BArray] = Derived("preemption.reclaimable", _reclaimable_running)
"""`reclaimable_running` of the round."""


def preempts_while_borrowing(p: Problem, tenant: int) -> bool:
    """Whether the tenant's jobs may preempt with a request above its nominal quota: its
    `borrow_within_cohort` policy is `lower_priority`, or fair sharing is on and its
    `reclaim_within_cohort` is not `never` (Kueue's `canPreemptWhileBorrowing`)."""
    if tenant >= len(p.cluster.tenants):
        return False
    policy = p.cluster.tenants[tenant].preemption
    if fairshare.enabled(p) and policy.reclaim_within_cohort != "never":
        return True
    bwc = policy.borrow_within_cohort
    return bwc is not None and bwc.policy != "never"


def over_nominal_problems(p: Problem, by: Preemptor) -> list[str]:
    """Rule 5, who may preempt: a job evicts others only if, in every flavor whose quota needs
    preemption for it, its request is within its tenant's nominal quota, unless its tenant's
    `borrow_within_cohort` lets it preempt while borrowing. Kueue (pkg/scheduler/flavorassigner/
    flavorassigner.go, `fitsResourceQuota`): a flavor resource that needs preemption is `noFit`
    unless ``nominal >= request`` or `canPreemptWhileBorrowing`, and one `noFit` flavor leaves
    the workload unadmitted. A flavor needs preemption when the preemptor's request on top of the
    round's starting usage (every running job, `running_usage_before`) breaks its tenant's quota
    there (`ledger.quota_broken`): Kueue's test at the start of a cycle. It does not depend on
    the rest of the plan, so admitting more jobs never makes an eviction illegal; evictions for
    node capacity alone pass. The request is the preemptor's whole usage of the flavor (every
    group), as Kueue sums its podsets. A tenant without a definition has no quota. One message
    per flavor."""
    nominal = p.nominal[by.job.tenant] if len(p.flavors) else np.zeros(0)
    return [f"its preemptor {by.job.id} requests {by.uses[f]:g} {p.flavors[f]}, above its tenant's nominal quota "
            f"{nominal[f]:g}, in a flavor whose quota needs preemption, and its tenant's borrow_within_cohort "
            "policy is never (Kueue's fitsResourceQuota: no fit)"
            for f in np.flatnonzero(_over_nominal_flavors(p, by.job, by.uses))]


def preemptor(view: PlanView, job_id: str | None) -> Preemptor | None:
    """The plan's admitted preemptor named `job_id`, or None."""
    p = view.problem
    if job_id is None or job_id not in p.job_index or not view.by_job.get(job_id):
        return None
    job = p.jobs[p.job_index[job_id]]
    uses = np.zeros(len(p.flavors))
    for r in view.by_job[job_id]:
        uses += flavor_use(p, job.groups[r.group], r.node)
    final = view.ledger.quota_used
    within = bool(np.all((final[job.tenant] <= p.nominal[job.tenant] + EPS * np.maximum(1.0, p.nominal[job.tenant]))
                         | (uses <= 0)))
    return Preemptor(job, uses, within, frozenset(r.node for r in view.by_job[job_id]), final)


def evictions_problems(p: Problem, evictions: list[tuple[JobSpec, str, Preemptor | None]]) -> list[tuple[int, str]]:
    """(position, message) for every illegal eviction among `evictions` (victim, reason, preemptor):
    each judged by `eviction_problems`; the reclaims of one tenant together, by `reclaim_order`."""
    out: list[tuple[int, str]] = []
    by_tenant: dict[int, list[int]] = {}
    own: dict[str, FArray] = {}  # per preemptor: quota of its own tenant's jobs it preempts (fair sharing)
    for i, (victim, reason, by) in enumerate(evictions):
        if reason == "reclaimed" and by is not None:
            by_tenant.setdefault(victim.tenant, []).append(i)
        else:
            out.extend((i, msg) for msg in eviction_problems(p, victim, reason, by))
            if reason == "preempted" and by is not None and by.job.tenant == victim.tenant:
                own[by.job.id] = own.get(by.job.id, 0.0) + held_flavors(p, victim)
    for positions in by_tenant.values():
        order, stuck = reclaim_order(p, [(evictions[i][0], evictions[i][2]) for i in positions], own)
        held = {k: held_flavors(p, evictions[positions[k]][0]) for k in [*stuck, *order]}
        removed = np.sum([held[k] for k in stuck], axis=0) if stuck else np.zeros(len(p.flavors))
        for k in stuck:  # no order takes them: each judged with the other such jobs gone (it fails)
            victim, reason, by = evictions[positions[k]]
            out.extend((positions[k], msg) for msg in eviction_problems(
                p, victim, reason, by, removed - held[k], own.get(by.job.id) if by is not None else None))
        for k in order:  # after them, in the order found (each passes)
            victim, reason, by = evictions[positions[k]]
            out.extend((positions[k], msg) for msg in eviction_problems(
                p, victim, reason, by, removed, own.get(by.job.id) if by is not None else None))
            removed = removed + held[k]
    out.sort(key=lambda x: x[0])
    return out


def reclaim_order(p: Problem, reclaims: list[tuple[JobSpec, Preemptor | None]],
                  own_freed: dict[str, FArray] | None = None) -> tuple[list[int], list[int]]:
    """An order in which Kueue could remove these reclaimed jobs of one tenant, each while the
    tenant still borrows a flavor that it and its preemptor use (module docstring), as positions;
    and the positions no order can take. Built from the end: the last one needs the tenant to
    borrow with all the others gone, and any job that can be last may be (taking it out only
    eases the conditions of the rest), so the greedy is exact. With fair sharing, a reclaim by a
    preemptor above nominal must also pass a strategy (`fairshare.strategy_problems`, with the preemptor's
    own preempted jobs `own_freed` by preemptor id), which also only gets harder as more jobs of
    the tenant go first."""
    if not reclaims:
        return [], []
    tenant = reclaims[0][0].tenant
    before = running_usage_before(p)[tenant]
    nominal = p.nominal[tenant] + 1e-9
    held = [held_flavors(p, v) for v, _ in reclaims]
    uses = [by.uses if by is not None else np.zeros(len(p.flavors)) for _, by in reclaims]
    left = list(range(len(reclaims)))
    total = np.sum(held, axis=0)
    tail: list[int] = []
    fair = fairshare.enabled(p)

    def may_be_last(k: int) -> bool:  # with every other one of `left` gone first
        if not np.any((held[k] > 0) & (uses[k] > 0) & (before - (total - held[k]) > nominal)):
            return False
        by = reclaims[k][1]
        return not (fair and by is not None and not by.within_nominal
                    and fairshare.strategy_problems(p, reclaims[k][0], by.job.tenant, by.uses, total - held[k],
                                            (own_freed or {}).get(by.job.id)))

    while left:
        last = next((k for k in left if may_be_last(k)), None)
        if last is None:
            return tail[::-1], left
        tail.append(last)
        left.remove(last)
        total = total - held[last]
    return tail[::-1], []


def check(view: PlanView) -> list[Violation]:
    """Legality and accounting of every eviction."""
    p = view.problem
    out = []
    evs = list(view.evicted.values())
    victims = [p.running[p.running_index[ev.job]] for ev in evs]
    for i, msg in evictions_problems(p, [(v, ev.reason, preemptor(view, ev.by))
                                         for v, ev in zip(victims, evs, strict=True)]):
        out.append(Violation("preemption", msg, job=evs[i].job, values={"reason": evs[i].reason, "by": evs[i].by}))
    for ev, victim in zip(evs, victims, strict=True):
        if ev.reason == "migrated" and not view.by_job.get(ev.job):
            out.append(Violation("completeness", "migrated job is not placed again", job=ev.job))
        expected = lost_gpu_hours(p, victim)
        if abs(ev.lost_gpu_hours - expected) > 1e-6 * max(1.0, expected):
            out.append(Violation("eviction_accounting",
                                 f"lost_gpu_hours {ev.lost_gpu_hours:g} != {expected:g}", job=ev.job,
                                 values={"reported": ev.lost_gpu_hours, "expected": expected}))
    return out


def term(view: PlanView) -> dict[str, float]:
    """`disruption`: work lost by evictions and migrations, in GPU-equivalent hours (`lost_work`)."""
    p = view.problem
    lost = running_table(p).lost
    return {"disruption": float(sum(lost[p.running_index[j]] for j in view.evicted))}


# ---------------------------------------------------------------------------- CP-SAT
DISRUPTION_SCALE = 1000
"""Fixed-point scale of lost work (GPU-equivalent hours) in the CP-SAT objective."""


def sure_flavors(p: Problem, job: JobSpec) -> BArray:
    """Flavors every admission of `job` uses: a flavor counting something a required replica
    asks for, on every node that replica may use (a resource on every node; the device model of
    a GPU group that can only land on that model's nodes). A replica is required of a gang's
    groups with a minimum, and of a job's only group; a job that is not a gang keeps the
    replicas that fit, so with several groups it may be admitted without any of one group's (a
    hypothesis round: a preemptor admitted with its CPU group alone was taken to use its GPU
    group's flavor, and the model reclaimed for it what the validator refused)."""
    out = np.zeros(len(p.flavors), dtype=bool)
    for g in job.groups:
        if g.rmin <= 0 or not (job.gang or len(job.groups) == 1):
            continue
        some, every = p.derived(ELIGIBLE_FLAVORS, job, g)
        if some.any() or not len(some):
            out |= counted_flavors(p, g) & every
    return out


def possible_flavors(p: Problem, job: JobSpec) -> BArray:
    """Flavors some admission of `job` may use."""
    out = np.zeros(len(p.flavors), dtype=bool)
    for g in job.groups:
        out |= counted_flavors(p, g) & p.derived(ELIGIBLE_FLAVORS, job, g)[0]
    return out


def _eligible_flavors(p: Problem, job: JobSpec, group: GroupSpec) -> tuple[BArray, BArray]:
    return flavors_among(p, eligibility.mask(p, job, group))


ELIGIBLE_FLAVORS: Derived[tuple[BArray, BArray]] = Derived("preemption.eligible_flavors", _eligible_flavors,
                                                           key=eligibility.shape_key)
"""Per replica shape: (flavors some of its eligible nodes count for, flavors all of them do)."""


@dataclass(frozen=True)
class Preemptors:
    """Queued jobs that may evict one running job, by the rule that would allow it."""

    same: list[JobSpec]
    """Same tenant, allowed by `within_tenant` (reason `preempted`)."""
    borrowing: list[JobSpec]
    """Other tenants of the cohort, allowed by `borrow_within_cohort` (reason `reclaimed`)."""
    nominal: list[JobSpec]
    """Other tenants of the cohort, allowed by `reclaim_within_cohort` if their tenant ends within
    its nominal quota (reason `reclaimed`)."""
    flavor: int
    """The borrowed flavor a reclaim takes back (-1 when the victim cannot be reclaimed)."""

    def __bool__(self) -> bool:
        return bool(self.same or self.borrowing or self.nominal)

    def pool(self, reason: str) -> list[JobSpec]:
        """The jobs that may evict for `reason`: `same` for ``preempted``, else the cohort's
        (`borrowing`, then `nominal`) for ``reclaimed``, in the order namers try them."""
        return self.same if reason == "preempted" else [*self.borrowing, *self.nominal]


@dataclass(frozen=True)
class _JobTable:
    """Per queued job, what the preemption rules read (arrays aligned with `p.jobs`)."""

    tenant: np.ndarray
    priority: np.ndarray
    submitted: np.ndarray
    may_use: np.ndarray
    """(jobs, flavors): flavors some admission may use."""
    within: np.ndarray
    """Per tenant: 0 never, 1 lower_priority, 2 lower_or_newer_equal_priority."""
    reclaim: np.ndarray
    """Per tenant: 0 never, 1 lower_priority, 2 any."""
    bwc: np.ndarray
    """Per tenant: borrow_within_cohort lower_priority's threshold (inf: none; -inf: off)."""
    min_use: np.ndarray
    """(jobs, flavors): quota usage every admission of the job has (its minimum replicas, in the
    flavors they cannot avoid: `_use_range`)."""
    max_use: np.ndarray
    """(jobs, flavors): the most quota usage an admission of the job may have (maximum replicas)."""
    capped: np.ndarray
    """Per tenant: rule 5 binds its jobs (a defined tenant whose borrow_within_cohort is off)."""
    barred: np.ndarray
    """Per job: even its least usage breaks rule 5 (`_over_nominal_flavors`): it may not preempt."""


def _job_table(p: Problem) -> _JobTable:
    return p.derived(JOB_TABLE)


def _build_job_table(p: Problem) -> _JobTable:
    n_t = len(p.tenant_names)
    within, reclaim, bwc = np.zeros(n_t, dtype=np.int64), np.zeros(n_t, dtype=np.int64), np.full(n_t, -np.inf)
    for i, t in enumerate(p.cluster.tenants):
        pol = t.preemption
        within[i] = ["never", "lower_priority", "lower_or_newer_equal_priority"].index(pol.within_tenant)
        reclaim[i] = ["never", "lower_priority", "any"].index(pol.reclaim_within_cohort)
        if pol.borrow_within_cohort is not None and pol.borrow_within_cohort.policy == "lower_priority" \
                and not fairshare.enabled(p):  # fair sharing replaces borrow_within_cohort: not modelled
            thr = pol.borrow_within_cohort.max_priority_threshold
            bwc[i] = np.inf if thr is None else float(thr)
    may_use = np.array([possible_flavors(p, j) for j in p.jobs], dtype=bool).reshape(len(p.jobs), len(p.flavors))
    uses = [_use_range(p, j) for j in p.jobs]
    n_f = len(p.flavors)
    capped = np.array([t < len(p.cluster.tenants) and not preempts_while_borrowing(p, t) for t in range(n_t)],
                      dtype=bool)
    barred = np.array([bool(capped[j.tenant]) and bool(_over_nominal_flavors(p, j, lo).any())
                       for j, (lo, _) in zip(p.jobs, uses, strict=True)], dtype=bool)
    table = _JobTable(np.array([j.tenant for j in p.jobs], dtype=np.int64),
                      np.array([j.priority for j in p.jobs], dtype=np.int64),
                      np.array([j.submitted_at for j in p.jobs], dtype=float), may_use, within, reclaim, bwc,
                      np.array([lo for lo, _ in uses], dtype=float).reshape(len(p.jobs), n_f),
                      np.array([hi for _, hi in uses], dtype=float).reshape(len(p.jobs), n_f), capped, barred)
    return table


def _use_range(p: Problem, job: JobSpec) -> tuple[FArray, FArray]:
    """(least, most) quota usage per flavor of an admission of `job` (`_JobTable.min_use`,
    `max_use`): the least counts the flavors its required replicas cannot avoid (`sure_flavors`,
    per group), the most every flavor they may use at the groups' maximum replicas. A job that is
    not a gang may be admitted with fewer replicas than its minimum (it keeps those that fit), so
    its least usage is none: rule 5 cannot bar it statically (a hypothesis round found a `kueue`
    plan whose preemptor, two of its three minimum replicas placed, was within nominal while its
    minimum was not, and the bound had treated its victim as unevictable)."""
    lo, hi = np.zeros(len(p.flavors)), np.zeros(len(p.flavors))
    res = p.flavor_resource
    for g in job.groups:
        some, every = p.derived(ELIGIBLE_FLAVORS, job, g)
        counted = counted_flavors(p, g)
        amount = np.where(res < 0, g.gpu, g.req[np.maximum(res, 0)]) if len(res) else np.zeros(0)
        may = counted & some
        hi[may] += amount[may] * g.rmax
        if g.rmin > 0 and some.any() and (job.gang or job.ratios):
            sure = counted & every
            lo[sure] += amount[sure] * g.rmin
    return lo, hi


JOB_TABLE: Derived[_JobTable] = Derived("preemption.job_table", _build_job_table)
"""Per queued job and tenant, what `preemptors` reads."""


def preemptors(p: Problem, victim: JobSpec, jobs: list[JobSpec] | None = None) -> Preemptors:
    """Which queued jobs (of `jobs`, default all: then kept per running job for the problem's
    life, as the domain path, the CP-SAT tables and the namers each ask) may evict `victim`,
    statically: the plan-dependent parts of the rule are the CP-SAT encoding's, and the validator
    judges the result. Vectorised over the queue (`_JobTable`)."""
    if jobs is None and p.running[victim.index] is victim:
        return p.derived(ALL_PREEMPTORS, victim.index)
    return _preemptors(p, victim, jobs)


def _all_preemptors(p: Problem, index: int) -> Preemptors:
    return _preemptors(p, p.running[index], None)


def _preemptors(p: Problem, victim: JobSpec, jobs: list[JobSpec] | None) -> Preemptors:
    empty: list[JobSpec] = []
    if not victim.preemptible or not len(p.jobs):
        return Preemptors(empty, empty, empty, -1)
    tb = _job_table(p)
    member = np.ones(len(p.jobs), dtype=bool)
    if jobs is not None:
        member[:] = False
        member[[j.index for j in jobs]] = True
    lower = tb.priority > victim.priority
    same_t = tb.tenant == victim.tenant
    policy = tb.within[victim.tenant] if victim.tenant < len(p.cluster.tenants) else 0
    newer_equal = (tb.priority == victim.priority) & (victim.submitted_at > tb.submitted)
    same = member & same_t & (((policy == 1) & lower) | ((policy == 2) & (lower | newer_equal)))
    flavor = -1
    used = running_usage_before(p)[victim.tenant]
    held = held_flavors(p, victim)
    borrowed = (used > p.nominal[victim.tenant] + 1e-9) & (held > 0)
    borrowing = nominal = np.zeros(len(p.jobs), dtype=bool)
    cohort = p.tenant_root[victim.tenant]
    if borrowed.any() and cohort >= 0:
        flavor = int(np.argmax(np.where(borrowed, held, -1.0)))
        other = member & ~same_t & (p.tenant_root[tb.tenant] == cohort) & (tb.reclaim[tb.tenant] > 0) \
            & tb.may_use[:, flavor]
        borrowing = other & lower & (victim.priority <= tb.bwc[tb.tenant])
        nominal = other & ~borrowing & ((tb.reclaim[tb.tenant] == 2) | lower)
    if len(p.flavors) and tb.capped.any():  # rule 5: jobs no admission of which may preempt
        barred = tb.barred & member
        same, borrowing, nominal = same & ~barred, borrowing & ~barred, nominal & ~barred
    pick = [p.jobs[i] for i in np.flatnonzero(same)], [p.jobs[i] for i in np.flatnonzero(borrowing)]
    return Preemptors(pick[0], pick[1], [p.jobs[i] for i in np.flatnonzero(nominal)], flavor)


ALL_PREEMPTORS: Derived[Preemptors] = Derived("preemption.all_preemptors", _all_preemptors)
"""Per running job (index), `preemptors` among the whole queue."""


def may_evict_literal(r: RoundModel, job: JobSpec, cache: dict[int, Any]) -> Any:
    """A literal that may be true only when `job` is admitted and rule 5 lets it evict (P2b): in
    every flavor where its largest usage (`_JobTable.max_use`) breaks the rule, its usage stays at
    most the largest with which the rule still lets it evict (`_rule5_limit`: within nominal, or
    not breaking its tenant's quota on top of the round's starting usage). The admission literal
    itself where no admission of the job can break the rule (the rule is monotone in usage, so the
    largest usage is the test)."""
    p, m = r.p, r.model
    tb = _job_table(p)
    risky = _over_nominal_flavors(p, job, tb.max_use[job.index])
    if not risky.any():
        return r.a[job.index]
    lit = cache.get(job.index)
    if lit is None:
        lit = cache[job.index] = m.new_bool_var(f"may_evict[{job.index}]")
        m.add(lit <= r.a[job.index])
        keys = r.job_keys(job.index)
        for f in np.flatnonzero(risky).tolist():
            coefs = [round(flavor_use(p, job.groups[k[1]], k[2])[f] * 1000) for k in keys]
            usage = r.wsum((r.y[k] for k, c in zip(keys, coefs, strict=True) if c), (c for c in coefs if c))
            m.add(usage <= _rule5_limit(p, job, f, float(tb.max_use[job.index, f]))).only_enforce_if(lit)
    return lit


def _rule5_limit(p: Problem, job: JobSpec, f: int, most: float) -> int:
    """The largest usage of flavor `f`, in thousandths and at most `most`, with which rule 5 still
    lets `job` evict (`_over_nominal_flavors`: false at no usage, and once true it stays true as
    usage grows, per flavor): at least its nominal quota, more where its tenant's quota holds the
    extra on top of the round's starting usage (a hierarchical cohort's root quota, say)."""
    def legal(thousandths: int) -> bool:
        uses = np.zeros(len(p.flavors))
        uses[f] = thousandths / 1000
        return not _over_nominal_flavors(p, job, uses)[f]

    lo, hi = 0, math.ceil(most * 1000)
    if legal(hi):
        return hi
    while hi - lo > 1:  # legal(lo), not legal(hi)
        mid = (lo + hi) // 2
        if legal(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _over_nominal_flavors(p: Problem, job: JobSpec, uses: FArray) -> BArray:
    """Flavors in which usage `uses` of `job` breaks rule 5 (`over_nominal_problems`): above its
    tenant's nominal quota where, on top of the round's starting usage, it breaks the quota; none
    for a tenant without a definition or with `borrow_within_cohort`."""
    t = job.tenant
    none = np.zeros(len(p.flavors), dtype=bool)
    if t >= len(p.cluster.tenants) or not len(p.flavors) or preempts_while_borrowing(p, t):
        return none
    nominal = p.nominal[t]
    over = uses > nominal + EPS * np.maximum(1.0, nominal)
    if not over.any():
        return none
    after = running_usage_before(p).copy()
    after[t] += uses
    out: BArray = over & quota_broken(p, after, t)
    return out


def uses_literal(r: RoundModel, job: JobSpec, f: int, cache: dict[tuple[int, int], Any]) -> Any:
    """A literal that is true exactly when `job` is admitted with some replica using flavor `f`."""
    p = r.p
    if sure_flavors(p, job)[f]:
        return r.a[job.index]
    lit = cache.get((job.index, f))
    if lit is None:
        lit = cache[(job.index, f)] = r.model.new_bool_var(f"uses[{job.index},{f}]")
        res = int(p.flavor_resource[f])
        on = [r.y[k] for k in r.job_keys(job.index) if p.flavor_nodes[f, k[2]]
              and (job.groups[k[1]].gpu > 0 if res < 0 else job.groups[k[1]].req[res] > 0)]
        r.model.add(lit <= r.a[job.index])
        r.model.add(r.sum(on) >= 1).only_enforce_if(lit)
        r.model.add(r.sum(on) == 0).only_enforce_if(lit.Not())  # both ways: `within` reads it
    return lit


def cpsat(r: RoundModel) -> None:
    """CP-SAT: which evictable running jobs go, why, and the work they lose (P1-P4).

    Per evictable job k: ``keep[k] + pre[k] + rec[k] = 1`` (P1); ``pre[k]`` needs an admitted
    same-tenant preemptor, ``rec[k]`` an admitted cohort preemptor allowed by
    `borrow_within_cohort`, or one allowed by `reclaim_within_cohort` whose ``within[j]`` holds:
    its tenant ends within nominal quota of every flavor it may use (P2); a preemptor above its
    nominal quota where its quota needs preemption only with `borrow_within_cohort` (P2b). Reclaim
    takes only borrowed quota: with k reclaimed, the reclaimed jobs of its tenant before k in
    Kueue's candidate order (`kueue_order`) hold less of k's reclaimed flavor than the tenant
    borrowed (P3). ``disruption`` = sum of the evicted jobs' lost work in GPU-equivalent hours
    (`running.lost_work`, P4). Two tie-breaks follow every term of a lexicographic order:
    ``victim_priority`` (the evicted jobs' priority ranks: lower-priority victims at equal lost
    work) and ``evictions``, their number (Kueue evicts as few jobs as it can).
    """
    p, m = r.p, r.model
    lost_terms: list[tuple[int, Any]] = []
    total_lost = 0
    within: dict[int, Any] = {}
    used_as: dict[tuple[int, int], Any] = {}  # (job, flavor) -> "the job is admitted and uses the flavor"
    capped: dict[int, Any] = {}  # job -> "admitted, and rule 5 lets it preempt" (P2b)
    reclaimed: dict[int, list[tuple[JobSpec, Any, int]]] = {}  # per victim tenant: (job, rec, flavor)
    r.device_plan.setdefault("evict", {})
    vias: dict[int, list[tuple[JobSpec, Any]]] = {}  # per victim: (reclaimer, "it may reclaim the victim")
    r.device_plan.update(may_evict=capped, uses=used_as, via=vias)  # for rule 10 (`serving.cpsat`)
    rt = running_table(p)
    fair_model = fairshare.enabled(p) and not p.hierarchical and len(p.flavors) > 0
    fair_pairs: list[tuple[JobSpec, JobSpec, int, str, Any]] = []  # (preemptor, victim, flavor, strategy, literal)
    for victim in r.evictable:
        k = p.running_index[victim.id]
        keep = r.keep[k]
        who = preemptors(p, victim, r.jobs if len(r.jobs) < len(p.jobs) else None)
        pre = m.new_bool_var(f"pre[{k}]")
        rec = m.new_bool_var(f"rec[{k}]")
        m.add(keep + pre + rec == 1)  # P1
        m.add(pre <= r.sum(may_evict_literal(r, j, capped) for j in who.same))  # P2, P2b
        for j in who.nominal:
            if j.index not in within:
                within[j.index] = m.new_bool_var(f"within[{j.index}]")
                m.add(within[j.index] <= r.a[j.index])
        via = [uses_literal(r, j, who.flavor, used_as) for j in who.borrowing]  # borrow_within_cohort: rule 5 is off
        vias[k] = list(zip(who.borrowing, via, strict=True))
        for j in who.nominal:  # within nominal and on the reclaimed flavor
            both = m.new_bool_var(f"via[{j.index},{k}]")
            m.add(both <= within[j.index])
            m.add(both <= uses_literal(r, j, who.flavor, used_as))
            may = may_evict_literal(r, j, capped)
            if may is not r.a[j.index]:
                m.add(both <= may)
            via.append(both)
            vias[k].append((j, both))
        if fair_model and who.flavor >= 0:  # fair sharing: a reclaim by a preemptor above nominal (P2f)
            for j in who.nominal:
                for strategy in fairshare.strategies(p):
                    both = m.new_bool_var(f"fair[{j.index},{k},{strategy}]")
                    m.add(both <= uses_literal(r, j, who.flavor, used_as))
                    m.add(both <= may_evict_literal(r, j, capped))
                    via.append(both)
                    vias[k].append((j, both))
                    fair_pairs.append((j, victim, who.flavor, strategy, both))
        m.add(rec <= r.sum(via))
        if who.flavor >= 0:
            reclaimed.setdefault(victim.tenant, []).append((victim, rec, who.flavor))
        r.device_plan["evict"][k] = (pre, rec, who)
        lost = round(float(rt.lost[k]) * DISRUPTION_SCALE)
        lost_terms.append((lost, keep))
        total_lost += lost
    for ji, var in within.items():  # P2: the preemptor's tenant within nominal of the flavors it uses
        job = p.jobs[ji]
        for f in np.flatnonzero(possible_flavors(p, job)).tolist():
            usage = r.quota_usage.get((job.tenant, f))
            nominal = round(p.nominal[job.tenant, f] * 1000)
            if usage is not None:
                m.add(usage <= nominal).only_enforce_if([var, uses_literal(r, job, f, used_as)])
            elif r.base.quota_used[job.tenant, f] * 1000 > nominal + 1e-6:  # over it already
                m.add_bool_or([var.Not(), uses_literal(r, job, f, used_as).Not()])
    used_before = running_usage_before(p).copy()
    inside = {v.id for v in r.evictable}
    for ev in r.hint.evictions if r.hint is not None else []:  # reclaims this model does not decide
        if ev.reason == "reclaimed" and ev.job not in inside:
            v = p.running[p.running_index[ev.job]]
            used_before[v.tenant] -= held_flavors(p, v)
    orders: dict[int, dict[str, int]] = {}
    for t, items in reclaimed.items():  # P3, in Kueue's candidate order (`kueue_order`)
        rank = orders[t] = {o.id: n for n, o in enumerate(kueue_order(p, [o for o, _, _ in items], rt))}
        for victim, rec, f in items:
            others = [(round(held_flavors(p, o)[f] * 1000), rr) for o, rr, _ in items
                      if rank[o.id] < rank[victim.id]]
            others = [(c, v) for c, v in others if c > 0]
            borrowed = round((used_before[t, f] - p.nominal[t, f]) * 1000)
            if borrowed <= 0:  # the reclaims outside this model took the borrowed quota already
                m.add(rec == 0)
                continue
            if not others:
                continue
            m.add(r.wsum((v for _, v in others), (c for c, _ in others)) <= borrowed - 1).only_enforce_if(rec)
    if fair_pairs:
        fairshare.strategies_cpsat(r, fair_pairs, reclaimed, orders, used_before,
                                   {j.index: possible_flavors(p, j) for j, *_ in fair_pairs})
    r.add_term("disruption", total_lost - r.wsum((v for _, v in lost_terms), (c for c, _ in lost_terms)),
               DISRUPTION_SCALE, maximise=False)
    r.term_ub["disruption"] = total_lost
    if r.evictable:  # tie-breaks after every term of a lexicographic order (`objective.TIE_BREAKS`)
        all_ranks = priority_ranks(p)
        ranks = [int(all_ranks[p.running_index[v.id]]) for v in r.evictable]
        ranked = [(c, keep) for c, (_, keep) in zip(ranks, lost_terms, strict=True) if c]
        r.add_term("victim_priority", sum(ranks) - r.wsum((v for _, v in ranked), (c for c, _ in ranked)), 1.0,
                   maximise=False)
        r.term_ub["victim_priority"] = sum(ranks)
        r.add_term("evictions", len(lost_terms) - r.sum(v for _, v in lost_terms), 1.0, maximise=False)
        r.term_ub["evictions"] = len(lost_terms)


def priority_ranks(p: Problem) -> np.ndarray:
    """Per running job, the dense rank of its priority among the running jobs' (0 for the lowest):
    the `victim_priority` tie-break sums them over the evicted jobs, so at equal lost work the
    lower-priority victims go (Kueue evicts its candidates lowest priority first)."""
    ranks: np.ndarray = np.unique(running_table(p).priority, return_inverse=True)[1]
    return ranks


def tie_break(p: Problem, plan: Plan) -> tuple[int, int]:
    """The plan's values of the model-only tie-breaks (`objective.TIE_BREAKS`), smaller is better:
    the priority ranks of its evicted jobs, summed (`priority_ranks`), then their number."""
    ranks = priority_ranks(p)
    return int(sum(int(ranks[p.running_index[ev.job]]) for ev in plan.evictions)), len(plan.evictions)


def kueue_order(p: Problem, victims: list[JobSpec], rt: RunningTable | None = None) -> list[JobSpec]:
    """Running jobs in Kueue's candidate order within one ClusterQueue: lowest priority first, then
    the most recently started, then by id (pkg/scheduler/preemption/common/ordering.go)."""
    rt = running_table(p) if rt is None else rt
    return sorted(victims, key=lambda v: (v.priority, -float(rt.started[v.index]), int(rt.id_rank[v.index])))


def candidate_order(p: Problem, running: np.ndarray, tenant: int) -> np.ndarray:
    """Positions in `p.running` (`running`) sorted as Kueue's `CandidatesOrdering` sorts the
    preemption candidates of a workload of `tenant` (pkg/scheduler/preemption/common/ordering.go):
    other ClusterQueues' first, then, among the tenant's own with admission fair sharing, the
    highest LocalQueue usage (`fairshare.running_queue_usage`), then lowest priority, then the most
    recently started (quota reserved last), then by id for a deterministic order. Kueue's first
    key, workloads already being evicted, has no counterpart: nothing is mid-eviction at a round's
    start. Kueue compares LocalQueue usage also between two candidates of one other ClusterQueue;
    here that key is applied per ClusterQueue where candidates are taken per ClusterQueue (fair
    sharing's target ordering), not in this one list over several."""
    rt = running_table(p)
    own = rt.tenant[running] == tenant
    afs = np.where(own, -fairshare.running_queue_usage(p)[running], 0.0)
    order = np.lexsort((rt.id_rank[running], -rt.started[running], rt.priority[running], afs, own))
    out: np.ndarray = running[order]
    return out


def evictable_jobs(p: Problem, limit: int | None = None) -> list[JobSpec]:
    """Running jobs some queued job may evict, at most `limit` (all: None; lowest priority, least
    work lost first). A round without running or queued jobs has none (its preemption tables are
    not built)."""
    if not (p.running and p.jobs):
        return []
    out = [v for v in p.running if preemptors(p, v)]
    lost = running_table(p).lost
    out.sort(key=lambda v: (v.priority, float(lost[v.index]), v.id))
    return out[:limit]
