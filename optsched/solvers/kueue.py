"""`kueue` baseline: Kueue's admission order, quota, borrowing and classic preemption.

Kueue admits workloads against quota and leaves node placement to kube-scheduler (or to its
topology-aware scheduling). This baseline does what a Kueue + kube-scheduler cluster does in one
round, as the Kueue documentation describes it (site/content/en/docs/concepts/cluster_queue.md
and preemption.md of kubernetes-sigs/kueue):

- **Queues.** Each tenant (a ClusterQueue) orders its jobs by priority, then submit time
  (`BestEffortFIFO`: a head that cannot be admitted does not block the ones behind it).
- **Admission order across tenants.** Each step takes the head of every tenant and admits first
  a head that fits without borrowing, then (fair sharing, among heads that borrow) the tenant
  with the lower share value: the largest share of the cohort's lendable quota it would borrow,
  over its weight; then the higher priority, then the older one (Kueue's scheduler entry
  ordering; the documented effect: "Kueue will admit Workloads in team-b-cq before admitting any
  new Workloads in team-a-cq" once team-a uses its nominal quota; fair sharing: "Kueue admits
  jobs with a lower share value first").
- **Flavors, then nodes.** Each group is assigned a flavor (a device model, or a ResourceFlavor's
  nodes) as Kueue's flavor assigner does with the tenant's FlavorFungibility: its flavors in
  order, quota per flavor, the first that fits (by default borrowing or not), else the first
  that may preempt (`optsched.solvers.flavors`).
  A job fits when its quota fits (nominal; beyond it, borrowing within the cohort's lendable
  quota and the tenant's `borrowing_limit`: `optsched.concerns.tenancy.quota`) and its replicas
  fit on its flavors' nodes; when they do not, the next flavor whose quota fits is tried (as
  topology-aware scheduling does). Nodes are chosen by kube-scheduler's NodeResourcesFit
  MostAllocated score (the `best-fit` baseline's placement), the usual setting for GPU clusters.
- **Classic preemption** when a job does not fit. Candidates: running, `preemptible` jobs of the
  same tenant allowed by `within_tenant`, and of other tenants in the cohort that borrow a flavor
  the job needs, allowed by `reclaim_within_cohort` (or `borrow_within_cohort` and its
  `max_priority_threshold` when the job's tenant would borrow). Sorted: other tenants' first,
  lowest priority, most recently started. Targets follow Kueue's four heuristics (same-tenant
  candidates only: allow borrowing; `borrow_within_cohort`: allow borrowing; the tenant within
  nominal: no borrowing; else same-tenant candidates with borrowing), as the shortest prefix of
  the sorted candidates after which the job fits, then minimised in reverse order (a target whose
  usage can be given back while the job still fits is not evicted). A job whose tenant has no
  `borrow_within_cohort` preempts only within its nominal quota: not at all when a flavor whose
  quota needs preemption is requested beyond nominal (Kueue's `fitsResourceQuota`: `noFit`; rule
  5 of the validator).
- **Fair sharing** (`Cluster.fair_sharing`): a job whose quota needs preemption takes Kueue's
  fair-sharing targets instead (`optsched.solvers.fairpreempt`: target tenants by dominant
  resource share down the cohort tree, the configured strategies, fill-back), with the engine's
  trial placement as Kueue's topology check of `workloadFits`.
- **Admission fair sharing** (`Cluster.admission_fair_sharing`): a tenant that enables it takes
  its jobs in the order of their LocalQueues' usage, with an entry penalty per admission
  (`fairshare.QueueUsage`).
- **Capacity held for a pending preemptor.** A job whose quota needs preemption but that
  preempts nothing, in a tenant whose `reclaim_within_cohort` is not `any`, holds its request in
  its tenant's usage until the tenant's next job comes up (Kueue's cycle: one head per
  ClusterQueue), so the other tenants' jobs in between do not borrow it (Kueue's
  `reserveCapacityForUnreclaimablePreempt`).
- Unlike Kueue alone, a job also preempts to get node capacity (as kube-scheduler's
  DefaultPreemption does for pods, within the same Kueue policies), since a round must place it.
- Once a tenant has reclaimed quota within its nominal, it is not allowed to borrow that flavor
  later in the same round (the validator judges a reclaim on the plan's final usage; Kueue judges
  it at the moment of admission, before the later admissions).

Every eviction names its preemptor and its lost work, and is checked with the validator's own
rule (`preemption.eviction_problems`) before it is kept, so the plan passes `check`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from optsched import clock
from optsched.concerns import eligibility, gang
from optsched.concerns.tenancy import fairshare, preemption, quota, running, serving
from optsched.latency import gc_paused
from optsched.ledger import EPS, RUNNING_PACK, PlacedReplica, flavor_use
from optsched.model.plan import Plan, SolverStats
from optsched.problem import BArray, Derived, FArray, GroupSpec, IArray, JobSpec, Problem
from optsched.solvers import diagnosis, fairpreempt
from optsched.solvers.contract import RunSpec, SolverInfo, stamped
from optsched.solvers.evictions import EvictionBook, Judged
from optsched.solvers.flavors import FlavorAssigner
from optsched.solvers.greedy import STRATEGIES, Attempt, GreedyEngine, NodeCursor, to_plan
from optsched.solvers.kueue_order import admission_order
from optsched.solvers.trials import KeptTrials, TrialState

PLACEMENT = "best-fit"
"""The node score the admitted jobs are placed with (kube-scheduler MostAllocated)."""

QUOTA_PRECHECK_MARGIN = 1e-9
"""Relative margin by which the quota precheck (`KueueEngine._quota_rules_out`) must see a limit
exceeded: its sums (the least usage, the released jobs' quota) may round differently from the
ledger's own replica by replica sums, and it may only reject what the full check rejects."""

NODE_FAILURES = frozenset({"capacity", "topology", "bandwidth", "spread"})
"""Placement failures of an assigned flavor's nodes, after which the next flavor is tried."""

MAX_CANDIDATES = 256
"""Preemption candidates considered per job, in Kueue's order (the rest are not tried)."""


SOURCE = ("Kueue ClusterQueue admission (BestEffortFIFO, non-borrowing heads first), cohort borrowing "
          "and classic preemption; kube-scheduler MostAllocated placement.")


def _stays_evicted(p: Problem) -> BArray:
    pack = p.derived(RUNNING_PACK)
    out: BArray = (pack.bandwidth > 0) & (pack.cross_start[1:] > pack.cross_start[:-1])
    out.setflags(write=False)
    return out


STAYS_EVICTED: Derived[BArray] = Derived("kueue.stays_evicted", _stays_evicted)
"""Per running job: its collective traffic crosses an uplink, so a target `KueueEngine._reprieve`
never puts back whatever the placement (the job may use the bandwidth it frees)."""


class KueueEngine(GreedyEngine):
    """The greedy engine with Kueue's queues, admission order and preemption."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem, STRATEGIES[PLACEMENT])
        p = problem
        self.alive = np.ones(len(p.running), dtype=bool)
        """Running jobs not evicted so far (a mask over `p.running`)."""
        self.no_borrow = np.zeros((len(p.tenant_names), len(p.flavors)), dtype=bool)
        """Tenant/flavor pairs that reclaimed within nominal: they may not borrow later."""
        self.book = EvictionBook(p)
        """The evictions so far, in order, with their preemptors, as the validator's rules judge them."""
        self.preempt_deadline = math.inf
        """perf_counter time after which jobs are no longer given preemption attempts."""
        self.flavors = FlavorAssigner(p, self.ledger, self.alive, self.book.entries)
        """Kueue's flavor assignment, on this engine's usage and evictions."""
        self.held = np.zeros((len(p.tenant_names), len(p.flavors)))
        """Quota usage held for pending preemptors (`_hold_capacity`), per tenant and flavor."""
        self._trials: dict[tuple[int, tuple[int, ...], bool], Attempt | None] = {}
        """Outcomes of trial placements since the round's state last changed (`_fits_without`)."""
        self.queue_usage = fairshare.QueueUsage(p)
        """The LocalQueues' admission fair-sharing usage, penalties of this round's admissions included."""
        self._series: TrialState | None = None
        """The trial series in progress (`_trial_release`): consecutive trials move its ledger
        from one victim set to the next, `_restore` ends the series."""
        self._inside: TrialState | None = None
        """The trial whose placement runs now (`_placing_in`): the engine's ledger and change log
        are the trial's, and cursors are the trial's clones."""
        self._round_ledger, self._round_log = self.ledger, self.changed
        """The round's own ledger and change log (the engine's outside a trial)."""
        self._kept = KeptTrials()
        """The priority diagnostic's trials, by victim set (`_fits_released`)."""
        self._flavor_on: list[BArray] = list(p.flavor_nodes)
        """Per flavor, its nodes: one mask object per flavor for the whole round (`cursor_within`
        knows the mask of a flavor alone by its identity)."""
        self._allow_borrow = True
        """Whether the placement under way may borrow (`_quota_ok`'s rule that its growth keeps)."""
        self.diagnose_beside = False
        """Whether `run` diagnoses deferred jobs beside the round (`optsched.solvers.diagnosis`)."""
        self._beside: diagnosis.Beside | None = None
        """The forked copy diagnosing this round's deferred jobs, while `run` runs with it."""

    # ------------------------------------------------------------------ flavors
    def device_nodes(self, job: JobSpec) -> BArray:
        """The base engine's device nodes, on the nodes of the flavors assigned to the job's GPU groups."""
        out = super().device_nodes(job)
        flavors = self.flavors.assign(job).flavors
        if flavors:
            out = out & self.p.flavor_nodes[list(flavors.values())].any(axis=0)
        return out

    def replica_restrict(self, job: JobSpec, group: GroupSpec, placed: list[PlacedReplica]) -> BArray | None:
        """The base engine's colocation mask, and a GPU group's assigned flavor: its nodes (Kueue
        places pods on the flavor's nodes after assigning it)."""
        extra = super().replica_restrict(job, group, placed)
        flavor = self.flavors.assign(job).flavors.get(group.index)
        if flavor is None:
            return extra
        on = self._flavor_on[flavor]
        return on if extra is None else extra & on

    def cursor_within(self, job: JobSpec, group: GroupSpec,
                      restrict: BArray | None) -> tuple[NodeCursor, BArray | None]:
        """For a group with an assigned flavor, a cursor over the shape's nodes of that flavor:
        every mask such a replica gets holds only the flavor's nodes (`replica_restrict`), so its
        best node is the shape cursor's best inside the mask (same scores, same tie order), found
        over a third of the nodes on mixed-cloud-10k. The mask itself goes where it is the
        flavor's nodes alone (most replicas), and then repeated replicas skip the search
        (`_repeat_node`); a colocation or topology mask stays, over the flavor's nodes only."""
        base, mask = super().cursor_within(job, group, restrict)
        if mask is None:
            return base, None
        flavor = self.flavors.assign(job).flavors.get(group.index)
        if flavor is None:
            return base, mask
        sub = self._flavor_cursor(job, group, flavor)
        if sub is None:
            return base, mask
        return sub, None if mask is self._flavor_on[flavor] else mask

    def _flavor_cursor(self, job: JobSpec, group: GroupSpec, flavor: int) -> NodeCursor | None:
        """The cursor over the nodes of `flavor` that the group's shape cursor holds
        (`subset_cursor`; None where it holds none: the mask then refuses the replica for its usual
        reason); inside a trial, its clone, as `shape_cursor` clones a shape's cursor."""
        trial = self._inside
        if trial is None:
            return self.subset_cursor(super().shape_cursor(job, group), ("flavor", flavor), self._flavor_on[flavor])
        mine = (job.running, job.index, group.index, f"{self.s.name}/{flavor}")
        clone = trial.cursor_of.get(mine)
        if clone is None:
            with self._placing_in(None):
                main = self._flavor_cursor(job, group, flavor)
                if main is None:
                    return None
                main.sync()
            clone = trial.clone(mine, main)
        return clone

    # ------------------------------------------------------------------ quota arithmetic
    def _need(self, job: JobSpec) -> FArray:
        """Quota the job's minimum replicas need per flavor, on the flavors Kueue assigns (`FlavorAssigner`)."""
        return self.flavors.assign(job).need

    def _uses(self, job: JobSpec, replicas: list[PlacedReplica]) -> FArray:
        uses = np.zeros(len(self.p.flavors))
        for r in replicas:
            uses += flavor_use(self.p, job.groups[r.group], r.node)
        return uses

    def _within_nominal(self, job: JobSpec, uses: FArray) -> bool:
        p = self.p
        final = self.ledger.quota_used[job.tenant]
        nominal = p.nominal[job.tenant]
        return bool(np.all((final <= nominal + EPS * np.maximum(1.0, nominal)) | (uses <= 0)))

    def _plan_usage(self) -> FArray:
        """Quota usage per tenant and flavor of the plan so far (a copy): the ledger's, less the
        capacity held for pending preemptors (`_hold_capacity`), which no plan carries."""
        out: FArray = self.ledger.quota_used - self.held
        return out

    def _preemptor(self, job: JobSpec, replicas: list[PlacedReplica], final: FArray) -> preemption.Preemptor:
        """The validator's view of `job` placed as `replicas` as a preemptor, the round ending with
        quota usage `final` (`preemption.preemptor`)."""
        uses = self._uses(job, replicas)
        return preemption.Preemptor(job, uses, self._within_nominal(job, uses), frozenset(r.node for r in replicas),
                                    final)

    def _borrowing_now(self) -> BArray:
        """(tenants x flavors): where each tenant uses above its nominal quota now."""
        nominal = self.p.nominal
        out: BArray = self.ledger.quota_used > nominal + EPS * np.maximum(1.0, nominal)
        return out

    # ------------------------------------------------------------------ running jobs
    def _release(self, victims: list[JobSpec], sign: float = -1.0) -> None:
        """Take running jobs out of the ledger (sign=+1 puts them back)."""
        self.changed.extend(self.ledger.add_running_many(victims, sign))

    def _trial_release(self, victims: list[JobSpec]) -> TrialState:
        """Have exactly `victims` out of the series' ledger for a trial (a copy of the round's,
        made as the series starts): from the previous trial's set, the new ones go and the ones no
        longer listed come back, in one ledger update (a series of trials over growing prefixes
        moves only their differences). Returns the series."""
        series = self._series
        if series is None:
            series = self._series = TrialState.of(self.ledger)
        series.release({v.index for v in victims})
        return series

    def _restore(self) -> None:
        """End the series of trials (the round's ledger never saw them: nothing moves back)."""
        self._series = None

    @contextmanager
    def _placing_in(self, trial: TrialState | None) -> Iterator[None]:
        """Run a trial placement on `trial`'s ledger and change log (and its cursor clones); with
        None, on the round's own (from inside a trial), the engine's state restored after."""
        saved = self.ledger, self.changed, self._inside
        if trial is None:
            self.ledger, self.changed = self._round_ledger, self._round_log
        else:
            self.ledger, self.changed = trial.ledger, trial.log
        self._inside = trial
        try:
            yield
        finally:
            self.ledger, self.changed, self._inside = saved

    def shape_cursor(self, job: JobSpec, group: GroupSpec) -> NodeCursor:
        """The round's cursor for the group's shape; inside a trial, its clone for the trial (the
        round's cursor first brought up to date on the round's ledger, then copied, current up to
        the trial log's start: its first sync re-scores the nodes the trial changed)."""
        trial = self._inside
        if trial is None:
            return super().shape_cursor(job, group)
        mine = (job.running, job.index, group.index, self.s.name)
        got = trial.cursor_of.get(mine)
        if got is None:
            with self._placing_in(None):
                main = super().shape_cursor(job, group)
                main.sync()
            got = trial.clone(mine, main)
        return got

    def _candidates(self, job: JobSpec, for_nodes: bool = False) -> list[tuple[JobSpec, str]]:
        """Running jobs this job may evict under its tenant's policies, in Kueue's order, with the
        eviction reason (`preempted` in the tenant, `reclaimed` across the cohort). With
        `for_nodes` (the job lacks node capacity, not quota), only jobs on nodes it may use.
        Vectorised over the running jobs (`running.running_table`)."""
        p = self.p
        tenants = p.cluster.tenants
        policy = tenants[job.tenant].preemption if job.tenant < len(tenants) else None
        if policy is None or not p.running:
            return []
        rt = running.running_table(p)
        ok = self.alive & rt.preemptible
        if for_nodes:  # a victim elsewhere frees nothing the job can use
            usable = np.zeros(p.n_nodes, dtype=bool)
            for g in job.groups:
                usable |= eligibility.mask(p, job, g)
            ok &= running.touching(rt, usable)
        same_t = rt.tenant == job.tenant
        lower = rt.priority < job.priority
        newer_equal = (rt.priority == job.priority) & (rt.submitted > job.submitted_at)
        within = {"never": np.zeros_like(lower), "lower_priority": lower,
                  "lower_or_newer_equal_priority": lower | newer_equal}[policy.within_tenant]
        same = ok & same_t & within
        cohort = int(p.tenant_root[job.tenant])
        other = np.zeros_like(same)
        if cohort >= 0 and policy.reclaim_within_cohort != "never" and len(p.flavors):
            borrowing = self._borrowing_now()
            need = self._need(job) > 0
            takes = ((rt.held > 0) & borrowing[rt.tenant] & need).any(axis=1)
            bwc = policy.borrow_within_cohort
            by_reclaim = lower | (policy.reclaim_within_cohort == "any")
            by_bwc = np.zeros_like(lower)
            if bwc is not None and bwc.policy == "lower_priority" and not fairshare.enabled(p):
                threshold = math.inf if bwc.max_priority_threshold is None else bwc.max_priority_threshold
                by_bwc = lower & (rt.priority <= threshold)
            other = ok & ~same_t & (p.tenant_root[rt.tenant] == cohort) & takes & (by_reclaim | by_bwc)
        ordered = preemption.candidate_order(p, np.flatnonzero(same | other), job.tenant)
        return [(p.running[k], "preempted" if same_t[k] else "reclaimed") for k in ordered[:MAX_CANDIDATES]]

    # ------------------------------------------------------------------ preemption
    def _fits_without(self, job: JobSpec, victims: list[JobSpec], allow_borrow: bool, keep: bool) -> Attempt | None:
        """Whether the job fits with `victims` evicted: a trial placement on the series' ledger
        (`_trial_release`), with them out of it. A trial places the job's minimum only (`grow`).
        With `keep`, a success is applied to the round's ledger (the victims released for good,
        the trial's replicas placed and grown there; the series ends). Returns the attempt if it
        fits.

        A trial leaves the round's state as it was, so between two changes of it the same trial
        has the same outcome: outcomes are remembered (`_trials`, emptied when a job is kept). A
        trial whose quota rules must refuse the job (`_quota_rules_out`) is not run (a capacity
        precheck did not pay for itself: docs/baselines.md)."""
        key = (job.index, tuple(v.index for v in victims), allow_borrow)
        tried = key in self._trials
        known = self._trials.get(key)
        if tried and not (keep and known is not None):
            return known
        if not tried:
            clock.charge(clock.TRIAL_S)  # the work clock's measure of a trial (deterministic mode)
            if self._quota_rules_out(job, victims, allow_borrow):  # before any ledger move
                self._trials[key] = None
                return None
            trial = self._trial_release(victims)
            with self._borrowing(allow_borrow), self._placing_in(trial):
                att = self.place_job(job)
                ok = att.failure is None and self._quota_ok(job, att, allow_borrow)
                if att.failure is None:
                    self.rollback(job, list(att.replicas))
            known = self._trials[key] = Attempt(list(att.replicas), within=att.within) if ok else None
            if known is None or not keep:
                return known
        assert known is not None
        self._restore()  # keep the success on the round's ledger
        self._release(victims)
        placed = list(known.replicas)
        for r in placed:
            self.ledger.add(job, job.groups[r.group], r.node, r.devices, r.share)
            self.changed.append(r.node)
        with self._borrowing(allow_borrow):  # the kept trial's elastic growth, which the trial left out (`grow`)
            self.grow(job, placed, known.within)
        self._trials.clear()
        return Attempt(placed, within=known.within)

    @contextmanager
    def _borrowing(self, allow_borrow: bool) -> Iterator[None]:
        """Within the block, placements judge growth by whether they may borrow (`growth_allowed`)."""
        self._allow_borrow = allow_borrow
        try:
            yield
        finally:
            self._allow_borrow = True

    def _quota_rules_out(self, job: JobSpec, victims: list[JobSpec], allow_borrow: bool) -> bool:
        """Whether `_quota_ok` must refuse every placement of the job with `victims` out of the
        ledger: its tenant's usage then (computed from the running jobs' quota, not applied: a
        refused trial moves nothing in the ledger) with the job's least usage
        (`FlavorAssigner.least_uses`) already borrows a flavor it may not borrow (reclaimed within
        nominal), or, without borrowing, exceeds nominal in a flavor the job uses. Usage only
        grows with a placement, so a trial it rejects would have been refused after placing the
        job (checked before it, it spares the release and the placement)."""
        if not self._quota_guarded(job, allow_borrow):
            return False
        used = self.ledger.quota_used[job.tenant] - self._quota_of(job.tenant, [v.index for v in victims])
        return bool(self._quota_refuses(job, used[None, :], allow_borrow)[0])

    def _first_quota_prefix(self, job: JobSpec, cands: list[JobSpec], allow_borrow: bool) -> int:
        """The length of the shortest prefix of `cands` whose eviction `_quota_rules_out` does not
        refuse (len(cands) + 1 if none): usage falls as the prefix grows, so every shorter prefix
        is refused. All prefixes at once, from the cumulative quota of the candidates."""
        if not cands or not self._quota_guarded(job, allow_borrow):
            return 1
        rt = running.running_table(self.p)
        index = np.array([v.index for v in cands], dtype=np.int64)
        mine = (rt.tenant[index] == job.tenant)[:, None] * rt.held[index]
        used = self.ledger.quota_used[job.tenant] - np.cumsum(mine, axis=0)
        refused = self._quota_refuses(job, used, allow_borrow)
        return 1 + int(np.argmin(refused)) if not refused.all() else len(cands) + 1

    def _quota_guarded(self, job: JobSpec, allow_borrow: bool) -> bool:
        """Whether the quota precheck can refuse anything for the job: without borrowing, or in a
        flavor its tenant may no longer borrow."""
        return bool(len(self.p.flavors)) and (not allow_borrow or bool(self.no_borrow[job.tenant].any()))

    def _quota_refuses(self, job: JobSpec, used: FArray, allow_borrow: bool) -> BArray:
        """Per row of `used` (its tenant's usage per flavor, rows x flavors): whether the job's least
        usage on top of it breaks a rule `_quota_ok` enforces (see `_quota_rules_out`)."""
        least = self.flavors.least_uses(job)
        nominal = self.p.nominal[job.tenant]
        over = used + least > nominal + (EPS + QUOTA_PRECHECK_MARGIN) * np.maximum(1.0, nominal)
        refused: BArray = np.any(self.no_borrow[job.tenant] & over, axis=1)
        if not allow_borrow:
            refused |= np.any((least > 0) & over, axis=1)
        return refused

    def _quota_of(self, tenant: int, jobs: list[int]) -> FArray:
        """Quota per flavor that the running jobs `jobs` (indices) of `tenant` hold (the others' is not counted)."""
        rt = running.running_table(self.p)
        index = np.array(jobs, dtype=np.int64)
        out: FArray = rt.held[index[rt.tenant[index] == tenant]].sum(axis=0)
        return out

    def _targets(self, job: JobSpec, cands: list[JobSpec], allow_borrow: bool) -> list[JobSpec]:
        """The shortest prefix of `cands` after whose eviction the job fits, minimised in reverse;
        none where no prefix fits or the step it gives must be refused (`_refusing`)."""
        try:
            return self._shortest_targets(job, cands, allow_borrow)
        finally:
            self._restore()

    def _shortest_targets(self, job: JobSpec, cands: list[JobSpec], allow_borrow: bool) -> list[JobSpec]:
        """`_targets`, with the last trial's victims left out of the ledger."""
        start = self._first_quota_prefix(job, cands, allow_borrow)  # shorter prefixes cannot fit
        if start > len(cands):
            return []
        # The shortest prefix's last target stays through the fill-back; where every candidate it
        # may still be refuses the step (`_refusing`), the search ends with no targets: the step
        # it would give is refused anyway (the plan is the same, with fewer trials).
        open_ = np.concatenate([[0], np.cumsum(~self._refusing(job, cands))])

        def refused(shortest_from: int, shortest_to: int) -> bool:  # every prefix length between
            return bool(open_[shortest_to] == open_[shortest_from - 1])

        lo = hi = start  # galloping from there: most jobs need one or two victims more
        if refused(start, len(cands)):
            return []
        if self._last_alone(job, cands, start, allow_borrow):  # the fill-back would keep it alone
            return [] if refused(start, start) else cands[start - 1:start]
        if self._fits_without(job, cands[:start], allow_borrow, keep=False) is None:
            if self._fits_without(job, cands, allow_borrow, keep=False) is None:
                return []
            lo, hi = start + 1, min(start + 1, len(cands))
            while hi < len(cands) and self._fits_without(job, cands[:hi], allow_borrow, keep=False) is None:
                lo, hi = hi + 1, min(start - 1 + 2 * (hi - start + 1), len(cands))
                if refused(lo, len(cands)):
                    return []
        while lo < hi:  # fits with cands[:hi]; find the shortest such prefix (fit grows with it)
            if refused(lo, hi):
                return []
            mid = (lo + hi) // 2
            if self._fits_without(job, cands[:mid], allow_borrow, keep=False) is not None:
                hi = mid
            else:
                lo = mid + 1
        if refused(hi, hi):
            return []
        targets = cands[:hi]
        # Kueue's fill-back (`fillBackWorkloads`): the last target is needed (the prefix without
        # it did not fit); the others, from the last to the first, are given back if the job
        # still fits without them. Given back a block at a time: when the job fits with a whole
        # block given back, giving its targets back one by one would succeed at each step (fit
        # grows with the targets, as the search above assumes), so the result is the one-by-one
        # pass's, in O(kept x log targets) trials instead of one per target.
        kept = set(range(len(targets)))

        def give_back(block: list[int]) -> None:
            if not block:
                return
            rest = [targets[i] for i in sorted(kept - set(block))]
            if self._fits_without(job, rest, allow_borrow, keep=False) is not None:
                kept.difference_update(block)
            elif len(block) > 1:
                half = len(block) // 2
                give_back(block[:half])
                give_back(block[half:])

        give_back(list(range(len(targets) - 2, -1, -1)))
        return [targets[i] for i in sorted(kept)]

    def _last_alone(self, job: JobSpec, cands: list[JobSpec], start: int, allow_borrow: bool) -> bool:
        """Whether the job fits, for all its minimum asks, with only the last target of the
        shortest prefix the quota allows (`cands[:start]`) evicted: then so it does with the
        prefix (fit grows with the targets), which is the shortest that fits, and the fill-back
        gives every other target back in its first trial, this one. `_shortest_targets` answers
        with it without a trial of the whole prefix (on mixed-cloud-10k, a job whose own tenant
        must free quota lists the cohort's other candidates first: dozens of victims moved out
        and back for nothing). Not asked where fit need not grow with the targets: a non-gang job
        placed only in part (with more room it places more replicas, which its quota may refuse),
        or a job with uplink traffic (with more room, best-fit may spread it across an uplink it
        then overloads; both seen on mixed-cloud-10k)."""
        if start <= 1 or job.bandwidth:
            return False
        att = self._fits_without(job, cands[start - 1:start], allow_borrow, keep=False)
        counts = gang.target_counts(job)
        return att is not None and counts is not None and len(att.replicas) == sum(counts)

    def _refusing(self, job: JobSpec, cands: list[JobSpec]) -> BArray:
        """Per candidate: whether a preemption step whose targets hold it as the last of the
        shortest prefix the job fits after (which the fill-back never gives back) must be
        refused: another tenant's job (`reclaimed`) that no reclaim may take
        (`preemption.reclaimable`: its tenant did not borrow, at the round's start, a flavor it
        holds) and that `_reprieve` never puts back (`STAYS_EVICTED`), so that the validator's
        rule 6 refuses every step that keeps it."""
        p = self.p
        index = np.array([v.index for v in cands], dtype=np.int64)
        out: BArray = (p.derived(STAYS_EVICTED)[index] & ~preemption.reclaimable_running(p)[index]
                       & (running.running_table(p).tenant[index] != job.tenant))
        return out

    def _preempt(self, job: JobSpec, failure: str) -> tuple[Attempt, list[tuple[JobSpec, str]]] | None:
        """Kueue's classic preemption targets for `job` (which failed for `failure`); on success
        the job is placed. The attempts and their candidates follow Kueue's `classicalPreemptions`
        (pkg/scheduler/preemption/preemption.go): with borrowing allowed, candidates of other
        tenants that may only go if the job's tenant does not borrow (`_reclaim_without_borrowing`)
        are left out; without it, all are in but the job must fit within nominal. Which attempts,
        in which order: same-tenant candidates only, or `borrow_within_cohort` forbidden while the
        tenant is not strictly under nominal now in the flavors needing preemption: with borrowing
        only; `borrow_within_cohort` forbidden and the job does not fit its own nominal quota:
        without, then with borrowing; else with, then without."""
        p = self.p
        cands = self._candidates(job, for_nodes=failure != "quota")
        if not cands:
            return None
        need = self._need(job)
        if failure == "quota" and self.flavors.no_fit(job, need):
            return None
        if failure == "quota" and fairshare.enabled(p):
            return self._fair_preempt(job, need, cands)
        reason_of = {v.id: r for v, r in cands}
        policy = p.cluster.tenants[job.tenant].preemption
        bwc = policy.borrow_within_cohort
        forbidden = bwc is None or bwc.policy == "never"
        advantage = not self.flavors.borrows(job)  # Kueue: the request fits the ClusterQueue's own quota
        frs = need > 0
        if all(v.tenant == job.tenant for v, _ in cands) or (forbidden and not self._under_nominal(job.tenant, frs)):
            options = [True]
        elif forbidden and not advantage:
            options = [False, True]
        else:
            options = [True, False]
        for allow_borrow in options:
            listed = [v for v, _ in cands if not (allow_borrow and self._reclaim_without_borrowing(job, v, advantage))]
            targets = self._targets(job, self._still_valid(job, listed, frs), allow_borrow)
            got = self._evict_for(job, targets, reason_of, allow_borrow) if targets else None
            if got is not None:
                return got
        return None

    def _evict_for(self, job: JobSpec, targets: list[JobSpec], reason_of: dict[str, str], allow_borrow: bool
                   ) -> tuple[Attempt, list[tuple[JobSpec, str]]] | None:
        """Place the job with `targets` evicted: the ones it does not need are given back
        (`_reprieve`), and the round's evictions must pass the validator's rules (`_legal`); on
        success (the attempt, the evictions with their reasons), else everything is undone."""
        att = self._fits_without(job, targets, allow_borrow, keep=True)
        if att is None:
            self._restore()
            return None
        chosen = self._reprieve(job, att, [(v, reason_of[v.id]) for v in targets])
        if self._legal(job, att, chosen):
            return att, chosen
        self.rollback(job, list(att.replicas))
        self._release([v for v, _ in chosen], sign=1.0)  # the reprieved are back already
        return None

    def _fair_preempt(self, job: JobSpec, need: FArray, cands: list[tuple[JobSpec, str]]
                      ) -> tuple[Attempt, list[tuple[JobSpec, str]]] | None:
        """Kueue's fair-sharing preemption (`fairpreempt.fair_targets`) for a job whose quota
        needs it; on success the job is placed on its flavors' nodes with the targets released
        (those it does not need there are given back, `_reprieve`) and every eviction so far
        passes the validator's rules."""
        p = self.p
        touched = np.zeros_like(self.ledger.quota_used, dtype=bool)
        touched[job.tenant] = need > 0

        def fits(used: FArray, targets: list[JobSpec]) -> bool:  # quota first, then a trial placement
            return not quota.problems(p, used, touched) and \
                self._fits_without(job, targets, allow_borrow=True, keep=False) is not None

        try:
            targets = fairpreempt.fair_targets(p, job, need, [v for v, _ in cands], self.ledger.quota_used, fits)
        finally:
            self._restore()
        return self._evict_for(job, targets, {v.id: r for v, r in cands}, allow_borrow=True) if targets else None

    def _hold_capacity(self, job: JobSpec) -> None:
        """Kueue's `reserveCapacityForUnreclaimablePreempt` (scheduler.go, `quotaResourcesToReserve`):
        a job whose quota needs preemption but that preempts nothing, in a tenant that cannot
        always reclaim (`reclaim_within_cohort` other than `any`: policy.go `CanAlwaysReclaim`),
        holds its request in its tenant's usage until its tenant's next job comes up
        (`_release_hold`), so that the other tenants' jobs in between do not borrow it: within nominal,
        up to the nominal left; a job that would borrow, up to nominal + borrowing limit. The held
        amount is usage no placement carries: the plan's real usage is below the engine's."""
        p = self.p
        t = job.tenant
        if t >= len(p.cluster.tenants) or p.tenant_cohort[t] < 0 or not len(p.flavors):
            return
        if p.cluster.tenants[t].preemption.reclaim_within_cohort == "any":
            return
        need = self._need(job)
        if self.flavors.no_fit(job, need):
            return  # `noFit`, not `Preempt`: nothing is held
        used, nominal = self.ledger.quota_used[t], p.nominal[t]
        borrows = bool(np.any(used + need > nominal + EPS * np.maximum(1.0, nominal)))
        room = nominal + p.borrow_limit[t] - used if borrows else nominal - used
        held = np.maximum(0.0, np.minimum(need, room))
        self.ledger.quota_used[t] += held
        self.held[t] = held

    def _release_hold(self, tenant: int) -> None:
        """End the tenant's hold (`_hold_capacity`) as its next job comes up: Kueue considers one
        head per ClusterQueue per scheduling cycle, so a hold lasts for the other ClusterQueues'
        heads of that cycle, not for the tenant's later jobs (held for every deferred job, holds
        would pile up over a round and keep the tenant's quota from everyone)."""
        if len(self.p.flavors) and self.held[tenant].any():
            self.ledger.quota_used[tenant] -= self.held[tenant]
            self.held[tenant] = 0.0

    def _reclaim_without_borrowing(self, job: JobSpec, victim: JobSpec, advantage: bool) -> bool:
        """Kueue's `ReclaimWithoutBorrowing` variant (classical/hierarchical_preemption.go
        `classifyPreemptionVariant`): a candidate of another tenant the job may reclaim only if
        its own tenant ends within nominal. Not so when the job fits its own quota (hierarchical
        advantage), nor when `borrow_within_cohort` allows it (lower priority, at most the
        threshold)."""
        if victim.tenant == job.tenant or advantage:
            return False
        bwc = self.p.cluster.tenants[job.tenant].preemption.borrow_within_cohort
        if bwc is None or bwc.policy == "never":
            return True
        threshold = bwc.max_priority_threshold
        return victim.priority >= job.priority or (threshold is not None and victim.priority > threshold)

    def _still_valid(self, job: JobSpec, cands: list[JobSpec], frs: BArray) -> list[JobSpec]:
        """The candidates Kueue's iterator yields, in order: one of another tenant is skipped once
        its tenant, with the candidates before it gone, no longer borrows any flavor needing
        preemption (classical/candidate_generator.go `candidateIsValid`). A tenant's usage only
        falls as its candidates go, so once one of its candidates is skipped so are the rest, and
        each kept one saw every earlier one of its tenant go: per tenant, its usage before each
        candidate (subtracted one by one, `subtract.accumulate`), kept while it borrows."""
        if not cands:
            return []
        p = self.p
        rt = running.running_table(p)
        index = np.array([v.index for v in cands], dtype=np.int64)
        tenant = rt.tenant[index]
        keep = np.ones(len(cands), dtype=bool)
        for u in np.unique(tenant[tenant != job.tenant]).tolist():
            at = np.flatnonzero(tenant == u)
            steps = np.vstack([self.ledger.quota_used[u], rt.held[index[at]]])
            before = np.subtract.accumulate(steps, axis=0)[:-1][:, frs]  # its usage before each of them goes
            nominal = p.nominal[u][frs]
            keep[at] = np.any(before > nominal + EPS * np.maximum(1.0, nominal), axis=1)
        return [v for v, k in zip(cands, keep.tolist(), strict=True) if k]

    def _under_nominal(self, tenant: int, frs: BArray) -> bool:
        """Kueue's `queueUnderNominalInResourcesNeedingPreemption`: the tenant's usage now (before
        the job) is strictly below nominal in every flavor needing preemption."""
        p = self.p
        nominal = p.nominal[tenant][frs]
        return bool(np.all(self.ledger.quota_used[tenant][frs] < nominal - EPS * np.maximum(1.0, nominal)))

    def _reprieve(self, job: JobSpec, att: Attempt, chosen: list[tuple[JobSpec, str]]) -> list[tuple[JobSpec, str]]:
        """The targets the placed job still needs: a target it has no replica beside, and whose
        return breaks no quota rule (`serving.serves_problems`: its eviction would serve no
        preemptor), goes back where it ran, last first (kube-scheduler's DefaultPreemption gives
        back the victims a pod does not need on its node). Best-fit may place a job away from a
        target the fill-back kept (a greedy placement can fail with more room free). A target
        whose traffic crosses an uplink stays out: the job may use the bandwidth it freed."""
        p = self.p
        reprieved: list[int] = []
        by = self._preemptor(job, att.replicas, self._plan_usage())
        for v, _reason in reversed(chosen):
            if p.derived(STAYS_EVICTED)[v.index]:
                continue
            rest = self._step_evictions(job, att, [(o, r) for o, r in chosen if o.index != v.index
                                                   and o.index not in reprieved])
            reclaiming = self.book.reclaiming_with(rest)
            if not serving.serves_problems(p, v, replace(by, final=self._plan_usage()), reclaiming):
                continue
            self.changed.extend(self.ledger.add_running_many([v]))
            reprieved.append(v.index)
        return [(v, reason) for v, reason in chosen if v.index not in reprieved]

    def _step_evictions(self, job: JobSpec, att: Attempt, chosen: list[tuple[JobSpec, str]]) -> list[Judged]:
        """`chosen`, evicted for `job` placed as `att`, each with that preemptor as the validator
        sees it if the round ended now."""
        by = self._preemptor(job, att.replicas, self._plan_usage())
        return [(v, reason, by) for v, reason in chosen]

    def _legal(self, job: JobSpec, att: Attempt, chosen: list[tuple[JobSpec, str]]) -> bool:
        """The validator's rules for every eviction so far and this step's, judged as if the round
        ended now (later admissions cannot make them illegal: see `_quota_ok`). What an earlier
        eviction's verdict reads that never changes is kept (`EvictionBook`)."""
        return self.book.legal_with(self._step_evictions(job, att, chosen), self._plan_usage())

    # ------------------------------------------------------------------ the round
    def iter_jobs(self) -> Iterator[JobSpec]:
        """Kueue's admission order (`kueue_order.admission_order`), on this round's usage."""
        return admission_order(self.p, self.flavors, self.queue_usage)

    def record(self, job: JobSpec, replicas: list[PlacedReplica]) -> None:
        """The base engine's accounting, and the admitted job's entry penalty on its LocalQueue's
        usage (admission fair sharing)."""
        super().record(job, replicas)
        self.queue_usage.admitted(job, replicas)

    def _blocked_by_priority(self, job: JobSpec, att: Attempt) -> Attempt:
        """The deferral of a job that preemption could not help: `priority` when evicting the
        preemptible running jobs of its priority or higher on nodes it may use (which its tenant's
        policies protect), with the ones they allow, would make room; else the original reason."""
        p = self.p
        tenants = p.cluster.tenants
        policy = tenants[job.tenant].preemption if job.tenant < len(tenants) else None
        if policy is None:
            return att
        usable = np.zeros(p.n_nodes, dtype=bool)
        for g in job.groups:
            usable |= eligibility.mask(p, job, g)
        # holders: alive preemptible running jobs of its priority or higher on nodes it may use,
        # which are candidates but for their priority (vectorised over `running.running_table`)
        rt = running.running_table(p)
        same = rt.tenant == job.tenant
        protected = same & (policy.within_tenant != "never")
        root = int(p.tenant_root[job.tenant])
        if policy.reclaim_within_cohort == "lower_priority" and root >= 0:
            borrowing = np.any(self._borrowing_now(), axis=1)
            protected |= ~same & (p.tenant_root[rt.tenant] == root) & borrowing[rt.tenant]
        holding = self.alive & rt.preemptible & (rt.priority >= job.priority) & protected
        if holding.any():
            holding &= running.touching(rt, usable)
        holders = [p.running[k] for k in np.flatnonzero(holding)]
        if not holders:
            return att
        allowed = [v for v, _ in self._candidates(job)]
        if not self._fits_released(job, holders + allowed):
            return att  # even they would not make room: the original reason binds
        return Attempt(failure="priority", detail=(
            f"{att.failure}: {len(holders)} preemptible running jobs of priority >= {job.priority} hold nodes "
            f"it may use, and its tenant's policies do not evict them ({att.detail})" if att.detail else
            f"{att.failure}: {len(holders)} preemptible running jobs of priority >= {job.priority} hold nodes "
            "it may use, and its tenant's policies do not evict them"))

    def run(self, deadline: float = math.inf) -> tuple[dict[str, list[PlacedReplica]], dict[str, tuple[str, str]]]:
        """The base engine's round; with `diagnose_beside` (and where `diagnosis.usable`), the
        deferred jobs' priority diagnostic runs in a forked copy of the engine, its verdicts taken
        as the round ends (the same as inline: `optsched.solvers.diagnosis`)."""
        self.deadline = deadline  # the copy's, too
        if not (self.diagnose_beside and diagnosis.usable(self.p)):
            return super().run(deadline)
        try:
            self._beside = diagnosis.Beside(self)
        except OSError:  # no process to fork (a limit): the diagnostic inline
            return super().run(deadline)
        try:
            placed, deferred = super().run(deadline)
            for index, why in self._beside.answers().items():
                deferred[self.p.jobs[index].id] = why
            return placed, deferred
        finally:
            self._beside.close()
            self._beside = None

    def diagnosis_request(self, job: int, failure: str, detail: str, nodes: IArray) -> diagnosis.Request:
        """What the priority diagnostic of `job` (index; deferred for `failure`) reads of the round
        now that a copy of this engine lacks, the round's ledger differing from the copy's only on
        `nodes` (`diagnosis.Beside`)."""
        p = self.p
        return diagnosis.Request(job, failure, detail, self.ledger.rows(nodes), self.alive.copy(),
                                 self.no_borrow.copy(), self.flavors.assign(p.jobs[job]))

    def diagnose_request(self, request: diagnosis.Request) -> tuple[str, str]:
        """In the copy: take the request's state as the round's, then the job's diagnostic
        (`_blocked_by_priority`): its deferral reason and detail."""
        job = self.p.jobs[request.job]
        self.ledger.load_rows(request.rows)
        self.changed.extend(request.rows.nodes)  # the cursors and kept trials re-read these nodes
        self.alive[...] = request.alive
        self.no_borrow[...] = request.no_borrow
        self.flavors.fix(job, request.assignment)
        att = self._blocked_by_priority(job, Attempt(failure=request.failure, detail=request.detail))
        return att.failure or "", att.detail

    def _fits_released(self, job: JobSpec, victims: list[JobSpec]) -> bool:
        """Whether the job fits, borrowing allowed, with `victims` out of the ledger:
        `_fits_without`'s trial for the priority diagnostic, its outcome not remembered, on the
        trial kept for this victim set (`trials.KeptTrials`). The victims that sit on none of the
        nodes the job may take (`_reachable_nodes`) leave only quota and uplink traffic, the part
        of the ledger such a placement reads of them (the diagnostic releases every preemptible
        job of its tenant and of borrowing ones: about 40% of their placements sit elsewhere on
        mixed-cloud-10k)."""
        clock.charge(clock.TRIAL_S)  # the work clock's measure of a trial (deterministic mode)
        if self._quota_rules_out(job, victims, allow_borrow=True):
            return False
        jobs = np.unique(np.array([v.index for v in victims], dtype=np.int64))
        near = running.touching(running.running_table(self.p), self._reachable_nodes(job))[jobs]
        kept = self._kept.get(self.ledger, self.changed, jobs, near)
        with kept.placing(), self._placing_in(kept.trial):
            att = self.place_job(job)
            return att.failure is None and self._quota_ok(job, att, allow_borrow=True)

    def _reachable_nodes(self, job: JobSpec) -> BArray:
        """Nodes a replica of the job may take: each group's eligible nodes, a GPU group's on its
        assigned flavor's nodes (`replica_restrict`)."""
        p = self.p
        flavors = self.flavors.assign(job).flavors
        out = np.zeros(p.n_nodes, dtype=bool)
        for g in job.groups:
            nodes = eligibility.mask(p, job, g)
            out |= nodes if g.index not in flavors else nodes & p.flavor_nodes[flavors[g.index]]
        return out

    def grow(self, job: JobSpec, placed: list[PlacedReplica], restrict: BArray | None) -> None:
        """The base engine's elastic growth, except in a trial: a trial's verdict is its minimum's
        (growth stops before any rule `_quota_ok` or the job-level rules would break, so a grown
        placement is refused exactly when its minimum is), so a preemption search's trials place
        the minimum only and the kept one grows once, on the round's ledger (`_fits_without`),
        and the priority diagnostic never grows."""
        if self._inside is None:
            super().grow(job, placed, restrict)

    def growth_allowed(self, job: JobSpec, placed: list[PlacedReplica]) -> bool:
        """Elastic growth stops where `_quota_ok` would refuse the job (above nominal in a trial
        that may not borrow; borrowing a flavor its tenant reclaimed within nominal): the largest
        count that fits, as Kueue's partial admission reduces a podset's count until it fits
        (`PodSetReducer`), instead of refusing a job whose smaller counts fit."""
        return self._quota_ok(job, Attempt(placed), self._allow_borrow)

    def _quota_ok(self, job: JobSpec, att: Attempt, allow_borrow: bool) -> bool:
        """Extra quota rules of a placed attempt: within nominal when borrowing is not allowed,
        and no borrowing of a flavor the tenant reclaimed within nominal this round."""
        if not allow_borrow and not self._within_nominal(job, self._uses(job, att.replicas)):
            return False
        guard = self.no_borrow[job.tenant]
        return not (guard.any() and np.any(guard & self._borrowing_now()[job.tenant]))

    def admit(self, job: JobSpec) -> Attempt:
        """Assign the job's flavors, place it on their nodes, preempting if it does not fit;
        returns the attempt."""
        clock.charge(clock.KUEUE_JOB_S)  # the work clock's measure of Kueue's per-job work (deterministic mode)
        self._trials.clear()
        self._release_hold(job.tenant)
        first = assignment = self.flavors.fix(job)  # fixed for the job's admission
        if assignment.no_fit:
            return Attempt(failure="quota", detail=assignment.no_fit)
        att = self.place_job(job)
        while att.failure in NODE_FAILURES:  # the flavor's nodes cannot hold it: the next flavor that fits
            step = self.flavors.next_flavors(job, assignment)
            if step is None:
                break
            assignment = self.flavors.fix(job, step)
            tried = self.place_job(job)
            if tried.failure is None:
                att = tried
                break
        if att.failure is not None:
            self.flavors.fix(job, first)  # preemption (for quota or nodes) on the first flavor
        if att.failure is None and self._quota_ok(job, att, allow_borrow=True):
            return att
        if att.failure is None:
            self.rollback(job, list(att.replicas))
            att = Attempt(failure="quota", detail="its tenant reclaimed this flavor within nominal quota this "
                                                  "round and may not also borrow it")
        if att.failure not in ("capacity", "quota", "topology", "bandwidth") \
                or clock.now() > self.preempt_deadline:
            return att
        got = self._preempt(job, att.failure)
        if got is None:
            if att.failure == "quota":
                self._hold_capacity(job)
            if self._beside is not None:  # its reason is settled beside the round (`run`)
                self._beside.ask(self, job.index, att.failure, att.detail)
                return att
            return self._blocked_by_priority(job, att)
        new, chosen = got
        by = self._preemptor(job, new.replicas, self._plan_usage())
        uses, within = by.uses, by.within_nominal
        for v, reason in chosen:
            self.book.add(v, reason, by)
            self.alive[v.index] = False
        if within and any(r == "reclaimed" for _, r in chosen):
            self.no_borrow[job.tenant] |= uses > 0
        return new


def solve_kueue(p: Problem, *, time_limit: float = math.inf, seed: int = 0,
                preempt_within: float | None = None, diagnose_beside: bool = True) -> Plan:
    """Run the `kueue` baseline on a compiled problem and return its plan (evictions included).

    `preempt_within` (seconds): after it, jobs that do not fit are deferred without trying
    preemption (the queue order puts the jobs that preempt first; the CP-SAT round uses this to
    get a Kueue plan within a short time limit). `diagnose_beside`: the deferred jobs' priority
    diagnostic runs in a forked process where that is safe and pays (`diagnosis.usable`; the
    same plan either way).
    """
    start = clock.now()
    with gc_paused():  # as in every solve (optsched.latency)
        engine = KueueEngine(p)
        engine.diagnose_beside = diagnose_beside
        engine.preempt_deadline = start + (math.inf if preempt_within is None else preempt_within)
        placed, deferred = engine.run(deadline=start + time_limit)
        wall = clock.now() - start
        plan = to_plan(p, placed, deferred, SolverStats(name="kueue", status="heuristic", wall_s=wall, seed=seed))
    return plan.model_copy(update={"evictions": engine.book.plan_evictions()})


def _run_kueue(p: Problem, run: RunSpec) -> Plan:
    left = max(0.0, run.started + run.time_limit - clock.now())
    return stamped(p, solve_kueue(p, time_limit=left, seed=run.seed), run)


SOLVERS = [SolverInfo("kueue", "Kueue's queues, quota, borrowing and classic preemption, best-fit placement",
                      _run_kueue)]
"""The `kueue` baseline (`optsched.solvers.registry`)."""
