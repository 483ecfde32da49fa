"""From the domain model's decision to a plan: replicas onto nodes and devices, evictions named.

The domain model (`optsched.domain.model`) says which jobs go in, how many replicas of each group
go to each cell or class, and which running jobs leave for which rule. Here:

1. the chosen victims leave the ledger; per victim (Kueue's order) an admitted job that may evict
   it is placed with one replica on the victim's nodes, on its bins' quota flavors where one
   fits, else on any (rule 10's room, `serve_victims`; meanwhile the jobs it places keep off the
   nodes of the victims it has not reached yet); then the other admitted jobs are placed, in priority order,
   each replica on the best-fit node (kube-scheduler MostAllocated, the placement engine of the
   baselines: every primitive is the validator's own) among the nodes of the bins the model gave
   its group (where the bins run out below the group's minimum, the LP having rounded the job in
   with fewer replicas, the rest go anywhere on the bins' flavors); a job that does not fit there
   is tried on every existing node of its bins' flavors, then
   deferred with the engine's reason; the jobs the model left out are tried after them, on any
   existing node (a provisioning slot is opened only where the model put replicas: the plan
   provisions, per pool, up to the highest slot used);
2. every eviction is given a preemptor: the first admitted job the validator's rule accepts
   (`preemption.eviction_problems`, reclaims in Kueue's candidate order), for the model's reason
   or the other one;
3. a victim without one is first served late: a deferred job that may evict it is placed beside
   it (`serve_late`), and step 2 repeats; a victim still without one is put back where it ran;
   the queued jobs whose replicas took its room there are taken off again (deferred:
   `capacity`), and step 2 repeats (a job taken off may have been another eviction's preemptor)
   until every eviction has a preemptor.

Quota flavors are kept because the model's quota rows hold only for its own flavors: on
mixed-cloud-10k, served and retried replicas that left them (100 GPUs of L40S jobs onto A100
nodes) took quota and room the model had given other jobs, which were then deferred. Keeping
flavors, keeping the victims' nodes free while serving and late serving took the placed value
from 1.4-3.9% (one-off, before) to 0.4-1.9% below the model's bound on seeds 0-4
(benchmarks/results/domain-placement.md).

The plan is then checked by the validator (a violation is a bug: the caller is told why, and
never gets the plan).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from optsched import clock
from optsched.check import check_view
from optsched.concerns import eligibility
from optsched.concerns.tenancy import preemption, running, serving
from optsched.domain.cells import Cells
from optsched.domain.model import DomainSolution
from optsched.ledger import EPS, Ledger, PlacedReplica, flavor_class, flavor_use
from optsched.metrics import evaluate_view
from optsched.model.plan import Eviction, Plan, SolverStats
from optsched.problem import BArray, FArray, GroupSpec, IArray, JobSpec, Problem
from optsched.solvers.greedy import STRATEGIES, GreedyEngine, NodeCursor, kube_order, to_plan
from optsched.view import PlanView

PLACEMENT = "best-fit"
"""The node score replicas are placed with inside their bins."""

MAX_REPAIRS = 8
"""Rounds of step 3 before the plan is given up (each takes victims back for good, so it ends)."""


class DomainEngine(GreedyEngine):
    """The placement engine with the domain model's victims gone and its bins as the first try."""

    def __init__(self, p: Problem, cells: Cells, sol: DomainSolution) -> None:
        admitted = [j for j in kube_order(p) if j.index in sol.admitted]
        rest = [j for j in kube_order(p) if j.index not in sol.admitted]
        super().__init__(p, STRATEGIES[PLACEMENT], admitted + rest)
        self.sol = sol
        self.victims = [p.running[v] for v in (*sol.preempted, *sol.reclaimed)]
        if self.victims:
            self.changed.extend(self.ledger.add_running_many(self.victims, -1.0))
        node_cls = np.where(cells.node_cell >= 0, cells.cls[np.maximum(cells.node_cell, 0)], -1) if cells.n \
            else np.full(p.n_nodes, -1, dtype=np.int64)
        self.node_bin = (cells.node_cell, np.where(node_cls >= 0, cells.n + node_cls, -1))
        """Per node: its cell bin, and its class bin (`optsched.domain.model`'s z columns)."""
        self.bin_nodes: dict[int, BArray] = {}
        """Per bin asked for: its nodes."""
        self.masks: dict[tuple[tuple[int, ...], int], tuple[IArray, BArray | None]] = {}
        """Per (open bins, id of the eligible nodes): those nodes (kept, so the id stays theirs)
        and the bins' mask (None: it holds all of them)."""
        self.owned: dict[int, BArray] = {}
        """The bins' masks `_in_bins` handed out, by id."""
        self.cells = cells
        self.flavor_masks: dict[tuple[int, ...], BArray | None] = {}
        """Per set of bins: the nodes of their quota flavors (`_flavor_mask`; None: every node)."""
        self.in_bins = False
        self.keep_flavors = False
        self.any_flavor = False
        """The serving pass's second try for a victim: a replica beside it on any flavor."""
        self.reserved: BArray | None = None
        """During the serving pass: the nodes of the victims it has not reached yet, which the
        jobs it places for earlier victims leave free (a job that may not evict a victim and
        sits on its nodes leaves it unserved)."""
        self.serving: BArray | None = None
        """While the serving pass places a preemptor: the nodes of the victim it is placed for (its
        first replica that may go there does)."""
        self.existing = ~p.node_provisioned
        """Real nodes: outside its bins a replica never opens a provisioning slot."""
        if cells.slot.any():
            self.use_nodes(self.existing | np.isin(cells.node_cell, np.flatnonzero(cells.slot)))

    def _in_bins(self, job: JobSpec, group: GroupSpec, placed: list[PlacedReplica]) -> tuple[bool, BArray | None]:
        """(whether the model placed the group, the nodes of its bins that still have replicas to
        take: the model's count per bin, less the group's replicas placed there). None nodes: no
        restriction, the open bins hold every node the group may use (the usual case for a class
        bin), so the placement takes the fast path of an unrestricted replica; also when the bins
        are used up before the group's minimum (an LP solution rounds a job in with fewer
        replicas than it needs: on mixed-cloud-10k 0-5 such jobs a seed in a one-off count, big gangs
        among them)."""
        bins = self.sol.replicas.get((job.index, group.index))
        if bins is None:
            return False, None
        n = self.cells.n
        node_bin = self.node_bin[0] if min(bins) < n else self.node_bin[1]
        taken: dict[int, int] = {}
        for r in placed:
            if r.group == group.index:
                b = int(node_bin[r.node])
                taken[b] = taken.get(b, 0) + 1
        open_bins = tuple(sorted(b for b, count in bins.items() if taken.get(b, 0) < count))
        if not open_bins and sum(taken.values()) < group.rmin:
            # the model's bins are used up below the group's minimum (the LP rounded the job in
            # with fewer replicas): the others anywhere it may go on its bins' flavors, before the
            # jobs after it fill it
            return True, self._flavor_mask(bins)
        eligible = self.eligible_nodes(job, group)
        key = (open_bins, id(eligible))
        cached = self.masks.get(key)
        if cached is not None and cached[0] is eligible:
            return True, cached[1]
        mask = np.zeros(self.p.n_nodes, dtype=bool)
        for b in open_bins:
            nodes = self.bin_nodes.get(b)
            if nodes is None:
                nodes = self.bin_nodes[b] = node_bin == b
            mask |= nodes
        got = None if mask[eligible].all() else mask
        self.masks[key] = (eligible, got)
        if got is not None:
            self.owned[id(got)] = got
        return True, got

    def _flavor_mask(self, bins: dict[int, int]) -> BArray | None:
        """The nodes that count for the same quota flavors as some node of `bins` (None: every
        node does): a replica the model's bins cannot hold goes there, so that it takes quota the
        model gave its job, not quota the model gave jobs placed after it."""
        p = self.p
        if not len(p.flavors):
            return None
        cls = flavor_class(p)  # nodes every flavor counts alike share a class
        key = tuple(sorted(bins))
        if key not in self.flavor_masks:
            n = self.cells.n
            node_bin = self.node_bin[0] if min(bins) < n else self.node_bin[1]
            in_bins = np.isin(node_bin, list(bins))
            got = np.isin(cls, np.unique(cls[in_bins]))
            self.flavor_masks[key] = None if got.all() else got
            if not got.all():
                self.owned[id(got)] = got
        return self.flavor_masks[key]

    def cursor_within(self, job: JobSpec, group: GroupSpec,
                      restrict: BArray | None) -> tuple[NodeCursor, BArray | None]:
        """For a mask of bins (`_in_bins`), a cursor over the shape's nodes in those bins, kept for
        the round: its best node is the shape cursor's best inside the mask (same scores, same
        tie order), found over the bins' nodes only. Any other mask is applied as given."""
        base, mask = super().cursor_within(job, group, restrict)
        if mask is None:
            return base, None
        if self.owned.get(id(mask)) is not mask:
            return base, mask  # not a bins' mask: combined with another rule, or the real nodes
        sub = self.subset_cursor(base, id(mask), mask)  # owned masks live as long as the engine: ids stay theirs
        return (base, mask) if sub is None else (sub, None)

    def domain_candidates(self, job: JobSpec, levels: list[int], limit: int) -> list[tuple[int, int]]:
        """The base engine's domains for a topology-bound job; while a serving pass places it
        beside a victim, only those holding one of the victim's nodes (in any other, the replica
        that must go beside it has nowhere to go: the same outcome, without the attempt)."""
        out = super().domain_candidates(job, levels, limit)
        if self.serving is None:
            return out
        nodes = np.flatnonzero(self.serving)
        return [(lv, d) for lv, d in out if bool((self.p.node_domain_at(lv)[nodes] == d).any())]

    def replica_restrict(self, job: JobSpec, group: GroupSpec, placed: list[PlacedReplica]) -> BArray | None:
        """The base engine's mask and, on the first try of an admitted job, its group's bins with
        replicas left to take (slots only there)."""
        extra = super().replica_restrict(job, group, placed)
        victim = self.serving
        target = None if victim is None else self._beside(job, group, victim)
        if victim is not None and target is not None and not any(victim[r.node] for r in placed) \
                and target[self.eligible_nodes(job, group)].any():
            return target if extra is None else extra & target  # beside the victim (rule 10's room)
        given, mine = self._in_bins(job, group, placed) if self.in_bins else (False, None)
        if not given:
            mine = self.existing if self.p.pool_max_nodes.sum() else None
            bins = self.sol.replicas.get((job.index, group.index)) if self.keep_flavors else None
            if bins:
                same = self._flavor_mask(bins)
                mine = same if mine is None else (mine if same is None else mine & same)
        if self.reserved is not None:  # the serving pass keeps the victims still to serve free
            mine = ~self.reserved if mine is None else mine & ~self.reserved
        if mine is None:
            return extra
        return mine if extra is None else extra & mine

    def run_passes(self, deadline: float, serve_until: float | None = None
                   ) -> tuple[dict[str, list[PlacedReplica]], dict[str, tuple[str, str]]]:
        """The admitted jobs in their bins (those bound to one domain first, each part in priority
        order), then those of them that did not fit, anywhere on their bins' flavors, then the jobs
        the model left out, anywhere (priority order): placements and deferrals. The serving pass
        (`serve_victims`) comes first, until `serve_until` (default: `deadline`)."""
        admitted = [j for j in self.order or [] if j.index in self.sol.admitted]
        # the jobs bound to one domain first: the others' bins (classes) span that domain too
        per_cell = {j for (j, _), bins in self.sol.replicas.items() if min(bins) < self.cells.n}
        admitted = [j for j in admitted if j.index in per_cell] + [j for j in admitted if j.index not in per_cell]
        self.in_bins = True
        try:
            until = deadline if serve_until is None else min(deadline, serve_until)
            served = self.serve_victims(admitted, until) if clock.now() < until else {}
            self.order = [j for j in admitted if j.id not in served]
            placed, deferred = self.run(deadline=deadline)
        finally:
            self.in_bins = False
        placed.update(served)
        self.first_pass = dict(deferred)
        for step, jobs in enumerate(([j for j in admitted if j.id in deferred],
                                     [j for j in kube_order(self.p) if j.id not in placed
                                      and j.index not in self.sol.admitted])):
            self.order = jobs
            self.keep_flavors = step == 0  # the admitted jobs again: on their bins' flavors
            more, again = self.run(deadline=deadline)
            placed.update(more)
            for j in more:
                deferred.pop(j, None)
            deferred.update(again)
        self.keep_flavors = False
        return placed, deferred

    def serve_victims(self, admitted: list[JobSpec], deadline: float) -> dict[str, list[PlacedReplica]]:
        """The serving pass (rule 10's room clause): per victim, in Kueue's order, unless a job
        placed so far that may evict it has a replica on its nodes, the first admitted job that
        may evict it (the model's reason first) and has a group the victim's nodes can hold is
        placed with one such replica on them, the rest in its bins, trying at most
        `SERVE_ATTEMPTS` jobs: first with that replica on its bins' quota flavors
        (`_group_flavors`), then, where none was placed so, on any. Best-fit alone leaves the
        freed nodes, the least allocated, to the last jobs placed, which may evict nobody. While
        the pass runs, the nodes of the victims it has not reached are kept free (`reserved`).
        It stops at `deadline`: the victims it did not reach are left to the passes (a job they
        place beside one that may evict it serves it) and to the naming. Returns the jobs placed."""
        p = self.p
        self.deadline = deadline
        victims = _victim_reasons(self.sol)
        admitted_ids = {j.index for j in admitted}
        placed: dict[str, list[PlacedReplica]] = {}
        on_node: dict[int, set[int]] = {}
        order = preemption.kueue_order(p, [p.running[v] for v in victims])
        self.reserved = np.zeros(p.n_nodes, dtype=bool)
        for victim in order:
            self.reserved[sorted(serving.victim_nodes(victim))] = True
        try:
            for victim in order:
                if clock.now() > deadline:
                    break
                nodes = sorted(serving.victim_nodes(victim))
                self.reserved[nodes] = False  # its turn: its nodes are the target now, then anyone's
                allowed = {j.index for j in self._serving_candidates(victim, victims[victim.index])}
                if any(allowed & on_node.get(n, set()) for n in nodes):
                    continue  # served already (by room)
                got = self._serve(victim, victims[victim.index],
                                  lambda j: j.index in admitted_ids and j.id not in placed)
                if got is None:  # none fits on its bins' flavors: a replica on another flavor
                    self.any_flavor = True  # serves it still (a victim put back costs more)
                    try:
                        got = self._serve(victim, victims[victim.index],
                                          lambda j: j.index in admitted_ids and j.id not in placed)
                    finally:
                        self.any_flavor = False
                if got is not None:
                    job, replicas = got
                    placed[job.id] = replicas
                    for r in replicas:
                        on_node.setdefault(r.node, set()).add(job.index)
        finally:
            self.reserved = None
        return placed

    def serve_late(self, stuck: list[JobSpec], reasons: dict[int, str], placed: dict[str, list[PlacedReplica]],
                   deferred: dict[str, tuple[str, str]], deadline: float) -> list[str]:
        """The serving pass again, for victims the naming left without a legal preemptor: per
        victim, in Kueue's order, the first job the plan deferred that may evict it and fits
        beside it is placed with a replica on its nodes (`SERVE_ATTEMPTS` tries). The model
        counted the victim's room in its cell, but no admitted job that may evict it was placed
        there (none fitted, or its bins were elsewhere); without this the victim is put back, and
        the jobs on its nodes and the quota it holds again push admitted jobs out (`_put_back`).
        Everything else is placed already, so a job placed here keeps every quota rule of the
        plan (the engine tests its quota on the round's whole usage); the naming that follows
        judges every eviction again. Returns the ids of the jobs placed."""
        self.deadline = deadline
        served: list[str] = []
        for victim in preemption.kueue_order(self.p, stuck):
            if clock.now() > deadline:
                break
            reason = reasons[victim.index]
            got = self._serve(victim, reason, lambda j: j.id in deferred)
            if got is not None:
                job, replicas = got
                placed[job.id] = replicas
                deferred.pop(job.id, None)
                served.append(job.id)
        return served

    def _serving_candidates(self, victim: JobSpec, reason: str) -> list[JobSpec]:
        """The queued jobs that may evict `victim`: for the model's reason first, then the other."""
        who = preemption.preemptors(self.p, victim)
        return [*who.pool(reason), *who.pool("reclaimed" if reason == "preempted" else "preempted")]

    def _serve(self, victim: JobSpec, reason: str, eligible: Callable[[JobSpec], bool]
               ) -> tuple[JobSpec, list[PlacedReplica]] | None:
        """Place the first `eligible` job that may evict `victim` and has a group its nodes can
        hold, with one such replica on them (at most `SERVE_ATTEMPTS` tries; a job whose domain
        holds none of those nodes is not a try): the job and its replicas, recorded, or None."""
        nodes = sorted(serving.victim_nodes(victim))
        target = np.zeros(self.p.n_nodes, dtype=bool)
        target[nodes] = True
        known: dict[tuple[int, int], bool] = {}  # `_fits_beside` per shape: the ledger moves only on a success
        tries = 0
        for job in self._serving_candidates(victim, reason):
            if tries >= SERVE_ATTEMPTS:
                break
            if not eligible(job) or not self._fits_beside(job, nodes, known):
                continue
            self.serving = target
            try:
                att = self.admit(job)
            finally:
                self.serving = None
            if att.failure == "topology":  # its domain holds none of these nodes: not a try
                continue
            tries += 1
            if att.failure is None:
                self.record(job, att.replicas)
                return job, att.replicas
        return None

    def _fits_beside(self, job: JobSpec, nodes: list[int], known: dict[tuple[int, int], bool]) -> bool:
        """Whether one replica of some group of `job` fits, by resources and devices, on one of
        `nodes` (a victim's) that it may use (`_beside`): a try that cannot succeed is not counted
        against `SERVE_ATTEMPTS`. `known` holds the answers per replica shape (its eligible nodes)
        and flavor mask while the ledger has not moved."""
        for g in job.groups:
            eligible = self.eligible_nodes(job, g)
            same = self._group_flavors(job, g)
            key = (id(eligible), id(same))
            got = known.get(key)
            if got is None:
                at = np.searchsorted(eligible, nodes).tolist()
                got = known[key] = any(
                    i < len(eligible) and int(eligible[i]) == n and (same is None or bool(same[n]))
                    and self.ledger.fits_one(g, n) for i, n in zip(at, nodes, strict=True))
            if got:
                return True
        return False

    def _beside(self, job: JobSpec, group: GroupSpec, target: BArray) -> BArray:
        """The nodes of `target` (a victim's) where the serving passes may put a replica of
        `group`: those of its bins' quota flavors (`_group_flavors`)."""
        same = self._group_flavors(job, group)
        return target if same is None else target & same

    def _group_flavors(self, job: JobSpec, group: GroupSpec) -> BArray | None:
        """In the first serving pass, the nodes of the quota flavors of the group's bins
        (`_flavor_mask`; None: any). A replica served onto another flavor takes quota and room
        the model gave other jobs there (on mixed-cloud-10k, 100 GPUs of L40S jobs went to A100
        nodes that way, and A100 jobs were then deferred for capacity)."""
        if not self.in_bins or self.any_flavor:
            return None
        bins = self.sol.replicas.get((job.index, group.index))
        return self._flavor_mask(bins) if bins else None


