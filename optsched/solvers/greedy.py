"""Greedy baselines: the strategies that Kubernetes, Volcano, Slurm and the papers use.

All of them share one engine (`GreedyEngine`): jobs are taken in the strategy's order; each job
is placed replica by replica (minimum counts first, ratios satisfied, then elastic replicas up to
`max`) on the node the strategy scores best among the nodes where the replica fits; a job that
cannot be placed whole is rolled back (gang all-or-nothing) and deferred with the binding
reason. Every feasibility test is the concern's own primitive (`eligibility.mask`,
`Ledger.fits_mask`, `devices.pick`, `spread.allowed_nodes`, `quota.problems`, uplink crossings)
that the validator also uses, so a baseline plan passes `check` by construction, and the tests
verify it.

The strategies differ only in what they are known for: the job order, the node score, the
device choice inside a node, and how they treat topology domains.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import TypeAdapter

from optsched import clock
from optsched.concerns import JOB_RULES, eligibility, fabric, gang, spread
from optsched.concerns.devices import DevicePolicy, pick
from optsched.latency import gc_paused
from optsched.ledger import EPS, Ledger, PlacedReplica, crossed_domains
from optsched.model.plan import Deferred, Placement, Plan, SolverStats
from optsched.problem import BArray, Derived, FArray, GroupSpec, IArray, JobSpec, Problem
from optsched.scores import (
    MONOTONE_SCORERS,
    SCALAR_SCORERS,
    Scorer,
    score_alignment,
    score_binpack,
    score_first,
    score_image_best_fit,
    score_least_allocated,
    score_most_allocated,
    score_tightest,
)


@dataclass
class Attempt:
    """Replicas placed so far for one job, and why it failed if it did."""

    replicas: list[PlacedReplica] = field(default_factory=list)
    failure: str | None = None
    detail: str = ""
    within: BArray | None = None
    """The node mask its minimum was placed within (a topology domain; None: every node), where
    its elastic growth goes on (`GreedyEngine.grow`)."""


# ---------------------------------------------------------------------------- job orders
def kube_order(p: Problem) -> list[JobSpec]:
    """kube-scheduler PrioritySort (and Slurm's priority then age): priority desc, then submit time."""
    return sorted(p.jobs, key=lambda j: (-j.priority, j.submitted_at, j.index))


@dataclass(frozen=True)
class Strategy:
    """What distinguishes one baseline: node score, device policy, topology handling, job order."""

    name: str
    score: Scorer
    device_policy: DevicePolicy = "first"
    domain_first: bool = False
    """Slurm topology/tree: try to fit the job inside one lowest-level domain, best fit."""
    drf_order: bool = False
    """Volcano: within a priority, the tenant with the lowest weighted dominant share goes first."""
    source: str = ""


def _domains_at(p: Problem, level: int) -> tuple[IArray, IArray]:
    doms, inv = np.unique(p.node_domain_at(level), return_inverse=True)
    return doms, inv


DOMAINS_AT: Derived[tuple[IArray, IArray]] = Derived("greedy.domains_at", _domains_at)
"""(the domains of `level` that hold a node, each node's position among them)."""


MAX_DOMAIN_ATTEMPTS = 64
"""Domains tried per job by the domain-first strategies before the job is deferred."""


SCALAR_RESCORE = 8
"""Changes (log entries) up to which a cursor re-scores their nodes one by one in plain Python
(`SCALAR_SCORERS`) rather than in one vectorised call (numpy's per-call cost dominates below it)."""


LOG_READ_SHARE = 8
"""A cursor at most (its nodes / this) single changes behind reads their nodes off the log
(`ChangeLog.entries`); further behind, or past a bulk change, it compares its nodes' stamps
(`ChangeLog.changed_since`): one pass over its nodes, however long the log has grown."""


class ChangeLog:
    """The nodes whose usage changed during a round, for the cursors to re-score what they have
    not seen. Each change is an entry: one node (`append`, a replica placed or taken off), or
    many at once (`extend`, running jobs released or put back, one `BULK` entry). A cursor a few
    single changes behind reads their nodes off the log (`entries`); one further behind asks for
    the nodes changed since (`changed_since`): every node keeps the entry count at its last
    change (`stamp`, brought up to date in bulk when asked), so that is one comparison over the
    cursor's own nodes, however long the log has grown."""

    BULK = -1
    """The entry of a bulk change (its nodes are kept aside until stamped)."""

    def __init__(self, n_nodes: int) -> None:
        self.entries: list[int] = []
        """One per change: the node, or `BULK`."""
        self.stamp: IArray = np.zeros(n_nodes, dtype=np.int64)
        """Per node: the number of entries up to its last change (0: none), for the entries
        before `_stamped`."""
        self._stamped = 0
        self._bulks: list[tuple[int, IArray]] = []
        """Bulk entries not stamped yet: (entry index, nodes)."""

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, node: int) -> None:
        """Log a change of one node's usage."""
        self.entries.append(node)

    def extend(self, nodes: IArray) -> None:
        """Log a change of many nodes' usage at once (repeats allowed), as one entry."""
        if len(nodes):
            self._bulks.append((len(self.entries), nodes))
            self.entries.append(self.BULK)

    def changed_since(self, seen: int, nodes: IArray) -> IArray:
        """Positions in `nodes` of the nodes changed after the first `seen` entries, ascending."""
        start, stop = self._stamped, len(self.entries)
        if start < stop:  # stamp the entries since the last call: singles at once, then the bulks
            chunk = np.array(self.entries[start:stop], dtype=np.int64)
            single = np.flatnonzero(chunk >= 0)
            np.maximum.at(self.stamp, chunk[single], single + start + 1)
            for at, bulk in self._bulks:
                self.stamp[bulk] = np.maximum(self.stamp[bulk], at + 1)
            self._bulks.clear()
            self._stamped = stop
        out: IArray = np.flatnonzero(self.stamp[nodes] > seen)
        return out


