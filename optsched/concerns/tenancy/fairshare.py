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

import numpy as np

from optsched.ledger import EPS, PlacedReplica, cohort_tree
from optsched.problem import BArray, FArray, JobSpec, Problem

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