SERVE_ATTEMPTS = 3
"""Admitted jobs the serving pass tries per victim before it leaves the victim to the naming."""


def _victim_reasons(sol: DomainSolution) -> dict[int, str]:
    """The model's victims (positions in `Problem.running`) with the reason it chose for each."""
    return {v: "preempted" for v in sol.preempted} | {v: "reclaimed" for v in sol.reclaimed}


def _preemptor(p: Problem, ledger: Ledger, job: JobSpec, replicas: list[PlacedReplica]) -> preemption.Preemptor:
    """The validator's view of an admitted job as a preemptor (`preemption.preemptor`), read from
    the engine's ledger (which holds exactly the plan's usage) instead of a `PlanView`."""
    uses = np.zeros(len(p.flavors))
    for r in replicas:
        uses += flavor_use(p, job.groups[r.group], r.node)
    final, nominal = ledger.quota_used[job.tenant], p.nominal[job.tenant]
    within = bool(np.all((final <= nominal + EPS * np.maximum(1.0, nominal)) | (uses <= 0)))
    return preemption.Preemptor(job, uses, within, frozenset(r.node for r in replicas), ledger.quota_used)


def name_preemptors(p: Problem, ledger: Ledger, placed: dict[str, list[PlacedReplica]],
                    victims: dict[int, str],
                    previous: dict[int, str] | None = None) -> tuple[list[Eviction], list[int]]:
    """(evictions with their preemptors, victims without a legal one) for the placed jobs: per
    victim the model's reason first, then the other; reclaims of one tenant in Kueue's candidate
    order, each judged with the tenant's earlier reclaims gone (`preemption.reclaim_order`'s rule).
    `previous` (victim -> job id: the last naming's, before a repair) is tried first in its pool:
    a repair changes few jobs, and most victims keep their preemptor (judged again all the same)."""
    previous = previous or {}
    out: list[Eviction] = []
    stuck: list[int] = []
    reclaimed_before: dict[int, FArray] = {}
    seen: dict[int, tuple[preemption.Preemptor, int]] = {}
    quota_served: dict[tuple[int, int, int], bool] = {}
    on_node: dict[int, set[str]] = {}
    for job_id, reps in placed.items():
        for r in reps:
            on_node.setdefault(r.node, set()).add(job_id)

    def as_preemptor(job: JobSpec) -> tuple[preemption.Preemptor, int]:
        """The job as a preemptor, and the flavors it uses as bits."""
        got = seen.get(job.index)
        if got is None:
            by = _preemptor(p, ledger, job, placed[job.id])
            got = seen[job.index] = by, sum(1 << f for f in np.flatnonzero(by.uses > 0).tolist())
        return got

    def serves(victim: JobSpec, beside: set[str], held: int, job: JobSpec) -> bool:
        """`serving.serves_problems` is empty for `job` as the victim's preemptor: beside it (on
        one of its nodes), or by the quota clause, cached per (victim, tenant, shared flavors): the
        final usage is the ledger's for every preemptor here."""
        if job.id in beside:
            return True
        shared_bits = as_preemptor(job)[1] & held
        if not shared_bits:
            return False
        key = (victim.index, job.tenant, shared_bits)
        got = quota_served.get(key)
        if got is None:
            shared = np.array([(shared_bits >> f) & 1 for f in range(len(p.flavors))], dtype=bool)
            got = quota_served[key] = serving.quota_serves(p, victim, job.tenant, shared, ledger.quota_used)
        return got

    for victim in preemption.kueue_order(p, [p.running[v] for v in victims]):
        who = preemption.preemptors(p, victim)
        first = victims[victim.index]
        beside = set().union(*(on_node.get(n, set()) for n in serving.victim_nodes(victim)))
        held = sum(1 << f for f in np.flatnonzero(running.held_flavors(p, victim) > 0).tolist())
        named = None
        for reason in (first, "reclaimed" if first == "preempted" else "preempted"):
            pool = who.pool(reason)
            others = reclaimed_before.get(victim.tenant, np.zeros(len(p.flavors))) if reason == "reclaimed" else None
            last = previous.get(victim.index)
            first_try = [j for j in pool if j.id == last] if last is not None else []
            by = next((j for j in (*first_try, *pool) if placed.get(j.id) and serves(victim, beside, held, j)
                       and not preemption.eviction_problems(p, victim, reason, as_preemptor(j)[0], others)), None)
            if by is not None:
                named = Eviction(job=victim.id, reason=reason, by=by.id,
                                 lost_gpu_hours=running.lost_gpu_hours(p, victim))
                if reason == "reclaimed":
                    reclaimed_before[victim.tenant] = reclaimed_before.get(
                        victim.tenant, np.zeros(len(p.flavors))) + running.held_flavors(p, victim)
                break
        if named is None:
            stuck.append(victim.index)
        else:
            out.append(named)
    return out, stuck


