"""Concern: tenant quotas with cohort borrowing and lending (hard rule 5; fairness term).

Kueue semantics, per tenant t and flavor f with usage u, nominal N, borrowing limit B and
lending limit L (L defaults to N):

- a tenant without a cohort: u <= N;
- in a cohort: borrowed b = max(0, u - N) <= B, and the cohort's borrowing never exceeds what
  its members lend: sum_t b_t <= sum_t min(L_t, max(0, N_t - u_t)).

Usage counts GPUs of a device model (fractional shares as fractions) against the flavor named
after the model, resources (cpu, memory, ...) against flavors named after them, and either on a
ResourceFlavor's nodes against ``<flavor>/<gpu or resource>`` (`Problem.flavor_nodes`).
The fairness term is the weighted DRF deviation (see `term`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from optsched.concerns import eligibility
from optsched.concerns.base import Violation
from optsched.concerns.tenancy import running
from optsched.ledger import (
    EPS,
    Ledger,
    PlacedReplica,
    cohort_tree,
    counted_flavors,
    flavor_class,
    flavor_use,
    quota_broken,
)
from optsched.problem import BArray, FArray, JobSpec, Problem
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel


def problems(p: Problem, used: FArray, touched: BArray | None = None) -> list[tuple[str, str, dict[str, float]]]:
    """(rule, message, numbers) for every quota rule broken by usage `used` (T x F).

    With `touched` (T x F, true where new usage was added), only those tenant/flavor pairs and
    the cohorts containing them are reported.
    """
    out: list[tuple[str, str, dict[str, float]]] = []
    if not len(p.flavors):
        return out
    tol = EPS * np.maximum(1.0, p.nominal)
    touched = np.ones_like(used, dtype=bool) if touched is None else touched
    solo = p.tenant_cohort < 0
    has_quota_defs = np.zeros(len(p.tenant_names), dtype=bool)
    has_quota_defs[: len(p.cluster.tenants)] = True
    over_solo = solo[:, None] & has_quota_defs[:, None] & (used > p.nominal + tol) & touched
    for t, f in zip(*np.nonzero(over_solo), strict=True):
        out.append(("quota", f"tenant {p.tenant_names[t]} uses {used[t, f]:g} {p.flavors[f]} > nominal "
                             f"{p.nominal[t, f]:g} (no cohort to borrow from)",
                    {"used": float(used[t, f]), "nominal": float(p.nominal[t, f])}))
    borrowed = np.maximum(0.0, used - p.nominal)
    over_b = ~solo[:, None] & (borrowed > p.borrow_limit + tol) & touched
    for t, f in zip(*np.nonzero(over_b), strict=True):
        out.append(("quota", f"tenant {p.tenant_names[t]} borrows {borrowed[t, f]:g} {p.flavors[f]} > "
                             f"borrowing_limit {p.borrow_limit[t, f]:g}",
                    {"borrowed": float(borrowed[t, f]), "borrowing_limit": float(p.borrow_limit[t, f])}))
    if p.hierarchical:
        out.extend(tree_problems(p, used, touched))
        return out
    lendable = np.minimum(p.lend_limit, np.maximum(0.0, p.nominal - used))
    for c in np.unique(p.tenant_cohort[~solo]):
        members = p.tenant_cohort == c
        b = borrowed[members].sum(axis=0)
        lent = lendable[members].sum(axis=0)
        hit = (b > lent + EPS * np.maximum(1.0, lent)) & touched[members].any(axis=0)
        for f in np.flatnonzero(hit):
            out.append(("quota", f"cohort of {[p.tenant_names[t] for t in np.flatnonzero(members)]} borrows "
                                 f"{b[f]:g} {p.flavors[f]} but lends only {lent[f]:g}",
                        {"borrowed": float(b[f]), "lendable": float(lent[f])}))
    return out


def tree_problems(p: Problem, used: FArray, touched: BArray) -> list[tuple[str, str, dict[str, float]]]:
    """The cohort rules of hierarchical cohorts (`cohort_tree`), reported where a tenant of the
    cohort's subtree gets new usage: a root uses at most its subtree quota, another cohort at
    most its subtree quota plus its borrowing limit."""
    out: list[tuple[str, str, dict[str, float]]] = []
    order, sq, u, _ = cohort_tree(p, used)
    inside = np.zeros((len(p.cohort_names), len(p.flavors)), dtype=bool)  # a touched tenant below
    member = p.tenant_cohort >= 0
    np.logical_or.at(inside, p.tenant_cohort[member], touched[member])
    for k in order:
        parent = int(p.cohort_parent[k])
        if parent >= 0:
            inside[parent] |= inside[k]
    for k in order:
        limit = sq[k] if p.cohort_parent[k] < 0 else sq[k] + p.cohort_borrow[k]
        hit = (u[k] > limit + EPS * np.maximum(1.0, limit)) & inside[k]
        for f in np.flatnonzero(hit):
            what = "its subtree's quota" if p.cohort_parent[k] < 0 else "its subtree's quota plus its borrowing limit"
            out.append(("quota", f"cohort {p.cohort_names[k]} uses {u[k, f]:g} {p.flavors[f]} > {what} {limit[f]:g}",
                        {"used": float(u[k, f]), "limit": float(limit[f])}))
    return out


def job_problem(p: Problem, ledger: Ledger, job: JobSpec, placed: Sequence[PlacedReplica]) -> tuple[str, str] | None:
    """Search primitive: ("quota", detail) when the job's tenant breaks a quota rule with the
    usage in `ledger` (the job's own replicas `placed` already in it)."""
    if not len(p.flavors):
        return None
    if not quota_broken(p, ledger.quota_used, job.tenant).any():
        return None  # the tenant's rules alone, as `problems` judges them (tested equal): 13 us against 32 (one-off)
    touched = np.zeros_like(ledger.quota_used, dtype=bool)
    touched[job.tenant] = True
    broken = problems(p, ledger.quota_used, touched)
    return ("quota", broken[0][1]) if broken else None


def min_need(p: Problem, job: JobSpec, left: FArray) -> FArray:
    """Quota (per flavor) the job's minimum replicas need. Per group and per thing it asks for
    (GPUs, each resource): when the flavors counting it cover every node the group may use, its
    minimum replicas count against the one of them with the most of `left` (the tenant's nominal
    quota left; Kueue tries a workload's flavors in order and takes the first that fits), the
    only one when a single flavor covers them all; when some such node counts it nowhere, the
    replicas may avoid quota and nothing is needed."""
    need = np.zeros(len(p.flavors))
    if not len(p.flavors):
        return need
    res = p.flavor_resource
    for g in job.groups:
        if g.rmin <= 0:
            continue
        usable = eligibility.mask(p, job, g)
        counted = counted_flavors(p, g)
        for what in np.unique(res[counted]).tolist():
            cols = np.flatnonzero(counted & (res == what) & (p.flavor_nodes & usable).any(axis=1))
            if not len(cols) or not p.flavor_nodes[cols][:, usable].any(axis=0).all():
                continue  # some usable node counts it nowhere
            amount = g.gpu if what < 0 else float(g.req[what])
            best = max(cols.tolist(), key=lambda f: left[f] - need[f])
            need[best] += amount * g.rmin
    return need


def deferral(p: Problem, used: FArray, job: JobSpec) -> str | None:
    """Why quota defers `job` after a plan with quota usage `used` (T x F): the first rule its
    minimum replicas would break (tenant, flavor, amount over), or None when quota lets it in."""
    need = min_need(p, job, p.nominal[job.tenant] - used[job.tenant])
    if not need.any():
        return None
    after = used.copy()
    after[job.tenant] += need
    touched = np.zeros_like(used, dtype=bool)
    touched[job.tenant] = need > 0
    broken = problems(p, after, touched)
    return broken[0][1] if broken else None


def check(view: PlanView) -> list[Violation]:
    """Quota rules after the plan, reported where the plan added usage."""
    touched = view.new_usage.quota_used > EPS
    return [Violation(rule, msg, values=vals)
            for rule, msg, vals in problems(view.problem, view.ledger.quota_used, touched)]


def tenant_usage(view: PlanView) -> FArray:
    """Usage (T x fairness dimensions: each resource, then GPUs per device model, `_dims`) held
    by each tenant after the plan."""
    p = view.problem
    usage = np.zeros((len(p.tenant_names), len(p.resources) + len(p.models)))
    held = [(j, [(pl.group, pl.node) for pl in j.placements]) for j in view.kept]
    held += [(j, [(r.group, r.node) for r in view.by_job[j.id]]) for j in view.placed_jobs()]
    for job, pls in held:
        for g, n in pls:
            usage[job.tenant] += _dims(p, job.groups[g], n)
    return usage


def term(view: PlanView) -> dict[str, float]:
    """`fairness`: sum over tenants of |dominant share - weighted fair share of the total|.

    The dominant share of a tenant is its largest share of any resource or device model in the
    cluster (DRF, Ghodsi et al. NSDI'11); its fair share is its weight's fraction of the summed
    dominant shares. 0 means usage is split exactly by weight; the unit is a fraction of the
    cluster.
    """
    p = view.problem
    if len(p.tenant_names) < 2:
        return {"fairness": 0.0}
    cap = _capacities(p)
    ds = (tenant_usage(view) / np.where(cap > 0, cap, np.inf)).max(axis=1)
    fair = p.tenant_weight / p.tenant_weight.sum() * ds.sum()
    return {"fairness": float(np.abs(ds - fair).sum())}


FAIR_SCALE = 10_000
"""Shares of the cluster are modelled in 1/10,000 (rounded up per tenant and dimension)."""


def _capacities(p: Problem) -> FArray:
    """Cluster capacity per fairness dimension: each resource, then each device model (GPUs),
    on real (not provisionable) nodes, as `term` measures it."""
    real = ~p.node_provisioned
    cap_r = p.cap[real].sum(axis=0)
    cap_m = np.bincount(p.node_model[real & (p.node_model >= 0)],
                        weights=p.node_dev_count[real & (p.node_model >= 0)], minlength=len(p.models))
    out: FArray = np.concatenate([cap_r, cap_m])
    return out


def _dims(p: Problem, group: Any, node: int) -> FArray:
    """Usage per fairness dimension of one replica of `group` on `node`."""
    use = np.zeros(len(p.resources) + len(p.models))
    use[: len(p.resources)] = group.req
    if group.gpu > 0 and p.node_model[node] >= 0:
        use[len(p.resources) + int(p.node_model[node])] = group.gpu
    return use


def fairness_cpsat(r: RoundModel) -> None:
    """CP-SAT: the `fairness` term (F1-F3), built only when the objective asks for it.

    Per tenant t and dimension d (resource or device model) with capacity C_d: usage u_td = fixed
    usage (running jobs the model keeps for sure, and placements outside a neighbourhood) +
    sum keep[k] x use_kd + sum y[j,g,v] x use_gd(v); share s_td = ceil(FAIR_SCALE x u_td / C_d)
    (F1); dominant share ds_t = max_d s_td (F2); deviation dev_t >= |W x ds_t - w_t x sum ds|
    with integer weights w_t (W = sum w_t) (F3). The term sum dev_t equals
    FAIR_SCALE x W x `term`'s value, up to the rounding of shares.
    """
    p, m = r.p, r.model
    n_t = len(p.tenant_names)
    if "fairness" not in r.wanted or n_t < 2:
        return
    cap = _capacities(p)
    dims = np.flatnonzero(cap > 0)
    amount = 1000.0  # usage in thousandths (GPU shares of 0.25, fractional requests)
    fixed = np.zeros((n_t, len(cap)))
    hint_evicted = {ev.job for ev in r.hint.evictions} if r.hint is not None else set()
    inside = {v.id for v in r.evictable}
    for job in p.running:
        if job.id not in hint_evicted and job.id not in inside:
            for held in job.placements:
                fixed[job.tenant] += _dims(p, job.groups[held.group], held.node)
    ids = {j.id for j in r.jobs}
    for pl in r.hint.placements if r.hint is not None else []:
        if pl.job not in ids:
            queued = p.jobs[p.job_index[pl.job]]
            fixed[queued.tenant] += _dims(p, queued.groups[queued.group_index[pl.group]], p.node_index[pl.node])
    parts: dict[tuple[int, int], list[tuple[int, Any]]] = {}
    for job in r.evictable:
        use = sum((_dims(p, job.groups[pl.group], pl.node) for pl in job.placements), np.zeros(len(cap)))
        for d in dims[use[dims] > 0].tolist():
            parts.setdefault((job.tenant, d), []).append((round(use[d] * amount), r.keep[job.index]))
    cache: dict[tuple[int, int, int], FArray] = {}
    for key, var in r.y.items():
        job = p.jobs[key[0]]
        ck = (key[0], key[1], int(p.node_model[key[2]]))
        per = cache.get(ck)
        if per is None:
            per = cache[ck] = _dims(p, job.groups[key[1]], key[2])
        for d in dims[per[dims] > 0].tolist():
            parts.setdefault((job.tenant, d), []).append((round(per[d] * amount), var))
    weights = [max(1, round(float(w) * 1000)) for w in p.tenant_weight]
    total_w = sum(weights)
    ds = []
    for t in range(n_t):
        shares = []
        for d in dims.tolist():
            c = round(cap[d] * amount)
            usage = round(fixed[t, d] * amount) + r.wsum((v for _, v in parts.get((t, d), [])),
                                                          (a for a, _ in parts.get((t, d), [])))
            s = m.new_int_var(0, FAIR_SCALE, f"share[{t},{d}]")
            m.add(c * s >= FAIR_SCALE * usage)  # F1: s = ceil(FAIR_SCALE x usage / C)
            m.add(c * s <= FAIR_SCALE * usage + c - 1)
            shares.append(s)
        dt = m.new_int_var(0, FAIR_SCALE, f"ds[{t}]")
        m.add_max_equality(dt, shares)  # F2
        ds.append(dt)
    total_ds = r.sum(ds)
    devs = []
    for t in range(n_t):
        dev = m.new_int_var(0, 2 * FAIR_SCALE * total_w * n_t, f"fair_dev[{t}]")
        gap = total_w * ds[t] - weights[t] * total_ds
        m.add(dev >= gap)  # F3
        m.add(dev >= -gap)
        devs.append(dev)
    r.add_term("fairness", r.sum(devs), FAIR_SCALE * total_w, maximise=False)
    r.term_ub["fairness"] = 2 * FAIR_SCALE * total_w * n_t


def cpsat(r: RoundModel) -> None:
    """CP-SAT: nominal, borrowing and lending per tenant and flavor, in thousandths (Q1-Q3).

    Usage = the kept running jobs in `base` + evictable running jobs while kept + new placements.
    As in the validator, the rules of a tenant/flavor hold where the plan adds usage to it
    (``touched[t, f]``), and a cohort's lending rule where it adds usage to any member's flavor:
    a limit that the running jobs already break binds only a plan that adds to it. The total
    usage per tenant and flavor is left in `r.quota_usage` for other concerns.
    """
    p, m = r.p, r.model
    if not len(p.flavors):
        return
    scale = 1000
    new: dict[tuple[int, int], list[tuple[int, Any]]] = {}
    kept: dict[tuple[int, int], list[tuple[int, Any]]] = {}
    uses: dict[tuple[int, int, int], list[tuple[int, int]]] = {}  # per (job, group, node flavor class)
    classes = flavor_class(p)
    for key, var in r.y.items():
        job = p.jobs[key[0]]
        cls = int(classes[key[2]])
        use = uses.get((key[0], key[1], cls))
        if use is None:
            vec = flavor_use(p, job.groups[key[1]], key[2])
            use = [(f, round(vec[f] * scale)) for f in np.flatnonzero(vec > 0).tolist()]
            uses[(key[0], key[1], cls)] = use
        for f, amount in use:
            new.setdefault((job.tenant, f), []).append((amount, var))
    for job in r.evictable:
        held = running.held_flavors(p, job)
        for f in np.flatnonzero(held > 0).tolist():
            kept.setdefault((job.tenant, f), []).append((round(held[f] * scale), r.keep[p.running_index[job.id]]))
    base = r.base.quota_used
    n_defined = len(p.cluster.tenants)
    usage_new = {tf: r.wsum((v for _, v in parts), (c for c, _ in parts)) for tf, parts in new.items()}
    usage_kept = {tf: r.wsum((v for _, v in parts), (c for c, _ in parts)) for tf, parts in kept.items()}
    for tf in set(usage_new) | set(usage_kept):  # total usage, for the preemption concern
        r.quota_usage[tf] = round(base[tf] * scale) + usage_kept.get(tf, 0) + usage_new.get(tf, 0)
    touched: dict[tuple[int, int], Any] = {}
    fixed = r.touched_fixed
    for t, f in set(usage_new) | set(usage_kept):
        if fixed is not None and fixed[t, f]:
            touched[(t, f)] = 1  # placements outside the model add usage here: the rules bind
        elif (t, f) in usage_new:
            touched[(t, f)] = m.new_bool_var(f"touched[{t},{f}]")
            m.add(usage_new[(t, f)] == 0).only_enforce_if(touched[(t, f)].Not())
        else:
            continue
        if p.tenant_cohort[t] < 0 and t < n_defined:  # Q1
            total = usage_new.get((t, f), 0) + usage_kept.get((t, f), 0)
            _enforce(m.add(total <= math.floor((p.nominal[t, f] - base[t, f]) * scale + 1e-6)), touched[(t, f)])
    if p.hierarchical:
        _tree_cpsat(r, new, kept, usage_new, usage_kept, touched, scale)
        return
    for c in np.unique(p.tenant_cohort[p.tenant_cohort >= 0]).tolist():
        members: list[int] = np.flatnonzero(p.tenant_cohort == c).tolist()
        for f in range(len(p.flavors)):
            if not any((t, f) in touched for t in members):
                continue
            borrowed, lendable = [], []
            for t in members:
                nominal, used = round(p.nominal[t, f] * scale), round(base[t, f] * scale)
                usage = used + usage_kept.get((t, f), 0) + usage_new.get((t, f), 0)
                # its largest value: every variable of its usage at its upper bound (a tight
                # bound keeps the MILP translation's big-M rows small)
                most = used + sum(c * r.model_ub(v) for c, v in new.get((t, f), []) + kept.get((t, f), []))
                b = m.new_int_var(0, max(most - nominal, 0), f"borrow[{t},{f}]")
                m.add(b >= usage - nominal)  # Q2
                if not math.isinf(p.borrow_limit[t, f]) and (t, f) in touched:
                    _enforce(m.add(b <= round(p.borrow_limit[t, f] * scale)), touched[(t, f)])
                room = m.new_int_var(0, max(nominal, 0), f"room[{t},{f}]")
                m.add_max_equality(room, [0, nominal - usage])
                lend = m.new_int_var(0, round(p.lend_limit[t, f] * scale), f"lend[{t},{f}]")
                m.add(lend <= room)
                borrowed.append(b)
                lendable.append(lend)
            q3 = m.add(r.sum(borrowed) <= r.sum(lendable))  # Q3, where some member is touched
            if not any(isinstance(touched.get((t, f)), int) for t in members):
                any_touched = m.new_bool_var(f"touched[cohort {c},{f}]")
                for t in members:
                    if (t, f) in touched:
                        m.add_implication(touched[(t, f)], any_touched)
                q3.only_enforce_if(any_touched)


def _tree_cpsat(r: RoundModel, new: dict[tuple[int, int], list[tuple[int, Any]]],
                kept: dict[tuple[int, int], list[tuple[int, Any]]], usage_new: dict[tuple[int, int], Any],
                usage_kept: dict[tuple[int, int], Any], touched: dict[tuple[int, int], Any], scale: int) -> None:
    """CP-SAT: hierarchical cohorts (Q2h-Q3h), per tree and flavor where a member is touched: each
    tenant within nominal + borrowing limit; over[n] = max(0, U[n] - LQ[n]) for tenants and
    cohorts (U of a cohort: the sum of its children's over), U[c] <= SQ[c] + borrowing limit for
    inner cohorts and U[root] <= SQ[root] (`ledger.cohort_tree`; SQ and LQ do not depend on usage)."""
    p, m = r.p, r.model
    order, sq, _, lq = cohort_tree(p, np.zeros_like(p.nominal))
    t_lq = p.nominal - p.lend_limit
    base = r.base.quota_used
    roots = p.tenant_root
    for root in np.unique(roots[roots >= 0]).tolist():
        members: list[int] = np.flatnonzero(roots == root).tolist()
        cohorts = [k for k in order if p.cohort_root[k] == root]
        for f in range(len(p.flavors)):
            if not any((t, f) in touched for t in members):
                continue
            lit: Any = 1
            if not any(isinstance(touched.get((t, f)), int) for t in members):
                lit = m.new_bool_var(f"touched[tree {root},{f}]")
                for t in members:
                    if (t, f) in touched:
                        m.add_implication(touched[(t, f)], lit)
            parts: dict[int, list[tuple[Any, int]]] = {k: [] for k in cohorts}  # (over var, its ub)
            for t in members:
                used = round(base[t, f] * scale)
                usage = used + usage_kept.get((t, f), 0) + usage_new.get((t, f), 0)
                if not math.isinf(p.borrow_limit[t, f]) and (t, f) in touched:  # Q2h
                    _enforce(m.add(usage <= math.floor((p.nominal[t, f] + p.borrow_limit[t, f]) * scale + 1e-6)),
                             touched[(t, f)])
                most = used + sum(c * r.model_ub(v) for c, v in new.get((t, f), []) + kept.get((t, f), []))
                local = round(t_lq[t, f] * scale)
                over = m.new_int_var(0, max(most - local, 0), f"over[{t},{f}]")
                m.add_max_equality(over, [0, usage - local])
                parts[int(p.tenant_cohort[t])].append((over, max(most - local, 0)))
            for k in cohorts:  # children first
                if not parts[k]:
                    continue
                total = r.sum(v for v, _ in parts[k])
                parent = int(p.cohort_parent[k])
                limit = sq[k, f] if parent < 0 else sq[k, f] + p.cohort_borrow[k, f]
                if not math.isinf(limit):  # Q3h
                    _enforce(m.add(total <= math.floor(limit * scale + 1e-6)), lit)
                if parent >= 0:
                    ub = sum(u for _, u in parts[k])
                    local = round(lq[k, f] * scale)
                    over = m.new_int_var(0, max(ub - local, 0), f"over[cohort {k},{f}]")
                    m.add_max_equality(over, [0, total - local])
                    parts[parent].append((over, max(ub - local, 0)))


def _enforce(ct: Any, touched: Any) -> None:
    """Make a constraint conditional on a `touched` literal (1: unconditional)."""
    if not isinstance(touched, int):
        ct.only_enforce_if(touched)
