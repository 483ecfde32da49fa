"""Kueue's fair-sharing preemption for the `kueue` baseline (pkg/scheduler/preemption/
preemption.go `fairPreemptions`, fairsharing/ordering.go; KEP-1714), on quota arithmetic.

With `Cluster.fair_sharing`, a job whose quota needs preemption takes its targets this way:

1. Its usage is added to its tenant's (Kueue's `SimulateUsageAddition`).
2. Target tenants come one at a time from `TargetOrdering`: from the root of its cohort tree down,
   the child with the highest dominant resource share (`fairshare`) that still has candidates and
   borrows (the preemptor's own tenant always qualifies); a cohort child wins ties against a
   tenant; equal tenants go by their first candidates' order.
3. A target in the preemptor's own tenant, or any target while the preemptor's tenant stays
   within nominal in the flavors needing preemption (Kueue's FairSharingPreemptWithinNominal),
   loses its first candidate. Otherwise its candidates are tried in order with the first
   strategy (S2-a by default): the first that passes goes and the target is chosen afresh; the
   ones that fail are kept for the second strategy.
4. The second strategy (S2-b) takes at most one candidate per target tenant, from those kept.
5. Once the job fits, targets are given back in reverse order while it still fits
   (`fillBackWorkloads`).

"Fits" is Kueue's `workloadFits`: the quota, and with topology-aware scheduling a topology
assignment of the pods; here the `kueue` engine's trial placement on its flavors' nodes (a round
places its jobs), with the quota checked first. The engine then places the job with the targets
released and checks the plan's rules.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from optsched.concerns.tenancy import fairshare, running
from optsched.ledger import EPS
from optsched.problem import FArray, JobSpec, Problem


class TargetOrdering:
    """Kueue's `TargetClusterQueueOrdering`: which tenant to take the next candidate from."""

    def __init__(self, p: Problem, preemptor: int, candidates: list[JobSpec]) -> None:
        self.p = p
        self.preemptor = preemptor
        rt = running.running_table(p)
        queue_usage = fairshare.running_queue_usage(p)
        self.queues: dict[int, list[JobSpec]] = {}
        """Per tenant: its candidates in Kueue's `CandidatesOrdering` within one ClusterQueue
        (highest LocalQueue usage with admission fair sharing, lowest priority, latest start, id)."""
        for v in candidates:
            self.queues.setdefault(v.tenant, []).append(v)
        for queue in self.queues.values():
            queue.sort(key=lambda v: (-float(queue_usage[v.index]), v.priority, -float(rt.started[v.index]),
                                      int(rt.id_rank[v.index])))
        self.pruned_tenants: set[int] = set()
        self.pruned_cohorts: set[int] = set()
        k = int(p.tenant_cohort[preemptor])
        self.path: set[int] = set()
        """Cohorts from the preemptor's tenant up to its root (never pruned while they have children left)."""
        while k >= 0:
            self.path.add(k)
            k = int(p.cohort_parent[k])
        self._rank = lambda v: (v.tenant == preemptor, v.priority, -float(rt.started[v.index]),
                                int(rt.id_rank[v.index]))

    def has(self, tenant: int) -> bool:
        """Whether the tenant has candidates left."""
        return bool(self.queues.get(tenant))

    def pop(self, tenant: int) -> JobSpec:
        """The tenant's next candidate (removed from its queue)."""
        return self.queues[tenant].pop(0)

    def drop(self, tenant: int) -> None:
        """Take no more candidates from the tenant (`DropQueue`)."""
        self.pruned_tenants.add(tenant)

    def next(self, used: FArray) -> int | None:
        """The next target tenant with quota usage `used` (the preemptor's job included), or None."""
        p, a = self.p, self.preemptor
        if p.tenant_cohort[a] < 0:
            return a if a not in self.pruned_tenants and self.has(a) else None
        root = int(p.tenant_root[a])
        s = fairshare.shares(p, used)
        while root not in self.pruned_cohorts:
            t = self._next_in(root, s)
            if t is not None:
                return t
        return None

    def _next_in(self, cohort: int, s: fairshare.Shares) -> int | None:
        """Kueue's `nextTarget`: the child of `cohort` with the highest share (pruning the ones
        that cannot yield candidates), descending into a cohort child; None after a pruning pass."""
        p, a = self.p, self.preemptor
        best_t, best_t_share = -1, -1.0
        for t in np.flatnonzero(p.tenant_cohort == cohort).tolist():
            if t in self.pruned_tenants:
                continue
            share = float(s.tenant[t])
            if (not s.tenant_borrows[t] and t != a) or not self.has(t):
                self.pruned_tenants.add(t)
            elif best_t >= 0 and share == best_t_share:
                if self._rank(self.queues[t][0]) < self._rank(self.queues[best_t][0]):
                    best_t = t
            elif share > best_t_share:
                best_t, best_t_share = t, share
        best_c, best_c_share = -1, -1.0
        for c in np.flatnonzero(p.cohort_parent == cohort).tolist():
            if c in self.pruned_cohorts:
                continue
            share = float(s.cohort[c])
            if not s.cohort_borrows[c] and c not in self.path:
                self.pruned_cohorts.add(c)
            elif share >= best_c_share:
                best_c, best_c_share = c, share
        if best_t < 0 and best_c < 0:
            self.pruned_cohorts.add(cohort)
            return None
        if best_c >= 0 and best_c_share >= best_t_share:
            return self._next_in(best_c, s)
        return best_t