def _put_back(engine: DomainEngine, victim: JobSpec, placed: dict[str, list[PlacedReplica]],
              deferred: dict[str, tuple[str, str]]) -> list[str]:
    """Return a victim to where it ran, taking off queued jobs with replicas on its nodes, lowest
    priority (then newest) first, only until its nodes and devices hold it again: the ids of the
    jobs taken off (deferred, until `assign` tries them elsewhere)."""
    taken: list[str] = []
    p, ledger = engine.p, engine.ledger
    engine.changed.extend(ledger.add_running_many([victim]))  # the cursors re-score its nodes
    nodes = sorted({pl.node for pl in victim.placements})
    devices = sorted({d for pl in victim.placements for d in pl.devices})
    on = set(nodes)
    holders = sorted((p.jobs[p.job_index[j]] for j, reps in placed.items() if any(r.node in on for r in reps)),
                     key=lambda j: (j.priority, -j.submitted_at, -j.index))
    for job in holders:
        over = ledger.used[nodes] > p.cap[nodes] + EPS * np.maximum(1.0, p.cap[nodes])
        if not over.any() and not any(ledger.dev_used[d] > 1.0 + EPS for d in devices):
            return taken
        taken.append(job.id)
        engine.rollback(job, list(placed.pop(job.id)))
        deferred[job.id] = ("capacity", f"the nodes of running job {victim.id} were kept for it: no job "
                                        "admitted in this plan may evict it")
    return taken


