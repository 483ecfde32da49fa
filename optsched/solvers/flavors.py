"""Kueue's flavor assignment for the `kueue` baseline (pkg/scheduler/flavorassigner/flavorassigner.go).

Before nodes, Kueue assigns each podset a ResourceFlavor per resource, trying the ClusterQueue's
flavors in order with quota checked per flavor, as its FlavorFungibility says; the pods then go
to that flavor's nodes. `FlavorAssigner` does this on the `kueue` engine's usage and evictions:
a GPU group over the flavors counting GPUs (device models, ``<resource flavor>/gpu``), a CPU
group over a resource that ResourceFlavors split (``<flavor>/cpu``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sized
from dataclasses import dataclass, field

import numpy as np

from optsched.concerns import eligibility, gang
from optsched.concerns.tenancy import preemption, quota, running
from optsched.ledger import (
    EPS,
    QUOTA_ROWS,
    Ledger,
    counted_flavors,
    flavor_class,
    flavor_use,
    plain_quota,
    quota_broken,
    quota_broken_rows,
)
from optsched.problem import BArray, Derived, FArray, GroupSpec, JobSpec, Problem


@dataclass(frozen=True)
class FlavorAssignment:
    """Kueue's flavor assignment of a job (`FlavorAssigner.assign`)."""

    need: FArray
    """Quota the job's minimum replicas need per flavor on the assigned flavors."""
    flavors: dict[int, int]
    """Group index -> the flavor assigned (its nodes); groups not listed keep every node."""
    no_fit: str
    """Why no flavor can take the job (Kueue's `noFit`), or empty."""
    later: dict[int, list[int]] = field(default_factory=dict)
    """Group index -> the later flavors in its tenant's order whose quota also fits."""


def _cohort_lendable(p: Problem, cohort: int) -> list[float]:
    members = p.tenant_cohort == cohort
    out: list[float] = np.minimum(p.nominal[members], p.lend_limit[members]).sum(axis=0).tolist()
    return out


COHORT_LENDABLE: Derived[list[float]] = Derived("flavors.cohort_lendable", _cohort_lendable)
"""Per cohort: what its members may lend per flavor (nominal, at most the lending limit), summed."""


@dataclass(frozen=True)
class _Step:
    """One group's flavor choice in `FlavorAssigner._assign_now`, for one assignment of the groups
    before it: all of it that does not depend on the usage (`FlavorAssigner._step`)."""

    order: list[int]
    """The flavors the group may try, in its tenant's order (`_order_of`)."""
    base: FArray
    """The job's need with the groups before it assigned (`_need_for`)."""
    trials: list[FArray]
    """Per flavor of `order`: the need with the group on it."""
    trial_rows: list[list[float]]
    """`trials` as lists."""
    touched: list[list[int]]
    """Per flavor of `order`: the flavors its need holds more of than `base`."""


