"""Mutable usage state of a round: what kept and placed replicas hold.

The validator replays a plan into a `Ledger` and compares it with capacities; the greedy
baselines place replicas into one and ask it what still fits. Both go through the same
methods, so a rule is computed one way only. Per-node device summaries (free whole devices,
largest free interconnect group, largest free share) are kept up to date incrementally so
that filtering all nodes for a replica is a handful of vectorised comparisons.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from optsched.problem import BArray, Derived, FArray, GroupSpec, IArray, JobSpec, Problem, RunningPlacement

EPS = 1e-9

SMALL_JOB = 32
"""Replicas up to which a job's domain crossings are counted in plain Python (per-call numpy
overhead dominates below it; the result is the same)."""


@dataclass(frozen=True)
class PlacedReplica:
    """One replica on a node: group index, replica index, node, flat device indices, share per device."""

    group: int
    replica: int
    node: int
    devices: tuple[int, ...]
    share: float
    elastic: bool


def flavor_use(p: Problem, group: GroupSpec, node: int) -> FArray:
    """Quota usage (per flavor) of one replica of `group` on `node`: its GPUs (shares as fractions)
    for the flavors that count GPUs there, its request of the resource for the others
    (`Problem.flavor_nodes`: where each flavor counts). Read-only: kept per request and flavor
    class (`flavor_class`), since ledgers ask it for every replica they add."""
    if not len(p.flavors):
        return _NO_FLAVORS
    memo, classes = p.derived(FLAVOR_USES)
    key = (group.gpu, group.req_row, classes[node])
    use = memo.get(key)
    if use is None:
        use = memo[key] = _flavor_use(p, group, node)
    return use


def _flavor_use(p: Problem, group: GroupSpec, node: int) -> FArray:
    use = np.zeros(len(p.flavors))
    on = p.flavor_nodes[:, node]
    res = p.flavor_resource
    gpu = on & (res < 0)
    if group.gpu > 0:
        use[gpu] = group.gpu
    counted = on & (res >= 0)
    use[counted] = group.req[res[counted]]
    use.setflags(write=False)
    return use


_NO_FLAVORS: FArray = np.zeros(0)
_NO_FLAVORS.setflags(write=False)


FlavorUses = tuple[dict[tuple[float, tuple[float, ...], int], FArray], list[int]]


def _flavor_uses(p: Problem) -> FlavorUses:
    return {}, p.derived(FLAVOR_CLASS).tolist()


FLAVOR_USES: Derived[FlavorUses] = Derived("ledger.flavor_uses", _flavor_uses)
"""`flavor_use`'s answers so far, by (GPUs, request, flavor class): a memo the problem keeps; and
each node's flavor class as a list (`flavor_use` asks per replica)."""


def _node_device_lists(p: Problem) -> list[tuple[int, list[bool], list[int]]]:
    starts, counts = p.node_dev_start.tolist(), p.node_dev_count.tolist()
    healthy, groups = p.dev_healthy.tolist(), p.dev_group.tolist()
    return [(a, healthy[a:a + k], groups[a:a + k]) for a, k in zip(starts, counts, strict=True)]


NODE_DEVICE_LISTS: Derived[list[tuple[int, list[bool], list[int]]]] = Derived("ledger.node_device_lists",
                                                                                _node_device_lists)
"""Per node: (its first flat device index, its devices' health, their interconnect groups) as
Python lists: what the per-replica device code reads node by node (a numpy slice and `tolist` per
call cost more than the work on a node's few devices)."""

NODE_ONE_GROUP: Derived[list[bool]] = Derived(
    "ledger.node_one_group",
    lambda p: [bool(h) and all(h) and len(set(g)) == 1 for _, h, g in p.derived(NODE_DEVICE_LISTS)])
"""Per node: whether it has devices, all healthy, in one interconnect group (most GPU servers):
its free devices are its free group's, which the per-replica device code counts without grouping."""


def flavor_class(p: Problem) -> IArray:
    """Per node, a class id shared by the nodes every flavor counts alike (the same column of
    `Problem.flavor_nodes`): a replica's quota usage depends on its node only through it."""
    return p.derived(FLAVOR_CLASS)


