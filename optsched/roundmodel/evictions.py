"""Eviction decisions of a round model outside the validator's rule: the preemptor each decoded
eviction names (`name_preemptors`), and, in a neighbourhood, the reclaims the model does not decide
kept legal (`hold_fixed_reclaims`, P5). The rule they keep is `concerns.tenancy.preemption`'s."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from optsched.concerns.tenancy.preemption import (
    Preemptor,
    Preemptors,
    eviction_problems,
    kueue_order,
    preemptor,
)
from optsched.concerns.tenancy.running import held_flavors, lost_gpu_hours, running_usage_before
from optsched.concerns.tenancy.serving import reclaiming_flavors, serves_problems
from optsched.model.plan import Eviction, Plan
from optsched.problem import BArray, FArray, JobSpec, Problem
from optsched.roundmodel.variables import RoundModel
from optsched.view import PlanView


def hold_fixed_reclaims(r: RoundModel, plan: Plan, view: PlanView) -> None:
    """In a neighbourhood of `plan`: the reclaims it does not decide stay legal (P5).

    A reclaim whose preemptor is outside the model and ends the plan within nominal quota keeps
    the preemptor's tenant within nominal of every flavor the preemptor uses (a tenant that
    starts to borrow loses the right to reclaim by `reclaim_within_cohort`). And its victim's
    tenant must still borrow the flavor it was reclaimed for once every other reclaimed job of
    that tenant is gone, the model's included (P3 seen from the fixed reclaim).
    """
    p, m = r.p, r.model
    inside = {j.id for j in r.jobs}
    decided = {v.id for v in r.evictable}
    evict = r.device_plan.get("evict", {})
    fixed = [ev for ev in plan.evictions if ev.reason == "reclaimed" and ev.job not in decided]
    outside: dict[int, FArray] = {}  # per victim tenant: held usage of the reclaims outside the model
    for ev in fixed:
        v = p.running[p.running_index[ev.job]]
        outside[v.tenant] = outside.get(v.tenant, np.zeros(len(p.flavors))) + held_flavors(p, v)
    before = running_usage_before(p)
    for ev in fixed:
        v = p.running[p.running_index[ev.job]]
        by = preemptor(view, ev.by)
        if by is None:
            continue
        if ev.by not in inside and by.within_nominal:
            for f in np.flatnonzero(by.uses > 0).tolist():
                usage = r.quota_usage.get((by.job.tenant, f))
                if usage is not None:
                    m.add(usage <= round(p.nominal[by.job.tenant, f] * 1000))
        held = held_flavors(p, v)
        slack = before[v.tenant] - (outside[v.tenant] - held) - p.nominal[v.tenant]
        ok = (held > 0) & (by.uses > 0) & (slack > 1e-9)
        if not ok.any():
            continue
        f = int(np.argmax(np.where(ok, slack, -np.inf)))  # the flavor with the most room: keep it borrowed
        model_rec = [(round(held_flavors(p, k)[f] * 1000), evict[k.index][1]) for k in r.evictable
                     if k.tenant == v.tenant and k.index in evict and held_flavors(p, k)[f] > 0]
        if model_rec:
            m.add(r.wsum((x for _, x in model_rec), (c for c, _ in model_rec)) <= math.ceil(slack[f] * 1000) - 1)


def _legal(p: Problem, victim: JobSpec, reason: str, by: Preemptor | None, others: FArray | None,
           reclaiming: BArray | None) -> bool:
    """The validator's rules for one eviction: who may evict whom, and rule 10 (it serves `by`,
    with the plan's `serving.reclaiming_flavors`)."""
    return by is not None and not eviction_problems(p, victim, reason, by, others) \
        and not serves_problems(p, victim, by, reclaiming)


def name_preemptors(p: Problem, plan: Plan, evicted: list[JobSpec], why: dict[int, Any],
                    solver: Any) -> list[Eviction] | None:
    """Evictions of `evicted` for a decoded CP-SAT plan (which may already hold other evictions):
    each one's reason from the model (``pre`` / ``rec``) and, as `by`, the first admitted
    preemptor the validator accepts. None when some eviction has no legal preemptor (the model and
    the validator disagree: a bug, so the caller falls back)."""
    reasons = {}
    for victim in evicted:
        pre, _rec, _ = why[p.running_index[victim.id]]
        reasons[victim.id] = "preempted" if solver.value(pre) else "reclaimed"
    draft = plan.model_copy(update={"evictions": [*plan.evictions, *(
        Eviction(job=v.id, reason=reasons[v.id], lost_gpu_hours=lost_gpu_hours(p, v)) for v in evicted)]})
    view = PlanView(p, draft)
    before: dict[str, FArray] = {}  # per reclaimed job: what its tenant's reclaims before it hold (P3's order)
    fixed: dict[int, FArray] = {}  # per tenant: the plan's reclaims outside the model, taken as earlier
    for ev in plan.evictions:
        if ev.reason == "reclaimed":
            v = p.running[p.running_index[ev.job]]
            fixed[v.tenant] = fixed.get(v.tenant, np.zeros(len(p.flavors))) + held_flavors(p, v)
    ours = kueue_order(p, [v for v in evicted if reasons[v.id] == "reclaimed"])
    for t in {v.tenant for v in ours}:
        acc = fixed.get(t, np.zeros(len(p.flavors)))
        for v in (v for v in ours if v.tenant == t):
            before[v.id] = acc
            acc = acc + held_flavors(p, v)
    named: dict[str, Eviction] = {}
    reclaims = [(p.running[p.running_index[ev.job]], preemptor(view, ev.by)) for ev in plan.evictions
                if ev.reason == "reclaimed"]
    reclaiming = None
    # reclaims first: a preemption may be served by keeping a reclaim legal (`serving.reclaiming_flavors`)
    for v in sorted(evicted, key=lambda v: reasons[v.id] != "reclaimed"):
        who: Preemptors = why[p.running_index[v.id]][2]
        reason = reasons[v.id]
        pool = who.pool(reason)
        others = before[v.id] if reason == "reclaimed" else None
        if reason == "preempted" and reclaiming is None:
            reclaiming = reclaiming_flavors(p, [(k, by) for k, by in reclaims if by is not None])
        by = next((j for j in pool if view.by_job.get(j.id)
                   and _legal(p, v, reason, preemptor(view, j.id), others, reclaiming)), None)
        if by is None:
            return None
        named[v.id] = Eviction(job=v.id, reason=reason, by=by.id, lost_gpu_hours=lost_gpu_hours(p, v))
        if reason == "reclaimed":
            reclaims.append((v, preemptor(view, by.id)))
    return [named[v.id] for v in evicted]
