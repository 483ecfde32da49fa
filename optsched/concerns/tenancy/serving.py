"""Concern: an eviction serves its preemptor (hard rule 10).

The preemption rules (`concerns.tenancy.preemption`) say who may evict whom; they do not say
that what the eviction frees is what the preemptor needed. Without this rule a plan may evict a
job for a preemptor placed elsewhere and give the victim's room to jobs that could not have
preempted it (measured before the rule on mixed-cloud-10k at 1 s: 204 of CP-SAT's 206 evictions
named a preemptor on none of the victim's nodes, and 187 were served by neither clause below).

An eviction with reason ``preempted`` or ``reclaimed`` serves its preemptor `by` when
- (room) `by` has a replica on a node the victim held: kube-scheduler's DefaultPreemption picks
  its victims on the node the pod is nominated to; or
- (quota) putting the victim's quota usage back into the plan's final usage, in a flavor the
  victim holds and the preemptor uses, breaks a quota rule (`ledger.quota_broken`: nominal,
  borrowing limit, cohort lending) for the victim's or the preemptor's tenant that the plan does
  not break, or takes the victim's tenant above its nominal quota of a flavor that one of its
  jobs reclaimed within nominal (that reclaim would become illegal: `reclaiming_flavors`; the
  `kueue` baseline's tenant that reclaimed within nominal preempts its own jobs rather than
  borrow). Kueue preempts for quota with minimal victim sets (`minimalPreemptions`), so each of
  its victims is needed.

Both clauses are judged on the final plan, so the rule is monotone in admissions: placing more
jobs never makes a served eviction unserved. ``migrated`` evictions are not preemptions.

The CP-SAT encoding (S1-S3, docs/formulation.md) is a sufficient form of the rule: the room
clause exactly, the quota clause through the tenant's own limit (nominal without a cohort, the
borrowing limit in one) and, in a flat cohort, the cohort's total usage above its members'
summed nominal quota (then its members borrow more than they could lend whatever the lending
limits). A plan it decodes is judged by the validator like any other.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from optsched.concerns.base import Violation
from optsched.concerns.tenancy.preemption import (
    Preemptor,
    eviction_problems,
    may_evict_literal,
    preemptor,
    uses_literal,
)
from optsched.concerns.tenancy.running import held_flavors
from optsched.ledger import EPS, quota_broken
from optsched.problem import BArray, JobSpec, Problem
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel

SCALE = 1000
"""Fixed-point scale of quota usage in the CP-SAT model (the quota concern's)."""


def victim_nodes(victim: JobSpec) -> frozenset[int]:
    """The nodes (indices) a running job holds."""
    return frozenset(pl.node for pl in victim.placements)


def reclaiming_flavors(p: Problem, reclaims: list[tuple[JobSpec, Preemptor]]) -> BArray:
    """(tenants x flavors): the flavors each tenant's reclaiming preemptors use, among the
    reclaims (victim, preemptor) that are legal only while the preemptor's tenant ends within its
    nominal quota (`reclaim_within_cohort`; not those `borrow_within_cohort` allows anyway)."""
    out = np.zeros((len(p.tenant_names), len(p.flavors)), dtype=bool)
    for victim, by in reclaims:
        if by.within_nominal and eviction_problems(p, victim, "reclaimed", replace(by, within_nominal=False)):
            out[by.job.tenant] |= by.uses > 0
    return out


def serves_problems(p: Problem, victim: JobSpec, by: Preemptor, reclaiming: BArray | None = None) -> list[str]:
    """Why evicting `victim` does not serve its preemptor `by` (empty when it does: module
    docstring), with `reclaiming` the plan's `reclaiming_flavors` (None: none). One message."""
    if by.nodes & victim_nodes(victim):
        return []
    if quota_serves(p, victim, by.job.tenant, shared_flavors(p, victim, by), by.final, reclaiming):
        return []
    return [f"its preemptor {by.job.id} has no replica on the nodes the victim held, and putting the victim back "
            "breaks no quota rule in a flavor both use: the eviction serves no preemptor"]


def shared_flavors(p: Problem, victim: JobSpec, by: Preemptor) -> BArray:
    """The flavors the victim holds and its preemptor uses (the quota clause looks at no other)."""
    return (held_flavors(p, victim) > 0) & (by.uses > 0)


def quota_serves(p: Problem, victim: JobSpec, tenant: int, shared: BArray, final: Any,
                 reclaiming: BArray | None = None) -> bool:
    """The quota clause: putting `victim` back into the plan's final usage `final` (tenants x
    flavors) breaks, in a `shared` flavor, a quota rule for the victim's tenant or the preemptor's
    `tenant` that `final` keeps, or lifts the victim's tenant above nominal in a flavor it
    reclaims within nominal (`reclaiming`). It depends on the preemptor only through `tenant` and
    `shared`, so a caller naming one of many preemptors may cache it on them."""
    if not shared.any():
        return False
    restored = final.copy()
    restored[victim.tenant] += held_flavors(p, victim)
    for t in sorted({victim.tenant, tenant}):
        if np.any(shared & quota_broken(p, restored, t) & ~quota_broken(p, final, t)):
            return True
    if reclaiming is not None and len(p.cluster.tenants) > victim.tenant:
        t = victim.tenant
        tol = EPS * np.maximum(1.0, p.nominal[t])
        lifted = (restored[t] > p.nominal[t] + tol) & (final[t] <= p.nominal[t] + tol)
        return bool(np.any(shared & reclaiming[t] & lifted))
    return False


def check(view: PlanView) -> list[Violation]:
    """Rule 10 for every ``preempted`` and ``reclaimed`` eviction with an admitted preemptor (one
    without is the preemption rule's violation)."""
    p = view.problem
    out: list[Violation] = []
    named = [(ev, p.running[p.running_index[ev.job]], preemptor(view, ev.by)) for ev in view.evicted.values()
             if ev.reason != "migrated"]
    reclaiming = plan_reclaiming(p, [(v, ev.reason, by) for ev, v, by in named])
    for ev, victim, by in named:
        if by is not None:
            out.extend(Violation("serving", msg, job=ev.job, values={"reason": ev.reason, "by": ev.by})
                       for msg in serves_problems(p, victim, by, reclaiming))
    return out


def plan_reclaiming(p: Problem, evictions: list[tuple[JobSpec, str, Preemptor | None]]) -> BArray:
    """`reclaiming_flavors` of a plan's evictions (victim, reason, preemptor)."""
    return reclaiming_flavors(p, [(v, by) for v, reason, by in evictions if reason == "reclaimed" and by is not None])


# ---------------------------------------------------------------------------- CP-SAT
def _margin(limit: float) -> int:
    """Thousandths above `limit` that make a break the validator sees (its tolerance, and one)."""
    return max(1, math.ceil(EPS * max(1.0, abs(limit)) * SCALE) + 1)


def _usage(r: RoundModel, t: int, f: int) -> Any:
    """Tenant t's usage of flavor f after the round, in thousandths (a constant where the model
    changes nothing of it)."""
    got = r.quota_usage.get((t, f))
    return got if got is not None else round(float(r.base.quota_used[t, f]) * SCALE)


def _break_literals(r: RoundModel, t: int, f: int, held: float, cohort_wide: bool) -> list[Any]:
    """Literals each of which, when true, makes tenant t's quota of flavor f break with `held`
    (the victim's usage of it) put back (S2): over the tenant's nominal quota without a cohort,
    over its borrowing limit in one, and, in a flat cohort, the members' total usage over their
    summed nominal quota. With `cohort_wide` only the last (a reclaim: the victim's tenant may
    add no usage, so the plan need not keep its own limits; its preemptor's tenant does, so the
    cohort's rule is kept)."""
    p, m = r.p, r.model
    if t >= len(p.cluster.tenants):
        return []  # a tenant without a definition has no quota
    h = round(held * SCALE)
    out = []
    cohort = int(p.tenant_cohort[t])
    limits = []
    if cohort < 0 and not cohort_wide:
        limits.append(float(p.nominal[t, f]))
    elif not cohort_wide and not math.isinf(p.borrow_limit[t, f]):
        limits.append(float(p.nominal[t, f] + p.borrow_limit[t, f]))
    for limit in limits:
        lit = m.new_bool_var(f"breaks[{t},{f}]")
        m.add(_usage(r, t, f) + h >= round(limit * SCALE) + _margin(limit)).only_enforce_if(lit)
        out.append(lit)
    if cohort >= 0 and not p.hierarchical:
        members: list[int] = np.flatnonzero(p.tenant_cohort == cohort).tolist()
        total = float(p.nominal[members, f].sum())
        lit = m.new_bool_var(f"cohort_breaks[{cohort},{f}]")
        m.add(r.sum(_usage(r, u, f) for u in members) + h >= round(total * SCALE) + _margin(total)).only_enforce_if(lit)
        out.append(lit)
    return out


def _on_nodes(r: RoundModel, victim: JobSpec) -> dict[int, list[Any]]:
    """Per queued job of the model, its count variables on the nodes `victim` holds."""
    out: dict[int, list[Any]] = {}
    for v in sorted(victim_nodes(victim)):
        for key in r.by_node.get(v, ()):
            out.setdefault(key[0], []).append(r.y[key])
    return out


def _served_by(r: RoundModel, allowed: Any, on: list[Any], name: str) -> Any:
    """A literal, or a sum, that is positive only when a preemptor whose eviction of the victim
    is allowed when `allowed` holds has a replica on the victim's nodes (count variables `on`)."""
    if allowed is None:
        return r.sum(on)  # a replica implies its admission, which is all the rule asks
    lit = r.model.new_bool_var(name)
    r.model.add(lit <= allowed)
    r.model.add(r.sum(on) >= 1).only_enforce_if(lit)
    return lit


def cpsat(r: RoundModel) -> None:
    """CP-SAT: every eviction the model decides serves its preemptor (S1-S3, module docstring).

    Per evictable job k with ``pre[k]`` / ``rec[k]`` from the preemption encoding:
    ``pre[k] <= sum over the allowed same-tenant preemptors j of y[j, ., n] on k's nodes n
    (through a literal where rule 5 may bar j) + sum over the flavors f that k holds of
    q[k, f]``, where ``q[k, f]`` needs an allowed preemptor admitted on f and a literal of
    `_break_literals` for k's tenant and f (S1, S2); ``rec[k] <= sum over k's reclaimers j of
    (j may reclaim k and has a replica on k's nodes) + qr[k]``, where ``qr[k]`` needs the flat
    cohort's break on the reclaimed flavor (S3: every reclaimer uses it).
    """
    p, m = r.p, r.model
    evict = r.device_plan.get("evict", {})
    if not evict:
        return
    capped: dict[int, Any] = r.device_plan["may_evict"]
    vias: dict[int, list[tuple[JobSpec, Any]]] = r.device_plan["via"]
    admitted_on: dict[tuple[int, int], Any] = {}  # (job, flavor) -> admitted, allowed by rule 5, using f
    anyone_on: dict[tuple[tuple[int, ...], int], Any] = {}  # (preemptors, flavor) -> one of them uses it
    for victim in r.evictable:
        k = p.running_index[victim.id]
        pre, rec, who = evict[k]
        on = _on_nodes(r, victim)
        held = held_flavors(p, victim)
        served: list[Any] = []  # S1: pre's room clause
        for j in who.same:
            if j.index in on:
                may = may_evict_literal(r, j, capped)
                served.append(_served_by(r, None if may is r.a[j.index] else may, on[j.index], f"room[{j.index},{k}]"))
        same = tuple(j.index for j in who.same)
        for f in np.flatnonzero(held > 0).tolist() if same else []:  # S2: pre's quota clause
            breaks = _break_literals(r, victim.tenant, f, float(held[f]), cohort_wide=False)
            if not breaks:
                continue
            users = anyone_on.get((same, f))
            if users is None:
                users = anyone_on[(same, f)] = m.new_bool_var(f"preemptor_uses[{k},{f}]")
                m.add(users <= r.sum(_admitted_on(r, j, f, admitted_on) for j in who.same))
            q = m.new_bool_var(f"quota_serves[{k},{f}]")
            m.add(q <= r.sum(breaks))
            m.add(q <= users)
            served.append(q)
        m.add(pre <= r.sum(served))
        reclaimed = [_served_by(r, lit, on[j.index], f"reclaim_room[{j.index},{k}]")  # S3
                     for j, lit in vias.get(k, []) if j.index in on]
        if who.flavor >= 0 and vias.get(k):  # rec <= sum of vias names an allowed reclaimer using the flavor
            reclaimed.extend(_break_literals(r, victim.tenant, who.flavor, float(held[who.flavor]), cohort_wide=True))
        m.add(rec <= r.sum(reclaimed))


def _admitted_on(r: RoundModel, j: JobSpec, f: int, cache: dict[tuple[int, int], Any]) -> Any:
    """A literal that holds only when `j` is admitted, rule 5 lets it evict, and it uses flavor f."""
    lit = cache.get((j.index, f))
    if lit is None:
        may = may_evict_literal(r, j, r.device_plan["may_evict"])
        uses = uses_literal(r, j, f, r.device_plan["uses"])
        if may is r.a[j.index]:
            lit = uses
        else:
            lit = r.model.new_bool_var(f"admitted_on[{j.index},{f}]")
            r.model.add(lit <= may)
            r.model.add(lit <= uses)
        cache[(j.index, f)] = lit
    return lit