@dataclass(frozen=True)
class Assigned:
    """The plan of a domain solution (its objective terms evaluated), and how many of its victims
    were put back."""

    plan: Plan
    kept_back: int


PLACE_SECONDS_PER_JOB = 2.2e-4
"""Time the placement passes take per admitted job: 0.14-0.19 s for 867-891 on mixed-cloud-10k at
1 s, seeds 0-4 (1.6-2.1e-4 a job; one-off, 2026-12-06). The serving pass ends where this much
is left for them (`assign`): serving cut short by the clock leaves the victims it did not reach
to be put back, and passes cut short defer the lowest-priority admitted jobs (`time_limit`),
which costs more. Before, the pass ran whole or not at all, by an estimate of both (7.5e-4 a
victim, 2.5e-4 a job, above the real times): after a stall of 0.08 s it was skipped, which cost
as much time as the pass (its victims put back, their nodes' jobs placed again) and kept back
52 of 873 admitted jobs (mixed-cloud-10k seed 1 at 1 s: 11,207 against 11,583)."""

CHECK_SECONDS_PER_JOB = 1e-4
"""Time kept back per queued and running job for naming preemptors and checking the plan (0.07-0.16
s for 1,473 jobs on mixed-cloud-10k)."""


def assign(p: Problem, cells: Cells, sol: DomainSolution, *, deadline: float) -> Assigned | str:
    """The plan of the domain model's decision `sol` (module docstring), ready by `deadline`
    (`clock.now()` seconds) when the estimates hold, or why there is none: the plan failed the
    validator (a bug). Jobs the placement did not reach in time are deferred (`time_limit`)."""
    engine = DomainEngine(p, cells, sol)
    placing_until = deadline - CHECK_SECONDS_PER_JOB * (len(p.jobs) + len(p.running))
    # the serving pass in the time the passes after it leave (`PLACE_SECONDS_PER_JOB`): the
    # victims it does not reach are put back if no job placed later may evict them beside them
    serve_until = placing_until - PLACE_SECONDS_PER_JOB * len(sol.admitted)
    placed, deferred = engine.run_passes(placing_until, serve_until=serve_until)
    victims = _victim_reasons(sol)
    evictions: list[Eviction] = []
    kept_back = 0
    previous: dict[int, str] = {}
    taken_off: list[str] = []  # jobs a put-back took off, placed again elsewhere before the next naming
    late_tried: set[int] = set()  # victims the late serving pass (`serve_late`) has tried
    repairs = 0
    while True:
        evictions, stuck = name_preemptors(p, engine.ledger, placed, victims, previous)
        previous = {p.running_index[e.job]: e.by for e in evictions if e.by is not None}
        if not stuck and not taken_off:
            break
        if not stuck:  # place them anywhere (a placement never unserves an eviction; naming judges the rest)
            if clock.now() >= placing_until:
                break
            # once each: a job taken off, served late and taken off again is listed twice
            engine.order = [p.jobs[p.job_index[j]] for j in dict.fromkeys(taken_off) if j in deferred]
            taken_off = []
            more, again = engine.run(deadline=placing_until)
            placed.update(more)
            for j in more:
                deferred.pop(j, None)
            deferred.update(again)
            continue
        late = [p.running[v] for v in stuck if v not in late_tried]
        if late and clock.now() < placing_until:
            late_tried.update(v.index for v in late)
            if engine.serve_late(late, victims, placed, deferred, placing_until):
                continue  # named again: the served victims have a preemptor beside them now
        repairs += 1
        if repairs > 2 * MAX_REPAIRS:
            return f"victims without a legal preemptor after {MAX_REPAIRS} repairs (a bug)"
        for v in stuck:
            del victims[v]
            taken_off.extend(_put_back(engine, p.running[v], placed, deferred))
        kept_back += len(stuck)
    plan = to_plan(p, placed, deferred, SolverStats(name="domain", status="heuristic"))
    used = [r.node for reps in placed.values() for r in reps]
    plan = plan.model_copy(update={"evictions": evictions, "provisioning": eligibility.provisioning_of(p, used)})
    view = PlanView(p, plan)  # checked and evaluated on one index of the plan
    violations = check_view(view)
    if violations:
        return f"the plan failed the check (a bug): {violations[0]}"
    return Assigned(plan.model_copy(update={"objective": evaluate_view(view).objective()}), kept_back)


__all__ = ["Assigned", "DomainEngine", "assign", "name_preemptors"]
