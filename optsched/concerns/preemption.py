"""Concern: evictions, their legality and the work they lose (hard rules 6 and 9; disruption).

Kueue's preemption semantics:
- ``preempted`` by a job of the same tenant with higher priority, when the tenant's policy
  ``within_tenant`` allows it (``lower_or_newer_equal_priority`` also allows an equal priority
  victim submitted later than the preemptor);
- ``reclaimed`` by a job of another tenant in the same cohort, when the victim's tenant borrows
  (uses more than its nominal quota of a flavor the victim holds) and the preemptor's policy
  ``reclaim_within_cohort`` allows it (``any``, or ``lower_priority``);
- ``migrated``: evicted and placed again in the same plan; the job must be ``migratable``.
Only ``preemptible`` jobs are preempted or reclaimed. A job's lost work is the GPU-time since its
last checkpoint plus its restart time: ``(checkpoint_age_s + restart_s) x GPUs / 3600`` GPU-hours.
"""

from __future__ import annotations

import numpy as np

from optsched.concerns.base import Violation
from optsched.ledger import Ledger, flavor_use
from optsched.problem import JobSpec, Problem
from optsched.view import PlanView


def lost_gpu_hours(p: Problem, job: JobSpec) -> float:
    """GPU-hours of work an eviction of running `job` loses."""
    return (job.checkpoint_age_s + job.restart_s) * p.gpus_of(job.placements) / 3600.0


def _running_usage_before(p: Problem) -> np.ndarray:
    """Quota usage (T x F) of all running jobs at the start of the round."""
    key = ("running_quota",)
    if key not in p._cache:
        p._cache[key] = Ledger.with_running(p).quota_used.copy()
    used: np.ndarray = p._cache[key]
    return used


def eviction_problems(p: Problem, victim: JobSpec, reason: str, by: JobSpec | None,
                      admitted: bool) -> list[str]:
    """Why evicting `victim` for `by` with `reason` is illegal (empty when legal)."""
    if reason == "migrated":
        return [] if victim.migratable else ["job is not migratable"]
    out = []
    if not victim.preemptible:
        out.append("job is not preemptible")
    if by is None or not admitted:
        out.append(f"{reason} eviction needs an admitted preemptor in `by`")
        return out
    tenants = p.cluster.tenants
    t_by = tenants[by.tenant] if by.tenant < len(tenants) else None
    if reason == "preempted":
        if by.tenant != victim.tenant:
            out.append("preempted by another tenant's job (only `reclaimed` crosses tenants)")
        policy = t_by.preemption.within_tenant if t_by else "lower_priority"
        newer = victim.submitted_at > by.submitted_at
        if policy == "never":
            out.append("tenant policy within_tenant is never")
        elif not (by.priority > victim.priority
                  or (policy == "lower_or_newer_equal_priority" and by.priority == victim.priority and newer)):
            out.append(f"preemptor priority {by.priority} does not exceed victim's {victim.priority}")
        return out
    # reclaimed
    if by.tenant == victim.tenant:
        out.append("reclaim within one tenant (use `preempted`)")
    if p.tenant_cohort[by.tenant] < 0 or p.tenant_cohort[by.tenant] != p.tenant_cohort[victim.tenant]:
        out.append("reclaim outside a shared cohort")
    policy_r = t_by.preemption.reclaim_within_cohort if t_by else "never"
    if policy_r == "never":
        out.append("tenant policy reclaim_within_cohort is never")
    elif policy_r == "lower_priority" and by.priority <= victim.priority:
        out.append(f"preemptor priority {by.priority} does not exceed victim's {victim.priority}")
    used = _running_usage_before(p)
    held = np.zeros(len(p.flavors))
    for pl in victim.placements:
        held += flavor_use(p, victim.groups[pl.group], pl.node)
    borrowing = (used[victim.tenant] > p.nominal[victim.tenant] + 1e-9) & (held > 0)
    if not borrowing.any():
        out.append("victim's tenant does not borrow any flavor the victim holds")
    return out


def check(view: PlanView) -> list[Violation]:
    """Legality and accounting of every eviction."""
    p = view.problem
    out = []
    for ev in view.evicted.values():
        victim = p.running[p.running_index[ev.job]]
        by = p.jobs[p.job_index[ev.by]] if ev.by in p.job_index else None
        admitted = by is not None and bool(view.by_job.get(by.id))
        for msg in eviction_problems(p, victim, ev.reason, by, admitted):
            out.append(Violation("preemption", msg, job=ev.job, values={"reason": ev.reason, "by": ev.by}))
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