def _flavor_class(p: Problem) -> IArray:
    if not len(p.flavors):
        return np.zeros(p.n_nodes, dtype=np.int64)
    out: IArray = np.unique(p.flavor_nodes.T, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
    out.setflags(write=False)
    return out


FLAVOR_CLASS: Derived[IArray] = Derived("ledger.flavor_class", _flavor_class)


def _flavor_class_rows(p: Problem) -> BArray:
    rows: BArray = np.unique(p.flavor_nodes.T, axis=0) if len(p.flavors) else np.zeros((1, 0), dtype=bool)
    return rows


FLAVOR_CLASS_ROWS: Derived[BArray] = Derived("ledger.flavor_class_rows", _flavor_class_rows)
"""The flavors of each flavor class ((classes, flavors), rows in `FLAVOR_CLASS`'s numbering)."""


def flavors_among(p: Problem, nodes: BArray) -> tuple[BArray, BArray]:
    """(flavors that some of `nodes` count for, flavors that all of them do), from the flavor
    classes present among them: one pass over the nodes instead of one per flavor. With no node,
    no flavor and every flavor."""
    rows = p.derived(FLAVOR_CLASS_ROWS)
    present = rows[np.bincount(p.derived(FLAVOR_CLASS)[nodes], minlength=len(rows)) > 0]
    some: BArray = np.any(present, axis=0)
    every: BArray = np.all(present, axis=0)
    return some, every


def counted_flavors(p: Problem, group: GroupSpec) -> BArray:
    """Flavors that count something a replica of `group` asks for: its GPUs (flavors counting
    GPUs, when it asks for devices) or a resource it requests (the others)."""
    res = p.flavor_resource
    out: BArray = np.where(res < 0, group.gpu > 0, group.req[np.maximum(res, 0)] > 0) if len(res) else \
        np.zeros(0, dtype=bool)
    return out


def cohort_tree(p: Problem, used: FArray) -> tuple[list[int], FArray, FArray, FArray]:
    """Kueue's hierarchical quota (pkg/cache/scheduler/resource_node.go) per cohort and flavor:
    (cohorts children first, subtree quota SQ, usage U, local quota LQ), all (cohorts, flavors).
    A tenant's local quota is what it does not lend (nominal - lending limit); a cohort's SQ is its
    own quota plus what its children lend up (their SQ past their local quota), its U what its
    children use past their local quota, its LQ the part of its SQ above its lending limit."""
    order: list[int] = p.cohort_order.tolist()
    sq = p.cohort_nominal.copy()
    u = np.zeros_like(sq)
    lq = np.zeros_like(sq)
    member = p.tenant_cohort >= 0
    t_lq = p.nominal - p.lend_limit
    np.add.at(sq, p.tenant_cohort[member], p.lend_limit[member])
    np.add.at(u, p.tenant_cohort[member], np.maximum(0.0, used[member] - t_lq[member]))
    for k in order:
        lq[k] = np.where(np.isinf(p.cohort_lend[k]), 0.0, np.maximum(0.0, sq[k] - p.cohort_lend[k]))
        parent = int(p.cohort_parent[k])
        if parent >= 0:
            sq[parent] += sq[k] - lq[k]
            u[parent] += np.maximum(0.0, u[k] - lq[k])
    return order, sq, u, lq


def quota_broken(p: Problem, used: FArray, tenant: int) -> BArray:
    """Flavors in which the tenant breaks a quota rule with usage `used` (T x F), Kueue's semantics
    as `concerns.tenancy.quota` states them: usage <= nominal without a cohort; in one, borrowed
    <= its borrowing limit and the cohort borrows no more than its members lend. Per flavor of one
    tenant (quota's `problems` reports them all); shared by quota and the preemption rules."""
    tol = EPS * np.maximum(1.0, p.nominal[tenant])
    cohort = int(p.tenant_cohort[tenant])
    if tenant >= len(p.cluster.tenants):
        return np.zeros(len(p.flavors), dtype=bool)
    if cohort < 0:
        solo: BArray = used[tenant] > p.nominal[tenant] + tol
        return solo
    if not p.hierarchical and used.shape[1] <= SMALL_QUOTA:
        return _flat_cohort_broken(p, used, tenant, cohort)
    borrowed = np.maximum(0.0, used - p.nominal)
    if p.hierarchical:  # every cohort on the tenant's path to its root
        _, sq, u, _ = cohort_tree(p, used)
        out = borrowed[tenant] > p.borrow_limit[tenant] + tol
        at = cohort
        while at >= 0:
            parent = int(p.cohort_parent[at])
            limit = sq[at] if parent < 0 else sq[at] + p.cohort_borrow[at]
            out = out | (u[at] > limit + EPS * np.maximum(1.0, limit))
            at = parent
        return out
    members = p.tenant_cohort == cohort
    lent = np.minimum(p.lend_limit, np.maximum(0.0, p.nominal - used))[members].sum(axis=0)
    out = ((borrowed[tenant] > p.borrow_limit[tenant] + tol)
           | (borrowed[members].sum(axis=0) > lent + EPS * np.maximum(1.0, lent)))
    return out


SMALL_QUOTA = 16
"""Flavors up to which `quota_broken` judges a flat cohort in plain Python (`_flat_cohort_broken`):
on a few flavors and tenants numpy's per-call cost was most of it (the `kueue` baseline's flavor
assignment asks 10,000 times a round)."""


def _flat_cohort_broken(p: Problem, used: FArray, tenant: int, cohort: int) -> BArray:
    """`quota_broken` for a tenant in a flat cohort, in plain Python (`quota_broken_rows`)."""
    return np.array(quota_broken_rows(p, used.tolist(), tenant, range(used.shape[1])), dtype=bool)


def plain_quota(p: Problem, tenant: int) -> bool:
    """Whether `quota_broken_rows` judges the tenant: a defined tenant without a cohort, or in a
    flat cohort, on at most `SMALL_QUOTA` flavors."""
    return tenant < len(p.cluster.tenants) and not p.hierarchical and len(p.flavors) <= SMALL_QUOTA


def quota_broken_rows(p: Problem, rows: list[list[float]], tenant: int, flavors: Iterable[int]) -> list[bool]:
    """`quota_broken(p, used, tenant)` at `flavors` only, in plain Python, for a tenant that
    `plain_quota` admits, with the usage as nested lists (`used.tolist()`): the same float
    operations in the same order as the array form (members summed in tenant order), so the same
    answer. A caller judging several usages (the `kueue` baseline's flavor assignment tries each
    flavor in turn) converts its usage once and judges only the flavors a trial touches."""
    nominal, lend, limit, cohorts = p.derived(QUOTA_ROWS)
    cohort = cohorts[tenant]
    mine_nominal, mine = nominal[tenant], rows[tenant]
    out = []
    if cohort < 0:
        for f in flavors:
            tol = EPS * (mine_nominal[f] if mine_nominal[f] > 1.0 else 1.0)
            out.append(mine[f] > mine_nominal[f] + tol)
        return out
    members = [k for k, c in enumerate(cohorts) if c == cohort]
    for f in flavors:
        borrowed_sum = 0.0
        lent = 0.0
        for k in members:
            over = rows[k][f] - nominal[k][f]
            borrowed_sum += over if over > 0.0 else 0.0
            left = nominal[k][f] - rows[k][f]
            left = left if left > 0.0 else 0.0
            lent += lend[k][f] if lend[k][f] < left else left
        borrowed = mine[f] - mine_nominal[f]
        borrowed = borrowed if borrowed > 0.0 else 0.0
        tol = EPS * (mine_nominal[f] if mine_nominal[f] > 1.0 else 1.0)
        out.append(borrowed > limit[tenant][f] + tol or borrowed_sum > lent + EPS * (lent if lent > 1.0 else 1.0))
    return out


QuotaRows = tuple[list[list[float]], list[list[float]], list[list[float]], list[int]]


def _quota_rows(p: Problem) -> QuotaRows:
    return p.nominal.tolist(), p.lend_limit.tolist(), p.borrow_limit.tolist(), p.tenant_cohort.tolist()


QUOTA_ROWS: Derived[QuotaRows] = Derived("ledger.quota_rows", _quota_rows)
"""(nominal, lending limit, borrowing limit) per tenant and flavor as nested lists, and each
tenant's cohort (`_flat_cohort_broken`)."""


def crossed_domains(p: Problem, nodes: IArray) -> IArray:
    """Global ids of the domains whose uplink a job on `nodes` crosses (levels below the top)."""
    if len(nodes) < 2 or p.n_levels < 2:
        return np.zeros(0, dtype=np.int64)
    if len(nodes) <= SMALL_JOB:  # plain Python beats np.unique per level on a few replicas
        rows = p.node_dom[nodes, 1:p.n_levels].tolist()
        found: list[int] = []
        for column in zip(*rows, strict=True):
            distinct = set(column)
            if len(distinct) > 1:  # every domain then holds fewer than all the replicas
                found.extend(sorted(distinct))
        return np.array(found, dtype=np.int64)
    out = []
    total = len(nodes)
    for level in range(1, p.n_levels):
        doms, counts = np.unique(p.node_dom[nodes, level], return_counts=True)
        if len(doms) > 1:
            out.append(doms[counts < total])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class RunningPack:
    """Every running job's usage as flat arrays, one row per placement, device and crossed
    uplink, tagged with the job's index in `Problem.running` (built once per problem): releasing
    a set of running jobs is then a handful of vectorised updates, however many there are (the
    `kueue` baseline releases and restores preemption candidates by the hundred per job)."""

    place_job: IArray
    place_node: IArray
    place_req: FArray
    """Per placement: running job, node, request per resource (placements x resources)."""
    place_pad: FArray
    """Per placement: its group's `nonzero_pad` (placements x 2)."""
    dev_job: IArray
    dev_index: IArray
    dev_share: FArray
    """Per device a placement holds: running job, flat device index, share of it."""
    quota: FArray
    """Quota per running job and flavor (running x flavors)."""
    cross_job: IArray
    cross_domain: IArray
    """Per uplink a running job crosses: the job, the domain."""
    bandwidth: FArray
    """Per running job: its collective traffic (Gbps)."""
    tenant: IArray
    place_start: IArray
    dev_start: IArray
    cross_start: IArray
    """Per running job k, its rows are [start[k], start[k + 1]) of the placement, device and
    uplink rows (the rows are in job order): a few jobs' rows without a pass over all of them."""


def _running_pack(p: Problem) -> RunningPack:
    run = p.running
    placements = [(k, pl) for k, j in enumerate(run) for pl in j.placements]
    req = np.array([run[k].groups[pl.group].req for k, pl in placements], dtype=float).reshape(
        len(placements), len(p.resources))
    devices = [(k, d, pl.share) for k, pl in placements for d in pl.devices]
    quota = np.zeros((len(run), len(p.flavors)))
    for k, pl in placements:
        if len(p.flavors):
            quota[k] += flavor_use(p, run[k].groups[pl.group], pl.node)
    crossed = [crossed_domains(p, np.array([pl.node for pl in j.placements], dtype=np.int64)) for j in run]
    starts = [np.concatenate([[0], np.cumsum(counts)]).astype(np.int64) for counts in (
        [len(j.placements) for j in run], [sum(len(pl.devices) for pl in j.placements) for j in run],
        [len(c) for c in crossed])]
    return RunningPack(
        place_job=np.array([k for k, _ in placements], dtype=np.int64),
        place_node=np.array([pl.node for _, pl in placements], dtype=np.int64), place_req=req,
        place_pad=np.array([run[k].groups[pl.group].nonzero_pad for k, pl in placements], dtype=float).reshape(
            len(placements), 2),
        dev_job=np.array([k for k, _, _ in devices], dtype=np.int64),
        dev_index=np.array([d for _, d, _ in devices], dtype=np.int64),
        dev_share=np.array([s for _, _, s in devices], dtype=float), quota=quota,
        cross_job=np.repeat(np.arange(len(run), dtype=np.int64), [len(c) for c in crossed]),
        cross_domain=np.concatenate(crossed) if crossed else np.zeros(0, dtype=np.int64),
        bandwidth=np.array([j.bandwidth for j in run], dtype=float),
        tenant=np.array([j.tenant for j in run], dtype=np.int64), place_start=starts[0], dev_start=starts[1],
        cross_start=starts[2])


@dataclass(frozen=True)
class RunningMove:
    """`Ledger.add_running_weighted`'s arguments with the rows they move, in its order: a move
    applied again, node by node (`Ledger.rebase_running`). Build with `running_move`."""

    jobs: IArray
    weights: FArray
    place_node: IArray
    """Per moved placement row (the jobs on nodes): its node."""
    req: FArray
    """Per moved placement row: the weighted request added (rows x resources)."""
    pad: FArray
    """Per moved placement row: the weighted score padding added."""
    dev_index: IArray
    """Per moved device row: the device."""
    dev_node: IArray
    """Per moved device row: its node."""
    dev_share: FArray
    """Per moved device row: the weighted share added."""


def running_move(p: Problem, jobs: IArray, weights: FArray, on_nodes: BArray | None = None) -> RunningMove:
    """The `RunningMove` of `add_running_weighted(jobs, weights, on_nodes)`."""
    pack = p.derived(RUNNING_PACK)
    moved, w = (jobs, weights) if on_nodes is None else (jobs[on_nodes], weights[on_nodes])
    rows, at = _rows_of(pack.place_start, moved)
    devs, dev_at = _rows_of(pack.dev_start, moved)
    index = pack.dev_index[devs]
    return RunningMove(jobs, weights, pack.place_node[rows], w[at, None] * pack.place_req[rows],
                       w[at, None] * pack.place_pad[rows], index, p.dev_node[index], w[dev_at] * pack.dev_share[devs])


def _add_rows(table: FArray, index: IArray, values: FArray) -> None:
    """`np.add.at(table, index, values)` for a 2-D table and one row index per row of `values`,
    through the flat 1-D form (numpy's fast path): the same additions in the same order."""
    if not table.flags.c_contiguous:  # no flat view of it
        np.add.at(table, index, values)
        return
    width = table.shape[1]
    flat = (index[:, None] * width + np.arange(width)).ravel()
    np.add.at(table.reshape(-1), flat, values.ravel())


def _ranges(first: IArray, counts: IArray) -> tuple[IArray, IArray]:
    """The index ranges [first[i], first[i] + counts[i]) one after the other, and where each
    range starts in the result (a job's rows in a packed table, a node's devices)."""
    ends = np.cumsum(counts)
    starts = ends - counts
    return np.repeat(first - starts, counts) + np.arange(int(ends[-1]) if len(ends) else 0), starts


def _rows_of(start: IArray, jobs: IArray) -> tuple[IArray, IArray]:
    """The rows of `jobs` (sorted, distinct running indices) in a table whose job k has rows
    [start[k], start[k + 1]), in row order, and each row's position in `jobs`."""
    if len(jobs) == 1:  # a quarter of the `kueue` baseline's moves: one job, three numpy calls fewer
        first, stop = int(start[jobs[0]]), int(start[jobs[0] + 1])
        return np.arange(first, stop), np.zeros(stop - first, dtype=np.int64)
    counts = start[jobs + 1] - start[jobs]
    rows, _ = _ranges(start[jobs], counts)
    return rows, np.repeat(np.arange(len(jobs)), counts)


RUNNING_PACK: Derived[RunningPack] = Derived("ledger.running_pack", _running_pack)
"""`RunningPack` of the round."""


def _running_ledger(p: Problem) -> Ledger:
    base = Ledger(p)
    base.add_many([(j, j.groups[pl.group], pl.node, pl.devices, pl.share) for j in p.running for pl in j.placements])
    for j in p.running:
        nodes = np.array([pl.node for pl in j.placements], dtype=np.int64)
        base.add_uplink(crossed_domains(p, nodes), j.bandwidth)
    return base


RUNNING_LEDGER: Derived[Ledger] = Derived("ledger.running", _running_ledger)
"""Every running job where it sits (never handed out: `Ledger.with_running` copies it)."""


def _cap_with_tolerance(p: Problem) -> FArray:
    out: FArray = p.cap + EPS
    return out


CAP_WITH_TOLERANCE: Derived[FArray] = Derived("ledger.cap_with_tolerance", _cap_with_tolerance)
"""Capacity per node and resource plus `EPS`: what a usage may reach (computed once; a fit test
runs once per replica and node)."""


def _cap_rows(p: Problem) -> list[list[float]]:
    rows: list[list[float]] = p.derived(CAP_WITH_TOLERANCE).tolist()
    return rows


CAP_ROWS: Derived[list[list[float]]] = Derived("ledger.cap_rows", _cap_rows)
"""`CAP_WITH_TOLERANCE` as Python floats per node (`Ledger.fits_one`)."""


NODE_ARRAYS = ("used", "score_pad", "free_whole", "max_group_free", "max_share_free")
"""The `Ledger` arrays with one row per node (`dev_used` has one per device)."""


@dataclass(frozen=True)
class NodeRows:
    """A ledger's usage on some nodes (their rows of `NODE_ARRAYS`, their devices' `dev_used`) and
    its quota and uplink usage, copied: what makes another ledger of the same problem equal to it
    where the two differ only on those nodes (`Ledger.load_rows`; a replica kept in another
    process, `optsched.solvers.diagnosis`)."""

    nodes: IArray
    per_node: dict[str, np.ndarray]
    dev_used: FArray
    uplink_load: FArray
    quota_used: FArray


class Ledger:
    """Resource, device, fabric and quota usage accumulated over replicas."""

    def __init__(self, problem: Problem) -> None:
        p = problem
        self.problem = p
        self.used: FArray = np.zeros_like(p.cap)
        self.score_pad: FArray = np.zeros((p.n_nodes, 2))
        """kube-scheduler's non-zero cpu (millicores) and memory (MiB) added per node for the replicas
        on it without such requests (`GroupSpec.nonzero_pad`): the scores read it, the fit tests do not."""
        self.dev_used: FArray = np.zeros(len(p.dev_node))
        self.uplink_load: FArray = np.zeros(len(p.domain_ids))
        self.quota_used: FArray = np.zeros((len(p.tenant_names), len(p.flavors)))
        self.free_whole: IArray = np.zeros(p.n_nodes, dtype=np.int64)
        self.max_group_free: IArray = np.zeros(p.n_nodes, dtype=np.int64)
        self.max_share_free: FArray = np.zeros(p.n_nodes)
        self._refresh_all_devices()

    # ------------------------------------------------------------------ devices
    def _refresh_all_devices(self) -> None:
        p = self.problem
        free = p.dev_healthy & (self.dev_used <= EPS)
        self.free_whole = np.bincount(p.dev_node, weights=free, minlength=p.n_nodes).astype(np.int64)
        per_group = np.bincount(p.dev_group, weights=free, minlength=len(p.group_node))
        self.max_group_free = np.zeros(p.n_nodes, dtype=np.int64)
        if len(per_group):
            np.maximum.at(self.max_group_free, p.group_node, per_group.astype(np.int64))
        share = np.where(p.dev_healthy, 1.0 - self.dev_used, 0.0)
        self.max_share_free = np.zeros(p.n_nodes)
        if len(share):
            np.maximum.at(self.max_share_free, p.dev_node, share)

    def _refresh_devices_of(self, nodes: IArray) -> None:
        """`_refresh_all_devices` for `nodes` only (sorted, distinct), vectorised: a node's devices
        are contiguous, and so are its interconnect groups, so each node's sums and maxima are
        segment reductions (`reduceat`) over them."""
        p = self.problem
        nodes = nodes[p.node_dev_count[nodes] > 0]
        if not len(nodes):
            return
        counts = p.node_dev_count[nodes]
        idx, starts = _ranges(p.node_dev_start[nodes], counts)
        free = p.dev_healthy[idx] & (self.dev_used[idx] <= EPS)
        self.free_whole[nodes] = np.add.reduceat(free.astype(np.int64), starts)
        groups = p.dev_group[idx]
        first = np.searchsorted(p.group_node, nodes)  # each node's groups: [first, first + n_groups)
        n_groups = np.searchsorted(p.group_node, nodes, side="right") - first
        at = np.cumsum(n_groups) - n_groups  # where each node's groups start among the nodes' groups
        per_group = np.bincount(groups - np.repeat(first - at, counts), weights=free,
                                minlength=int(n_groups.sum())).astype(np.int64)
        self.max_group_free[nodes] = np.maximum.reduceat(per_group, at)
        share = np.maximum.reduceat(np.where(p.dev_healthy[idx], 1.0 - self.dev_used[idx], 0.0), starts)
        self.max_share_free[nodes] = np.maximum(share, 0.0)  # as `_refresh_all_devices`: never below 0

    def _refresh_node(self, n: int) -> None:
        p = self.problem
        a, healthy, groups = p.derived(NODE_DEVICE_LISTS)[n]
        k = len(healthy)
        if k == 0:
            return
        # one node's few devices: plain Python (numpy's per-call cost dominated this in profiles)
        used = self.dev_used[a:a + k].tolist()
        if p.derived(NODE_ONE_GROUP)[n]:  # the loop below with one group, all healthy
            n_free = len([u for u in used if u <= EPS])
            self.free_whole[n] = n_free
            self.max_group_free[n] = n_free
            self.max_share_free[n] = 1.0 - min(used)  # the largest 1.0 - u: subtraction keeps the order
            return
        per_group = dict.fromkeys(groups, 0)
        share = -np.inf  # one pass: free devices per group and the largest free share
        for h, u, g in zip(healthy, used, groups, strict=True):
            if h:
                if u <= EPS:
                    per_group[g] += 1
                free = 1.0 - u
            else:
                free = 0.0
            if free > share:
                share = free
        self.free_whole[n] = sum(per_group.values())
        self.max_group_free[n] = max(per_group.values())
        self.max_share_free[n] = share

    def node_devices(self, n: int) -> tuple[int, int]:
        """Flat index range [start, stop) of node `n`'s devices."""
        a = int(self.problem.node_dev_start[n])
        return a, a + int(self.problem.node_dev_count[n])

    # ------------------------------------------------------------------ replicas
    def add(self, job: JobSpec, group: GroupSpec, node: int, devices: tuple[int, ...], share: float,
            sign: float = 1.0) -> None:
        """Account one replica (sign=-1 removes it)."""
        self.used[node] += group.req if sign == 1.0 else sign * group.req  # the same floats, one numpy call fewer
        pad = group.nonzero_pad
        if pad[0] or pad[1]:
            self.score_pad[node, 0] += sign * pad[0]
            self.score_pad[node, 1] += sign * pad[1]
        if devices:
            delta = sign * share
            dev_used = self.dev_used
            for d in devices:  # as np.add.at: one at a time, a repeated index counts twice
                dev_used[d] += delta
            self._refresh_node(node)
        if len(self.problem.flavors):
            use = flavor_use(self.problem, group, node)
            self.quota_used[job.tenant] += use if sign == 1.0 else sign * use

    def add_uplink(self, domains: IArray, gbps: float, sign: float = 1.0) -> None:
        """Account a job's collective traffic on the uplinks of `domains`."""
        if gbps and len(domains):
            np.add.at(self.uplink_load, domains, sign * gbps)

    def add_many(self, items: list[tuple[JobSpec, GroupSpec, int, tuple[int, ...], float]]) -> None:
        """Account many replicas at once (vectorised; device summaries refreshed once)."""
        if not items:
            return
        p = self.problem
        nodes = np.fromiter((it[2] for it in items), dtype=np.int64, count=len(items))
        np.add.at(self.used, nodes, np.stack([it[1].req for it in items]))
        np.add.at(self.score_pad, nodes, np.array([it[1].nonzero_pad for it in items], dtype=float))
        devs = [d for it in items for d in it[3]]
        if devs:
            shares = [it[4] for it in items for _ in it[3]]
            np.add.at(self.dev_used, np.array(devs, dtype=np.int64), np.array(shares))
            self._refresh_all_devices()
        if len(p.flavors):
            for job, group, node, _, _ in items:
                self.quota_used[job.tenant] += flavor_use(p, group, node)

    def copy(self) -> Ledger:
        """An independent copy of this ledger."""
        other = Ledger.__new__(Ledger)
        other.problem = self.problem
        for name in ("used", "score_pad", "dev_used", "uplink_load", "quota_used", "free_whole", "max_group_free",
                     "max_share_free"):
            setattr(other, name, getattr(self, name).copy())
        return other

    def rows(self, nodes: IArray) -> NodeRows:
        """This ledger's usage on `nodes` (sorted, distinct) and its quota and uplink usage, copied."""
        p = self.problem
        devices, _ = _ranges(p.node_dev_start[nodes], p.node_dev_count[nodes])
        return NodeRows(nodes.copy(), {name: getattr(self, name)[nodes].copy() for name in NODE_ARRAYS},
                        self.dev_used[devices].copy(), self.uplink_load.copy(), self.quota_used.copy())

    def load_rows(self, rows: NodeRows) -> None:
        """Take `rows` (another ledger's, of the same problem) as this ledger's: equal to that one
        where the two differed only on `rows.nodes` (the values themselves, bit for bit)."""
        p = self.problem
        for name in NODE_ARRAYS:
            getattr(self, name)[rows.nodes] = rows.per_node[name]
        devices, _ = _ranges(p.node_dev_start[rows.nodes], p.node_dev_count[rows.nodes])
        self.dev_used[devices] = rows.dev_used
        self.uplink_load[...] = rows.uplink_load
        self.quota_used[...] = rows.quota_used

    @classmethod
    def with_running(cls, problem: Problem) -> Ledger:
        """A ledger holding every running job where it sits (built once per problem, then copied)."""
        return problem.derived(RUNNING_LEDGER).copy()

    def add_running(self, job: JobSpec, sign: float = 1.0) -> None:
        """Account (or release) a running job where it sits, uplinks included."""
        self.add_replicas(job, job.placements, sign)

    def add_running_many(self, jobs: Sequence[JobSpec], sign: float = 1.0) -> IArray:
        """`add_running` for many running jobs at once (`add_running_weighted` with `sign` per
        listing: a job listed twice counts twice, as with `add_running`). Returns the nodes whose
        usage it changed (a node once per placement of the jobs on it)."""
        if not jobs:
            return np.zeros(0, dtype=np.int64)
        index, times = np.unique(np.fromiter((j.index for j in jobs), dtype=np.int64, count=len(jobs)),
                                 return_counts=True)
        return self.add_running_weighted(index, sign * times.astype(float))

    def add_running_weighted(self, jobs: IArray, weights: FArray, on_nodes: BArray | None = None) -> IArray:
        """Account running jobs `jobs` (sorted, distinct indices into `Problem.running`) `weights`
        times each where they sit (-1 releases one, +1 puts it back: a trial that moves from one
        set of released jobs to another is one call): a few vectorised updates on their rows of
        the round's `RunningPack`, device summaries refreshed once per touched node. With
        `on_nodes` (a mask over `jobs`), only those jobs' node usage (resources, devices) moves;
        every job's quota and uplink traffic does (a trial placement that can only use nodes the
        others do not sit on sees the same ledger, at the cost of its jobs). Returns the nodes
        whose usage it changed (a node once per placement of the jobs on it)."""
        p = self.problem
        if not len(jobs):
            return np.zeros(0, dtype=np.int64)
        move = running_move(p, jobs, weights, on_nodes)
        self._add_running_quota(p.derived(RUNNING_PACK), jobs, weights)
        self._apply_rows(move, None)
        return move.place_node

    def rebase_running(self, base: Ledger, nodes: IArray, move: RunningMove) -> None:
        """Make this ledger what `base.copy()` then `add_running_weighted(*move's arguments)` would
        give, where it may differ from that only on `nodes` (sorted, distinct) and in quota and
        uplink traffic: those are taken from `base` and the move's rows on them applied in the same
        order (the same float operations as the copy and the move, node by node). A trial ledger
        kept across the round (`KueueEngine`'s priority diagnostic) is brought up to date on the
        nodes the round changed since, instead of copied and moved again."""
        p = self.problem
        pack = p.derived(RUNNING_PACK)
        self.quota_used[...] = base.quota_used
        self.uplink_load[...] = base.uplink_load
        self._add_running_quota(pack, move.jobs, move.weights)
        if not len(nodes):
            return
        for name in NODE_ARRAYS:
            getattr(self, name)[nodes] = getattr(base, name)[nodes]
        devices, _ = _ranges(p.node_dev_start[nodes], p.node_dev_count[nodes])
        self.dev_used[devices] = base.dev_used[devices]
        mark = np.zeros(p.n_nodes, dtype=bool)
        mark[nodes] = True
        self._apply_rows(move, mark)

    def _apply_rows(self, move: RunningMove, on: BArray | None) -> None:
        """A move's node usage (resources, devices; the rows on the nodes `on` marks, or all), in
        its order, device summaries refreshed once per touched node."""
        place_node, req, pad = move.place_node, move.req, move.pad
        dev_index, dev_node, dev_share = move.dev_index, move.dev_node, move.dev_share
        if on is not None:
            keep = on[place_node]
            place_node, req, pad = place_node[keep], req[keep], pad[keep]
            keep = on[dev_node]
            dev_index, dev_node, dev_share = dev_index[keep], dev_node[keep], dev_share[keep]
        if len(place_node):
            _add_rows(self.used, place_node, req)
            _add_rows(self.score_pad, place_node, pad)
        if not len(dev_index):
            return
        np.add.at(self.dev_used, dev_index, dev_share)
        touched = np.unique(dev_node)
        if len(touched) > 16:  # one vectorised pass beats many per-node refreshes
            self._refresh_devices_of(touched)
        else:
            for n in touched.tolist():
                self._refresh_node(n)

    def _add_running_quota(self, pack: RunningPack, jobs: IArray, weights: FArray) -> None:
        """`add_running_weighted`'s quota and uplink traffic of `jobs`."""
        if len(self.problem.flavors):
            np.add.at(self.quota_used, pack.tenant[jobs], weights[:, None] * pack.quota[jobs])
        gbps = pack.bandwidth[jobs]
        if not gbps.any():  # no traffic to move
            return
        cross, cross_at = _rows_of(pack.cross_start, jobs)
        if len(cross):
            keep = gbps[cross_at] != 0
            if keep.any():
                np.add.at(self.uplink_load, pack.cross_domain[cross[keep]], (weights * gbps)[cross_at[keep]])

    def add_replicas(self, job: JobSpec, replicas: Sequence[RunningPlacement | PlacedReplica],
                     sign: float = 1.0) -> None:
        """Account (or release) a job's replicas, and its traffic on the uplinks they cross."""
        for r in replicas:
            self.add(job, job.groups[r.group], r.node, r.devices, r.share, sign)
        nodes = np.array([r.node for r in replicas], dtype=np.int64)
        self.add_uplink(crossed_domains(self.problem, nodes), job.bandwidth, sign)

    # ------------------------------------------------------------------ queries
    def free(self) -> FArray:
        """Free resources per node and resource (capacity minus usage)."""
        return self.problem.cap - self.used

    def fits_mask(self, group: GroupSpec, candidates: BArray | None = None) -> BArray:
        """Nodes where one more replica of `group` fits by resources and devices."""
        if candidates is None:
            return self.fits_at(group, np.arange(self.problem.n_nodes))
        ok = np.zeros(self.problem.n_nodes, dtype=bool)
        idx = np.flatnonzero(candidates)
        ok[idx] = self.fits_at(group, idx)
        return ok

    def fits_at(self, group: GroupSpec, nodes: IArray) -> BArray:
        """Whether one more replica of `group` fits on each of `nodes` (aligned with `nodes`)."""
        p = self.problem
        ok: BArray = np.all(self.used[nodes] + group.req <= p.derived(CAP_WITH_TOLERANCE)[nodes], axis=1)
        if group.whole:
            free_whole = self.free_whole[nodes]
            if group.affinity == "required":
                # one group, or whole groups when the request exceeds the largest group
                big = group.whole > p.node_max_group[nodes]
                ok &= np.where(big, free_whole >= group.whole, self.max_group_free[nodes] >= group.whole)
            else:
                ok &= free_whole >= group.whole
        elif group.share:
            ok &= self.max_share_free[nodes] >= group.share - EPS
        return ok

    def fits_one(self, group: GroupSpec, node: int) -> bool:
        """`fits_at` for a single node, in plain Python (the greedy engine re-tests the one node a
        placement changed; numpy's per-call cost was most of that). Same floats, same answer."""
        p = self.problem
        limit = p.derived(CAP_ROWS)[node]
        if not all(u + r <= c for u, r, c in zip(self.used[node].tolist(), group.req_row, limit, strict=True)):
            return False
        if group.whole:
            if group.affinity == "required" and group.whole <= p.node_max_group[node]:
                return bool(self.max_group_free[node] >= group.whole)
            return bool(self.free_whole[node] >= group.whole)
        if group.share:
            return bool(self.max_share_free[node] >= group.share - EPS)
        return True

    def share_slots(self, share: float) -> FArray:
        """Per node: how many more shares of size `share` its healthy devices could take."""
        p = self.problem
        per_dev = np.where(p.dev_healthy, np.floor((1.0 - self.dev_used + EPS) / share), 0.0)
        return np.bincount(p.dev_node, weights=per_dev, minlength=p.n_nodes).astype(float)

    def replicas_fit(self, group: GroupSpec, nodes: IArray, share_slots: FArray | None = None,
                     slack: float = EPS, most: int | None = None) -> IArray:
        """Most replicas of `group` each of `nodes` could hold alone (resources and devices), vectorised.

        `share_slots` is `share_slots(group.share)` when the caller already has it; `slack` is
        added to every free resource amount before dividing (a larger one only overestimates);
        `most` caps the count (default: the group's `max`, what one job can place).
        """
        p = self.problem
        free = p.cap[nodes] - self.used[nodes]
        need = group.req > 0
        n = np.full(len(nodes), float(group.rmax if most is None else most))
        if need.any():
            n = np.minimum(n, np.floor((free[:, need] + slack) / group.req[need]).min(axis=1))
        if group.whole:
            n = np.minimum(n, self.free_whole[nodes] // group.whole)
        elif group.share:
            slots = self.share_slots(group.share) if share_slots is None else share_slots
            n = np.minimum(n, slots[nodes])
        out: IArray = np.maximum(n, 0).astype(np.int64)
        return out