def fair_targets(p: Problem, job: JobSpec, need: FArray, candidates: list[JobSpec], used: FArray,
                 fits: Callable[[FArray, list[JobSpec]], bool]) -> list[JobSpec]:
    """Kueue's fair-sharing targets (module docstring) for `job` needing quota `need`, from
    `candidates` (Kueue's order) with quota usage `used` (without the job); `fits(u, targets)`:
    whether the job fits with quota usage `u` (the job included) and `targets` gone (Kueue's
    `workloadFits`: its quota, and with topology-aware scheduling its pods' domains; here the
    engine's placement). Empty when no targets make it fit."""
    a = job.tenant
    now = used.copy()
    now[a] += need
    nominal = p.nominal[a]
    within = not bool(np.any((need > 0) & (now[a] > nominal + EPS * np.maximum(1.0, nominal))))
    names = fairshare.strategies(p)
    targets: list[JobSpec] = []
    retry: list[JobSpec] = []

    def take(v: JobSpec) -> bool:
        now[v.tenant] -= running.held_flavors(p, v)
        targets.append(v)
        return fits(now, targets)

    def shares_of(t: int) -> tuple[float, float, tuple[str, int]]:
        node_a, node_t = fairshare.almost_lcas(p, a, t)
        s = fairshare.shares(p, now)
        return fairshare.share_of(s, node_a), fairshare.share_of(s, node_t), node_t

    fitted = False
    ordering = TargetOrdering(p, a, candidates)
    while not fitted:
        t = ordering.next(now)
        if t is None:
            break
        if t == a or within:
            fitted = take(ordering.pop(t))
            continue
        mine, old, node_t = shares_of(t)
        while ordering.has(t):
            v = ordering.pop(t)
            after = now.copy()
            after[t] -= running.held_flavors(p, v)
            new = fairshare.share_of(fairshare.shares(p, after), node_t)
            if fairshare.strategy_holds(names[0], mine, old, new):
                fitted = take(v)
                break
            retry.append(v)
    if not fitted and len(names) > 1:
        ordering = TargetOrdering(p, a, retry)
        while not fitted:
            t = ordering.next(now)
            if t is None:
                break
            mine, old, _ = shares_of(t)
            v = ordering.pop(t)  # the rule does not depend on the candidate: the first one
            if fairshare.strategy_holds(names[1], mine, old, old):
                fitted = take(v)
            ordering.drop(t)
    if not fitted:
        return []
    for i in range(len(targets) - 2, -1, -1):  # `fillBackWorkloads`
        v = targets[i]
        now[v.tenant] += running.held_flavors(p, v)
        if fits(now, targets[:i] + targets[i + 1:]):
            del targets[i]
        else:
            now[v.tenant] -= running.held_flavors(p, v)
    return targets
