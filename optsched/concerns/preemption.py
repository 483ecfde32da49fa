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
  victim of lower priority, at most ``max_priority_threshold``;
- reclaim takes only borrowed capacity: with all the other reclaimed jobs of its tenant gone, a
  reclaimed job's tenant must still borrow such a flavor (so the evictions are legal in any
  order; Kueue decides one preemption at a time, and this is the order-free form of that rule);
- ``migrated``: evicted and placed again in the same plan; the job must be ``migratable``.
Only ``preemptible`` jobs are preempted or reclaimed. Borrowing before the round is measured on
the running jobs as they stand. A job's lost work is the GPU-time since its last checkpoint plus
its restart time: ``(checkpoint_age_s + restart_s) x GPUs / 3600`` GPU-hours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optsched.concerns.base import Violation
from optsched.ledger import EPS, Ledger, flavor_use
from optsched.problem import FArray, JobSpec, Problem
from optsched.view import PlanView


def lost_gpu_hours(p: Problem, job: JobSpec) -> float:
    """GPU-hours of work an eviction of running `job` loses."""
    return (job.checkpoint_age_s + job.restart_s) * p.gpus_of(job.placements) / 3600.0


def running_usage_before(p: Problem) -> np.ndarray:
    """Quota usage (T x F) of all running jobs at the start of the round."""
    key = ("running_quota",)
    if key not in p._cache:
        p._cache[key] = Ledger.with_running(p).quota_used.copy()
    used: np.ndarray = p._cache[key]
    return used


def held_flavors(p: Problem, job: JobSpec) -> FArray:
    """Quota usage (per flavor) of a running job where it sits."""
    held = np.zeros(len(p.flavors))
    for pl in job.placements:
        held += flavor_use(p, job.groups[pl.group], pl.node)
    return held


@dataclass(frozen=True)
class Preemptor:
    """What the legality of an eviction needs to know about its preemptor in the plan."""

    job: JobSpec
    uses: FArray
    """Quota usage per flavor of the preemptor's placements in the plan."""
    within_nominal: bool
    """Whether the preemptor's tenant ends the plan within its nominal quota of every flavor
    the preemptor uses (Kueue: the workload "fits within the nominal quota")."""


def eviction_problems(p: Problem, victim: JobSpec, reason: str, by: Preemptor | None,
                      others_reclaimed: FArray | None = None) -> list[str]:
    """Why evicting `victim` for `by` with `reason` is illegal (empty when legal).

    `by` is None when the named preemptor is unknown or not admitted; `others_reclaimed` is the
    quota usage of the other jobs of the victim's tenant reclaimed in the same plan.
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
    if p.tenant_cohort[job.tenant] < 0 or p.tenant_cohort[job.tenant] != p.tenant_cohort[victim.tenant]:
        out.append("reclaim outside a shared cohort")
    reclaim = policy.reclaim_within_cohort if policy else "never"
    if reclaim == "never":
        out.append("tenant policy reclaim_within_cohort is never")
    elif by.within_nominal:
        if reclaim == "lower_priority" and job.priority <= victim.priority:
            out.append(f"preemptor priority {job.priority} does not exceed victim's {victim.priority}")
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
                   + (" (once its other reclaimed jobs are gone)" if others_reclaimed is not None
                      and others_reclaimed.any() else ""))
    return out


def preemptor(view: PlanView, job_id: str | None) -> Preemptor | None:
    """The plan's admitted preemptor named `job_id`, or None."""
    p = view.problem
    if job_id is None or job_id not in p.job_index or not view.by_job.get(job_id):
        return None
    job = p.jobs[p.job_index[job_id]]
    uses = np.zeros(len(p.flavors))
    for r in view.by_job[job_id]:
        uses += flavor_use(p, job.groups[r.group], r.node)
    final = view.ledger.quota_used[job.tenant]
    within = bool(np.all((final <= p.nominal[job.tenant] + EPS * np.maximum(1.0, p.nominal[job.tenant]))
                         | (uses <= 0)))
    return Preemptor(job, uses, within)


def evictions_problems(p: Problem, evictions: list[tuple[JobSpec, str, Preemptor | None]]) -> list[tuple[int, str]]:
    """(position, message) for every illegal eviction among `evictions` (victim, reason, preemptor):
    each judged by `eviction_problems`, reclaims together with the other reclaims of their tenant."""
    reclaimed: dict[int, FArray] = {}  # per victim tenant: usage of all its reclaimed jobs
    held = [held_flavors(p, victim) if reason == "reclaimed" else None for victim, reason, _ in evictions]
    for (victim, _, _), h in zip(evictions, held, strict=True):
        if h is not None:
            reclaimed[victim.tenant] = reclaimed.get(victim.tenant, np.zeros(len(p.flavors))) + h
    out: list[tuple[int, str]] = []
    for i, ((victim, reason, by), h) in enumerate(zip(evictions, held, strict=True)):
        others = None if h is None else reclaimed[victim.tenant] - h
        out.extend((i, msg) for msg in eviction_problems(p, victim, reason, by, others))
    return out


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
    """`disruption`: GPU-hours of work lost by evictions and migrations."""
    p = view.problem
    return {"disruption": sum(lost_gpu_hours(p, p.running[p.running_index[j]]) for j in view.evicted)}
