"""Kueue's fair sharing: dominant resource shares for fair-sharing preemption
(`Cluster.fair_sharing`; pkg/cache/scheduler/fair_sharing.go, KEP-1714), and LocalQueue usage for
admission fair sharing (`Cluster.admission_fair_sharing`; `QueueUsage`).

The share of a node of a cohort tree (a tenant, or a cohort with a parent) with usage `used`:
per resource (GPUs, or one of `Problem.resources`), what it borrows, summed over the flavors
counting that resource, each flavor's borrowed amount being its usage past its subtree quota (a
tenant's nominal quota; a cohort's subtree quota, `ledger.cohort_tree`); divided by what its
parent could lend of that resource (Kueue's `potentialAvailable`, summed over the flavors), times
1,000; the largest over resources, divided by the node's weight (`Tenant.weight`,
`Cohort.weight`). A node without a parent, or borrowing nothing, has share 0. Shares are compared between
the two nodes just below the lowest cohort that holds both tenants (Kueue's "almost least common
ancestors"): in a flat cohort, the tenants themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from optsched.concerns.tenancy.running import held_flavors, running_usage_before
from optsched.ledger import EPS, PlacedReplica, cohort_tree, flavor_use
from optsched.problem import BArray, Derived, FArray, JobSpec, Problem

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel

FINAL_SHARE = "less_than_or_equal_to_final_share"
"""Rule S2-a: the preemptor's share with its job is at most the target's share after the eviction."""
INITIAL_SHARE = "less_than_initial_share"
"""Rule S2-b: the preemptor's share with its job is below the target's share before the eviction."""


@dataclass(frozen=True)
class Shares:
    """Dominant resource shares of every tenant and cohort for one usage (`shares`)."""

    tenant: FArray
    """Per tenant: its weighted share."""
    cohort: FArray
    """Per cohort: its weighted share (0 for a root)."""
    tenant_borrows: BArray
    """Per tenant: whether it uses more than its nominal quota of some flavor (Kueue's `IsBorrowing`)."""
    cohort_borrows: BArray
    """Per cohort with a parent: whether it uses more than its subtree quota of some flavor."""


def enabled(p: Problem) -> bool:
    """Whether the cluster runs Kueue's fair sharing (`Cluster.fair_sharing`)."""
    return p.cluster.fair_sharing is not None


def strategies(p: Problem) -> list[str]:
    """The configured fair-sharing preemption strategies, in order (none when fair sharing is off)."""
    fs = p.cluster.fair_sharing
    return [] if fs is None else list(fs.preemption_strategies)


def shares(p: Problem, used: FArray) -> Shares:
    """Every tenant's and cohort's dominant resource share with quota usage `used` (T x F)."""
    n_t, n_c = len(p.tenant_names), len(p.cohort_names)
    out = Shares(np.zeros(n_t), np.zeros(n_c), np.zeros(n_t, dtype=bool), np.zeros(n_c, dtype=bool))
    if not len(p.flavors) or not n_c:
        return out
    _, sq, u, lq = cohort_tree(p, used)
    lendable = _potential_available(p, sq, lq)
    for t in np.flatnonzero(p.tenant_cohort >= 0).tolist():
        borrowed = used[t] - p.nominal[t]
        out.tenant[t], out.tenant_borrows[t] = _share(p, borrowed, lendable[p.tenant_cohort[t]], EPS)
        out.tenant[t] /= float(p.tenant_weight[t])
    weight = {c.name: c.weight for c in p.cluster.cohorts}
    for k in np.flatnonzero(p.cohort_parent >= 0).tolist():
        out.cohort[k], out.cohort_borrows[k] = _share(p, u[k] - sq[k], lendable[p.cohort_parent[k]], EPS)
        out.cohort[k] /= weight.get(p.cohort_names[k], 1.0)
    return out


def lendable(p: Problem) -> FArray:
    """Kueue's `potentialAvailable` per cohort and flavor (cohorts x flavors): what a tenant of the
    cohort could borrow at most, the denominator of its share (it depends on quotas only)."""
    if not len(p.flavors) or not len(p.cohort_names):
        return np.zeros((len(p.cohort_names), len(p.flavors)))
    _, sq, _, lq = cohort_tree(p, np.zeros((len(p.tenant_names), len(p.flavors))))
    return _potential_available(p, sq, lq)


def _potential_available(p: Problem, sq: FArray, lq: FArray) -> FArray:
    """Kueue's `potentialAvailable` per cohort and flavor: a root's subtree quota; below it, the
    cohort's local quota plus its parent's, capped by its subtree quota plus its borrowing limit."""
    out = np.zeros_like(sq)
    for k in p.cohort_order[::-1].tolist():  # parents first
        parent = int(p.cohort_parent[k])
        if parent < 0:
            out[k] = sq[k]
        else:
            out[k] = np.minimum(lq[k] + out[parent], sq[k] + p.cohort_borrow[k])
    return out


def _share(p: Problem, borrowed: FArray, lendable: FArray, tol: float) -> tuple[float, bool]:
    """(unweighted share, borrows) of a node borrowing `borrowed` per flavor (negative: unused)
    from a parent that could lend `lendable` per flavor."""
    over = borrowed > tol * np.maximum(1.0, np.abs(borrowed))
    if not over.any():
        return 0.0, False
    res = p.flavor_resource
    best = 0.0
    for r in np.unique(res[over]).tolist():
        b = float(borrowed[over & (res == r)].sum())
        lend = float(lendable[res == r].sum())
        if lend > 0:
            best = max(best, b * 1000.0 / lend)
    return best, True


def almost_lcas(p: Problem, a: int, b: int) -> tuple[tuple[str, int], tuple[str, int]]:
    """The nodes just below the lowest cohort holding tenants `a` and `b` (same cohort tree), on
    `a`'s and on `b`'s path: ("tenant", index) or ("cohort", index). Kueue compares their shares."""
    def path(t: int) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = [("tenant", t)]
        k = int(p.tenant_cohort[t])
        while k >= 0:
            out.append(("cohort", k))
            k = int(p.cohort_parent[k])
        return out

    pa, pb = path(a)[::-1], path(b)[::-1]  # root first
    i = 0
    while i < min(len(pa), len(pb)) and pa[i] == pb[i]:
        i += 1
    return pa[min(i, len(pa) - 1)], pb[min(i, len(pb) - 1)]


def share_of(s: Shares, node: tuple[str, int]) -> float:
    """The share of a node as `almost_lcas` names it."""
    kind, k = node
    return float(s.tenant[k] if kind == "tenant" else s.cohort[k])


def strategy_holds(name: str, preemptor_share: float, target_before: float, target_after: float) -> bool:
    """Whether strategy `name` lets a preemptor of share `preemptor_share` (its job included)
    evict from a target whose share is `target_before`, `target_after` the eviction: S2-a
    ``preemptor <= after``, S2-b ``preemptor < before`` (within a relative tolerance)."""
    tol = EPS * max(1.0, abs(preemptor_share))
    if name == FINAL_SHARE:
        return preemptor_share <= target_after + tol
    return preemptor_share < target_before - tol


def strategy_passes(p: Problem, preemptor_share: float, target_before: float, target_after: float) -> bool:
    """Whether some configured strategy holds (`strategy_holds`)."""
    return any(strategy_holds(name, preemptor_share, target_before, target_after) for name in strategies(p))


def strategy_problems(p: Problem, victim: JobSpec, tenant: int, uses: FArray, others_reclaimed: FArray | None,
                      own_freed: FArray | None = None) -> list[str]:
    """Why fair sharing does not let a preemptor of `tenant` using `uses` (per flavor) in the plan,
    above its tenant's nominal quota, reclaim `victim` (rule 6's fair-sharing clause,
    `preemption.eviction_problems`), the jobs of the victim's tenant reclaimed before it (quota
    usage `others_reclaimed`) gone first: no configured strategy holds (`strategy_passes`). Shares
    are Kueue's (`shares`), of the two tenants' almost least common ancestors, on the round's
    starting usage (`running_usage_before`, as rule 5 reads it: admitting more jobs never makes an
    eviction illegal): the preemptor's with its usage in the plan added and its own tenant's jobs it
    preempts (`own_freed`) gone (Kueue takes those as targets too, and may take them first), the
    target's before and after the victim's removal. Kueue computes them on its cache at that
    moment of its cycle."""
    start = running_usage_before(p)
    a, b = tenant, victim.tenant
    node_a, node_b = almost_lcas(p, a, b)
    with_job = start.copy()
    with_job[a] += uses
    if own_freed is not None:
        with_job[a] -= own_freed
    mine = share_of(shares(p, with_job), node_a)
    before = start.copy()
    if others_reclaimed is not None:
        before[b] -= others_reclaimed
    old = share_of(shares(p, before), node_b)
    after = before.copy()
    after[b] -= held_flavors(p, victim)
    new = share_of(shares(p, after), node_b)
    if strategy_passes(p, mine, old, new):
        return []
    return [f"fair sharing: the preemptor's share with its job {mine:.6g} is above the victim's tenant's share "
            f"after the eviction {new:.6g} and not below it before {old:.6g} (strategies "
            f"{strategies(p)})"]


STRATEGY_SCALE = 10_000
"""Integer scale of the fair-sharing share comparison (P2f): both sides' coefficients are scaled so
that the larger is this, rounded against the reclaim (the preemptor's up, the victim's down)."""

STRATEGY_MARGIN = 1e-5
"""Relative and absolute margin of a strict comparison (S2-b alone) in P2f: above the validator's
tolerance (`ledger.EPS` x share)."""


def strategies_cpsat(r: RoundModel, pairs: list[tuple[JobSpec, JobSpec, int, str, Any]],
                     reclaimed: dict[int, list[tuple[JobSpec, Any, int]]], orders: dict[int, dict[str, int]],
                     used_before: FArray, may_use: dict[int, BArray]) -> None:
    """P2f, fair sharing in a flat cohort, for `preemption.cpsat`: ``fair[j,k]`` (j reclaims k
    without ending within its nominal quota; `pairs`: (j, k, k's reclaimed flavor, strategy,
    literal)) only when the strategy holds (`strategy_problems`), in a sound
    restriction. The preemptor's share with its usage is bounded above: per resource R,
    ``X[j,R] = Σ_{f∈R} b[j,f]`` with ``b[j,f] ≥ start[t_j,f] + use[j,f] − nominal[t_j,f]``, ``b ≥ 0``
    (its own preempted jobs not subtracted). The victim's tenant's share is bounded below by the
    resource R_k of the reclaimed flavor alone, its borrowing summed with sign:
    ``Y[k] = Σ_{f∈R_k} (start[t_k,f] − nominal[t_k,f] − held[k,f] − Σ_{o before k} held[o,f] rec[o])``
    over its tenant's reclaims before k in Kueue's order (P3, `orders` per tenant). S2-a:
    ``X[j,R] · L_{R_k} w_k ≤ Y[k] · L_R w_j`` and ``Y[k] ≥ 0``, L the cohort's lendable per
    resource (`lendable`), w the weights; S2-b: the same with ``Y`` before k's removal
    and a margin (`STRATEGY_MARGIN`). One literal per configured strategy: either lets j reclaim k.
    Units: usage x 1000, as the quota rows."""
    p, m = r.p, r.model
    start = running_usage_before(p)
    res = p.flavor_resource
    lend = lendable(p)
    excess: dict[tuple[int, int], Any] = {}

    def over(j: JobSpec, f: int) -> Any:  # b[j,f]: j's tenant's usage past nominal with j's usage added
        got = excess.get((j.index, f))
        if got is None:
            base = round((start[j.tenant, f] - p.nominal[j.tenant, f]) * 1000)
            keys = r.job_keys(j.index)
            coefs = [round(flavor_use(p, j.groups[key[1]], key[2])[f] * 1000) for key in keys]
            use = r.wsum((r.y[key] for key, c in zip(keys, coefs, strict=True) if c), (c for c in coefs if c))
            most = max(0, base) + sum(c * j.groups[key[1]].rmax for key, c in zip(keys, coefs, strict=True))
            got = excess[(j.index, f)] = m.new_int_var(0, max(0, most), f"fair_over[{j.index},{f}]")
            m.add(got >= base + use)
        return got

    for j, victim, f_k, strategy, lit in pairs:
        final = strategy == FINAL_SHARE
        a, b = j.tenant, victim.tenant
        cohort = int(p.tenant_cohort[b])
        r_k = int(res[f_k])
        group_k = np.flatnonzero(res == r_k)
        lend_k = float(lend[cohort, group_k].sum())
        if lend_k <= 0:
            m.add(lit == 0)
            continue
        held = held_flavors(p, victim)
        rank = orders[b]
        y_const = sum(round((used_before[b, f] - p.nominal[b, f] - (held[f] if final else 0.0)) * 1000)
                      for f in group_k.tolist())
        earlier = [(round(float(held_flavors(p, o)[group_k].sum()) * 1000), rec) for o, rec, _ in reclaimed[b]
                   if rank[o.id] < rank[victim.id]]
        earlier = [(c, v) for c, v in earlier if c]
        y = y_const - r.wsum((v for _, v in earlier), (c for c, _ in earlier)) if earlier else y_const
        m.add(y >= 0).only_enforce_if(lit)
        usable = may_use[j.index]  # `preemption.possible_flavors`
        for r_a in np.unique(res).tolist():  # every resource: the share is the largest over them
            group_a = np.flatnonzero(res == r_a)
            lend_a = float(lend[cohort, group_a].sum())
            if lend_a <= 0:
                continue
            alpha = lend_k * float(p.tenant_weight[b])  # on the preemptor's borrowing
            beta = lend_a * float(p.tenant_weight[a])  # on the victim's tenant's
            if not final:
                beta *= 1.0 - STRATEGY_MARGIN
            top = max(alpha, beta)
            ca, cb = math.ceil(alpha / top * STRATEGY_SCALE), math.floor(beta / top * STRATEGY_SCALE)
            x_terms = [over(j, f) if usable[f] else max(0, round((start[a, f] - p.nominal[a, f]) * 1000))
                       for f in group_a.tolist()]
            margin = 0 if final else math.ceil(STRATEGY_MARGIN * STRATEGY_SCALE * alpha * beta / top)
            m.add(ca * r.sum(x_terms) + margin <= cb * y).only_enforce_if(lit)


# ---------------------------------------------------------------------------- admission fair sharing
# Kueue's admission fair sharing (pkg/util/admissionfairsharing, pkg/cache/queue/cluster_queue.go
# `queueOrderingFunc`; docs/concepts/admission_fair_sharing.md). In a tenant (ClusterQueue) with
# `admission_fair_sharing`, when the cluster configures it, pending jobs are ordered by their
# LocalQueue's usage, lowest first, then as usual (priority, then age). A LocalQueue's usage is its
# decayed consumption (`LocalQueue.consumed`) plus the entry penalties of the jobs admitted since,
# each resource weighted (`resource_weights`, 1 when not listed) and summed in Kueue's units
# (cores, bytes, devices), divided by the queue's weight (0: infinite). An admitted job's penalty
# is its requests x ``1 - 0.5^(sampling interval / half life)`` (Kueue's `CalculateEntryPenalty`).
# A job naming no LocalQueue has usage 0. Kueue also orders preemption candidates of one
# ClusterQueue from different LocalQueues by usage, highest first (preemption/common/ordering.go).

KUEUE_UNIT = {"cpu": 1e-3, "memory": float(1 << 20)}
"""Factor from optsched's unit to Kueue's for the usage sum: millicores to cores, MiB to bytes
(Kueue sums `Quantity.AsApproximateFloat64`); other resources and GPUs count as they are."""


class QueueUsage:
    """The LocalQueues' admission fair-sharing usage over a round, penalties included."""

    def __init__(self, p: Problem) -> None:
        self.p = p
        afs = p.cluster.admission_fair_sharing
        self.on = afs is not None
        self.tenants = {i for i, t in enumerate(p.cluster.tenants) if t.admission_fair_sharing} if self.on else set()
        """Tenants whose queues it orders."""
        self.alpha = 0.0 if afs is None or afs.usage_half_life_s <= 0 else \
            1.0 - 0.5 ** (afs.usage_sampling_interval_s / afs.usage_half_life_s)
        self.weights = dict(afs.resource_weights) if afs is not None else {}
        self.queues = {q.name: q for q in p.cluster.local_queues}
        self.penalty: dict[str, dict[str, float]] = {}
        """Per LocalQueue: entry penalties of the jobs admitted this round, optsched's units."""

    def orders(self, tenant: int) -> bool:
        """Whether the tenant's pending jobs are ordered by LocalQueue usage."""
        return tenant in self.tenants

    def usage(self, queue: str | None) -> float:
        """The LocalQueue's usage now (0 for none)."""
        if queue is None or queue not in self.queues:
            return 0.0
        q = self.queues[queue]
        added = self.penalty.get(queue, {})
        total = 0.0
        for name in sorted(set(q.consumed) | set(added)):  # sorted, as Kueue sums them
            amount = q.consumed.get(name, 0.0) + added.get(name, 0.0)
            total += self.weights.get(name, 1.0) * amount * KUEUE_UNIT.get(name, 1.0)
        return math.inf if q.weight <= 0 else total / q.weight

    def admitted(self, job: JobSpec, replicas: list[PlacedReplica]) -> None:
        """Add the entry penalty of an admitted job (its placed replicas' requests) to its queue."""
        queue = job.spec.local_queue
        if queue is None or not self.orders(job.tenant) or not self.alpha:
            return
        added = self.penalty.setdefault(queue, {})
        for r in replicas:
            g = job.groups[r.group]
            if g.gpu:
                added["gpu"] = added.get("gpu", 0.0) + self.alpha * g.gpu
            for name, amount in zip(self.p.resources, g.req.tolist(), strict=True):
                if amount:
                    added[name] = added.get(name, 0.0) + self.alpha * amount


def running_queue_usage(p: Problem) -> FArray:
    """Per running job, its LocalQueue's usage at the round's start (`QueueUsage`; 0 where its
    tenant does not order by it): Kueue's candidate order within a ClusterQueue."""
    return p.derived(RUNNING_QUEUE_USAGE)


def _running_queue_usage(p: Problem) -> FArray:
    usage = QueueUsage(p)
    out = np.array([usage.usage(j.spec.local_queue) if usage.orders(j.tenant) else 0.0 for j in p.running],
                   dtype=float)
    out.setflags(write=False)
    return out


RUNNING_QUEUE_USAGE: Derived[FArray] = Derived("fairshare.running_queue_usage", _running_queue_usage)