class NodeCursor:
    """The eligible nodes of one replica shape, with their fit and score, kept current lazily.

    A placement changes only its own node's usage, so every other node keeps its fit and its
    score. The cursor scores all its nodes once (O(nodes x resources)); afterwards it re-scores
    only the nodes that the engine's change log names since it last looked, in one vectorised
    call. Replicas of the same shape (same request, devices and eligibility) share one cursor
    across the whole round. The choice is the same as rescoring every node for every replica
    (highest score, lowest node index on ties), at O(nodes) per replica instead of
    O(nodes x resources) per replica.
    """

    def __init__(self, engine: GreedyEngine, group: GroupSpec, nodes: IArray) -> None:
        self.engine = engine
        self.group = group
        self.nodes = nodes
        self.key = np.full(len(nodes), -np.inf)
        self.seen = len(engine.changed)
        self._positions: dict[int, IArray] = {}
        self._by_domain: dict[int, tuple[IArray, IArray, IArray, dict[int, IArray]]] = {}
        """Per spread level: the positions sorted by domain, their domains, the positions outside
        the group's eligible domains, and each domain's positions once asked for (built on the
        first spread replica)."""
        self._where: dict[int, int] | None = None
        """Position of each of `nodes` (built on the first one-by-one re-score)."""
        if len(nodes):
            self._score(np.arange(len(nodes)))

    def clone(self, seen: int) -> NodeCursor:
        """A copy with its own fit and scores (the caches of positions shared, read-only), current
        up to entry `seen` of whatever change log the engine holds when it next syncs: a trial
        placement on a copy of the ledger scores on the copy without touching this cursor."""
        other = copy.copy(self)  # shallow: the caches of positions are shared
        other.key, other.seen = self.key.copy(), seen
        return other

    def _score(self, positions: IArray) -> None:
        e = self.engine
        nodes = self.nodes[positions]
        fit = e.ledger.fits_at(self.group, nodes)
        self.key[positions] = -np.inf
        self.key[positions[fit]] = e.s.score(e.p, e.ledger, self.group, nodes[fit])

    def sync(self) -> None:
        """Re-score the nodes whose usage changed since the last call."""
        log = self.engine.changed
        entries = log.entries
        seen = self.seen
        if seen == len(entries) or not len(self.nodes):
            self.seen = len(entries)
            return
        self.seen = len(entries)
        e = self.engine
        one = SCALAR_SCORERS.get(e.s.score)
        gap = len(entries) - seen
        new = entries[seen:] if gap <= max(SCALAR_RESCORE, len(self.nodes) // LOG_READ_SHARE) else None
        if new is not None and ChangeLog.BULK in new:
            new = None  # a bulk change: its nodes are known by their stamps
        if new is not None and one is not None and gap <= SCALAR_RESCORE:  # the usual case: the node just placed on
            if self._where is None:
                self._where = dict(zip(self.nodes.tolist(), range(len(self.nodes)), strict=True))
            for node in set(new):
                i = self._where.get(node)
                if i is not None:
                    self.key[i] = one(e.p, e.ledger, self.group, node) if e.ledger.fits_one(self.group, node) \
                        else -np.inf
            return
        if new is not None:  # a few single changes: their nodes, off the log
            touched = np.fromiter(sorted(set(new)), dtype=np.int64)
            pos = np.searchsorted(self.nodes, touched)
            inside = pos < len(self.nodes)
            pos = pos[inside]
            pos = pos[self.nodes[pos] == touched[inside]]
        else:
            pos = log.changed_since(seen, self.nodes)
        if len(pos):
            self._score(pos)

    def best(self, allowed: BArray | None = None, hidden: IArray | None = None) -> int:
        """The best node where a replica fits (among `allowed` positions, none of the `hidden`
        positions), or -1. Hiding a few positions costs what they number, masking costs a pass
        over every node: the same choice (highest score, lowest index on ties) either way."""
        self.sync()
        key = self.key if allowed is None else np.where(allowed, self.key, -np.inf)
        if not len(key):
            return -1
        if hidden is not None and len(hidden):
            saved = key[hidden]
            key[hidden] = -np.inf
            i = int(key.argmax())
            found = bool(key[i] > -np.inf)
            key[hidden] = saved
        else:
            i = int(key.argmax())
            found = bool(key[i] > -np.inf)
        return int(self.nodes[i]) if found else -1

    def spread_hidden(self, job: JobSpec, group: GroupSpec, level: int, blocked: list[int]) -> IArray:
        """Positions of the cursor's nodes that a spread group may not use now: those in the
        `blocked` domains of `level` (`spread.blocked_domains`) and those outside the group's
        eligible spread domains (which `spread.allowed_domains` refuses as well)."""
        got = self._by_domain.get(level)
        if got is None:
            dom = self.engine.p.node_domain_at(level)[self.nodes]
            order = np.argsort(dom, kind="stable")
            n_doms = len(spread.eligible_domains(self.engine.p, job, group, level))
            outside = np.flatnonzero(self.domain_positions(job, group, level) == n_doms)
            got = self._by_domain[level] = (order, dom[order], outside, {})
        order, sorted_dom, outside, members = got
        parts = []
        for d in blocked:
            at = members.get(d)
            if at is None:
                lo, hi = np.searchsorted(sorted_dom, [d, d + 1]).tolist()
                at = members[d] = order[lo:hi]
            parts.append(at)
        if not parts:
            return outside
        if len(outside):
            parts.append(outside)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def domain_positions(self, job: JobSpec, group: GroupSpec, level: int) -> IArray:
        """`spread.domain_position` of the cursor's nodes (kept: a spread group asks per replica)."""
        got = self._positions.get(level)
        if got is None:
            got = self._positions[level] = spread.domain_position(self.engine.p, job, group, level)[self.nodes]
        return got

    def drop(self, node: int) -> None:
        """Do not offer `node` until its usage changes (its devices cannot take the replica)."""
        self.key[int(np.searchsorted(self.nodes, node))] = -np.inf


class GreedyEngine:
    """Places a round job by job for one `Strategy` (see module docstring)."""

    def __init__(self, problem: Problem, strategy: Strategy, order: Sequence[JobSpec] | None = None) -> None:
        clock.charge(clock.ENGINE_S * (problem.n_nodes + len(problem.jobs) + len(problem.running)))
        self.p = problem
        self.s = strategy
        self.order = None if order is None else list(order)
        """A job order that replaces the strategy's own (the LP-guided hint of the CP-SAT round)."""
        self.deadline = math.inf
        self.ledger = Ledger.with_running(problem)
        self.real = ~problem.node_provisioned
        self.tenant_share_use = np.zeros((len(problem.tenant_names), len(problem.resources) + 1))
        self._cursors: dict[tuple[object, ...], NodeCursor] = {}
        """One cursor per replica shape, for the whole round."""
        self._cursor_of: dict[tuple[bool, int, int, str], NodeCursor] = {}
        """The cursor of each (running, job, group, strategy) asked for (its shape key is not
        recomputed per replica)."""
        self._subset_cursors: dict[tuple[int, Hashable], tuple[NodeCursor, NodeCursor | None]] = {}
        """(id of a cursor, subset) -> (that cursor, its cursor over the subset: `subset_cursor`)."""
        self._domain_masks: dict[tuple[int, int], BArray] = {}
        """(level, domain) -> its nodes (`domain_mask`), for the round."""
        self._mask_domain: dict[int, tuple[int, int]] = {}
        """id of a mask in `_domain_masks` -> its (level, domain) (they live as long as the engine)."""
        self.changed = ChangeLog(problem.n_nodes)
        """The nodes whose usage changed, in order (cursors re-score what they have not seen)."""
        self._totals: FArray | None = None
        """Cluster totals per resource and GPUs (real nodes), the DRF denominators."""
        self._last: tuple[NodeCursor, Ledger, ChangeLog, int, int] | None = None
        """The last replica placed without a mask: (its cursor, ledger, log, the log's length after
        it, its node). While nothing else changed and the score is monotone, that node is still its
        cursor's best wherever the next replica of the shape fits (`_repeat_node`)."""

    # ------------------------------------------------------------------ one replica
    def shape_cursor(self, job: JobSpec, group: GroupSpec) -> NodeCursor:
        """The round's cursor for the shape of `group` (its eligible real nodes, scored by the
        current strategy: an engine whose strategy changes per job keeps one cursor per strategy)."""
        mine = (job.running, job.index, group.index, self.s.name)
        cursor = self._cursor_of.get(mine)
        if cursor is not None:
            return cursor
        key = (eligibility.shape_key(self.p, job, group), group.gpu, group.share, self.s.name)
        cursor = self._cursors.get(key)
        if cursor is None:
            nodes = np.flatnonzero(eligibility.mask(self.p, job, group) & self.real)
            cursor = self._cursors[key] = NodeCursor(self, group, nodes)
        self._cursor_of[mine] = cursor
        return cursor

    def cursor_within(self, job: JobSpec, group: GroupSpec,
                      restrict: BArray | None) -> tuple[NodeCursor, BArray | None]:
        """The cursor a replica of `group` is placed with, and the node mask still to apply to it:
        the shape's cursor and `restrict`, or, where `restrict` is one domain's nodes
        (`domain_mask`: a topology-bound attempt, a colocation), the round's cursor over the
        shape's nodes in that domain and no mask. Its best node is the shape cursor's best inside
        the mask (same scores, same tie order), found over the domain's nodes instead of a pass
        over every eligible node per replica (12,800 at 102,400 GPUs); engines that keep cursors
        over other subsets extend this."""
        base = self.shape_cursor(job, group)
        if restrict is None:
            return base, None
        domain = self._mask_domain.get(id(restrict))
        if domain is None or self._domain_masks[domain] is not restrict \
                or self._cursor_of.get((job.running, job.index, group.index, self.s.name)) is not base:
            # not a domain's mask, or not the round's cursor (a trial's copy: a cursor over its domain
            # would be built per trial and kept for the round): the mask, as given
            return base, restrict
        sub = self.subset_cursor(base, ("domain", *domain), restrict)
        return (base, restrict) if sub is None else (sub, None)

    def domain_mask(self, level: int, domain: int) -> BArray:
        """The nodes of `domain` (an id at `level`), read-only and the same array for the round:
        `cursor_within` knows it by identity."""
        key = (level, domain)
        got = self._domain_masks.get(key)
        if got is None:
            got = self._domain_masks[key] = self.p.node_domain_at(level) == domain
            got.setflags(write=False)
            self._mask_domain[id(got)] = key
        return got

    def subset_cursor(self, base: NodeCursor, subset: Hashable, nodes: BArray) -> NodeCursor | None:
        """A cursor over the nodes of `base` that `nodes` marks (None where it marks none), kept
        for the round per `base` and `subset` (a name for `nodes`: the same subset must always
        come with the same nodes). Its best node is `base.best` inside the mask (same scores, same
        tie order), found over the subset's nodes only: an engine whose replicas keep to a few
        large node sets (quota flavors, the domain path's bins) hands these out in `cursor_within`."""
        key = (id(base), subset)
        got = self._subset_cursors.get(key)
        if got is None or got[0] is not base:  # a cursor dropped since (`use_nodes`) may share an id
            inside = base.nodes[nodes[base.nodes]]
            got = self._subset_cursors[key] = (base, NodeCursor(self, base.group, inside) if len(inside) else None)
        return got[1]

    def eligible_nodes(self, job: JobSpec, group: GroupSpec) -> IArray:
        """The real nodes a replica of `group` may use, sorted (its cursor's: the same array for
        the whole of a `run`)."""
        return self.shape_cursor(job, group).nodes

    def _place_replica(self, job: JobSpec, group: GroupSpec, replica: int, elastic: bool,
                       restrict: BArray | None, placed: list[PlacedReplica]) -> tuple[PlacedReplica | None, str]:
        clock.charge(clock.REPLICA_S)  # the work clock's measure of a baseline's time (deterministic mode)
        p, ledger = self.p, self.ledger
        cursor, restrict = self.cursor_within(job, group, restrict)
        if not len(cursor.nodes):
            return None, eligibility.no_node_reason(p, job, group)
        allowed = None if restrict is None else restrict[cursor.nodes]
        if allowed is not None and not allowed.any():
            return None, "topology"
        hidden = None
        if group.spec.spread is not None:
            level = p.level_index(group.spec.spread.level)
            at = p.node_domain_at(level)
            counts: dict[int, int] = {}
            for r in placed:
                if r.group == group.index:
                    d = int(at[r.node])
                    counts[d] = counts.get(d, 0) + 1
            if allowed is None:  # the usual case: hide the few full domains instead of masking
                hidden = cursor.spread_hidden(job, group, level, spread.blocked_domains(p, job, group, counts))
                if len(hidden) == len(cursor.nodes):
                    return None, "spread"
            else:
                allowed = allowed & spread.allowed_domains(p, job, group, counts)[
                    cursor.domain_positions(job, group, level)]
                if not allowed.any():
                    return None, "spread"
        unmasked = allowed is None and hidden is None
        repeat = self._repeat_node(cursor, group) if unmasked else -1
        self._last = None
        for _ in range(8):  # the device check is exact; a node that passed the mask rarely fails it
            node = repeat if repeat >= 0 else cursor.best(allowed, hidden)
            if node < 0:
                break
            got = pick(p, ledger, node, group, self.s.device_policy)
            if got is None:
                if repeat >= 0:
                    cursor.sync()  # as if `best` had chosen it: its score current, then dropped
                    repeat = -1
                cursor.drop(node)
                continue
            devs, share = got
            ledger.add(job, group, node, devs, share)
            self.changed.append(node)
            if unmasked:
                self._last = (cursor, ledger, self.changed, len(self.changed), node)
            return PlacedReplica(group.index, replica, node, devs, share, elastic), ""
        return None, "capacity"

    def _repeat_node(self, cursor: NodeCursor, group: GroupSpec) -> int:
        """The node `cursor.best()` would choose for a replica of `group`, known without a pass
        over the cursor's nodes, or -1 when it is not known. It is known when the last replica
        the engine placed (without a mask) was placed with this cursor, on this ledger and log,
        and nothing changed since: every other node's fit and score are as when that node was
        best, its own score has not fallen (`MONOTONE_SCORERS`), so while the replica fits it
        is still the best (ties: a lower node had a lower score). The cursor is not synced: the
        log keeps the node for its next `best`."""
        last = self._last
        if last is None or self.s.score not in MONOTONE_SCORERS:
            return -1
        last_cursor, ledger, log, length, node = last
        if last_cursor is not cursor or ledger is not self.ledger or log is not self.changed or len(log) != length:
            return -1
        return node if ledger.fits_one(group, node) else -1

    def rollback(self, job: JobSpec, placed: list[PlacedReplica]) -> None:
        """Take the replicas `placed` of `job` off the ledger again (and empty the list)."""
        for r in reversed(placed):
            self.ledger.add(job, job.groups[r.group], r.node, r.devices, r.share, sign=-1.0)
            self.changed.append(r.node)
        placed.clear()

    def _job_ok(self, job: JobSpec, placed: list[PlacedReplica]) -> tuple[str, str]:
        """The job-level rules (`optsched.concerns.JOB_RULES`: uplinks, quota) for the job as
        placed so far: (reason, detail), ('', '') when fine."""
        for rule in JOB_RULES:
            broken = rule(self.p, self.ledger, job, placed)
            if broken is not None:
                return broken
        return "", ""

    def device_nodes(self, job: JobSpec) -> BArray:
        """Nodes that may hold a replica of one of the job's device groups (`eligibility.device_nodes`;
        engines that narrow placement to some models narrow it too), whose free devices decide
        which domains a topology-bound job tries."""
        return eligibility.device_nodes(self.p, job)

    def replica_restrict(self, job: JobSpec, group: GroupSpec, placed: list[PlacedReplica]) -> BArray | None:
        """Nodes the next replica of `group` may use beyond its eligibility (None: all): here the
        colocation of the job's groups (under one rule, the domain's mask itself, `domain_mask`);
        engines that narrow placement further extend it."""
        return fabric.colocate_mask(self.p, job, group.index, placed, self.domain_mask)

    def place_in(self, job: JobSpec, counts: list[int], restrict: BArray | None) -> Attempt:
        """Place the job's minimum counts inside `restrict`, then elastic replicas."""
        att = Attempt(within=restrict)
        placed = att.replicas
        first_why = ""  # a non-gang job that places nothing fails for its first replica's reason
        for group in job.groups:
            for i in range(counts[group.index]):
                if i % 64 == 63 and clock.now() > self.deadline:  # a huge job must not overrun
                    self.rollback(job, placed)
                    att.failure = "time_limit"
                    return att
                extra = self.replica_restrict(job, group, placed)
                mask = restrict if extra is None else (extra if restrict is None else restrict & extra)
                rep, why = self._place_replica(job, group, i, i >= group.rmin, mask, placed)
                if rep is None:
                    if job.gang or job.ratios:
                        self.rollback(job, placed)
                        att.failure = why
                        return att
                    first_why = first_why or why
                    break  # a non-gang job keeps the replicas that fit
                placed.append(rep)
        if not placed:
            att.failure = first_why or "capacity"
            return att
        why, detail = self._job_ok(job, placed)
        if why:
            self.rollback(job, placed)
            att.failure, att.detail = why, detail
            return att
        self.grow(job, placed, restrict)
        return att

    def grow(self, job: JobSpec, placed: list[PlacedReplica], restrict: BArray | None) -> None:
        """Elastic growth of an admitted job, one replica at a time, while every rule still holds
        (the job's own uplink traffic must not be in the ledger yet)."""
        now = [0] * len(job.groups)
        for r in placed:
            now[r.group] += 1
        for group in job.groups:
            while now[group.index] < group.rmax and clock.now() <= self.deadline:
                trial = list(now)
                trial[group.index] += 1
                if gang.count_problems(job, trial):
                    break
                extra = self.replica_restrict(job, group, placed)
                mask = restrict if extra is None else (extra if restrict is None else restrict & extra)
                rep, _ = self._place_replica(job, group, now[group.index], now[group.index] >= group.rmin,
                                             mask, placed)
                if rep is None:
                    break
                placed.append(rep)
                if self._job_ok(job, placed)[0] or not self.growth_allowed(job, placed):
                    self.rollback(job, [placed.pop()])
                    break
                now[group.index] += 1

    def growth_allowed(self, job: JobSpec, placed: list[PlacedReplica]) -> bool:
        """Whether the job may keep the elastic replica just placed, beyond the job-level rules
        (`optsched.concerns.JOB_RULES`): here always; an engine that judges an admission by rules
        of its own stops growth where they would refuse it."""
        return True

    # ------------------------------------------------------------------ domains
    def domain_candidates(self, job: JobSpec, levels: list[int], limit: int) -> list[tuple[int, int]]:
        """Up to `limit` (level, domain) pairs, at `levels` in order, whose free devices of the
        models the job accepts could hold its minimum replicas (Slurm counts only nodes that
        satisfy the job's constraints)."""
        p = self.p
        need = sum(g.gpu * g.rmin for g in job.groups)
        free_gpu = np.where(self.real & self.device_nodes(job), self.ledger.free_whole, 0)
        out: list[tuple[int, int]] = []
        for level in levels:
            doms, inv = p.derived(DOMAINS_AT, level)
            free = np.bincount(inv, weights=free_gpu, minlength=len(doms))
            ok = np.flatnonzero(free >= need - EPS) if need > 0 else np.arange(len(doms))
            if self.s.domain_first:
                ok = ok[np.argsort(free[ok], kind="stable")]  # best fit: the tightest domain first
            out.extend((level, int(d)) for d in doms[ok[:limit - len(out)]])
            if len(out) >= limit:
                break
        return out

    def place_job(self, job: JobSpec) -> Attempt:
        """Place one job (or defer it with a reason); the ledger keeps what was placed."""
        counts = gang.target_counts(job)
        if counts is None:
            return Attempt(failure="ratio", detail="no replica counts satisfy min/max and ratios")
        p = self.p
        multi = sum(counts) > 1 and any(g.gpu > 0 for g in job.groups)
        attempts: list[tuple[int, int] | None]
        if job.topo_required and job.topo_level is not None:
            lv = job.topo_level
            # Slurm tree: the lowest switch first, up to the required level; others: that level only
            levels = list(range(p.n_levels - 1, lv - 1, -1)) if self.s.domain_first and lv < p.n_levels else [lv]
            attempts = list(self.domain_candidates(job, levels, MAX_DOMAIN_ATTEMPTS))
            if not attempts:
                return Attempt(failure="topology", detail="no domain has enough free devices")
        elif self.s.domain_first and multi and p.n_levels:
            attempts = [*self.domain_candidates(job, list(range(p.n_levels - 1, -1, -1)), MAX_DOMAIN_ATTEMPTS), None]
        else:
            attempts = [None]
        last = Attempt(failure="capacity")
        for domain in attempts[:MAX_DOMAIN_ATTEMPTS]:
            restrict = None if domain is None else self.domain_mask(*domain)
            att = self.place_in(job, counts, restrict)
            if att.failure is None:
                return att
            last = att
        return last

    # ------------------------------------------------------------------ the round
    def _dominant_share(self, tenant: int) -> float:
        p = self.p
        totals = self._totals
        if totals is None:
            totals = self._totals = np.concatenate([p.cap[self.real].sum(axis=0),
                                                    [float(p.node_dev_count[self.real].sum())]])
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(totals > 0, self.tenant_share_use[tenant] / np.where(totals > 0, totals, 1), 0.0)
        return float(s.max()) / float(p.tenant_weight[tenant])

    def _account_tenant(self, job: JobSpec, placed: list[PlacedReplica]) -> None:
        for r in placed:
            g = job.groups[r.group]
            self.tenant_share_use[job.tenant, :-1] += g.req
            self.tenant_share_use[job.tenant, -1] += g.gpu

    def _order(self) -> list[JobSpec] | None:
        if self.order is not None:
            return self.order
        return None if self.s.drf_order else kube_order(self.p)

    def run(self, deadline: float = math.inf) -> tuple[dict[str, list[PlacedReplica]], dict[str, tuple[str, str]]]:
        """Place the whole queue; returns placements and deferrals (reason, detail) by job id."""
        placed: dict[str, list[PlacedReplica]] = {}
        deferred: dict[str, tuple[str, str]] = {}
        self.deadline = deadline
        for job in self.iter_jobs():
            clock.charge(clock.JOB_S)  # the work clock's measure of a baseline's time (deterministic mode)
            if clock.now() > deadline:
                deferred[job.id] = ("time_limit", "the round's time limit ran out before this job")
                continue
            att = self.admit(job)
            if att.failure is None:
                placed[job.id] = att.replicas
                self.record(job, att.replicas)
            elif att.failure == "time_limit":
                deferred[job.id] = ("time_limit", "the round's time limit ran out while placing this job")
            else:
                deferred[job.id] = (att.failure, att.detail)
        return placed, deferred

    def record(self, job: JobSpec, replicas: list[PlacedReplica]) -> None:
        """Account an admitted job beyond its replicas' node usage: its tenant's share (DRF order)
        and its uplink traffic."""
        if self.s.drf_order:  # the shares order Volcano's queue only
            self._account_tenant(job, replicas)
        if job.bandwidth and len(replicas) > 1:
            nodes = np.array([r.node for r in replicas], dtype=np.int64)
            self.ledger.add_uplink(crossed_domains(self.p, nodes), job.bandwidth)

    def use_nodes(self, nodes: BArray) -> None:
        """Place on `nodes` from now on (by default the real nodes; provisioning slots are added by
        the `karpenter` baseline): every cursor and cached total over the node set is dropped."""
        self.real = nodes
        self._cursors.clear()
        self._cursor_of.clear()
        self._subset_cursors.clear()
        self._totals = None

    def admit(self, job: JobSpec) -> Attempt:
        """Admit one job of the round: place it (the `kueue` baseline also preempts)."""
        return self.place_job(job)

    def iter_jobs(self) -> Iterator[JobSpec]:
        """Jobs in the strategy's order; Volcano's DRF order is recomputed as jobs are admitted."""
        order = self._order()
        if order is not None:
            yield from order
            return
        # Volcano: priority levels descending; inside one, DRF across tenants, then submit time
        by_prio: dict[int, dict[int, list[JobSpec]]] = {}
        for j in sorted(self.p.jobs, key=lambda j: (j.submitted_at, j.index)):
            by_prio.setdefault(j.priority, {}).setdefault(j.tenant, []).append(j)
        for prio in sorted(by_prio, reverse=True):
            queues = by_prio[prio]
            heads = {t: 0 for t in queues}
            while heads:
                t = min(heads, key=lambda t: (self._dominant_share(t), t))
                yield queues[t][heads[t]]
                heads[t] += 1
                if heads[t] == len(queues[t]):
                    del heads[t]


def to_plan(p: Problem, placed: dict[str, list[PlacedReplica]], deferred: dict[str, tuple[str, str]],
            stats: SolverStats) -> Plan:
    """Turn engine output into a Plan document (node ids, node-local device indices).

    The placements are validated in one pydantic-core call over plain rows (`_PLACEMENTS`) rather
    than one model constructor call each: 0.125-0.144 s against 0.147-0.153 s for the 36,662
    replicas of a best-fit round at 102,400 GPUs (one-off, alternate runs in one process)."""
    rows: list[dict[str, object]] = []
    dev_local = p.dev_local.tolist()
    node_ids = p.node_ids
    for job in p.jobs:
        replicas = placed.get(job.id)
        if not replicas:
            continue
        for r in sorted(replicas, key=lambda r: (r.group, r.replica)):
            g = job.groups[r.group]
            rows.append({"job": job.id, "group": g.name, "replica": r.replica, "node": node_ids[r.node],
                         "devices": [dev_local[d] for d in r.devices], "share": r.share if g.share else None,
                         "elastic": r.elastic})
    defer = [Deferred.model_validate({"job": j.id, "reason": deferred[j.id][0], "detail": deferred[j.id][1]})
             for j in p.jobs if j.id in deferred]
    return Plan(placements=_PLACEMENTS.validate_python(rows), deferred=defer, solver=stats)


_PLACEMENTS: TypeAdapter[list[Placement]] = TypeAdapter(list[Placement])
"""The validator of a plan's placements, built once (a schema build takes milliseconds)."""


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("first-fit", score_first, "first",
                 source="First fit in node order: the simplest list scheduler (kube filter order)."),
        Strategy("best-fit", score_most_allocated, "best",
                 source="kube-scheduler NodeResourcesFit scoringStrategy MostAllocated (bin packing)."),
        Strategy("spread", score_least_allocated, "first",
                 source="kube-scheduler NodeResourcesFit scoringStrategy LeastAllocated (default)."),
        Strategy("volcano", score_binpack, "best", drf_order=True,
                 source="Volcano allocate action with priority, drf, gang and binpack plugins."),
        Strategy("tetris", score_alignment, "first",
                 source="Tetris, Grandl et al. SIGCOMM'14: dot-product alignment of demand and free."),
        Strategy("topo-best-fit", score_tightest, "best", domain_first=True,
                 source="Slurm topology/tree + cons_tres best fit: lowest switch that holds the job."),
    )
}
"""The greedy baselines by name (the ones `greedy`, hints and Pareto seeds use)."""