class FlavorAssigner:
    """Kueue's flavor assignment of jobs on a round's usage (`ledger.quota_used`), with the running
    jobs still `alive` and the round's `evicted` so far (the `kueue` engine's, shared, not copied:
    only their number is read, the version of `alive` an assignment was made at)."""

    def __init__(self, p: Problem, ledger: Ledger, alive: BArray, evicted: Sized) -> None:
        self.p = p
        self.ledger = ledger
        self.alive = alive
        self.evicted = evicted
        self._fixed: dict[int, FlavorAssignment] = {}
        """Assignments fixed while a job is admitted (`fix`); others are computed afresh."""
        self._memo: dict[tuple[int, bytes, int], FlavorAssignment] = {}
        """`assign` by (job, quota usage, evictions so far): a head is asked several times per step."""
        self._needs: dict[tuple[int, tuple[tuple[int, int], ...]], FArray] = {}
        """`_need_for` by (job, assigned flavors): it does not depend on usage."""
        self._eligible_flavors: dict[tuple[Hashable, int], bool] = {}
        """(replica shape (`eligibility.shape_key`), flavor) -> some node of the flavor may hold
        a replica of that shape (it depends on the group's eligible nodes alone)."""
        self._quantity: dict[tuple[Hashable, bool], int | None] = {}
        """(replica shape (`eligibility.shape_key`), asks for GPUs) -> `_assigned_quantity` (it
        depends on the nodes the group may use and what it asks for, nothing else)."""
        self._listed: dict[tuple[int, int], list[int]] = {}
        """(tenant, what) -> `_listed_flavors`."""
        self._covers: dict[tuple[Hashable, bool, int | None], list[int]] = {}
        """(replica shape, asks for GPUs, assigned flavor) -> `_covering`."""
        self._signatures: dict[int, Hashable] = {}
        """`_signature` by job."""
        self._chosen: dict[Hashable, list[int]] = {}
        """`_choosing`'s group indices by job signature."""
        self._steps: dict[tuple[Hashable, int, tuple[tuple[int, int], ...]], _Step] = {}
        """`_step` by (job signature, group, the flavors of the groups before it)."""
        self._least: dict[tuple[int, tuple[tuple[int, int], ...]], FArray] = {}
        """`least_uses` by (job, assigned flavors)."""

    def fix(self, job: JobSpec, assignment: FlavorAssignment | None = None) -> FlavorAssignment:
        """Fix the job's assignment while it is admitted (placement, preemption trials): the one
        given, else the one computed now; returns it."""
        if assignment is None:
            self._fixed.pop(job.index, None)
            assignment = self.assign(job)
        self._fixed[job.index] = assignment
        return assignment

    def assign(self, job: JobSpec) -> FlavorAssignment:
        """Kueue's flavor assignment (pkg/scheduler/flavorassigner/flavorassigner.go) for the job's
        minimum replicas. Each GPU group tries the flavors counting GPUs (device models, or
        ``<resource flavor>/gpu``), a CPU group those of a resource that ResourceFlavors split
        (``<flavor>/cpu``), in the order its tenant lists their quotas, with the usage of the
        groups before it, its other requests counted on the same nodes' flavors; with the
        default FlavorFungibility (`when_can_borrow: may_stop_search`, `when_can_preempt:
        try_next_flavor`) the first flavor whose quota fits, borrowing or not, is taken, and one
        that needs preemption is passed over for a later one that fits; `try_next_flavor` for
        borrowing prefers a later flavor that fits without borrowing, `may_stop_search` for
        preemption takes the first flavor that may preempt. When none fits, the first that may
        preempt (rule 5, and a running job there the policies allow) is taken, else the first
        that may preempt at all, else none (`noFit`). A flavor the tenant lists no quota for is
        not tried (the ClusterQueue lacks it), nor one none of whose nodes may hold the group
        (`_flavor_eligible`). A group with nothing to assign (`_assigned_quantity`) keeps every
        node, as does a job of an undefined tenant."""
        known = self._fixed.get(job.index)
        if known is not None:
            return known
        state = (job.index, self.ledger.quota_used.tobytes(), len(self.evicted))
        known = self._memo.get(state)
        if known is None:
            known = self._memo[state] = self._assign_now(job)
        return known

    def borrows(self, job: JobSpec) -> bool:
        """Whether admitting the job on its assignment (`assign`) would take its tenant above
        nominal in some flavor. Plain Python over the flavors (the same float operations as the
        array form): the queue order asks it of every tenant's head at each step."""
        p = self.p
        if not len(p.flavors):
            return False
        nominal = p.derived(QUOTA_ROWS)[0][job.tenant]
        for u, x, n in zip(self.ledger.quota_used[job.tenant].tolist(), self.assign(job).need.tolist(), nominal,
                           strict=True):
            if u + x > n + EPS * (n if n > 1.0 else 1.0):
                return True
        return False

    def share_value(self, job: JobSpec) -> float:
        """Kueue's fair-sharing share value of the job's tenant with the job admitted on its
        assignment: the largest share, over flavors, of the cohort's lendable quota
        (`COHORT_LENDABLE`) that the tenant borrows, divided by its weight (positive); 0 outside
        a cohort. Plain Python over the flavors, as `borrows`."""
        p = self.p
        t = job.tenant
        cohort = int(p.tenant_cohort[t])
        if cohort < 0 or not len(p.flavors):
            return 0.0
        lendable = p.derived(COHORT_LENDABLE, cohort)
        largest = -math.inf
        for u, x, n, lend in zip(self.ledger.quota_used[t].tolist(), self.assign(job).need.tolist(),
                                 p.derived(QUOTA_ROWS)[0][t], lendable, strict=True):
            borrowed = u + x - n
            borrowed = borrowed if borrowed > 0.0 else 0.0
            ratio = borrowed / lend if lend > EPS else (math.inf if borrowed > EPS else 0.0)
            largest = ratio if ratio > largest else largest
        return largest / float(p.tenant_weight[t])

    def _assign_now(self, job: JobSpec) -> FlavorAssignment:
        """`assign` computed for the round's state now (the usage and the evictions so far)."""
        p = self.p
        t = job.tenant
        flavors: dict[int, int] = {}
        later: dict[int, list[int]] = {}
        if t >= len(p.cluster.tenants) or not len(p.flavors):
            return FlavorAssignment(quota.min_need(p, job, p.nominal[t] - self.ledger.quota_used[t]), flavors, "")
        fungibility = p.cluster.tenants[t].flavor_fungibility
        used = self.ledger.quota_used
        rows = used.tolist() if plain_quota(p, t) else None
        for g in self._choosing(job):
            step = self._step(job, g, flavors)
            order = step.order
            if not order:
                return FlavorAssignment(step.base, flavors,
                                        f"its tenant {p.tenant_names[t]} lists no quota for a flavor whose nodes "
                                        f"may hold group {g.spec.name}")
            fits: list[int] = []
            fits_nominal: list[int] = []
            preempt_in: list[int] = []
            for f, trial, trial_row, touched_at in zip(order, step.trials, step.trial_rows, step.touched,
                                                       strict=True):
                broken, over_nominal = self._quota_verdict(t, rows, trial, step.base, trial_row, touched_at)
                if not broken:
                    fits.append(f)
                    if not over_nominal:
                        fits_nominal.append(f)
                else:
                    after = used.copy()
                    after[t] += trial
                    if not self.no_fit(job, trial, after):
                        preempt_in.append(f)
            if fungibility.when_can_borrow == "try_next_flavor" and fits_nominal:
                fits = fits_nominal + [f for f in fits if f not in fits_nominal]
            if fungibility.when_can_preempt == "may_stop_search" and preempt_in:
                first_preempt = order.index(preempt_in[0])
                if not fits or order.index(fits[0]) > first_preempt:
                    fits = []  # the first flavor that may preempt comes before any that fits: take it
            if fits:
                flavors[g.index] = fits[0]
                later[g.index] = fits[1:]
            elif preempt_in:
                flavors[g.index] = next((f for f in preempt_in if self._victims_hold(job, f)), preempt_in[0])
            else:
                return FlavorAssignment(self._need_for(job, flavors), flavors,
                                        f"no flavor group {g.spec.name} may use fits its tenant's quota, and none "
                                        "may preempt for it")
        return FlavorAssignment(self._need_for(job, flavors), flavors, "", later)

    def _quota_verdict(self, t: int, rows: list[list[float]] | None, trial: FArray, base: FArray,
                       trial_row: list[float], touched_at: list[int]) -> tuple[bool, bool]:
        """Whether tenant `t`'s usage now (`rows`: `ledger.quota_used` as nested lists where
        `ledger.plain_quota` holds, else None) with a trial assignment's need `trial` added breaks
        a quota rule (`ledger.quota_broken`), and whether it exceeds nominal, in the flavors the
        trial needs more of than `base` (the groups assigned before it; the second is not judged,
        and reported True, when the first holds). Plain Python on the flavors touched where it can
        (the same float operations as the array form), from `trial` as a list (`trial_row`) and
        the flavors it needs more of (`touched_at`: `_Step`)."""
        p = self.p
        if rows is None:
            after = self.ledger.quota_used.copy()
            after[t] += trial
            touched = trial > base + EPS
            broken = bool(np.any(quota_broken(p, after, t) & touched))
            nominal = p.nominal[t]
            return broken, bool(np.any((after[t] > nominal + EPS * np.maximum(1.0, nominal)) & touched))
        mine = [u + x for u, x in zip(rows[t], trial_row, strict=True)]
        if any(quota_broken_rows(p, [*rows[:t], mine, *rows[t + 1:]], t, touched_at)):
            return True, True
        nominal_row = p.derived(QUOTA_ROWS)[0][t]
        return False, any(mine[f] > nominal_row[f] + EPS * (nominal_row[f] if nominal_row[f] > 1.0 else 1.0)
                          for f in touched_at)

    def _signature(self, job: JobSpec) -> Hashable:
        """What `_choosing` and `_step` read of a job: its tenant (the flavors it lists quota for)
        and per group its replica shape (eligible nodes: the flavors that cover them, the quantity
        assigned), GPUs, request and minimum count (the needs). Jobs with equal signatures share
        them (kept per job)."""
        known = self._signatures.get(job.index)
        if known is None:
            p = self.p
            known = self._signatures[job.index] = (job.tenant, tuple(
                (eligibility.shape_key(p, job, g), g.gpu, g.req.tobytes(), g.rmin) for g in job.groups))
        return known

    def _choosing(self, job: JobSpec) -> list[GroupSpec]:
        """The job's groups that have a flavor to assign (`_assigned_quantity`), in order (kept per
        job signature, `_signature`)."""
        key = self._signature(job)
        known = self._chosen.get(key)
        if known is None:
            known = self._chosen[key] = [g.index for g in job.groups if self._assigned_quantity(job, g) is not None]
        return [job.groups[i] for i in known]

    def _step(self, job: JobSpec, group: GroupSpec, flavors: dict[int, int]) -> _Step:
        """What `_assign_now` reads, apart from the usage, to choose the flavor of `group` after
        the groups before it got `flavors`: its flavors in order and the needs they give (kept per
        job signature, `_signature`)."""
        key = (self._signature(job), group.index, tuple(flavors.items()))
        known = self._steps.get(key)
        if known is None:
            what = self._assigned_quantity(job, group)
            assert what is not None  # `_choosing` lists only such groups
            order = self._order_of(job, group, what)
            base = self._need_for(job, flavors)
            trials = [self._need_for(job, {**flavors, group.index: f}) for f in order]
            base_row = base.tolist()
            rows = [trial.tolist() for trial in trials]
            touched = [[f for f, (x, b) in enumerate(zip(row, base_row, strict=True)) if x > b + EPS] for row in rows]
            known = self._steps[key] = _Step(order, base, trials, rows, touched)
        return known

    def _need_for(self, job: JobSpec, flavors: dict[int, int]) -> FArray:
        """Quota the job's minimum replicas need per flavor with GPU groups on the nodes of the
        flavors `flavors` assigns them (others on every node they may use): for each thing a group
        asks for, the one flavor counting it on all those nodes (none when several split them or
        some node counts it nowhere: the replicas may avoid quota; `quota.min_need` picks then).
        Read-only (kept, and shared by the assignments that carry it)."""
        key = (job.index, tuple(sorted(flavors.items())))
        known = self._needs.get(key)
        if known is not None:
            return known
        p = self.p
        need = np.zeros(len(p.flavors))
        res = p.flavor_resource
        for g in job.groups:
            if g.rmin <= 0:
                continue
            for f in self._covering(job, g, flavors.get(g.index)):
                need[f] += (g.gpu if res[f] < 0 else float(g.req[res[f]])) * g.rmin
        need.setflags(write=False)
        self._needs[key] = need
        return need

    def least_uses(self, job: JobSpec) -> FArray:
        """Per flavor, a lower bound of the quota usage of every placement of the job on its
        assigned flavors (read-only): a gang (or ratio) job places each group's target count,
        another job at least one replica of some group (the greedy engine's `place_in`), and a
        replica uses at least the least a replica of its group uses on an existing node it may take
        (eligible, on its assigned flavor's nodes). The `kueue` engine's quota precheck reads it."""
        p = self.p
        flavors = self.assign(job).flavors
        key = (job.index, tuple(sorted(flavors.items())))
        known = self._least.get(key)
        if known is not None:
            return known
        counts = gang.target_counts(job) or [0] * len(job.groups)
        classes = flavor_class(p)
        per_group = []
        for group, count in zip(job.groups, counts, strict=True):
            nodes = eligibility.mask(p, job, group) & ~p.node_provisioned
            if group.index in flavors:
                nodes = nodes & p.flavor_nodes[flavors[group.index]]
            at = np.flatnonzero(nodes)
            if not count or not len(at):
                continue  # places nothing (a gang job then places nothing at all)
            _, first = np.unique(classes[at], return_index=True)
            per_replica = np.min([flavor_use(p, group, int(n)) for n in at[first]], axis=0)
            per_group.append(per_replica * count if job.gang or job.ratios else per_replica)
        if not per_group:
            least = np.zeros(len(p.flavors))
        elif job.gang or job.ratios:
            least = np.sum(per_group, axis=0)
        else:
            least = np.min(per_group, axis=0)
        least.setflags(write=False)
        self._least[key] = least
        return least

    def _covering(self, job: JobSpec, group: GroupSpec, flavor: int | None) -> list[int]:
        """The flavors counting what the group asks for on every node it may use (on `flavor`'s
        nodes, when one is assigned): per replica shape, since they depend on nothing else."""
        key = (eligibility.shape_key(self.p, job, group), group.gpu > 0, flavor)
        known = self._covers.get(key)
        if known is None:
            p = self.p
            nodes = eligibility.mask(p, job, group)
            if flavor is not None:
                nodes = nodes & p.flavor_nodes[flavor]
            known = [] if not nodes.any() else \
                np.flatnonzero(counted_flavors(p, group) & p.flavor_nodes[:, nodes].all(axis=1)).tolist()
            self._covers[key] = known
        return known

    def _assigned_quantity(self, job: JobSpec, group: GroupSpec) -> int | None:
        """What the group's flavor is assigned by: its GPUs (-1) when it asks for devices, else the
        first resource it requests that flavors count on only some nodes (a resource group of
        ResourceFlavors, ``<flavor>/cpu``); None when nothing is to assign: every usable node must
        be counted by a flavor of that quantity (else its replicas may avoid quota), and a
        resource counted on every node by one flavor needs no choice."""
        key = (eligibility.shape_key(self.p, job, group), group.gpu > 0)
        if key in self._quantity:
            return self._quantity[key]
        p = self.p
        res = p.flavor_resource
        usable = eligibility.mask(p, job, group)
        counted = counted_flavors(p, group)
        candidates = [-1] if group.gpu > 0 else sorted({int(r) for r in res[counted] if r >= 0})
        out = None
        for what in candidates:
            cols = counted & (res == what)
            if not cols.any() or not p.flavor_nodes[cols][:, usable].any(axis=0).all():
                continue
            if what < 0 or not p.flavor_nodes[cols][:, usable].all(axis=1).any():  # a choice to make
                out = what
                break
        self._quantity[key] = out
        return out

    def _order_of(self, job: JobSpec, group: GroupSpec, what: int) -> list[int]:
        """The flavors counting `what` that the group may try, in its tenant's order: those it
        lists quota for (`_listed_flavors`) whose nodes may hold the group (`_flavor_eligible`;
        kept with the group's steps, `_step`)."""
        return [f for f in self._listed_flavors(job.tenant, what) if self._flavor_eligible(job, group, f)]

    def _flavor_eligible(self, job: JobSpec, group: GroupSpec, flavor: int) -> bool:
        """Whether some node of `flavor` may ever hold a replica of `group` (`eligibility.mask`):
        Kueue skips a flavor whose node labels and taints the pod does not match; a flavor none
        of whose nodes has the pod's shape would leave it pending, so it is skipped too."""
        key = (eligibility.shape_key(self.p, job, group), flavor)
        known = self._eligible_flavors.get(key)
        if known is None:
            known = self._eligible_flavors[key] = bool(
                np.any(eligibility.mask(self.p, job, group) & self.p.flavor_nodes[flavor]))
        return known

    def _listed_flavors(self, tenant: int, what: int) -> list[int]:
        """Flavors counting `what` (-1: GPUs, else a resource index) whose quota the tenant lists,
        in its order (its ClusterQueue's flavors; kept, it depends on the problem alone)."""
        known = self._listed.get((tenant, what))
        if known is None:
            index = {name: f for f, name in enumerate(self.p.flavors)}
            known = self._listed[tenant, what] = [
                index[k] for k in self.p.cluster.tenants[tenant].quotas if self.p.flavor_resource[index[k]] == what]
        return known

    def next_flavors(self, job: JobSpec, assignment: FlavorAssignment) -> FlavorAssignment | None:
        """The assignment with each GPU group that has one on its next flavor whose quota fits, or
        None: what Kueue tries when the assigned flavor's nodes cannot hold the pods (topology-aware
        scheduling finds no room there, so the flavor does not fit and the next is tried)."""
        if not any(assignment.later.values()):
            return None
        flavors = dict(assignment.flavors)
        later = {g: list(rest) for g, rest in assignment.later.items()}
        for g, rest in later.items():
            if rest:
                flavors[g] = rest.pop(0)
        return FlavorAssignment(self._need_for(job, flavors), flavors, "", later)

    def _victims_hold(self, job: JobSpec, flavor: int) -> bool:
        """Whether some running job the tenant's policies may let the job preempt or reclaim holds
        `flavor` (the question Kueue's preemption oracle answers before it takes a flavor that
        needs preemption; here by priority and policy alone)."""
        p = self.p
        policy = p.cluster.tenants[job.tenant].preemption
        rt = running.running_table(p)
        ok = self.alive & rt.preemptible & (rt.held[:, flavor] > 0)
        lower = rt.priority < job.priority
        same = (rt.tenant == job.tenant) & (lower if policy.within_tenant != "never" else False)
        cohort = int(p.tenant_root[job.tenant])
        other = np.zeros_like(same)
        if cohort >= 0 and policy.reclaim_within_cohort != "never":
            other = (rt.tenant != job.tenant) & (p.tenant_root[rt.tenant] == cohort) \
                & (lower | (policy.reclaim_within_cohort == "any"))
        return bool(np.any(ok & (same | other)))

    def no_fit(self, job: JobSpec, need: FArray, after: FArray | None = None) -> bool:
        """Kueue's `noFit` for a job whose quota needs preemption: a flavor needing it is requested
        beyond the tenant's nominal quota and `borrow_within_cohort` is off (flavorassigner.go
        `fitsResourceQuota`; rule 5 of the validator). `after`: the usage with `need` added."""
        p = self.p
        if preemption.preempts_while_borrowing(p, job.tenant):
            return False
        over = need > p.nominal[job.tenant] + EPS * np.maximum(1.0, p.nominal[job.tenant])
        if not over.any():
            return False
        if after is None:
            after = self.ledger.quota_used.copy()
            after[job.tenant] += need
        return bool(np.any(over & quota_broken(p, after, job.tenant)))