IMAGE_BEST_FIT = Strategy("image-best-fit", score_image_best_fit, "best",
                          source="kube-scheduler MostAllocated + ImageLocality score plugins, equal weights.")
"""The comparison for image locality (issue 5); a named solver, not one of `STRATEGIES`."""
NAMED_STRATEGIES: dict[str, Strategy] = {**STRATEGIES, IMAGE_BEST_FIT.name: IMAGE_BEST_FIT}


def solve_greedy(p: Problem, name: str, *, time_limit: float = math.inf, seed: int = 0,
                 order: Sequence[JobSpec] | None = None, label: str | None = None) -> Plan:
    """Run one greedy baseline on a compiled problem and return its plan.

    `order` replaces the strategy's job order (every job of the round exactly once; used by the
    CP-SAT round's LP-guided hint), `label` names the plan's solver (default: the strategy's name).
    """
    if name not in NAMED_STRATEGIES:
        raise KeyError(name)
    if order is not None and sorted(j.index for j in order) != list(range(len(p.jobs))):
        raise ValueError("order must list every job of the round exactly once")
    start = clock.now()
    with gc_paused():  # as in every solve: full collections took 0.2-0.5 s of 2.2 s at 102,400 GPUs
        engine = GreedyEngine(p, NAMED_STRATEGIES[name], order)
        placed, deferred = engine.run(deadline=start + time_limit)
        wall = clock.now() - start
        return to_plan(p, placed, deferred, SolverStats(name=label or name, status="heuristic", wall_s=wall,
                                                        seed=seed))
