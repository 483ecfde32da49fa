"""The domain model: the round decided per cell (`optsched.domain.cells`), solved by HiGHS.

Symbols as in docs/formulation.md, section "Domain model". Columns:

- ``x[k]`` in 0..n_k: queued jobs of kind k admitted (identical jobs are one kind: `job_kinds`;
  the rows below are written per job j, as in the docs, and hold per kind with x[k] for x[j]);
- ``zm[g, c]``, ``ze[g, c]`` integer >= 0: replicas of group g below its `min`, and elastic ones,
  in cell c (only where a node of c could hold one: ``fit[g, c] > 0``);
- ``ep[v]``, ``er[v]`` in {0, 1}: running job v evicted as ``preempted`` / ``reclaimed`` (only
  running jobs some queued job may evict: `preemption.evictable_jobs`);
- ``y[j, d]`` in {0, 1}: job j's bound groups (a `required` topology, or its first `colocate`
  rule) run inside domain d of that level (`_binding`);
- ``b[t, f]``, ``l[t, f]`` >= 0: what tenant t borrows and lends of flavor f (flat cohorts).

Rows (every valid plan on the existing nodes satisfies them, so the LP optimum bounds its value):

- D1  sum_c zm[g, c] = rmin_g x[j] (gang; <= otherwise); D2  sum_c ze[g, c] <= (rmax - rmin) x[j];
- D3  zm + ze <= fit[g, c]: the replicas c's nodes could hold one at a time with every evictable
  job gone (selectors, taints, models, resources, devices);
- D4  per cell and resource: sum_g req zm/ze - sum_v held[v, c] (ep + er) <= free[c];
- D5  per cell and whole-device count w: replicas asking >= w whole devices use only nodes with
  >= w free devices: the free devices of the nodes that have w free, plus, per evicted job and
  node it holds, its devices there and (when the node has fewer than w free) the node's free ones
  (valid however many evicted jobs share a node: each adds at least what the node gains);
- D6  per cell: devices and shares asked - devices the evicted jobs free <= free device capacity;
- E1  ep[v] <= sum of x over the jobs that may preempt v (same tenant, `within_tenant`);
  E2  er[v] <= sum of x over those that may reclaim it (cohort, `reclaim_within_cohort` or
  `borrow_within_cohort`); E3  ep + er <= 1;
- E4  reclaim takes only borrowed quota: per tenant and flavor, the victims holding that flavor
  alone reclaim at most what the tenant borrowed before the round plus the largest of them (the
  last one may take the tenant back to nominal: `preemption.reclaim_order`);
- Q1  per tenant and flavor, usage u = before - evicted + admitted (quota usage per cell):
  u <= nominal (no cohort), u - b <= nominal and b <= borrowing_limit (a cohort);
  Q2  flat cohort: l <= lending_limit, l + u - b <= nominal, sum (b - l) <= 0; a bound already
  broken before the round is loosened to where it stands (the validator judges what a plan adds);
- T1  sum_d y[k, d] = x[k]; T2  per bound group and domain, sum_{c in d} zm[g, c] = rmin y[k, d]
  (<= for a job that is not a gang) and sum_{c in d} ze[g, c] <= (rmax - rmin) y[k, d].

Objective: max sum value[g, c] (zm + 0.5 ze) - LOST_WEIGHT x lost[v] (ep + er), the admitted value of
`optsched.metrics` (priority weight x GPU-equivalents x the cell's speed) with the work an eviction
loses as a small second term. The bound is the objective's LP (or MIP dual) value with the lost work
left out.

Dropped (which only loosens it): spread, ratios, interconnect groups, uplink bandwidth, preferred
topology, colocation rules after a job's first, the plan-dependent parts of the preemption rules (a
reclaiming job's tenant ending within nominal, rule 5 beyond a job's least usage, hierarchical
cohorts past each tenant's borrowing limit) and migrations (the bound is not reported when a
running job is migratable). Provisioning slots are cells of their own: the bound counts them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_array

from optsched import clock
from optsched.concerns import eligibility
from optsched.concerns.tenancy import preemption, running
from optsched.domain.cells import Cells, build_cells, running_use, whole_freed
from optsched.ledger import EPS, Ledger
from optsched.problem import (
    CPU_PER_GPU_EQUIVALENT,
    ELASTIC_WEIGHT,
    BArray,
    FArray,
    IArray,
    JobSpec,
    Problem,
    priority_weight,
)
from optsched.solvers.bound import EligibleFits, relaxed_base

LOST_WEIGHT = 1e-3
"""Default objective weight of a GPU-equivalent hour of lost work against one unit of admitted
value: small, so that value comes first (the default objective order), yet large enough that an
eviction that buys no value is not made."""

UNCAPPED = 1 << 30
"""Replica count no node reaches: the per-node fit of a shape computed once, then capped per kind."""

LEVEL_TIE = 1e-6
"""Weight of admitted value in the second level's objective (lost work), to break its ties."""

MIP_GAP = 1e-3
"""Relative MIP gap at which HiGHS stops (the round's value is known to this precision anyway)."""


class _Rows:
    """Sparse rows lo <= A x <= hi, gathered as numpy blocks (one block per constraint family)."""

    def __init__(self) -> None:
        self.r: list[IArray] = []
        self.c: list[IArray] = []
        self.v: list[FArray] = []
        self.lo: list[FArray] = []
        self.hi: list[FArray] = []
        self.n = 0

    def new(self, count: int, lo: FArray | float, hi: FArray | float) -> int:
        """Reserve `count` rows with bounds; returns the first row's index."""
        first = self.n
        self.n += count
        self.lo.append(np.full(count, lo, dtype=float) if np.isscalar(lo) else np.asarray(lo, dtype=float))
        self.hi.append(np.full(count, hi, dtype=float) if np.isscalar(hi) else np.asarray(hi, dtype=float))
        return first

    def add(self, rows: IArray, cols: IArray, vals: FArray | float) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        self.r.append(rows)
        self.c.append(np.asarray(cols, dtype=np.int64))
        self.v.append(np.full(rows.shape, vals, dtype=float) if np.isscalar(vals) else np.asarray(vals, dtype=float))

    def matrix(self, n_cols: int) -> tuple[csr_array, FArray, FArray]:
        vals, lo, hi = _cat_f(self.v), _cat_f(self.lo), _cat_f(self.hi)
        a = csr_array((vals, (_cat_i(self.r), _cat_i(self.c))), shape=(self.n, n_cols))
        return a, lo, hi


@dataclass
class DomainModel:
    """The built model (module docstring) and the maps its solution is read through."""

    p: Problem
    cells: Cells
    victims: IArray
    """Positions in `p.running` of the running jobs the model may evict."""
    kinds: list[IArray]
    """Per kind (identical jobs: `job_kinds`), its jobs in priority-then-age order; `x` counts them."""
    cost: FArray
    """Objective to minimise (negated value, plus lost work)."""
    value: FArray
    """Admitted value per column (the bound's objective)."""
    integrality: IArray
    lower: FArray
    upper: FArray
    a: csr_array
    row_lo: FArray
    row_hi: FArray
    z_group: IArray
    z_job: IArray
    """Per z column: the kind and the group index in its jobs."""
    z_cell: IArray
    """Per z column: its bin, a cell (< cells.n) or a class (cells.n + class)."""
    z_elastic: IArray
    z_slot: BArray
    """Per z column: its bin holds provisioning slots (not used by the plan: `solve_model`)."""
    z_first: int
    ep_first: int
    er_first: int
    y_first: int
    y_kind: IArray
    y_dom: IArray
    """Per y column: its kind and domain (global id)."""
    build_s: float
    bound_valid: bool
    """Whether the LP value bounds every valid plan (no migratable running job)."""


@dataclass
class DomainSolution:
    """What the domain model decided: replicas per (job, group, cell) and the evictions."""

    status: str
    admitted: set[int] = field(default_factory=set)
    """Queued job indices admitted."""
    replicas: dict[tuple[int, int], dict[int, int]] = field(default_factory=dict)
    """(job, group) -> cell -> replicas."""
    preempted: list[int] = field(default_factory=list)
    reclaimed: list[int] = field(default_factory=list)
    """Positions in `p.running` evicted for each reason."""
    value: float | None = None
    """Admitted value of the model's solution."""
    bound: float | None = None
    """Upper bound on the admitted value of every valid plan (None when not valid or not found)."""
    seconds: float = 0.0


def _size(group_gpu: float, cpu_req: float, speed: FArray, models: IArray) -> FArray:
    """GPU-equivalents x speed of one replica in cells of device models `models`."""
    if group_gpu > 0:
        return np.where(models >= 0, group_gpu * speed[np.maximum(models, 0)], 0.0)
    return np.full(len(models), cpu_req / CPU_PER_GPU_EQUIVALENT)


def _binding(p: Problem, job: JobSpec) -> tuple[int, frozenset[int]] | None:
    """(topology level, groups) that must share one domain of that level, decided per cell: every
    group of a job with a `required` topology, or the groups of its first `colocate` rule (any
    further rule is left to the placement: dropping it only loosens the model); None when nothing
    binds the job above the node level."""
    if job.topo_required and job.topo_level is not None and job.topo_level < p.n_levels:
        return job.topo_level, frozenset(range(len(job.groups)))
    for groups, level in job.colocate:
        if level < p.n_levels:
            return level, frozenset(groups)
    return None


def build_model(p: Problem, lost_price: float = LOST_WEIGHT) -> DomainModel:
    """Build the domain model of the round from its compiled arrays (module docstring); `lost_price`
    is the objective weight of a GPU-equivalent hour of lost work against a unit of admitted value."""
    start = clock.now()
    base = Ledger.with_running(p)
    cells = build_cells(p, base)
    n_cells, n_cls = cells.n, cells.n_classes
    bin_cls = np.concatenate([cells.cls, np.arange(n_cls)])
    cls_node = np.full(n_cls, 0, dtype=np.int64)
    cls_node[cells.cls[::-1]] = cells.node[::-1]  # one node of each class (its first cell's)
    bin_node = np.concatenate([cells.node, cls_node])
    bin_model = p.node_model[bin_node] if len(bin_node) else np.zeros(0, dtype=np.int64)
    cls_slot = np.zeros(n_cls, dtype=bool)
    cls_slot[cells.cls] = cells.slot
    bin_slot = np.concatenate([cells.slot, cls_slot])
    # running jobs some queued job may evict (`preemption.evictable_jobs`), with who may
    who_of = {v.index: who for v in (p.running if p.jobs else ()) if (who := preemption.preemptors(p, v))}
    victims = np.array(sorted(who_of), dtype=np.int64)
    relaxed = relaxed_base(p) if len(victims) else base
    n_r = len(p.resources)
    rows = _Rows()

    # ---------------------------------------------------------------- kinds: identical jobs share columns
    kinds = job_kinds(p)
    n_kinds = len(kinds)
    kind_of = np.zeros(len(p.jobs), dtype=np.int64)
    for k, jobs_of_kind in enumerate(kinds):
        kind_of[jobs_of_kind] = k

    # ---------------------------------------------------------------- columns: x per kind, then z per group
    z_job: list[IArray] = []
    z_grp: list[IArray] = []
    z_bin: list[IArray] = []
    z_el: list[IArray] = []
    z_ub: list[FArray] = []
    z_val: list[FArray] = []
    fit_cache: dict[tuple[object, ...], FArray] = {}
    per_cell: FArray
    real = cells.node_cell >= 0
    node_fits = EligibleFits(p, relaxed, real)
    n_z = 0
    group_cols: list[tuple[int, int, IArray, IArray, IArray, FArray]] = []
    """(kind, group, zm columns, ze columns, bins, fit) per group."""
    empty = np.zeros(0, dtype=np.int64)
    for kind, jobs_of_kind in enumerate(kinds):
        job = p.jobs[int(jobs_of_kind[0])]
        n_k = len(jobs_of_kind)
        weight = priority_weight(job.priority)
        bound_to = _binding(p, job)
        for g in job.groups:
            per_cell_bins = bound_to is not None and g.index in bound_to[1]
            most = g.rmax * n_k  # a node may hold replicas of every job of the kind
            shape = (eligibility.shape_key(p, job, g), g.gpu, g.share, most)
            cached = fit_cache.get(shape)
            if cached is not None:
                per_cell = cached
            else:
                nodes, uncapped = node_fits(job, g, UNCAPPED)  # one fit per shape, capped per kind
                counts = np.minimum(uncapped, float(most))
                per_cell = fit_cache[shape] = np.bincount(cells.node_cell[nodes], weights=counts,
                                                          minlength=n_cells).astype(float)
            if per_cell_bins:
                where = np.flatnonzero(per_cell > 0)
                fit = per_cell[where]
            else:
                per_cls = np.bincount(cells.cls, weights=per_cell, minlength=n_cls).astype(float)
                where = np.flatnonzero(per_cls > 0)
                fit = per_cls[where]
                where = where + n_cells
            size = _size(g.gpu, float(g.req[0]) if n_r else 0.0, g.model_speed, bin_model[where]) * weight
            k = len(where)
            blocks = [(False, g.rmin)] if g.rmin > 0 else []
            if g.rmax > g.rmin:
                blocks.append((True, g.rmax - g.rmin))
            cols: dict[bool, IArray] = {}
            for elastic, count in blocks:
                cols[elastic] = np.arange(n_z, n_z + k)
                z_job.append(np.full(k, kind))
                z_grp.append(np.full(k, g.index))
                z_bin.append(where)
                z_el.append(np.full(k, elastic))
                z_ub.append(np.minimum(fit, count * n_k))  # fit bounds every replica of the shape there
                z_val.append(size * (ELASTIC_WEIGHT if elastic else 1.0))
                n_z += k
            group_cols.append((kind, g.index, cols.get(False, empty), cols.get(True, empty), where, fit))
    zj, zg, zb = _cat_i(z_job), _cat_i(z_grp), _cat_i(z_bin)
    ze_flag = _cat_i(z_el).astype(bool)
    zub, zval = _cat_f(z_ub), _cat_f(z_val)
    z0 = n_kinds
    n_v = len(victims)
    ep0 = z0 + n_z
    er0 = ep0 + n_v
    n_cols = er0 + n_v
    x_ub = np.array([len(jobs_of_kind) for jobs_of_kind in kinds], dtype=float)

    # ---------------------------------------------------------------- D1, D2 (and D3 for elastic pairs)
    for j, gi, zm, ze, _where, fit in group_cols:
        job = p.jobs[int(kinds[j][0])]
        g = job.groups[gi]
        if g.rmin > 0:
            if not len(zm):
                if job.gang:
                    x_ub[j] = 0.0
                continue
            r = rows.new(1, 0.0 if job.gang else -np.inf, 0.0)
            rows.add(np.full(len(zm) + 1, r), np.append(z0 + zm, j), np.append(np.ones(len(zm)), -float(g.rmin)))
        if len(ze):
            r = rows.new(1, -np.inf, 0.0)
            rows.add(np.full(len(ze) + 1, r), np.append(z0 + ze, j),
                     np.append(np.ones(len(ze)), -float(g.rmax - g.rmin)))
            if len(zm):
                first = rows.new(len(zm), -np.inf, fit)
                rr = np.arange(first, first + len(zm))
                rows.add(np.concatenate([rr, rr]), np.concatenate([z0 + zm, z0 + ze]), 1.0)

    # ---------------------------------------------------------------- D4, D6: capacity with evictions,
    # per class (every column and victim of the class) and per cell (the cells' own columns only)
    groups = [p.jobs[int(kinds[k][0])].groups[g] for k, g in zip(zj.tolist(), zg.tolist(), strict=True)]
    req = np.stack([g.req for g in groups]) if n_z else np.zeros((0, n_r))
    gpu_of = np.array([g.gpu for g in groups], dtype=float)
    whole_of = np.array([g.whole for g in groups], dtype=np.int64)
    dev_ask = np.where(whole_of > 0, whole_of, gpu_of)
    use = running_use(p, cells, victims)
    freed = whole_freed(p, victims)
    cls_free = np.zeros((n_cls, n_r))
    np.add.at(cls_free, cells.cls, cells.free)
    cls_dev = np.bincount(cells.cls, weights=cells.dev_free, minlength=n_cls).astype(float)
    on_cell = zb < n_cells
    cell_rows = np.unique(zb[on_cell])
    for level in ("class", "cell"):
        if level == "class":
            n_at, free_at, dev_at = n_cls, cls_free, cls_dev
            z_at, z_cols = bin_cls[zb], np.arange(n_z)
            v_at = cells.cls[use.cell]
            keep = np.ones(len(use.cell), dtype=bool)
        else:
            if not len(cell_rows):
                continue
            n_at, free_at, dev_at = n_cells, cells.free, cells.dev_free
            z_cols = np.flatnonzero(on_cell)
            z_at = zb[z_cols]
            v_at = use.cell
            keep = np.isin(use.cell, cell_rows)
        first = rows.new(n_at * n_r, -np.inf, free_at.reshape(-1))
        nz = np.nonzero(req[z_cols])
        rows.add(first + z_at[nz[0]] * n_r + nz[1], z0 + z_cols[nz[0]], req[z_cols][nz])
        ev = np.nonzero(use.resources * keep[:, None])
        for col0 in (ep0, er0):
            rows.add(first + v_at[ev[0]] * n_r + ev[1], col0 + use.victim[ev[0]], -use.resources[ev])
        first = rows.new(n_at, -np.inf, dev_at)
        dev_cols = z_cols[gpu_of[z_cols] > 0]
        rows.add(first + (bin_cls[zb[dev_cols]] if level == "class" else zb[dev_cols]), z0 + dev_cols,
                 dev_ask[dev_cols])
        on = (use.devices > 0) & keep
        for col0 in (ep0, er0):
            rows.add(first + v_at[on], col0 + use.victim[on], -use.devices[on])
        # D5: replicas of >= w whole devices use only nodes with >= w free; a node counts its free
        # devices when it has w, and each victim on it adds its devices there plus, when the node
        # had fewer than w free, those it had (an upper bound however many victims share a node)
        for w in np.unique(whole_of[z_cols][whole_of[z_cols] > 0]).tolist():
            big = real & (base.free_whole >= w)
            cell_cap = np.bincount(cells.node_cell[big], weights=base.free_whole[big], minlength=n_cells).astype(float)
            cap = np.bincount(cells.cls, weights=cell_cap, minlength=n_cls).astype(float) if level == "class" \
                else cell_cap
            wide = z_cols[whole_of[z_cols] >= w]
            first = rows.new(n_at, -np.inf, cap)
            rows.add(first + (bin_cls[zb[wide]] if level == "class" else zb[wide]), z0 + wide,
                     whole_of[wide].astype(float))
            if len(freed.victim):
                node = freed.node
                gain = freed.devices + np.where(base.free_whole[node] < w, base.free_whole[node], 0)
                at = cells.node_cell[node]
                ok = at >= 0
                if level == "cell":
                    ok &= np.isin(at, cell_rows)
                else:
                    at = np.where(ok, cells.cls[np.maximum(at, 0)], -1)
                for col0 in (ep0, er0):
                    rows.add(first + at[ok], col0 + freed.victim[ok], -gain[ok].astype(float))

    # ---------------------------------------------------------------- E1-E4: who may evict whom
    rt = running.running_table(p)
    before = running.running_usage_before(p)
    reclaim_caps: dict[tuple[int, int], list[int]] = {}
    for k, v in enumerate(victims.tolist()):
        victim = p.running[v]
        who = who_of[v]
        same = np.unique(kind_of[[j.index for j in who.same]]).astype(np.int64)
        rec = np.unique(kind_of[[j.index for j in (*who.borrowing, *who.nominal)]]).astype(np.int64)
        for col, pool in ((ep0 + k, same), (er0 + k, rec)):
            r = rows.new(1, -np.inf, 0.0)
            rows.add(np.full(len(pool) + 1, r), np.append(pool, col), np.append(-np.ones(len(pool)), 1.0))
        r = rows.new(1, -np.inf, 1.0)
        rows.add(np.array([r, r]), np.array([ep0 + k, er0 + k]), 1.0)
        held = rt.held[v]
        if len(rec) and np.count_nonzero(held > 0) == 1:
            reclaim_caps.setdefault((victim.tenant, int(np.argmax(held))), []).append(k)
    for (t, f), ks in reclaim_caps.items():
        amounts = np.array([rt.held[victims[k], f] for k in ks])
        borrowed = max(0.0, float(before[t, f] - p.nominal[t, f]))
        r = rows.new(1, -np.inf, borrowed + float(amounts.max()) + EPS)
        rows.add(np.full(len(ks), r), er0 + np.array(ks), amounts)

    # ---------------------------------------------------------------- Q1, Q2: quota
    n_t, n_f = len(p.tenant_names), len(p.flavors)
    extra_cols = 0
    if n_f and n_t:
        # quota usage per column and flavor (`ledger.flavor_use` in bulk): GPUs where a flavor counts
        # the group's devices on the bin's nodes, the request where it counts a resource
        res = p.flavor_resource
        amount = np.where(res[None, :] < 0, gpu_of[:, None], req[:, np.maximum(res, 0)]) if n_z else np.zeros((0, n_f))
        bin_use = np.where(p.flavor_nodes[:, bin_node[zb]].T, amount, 0.0)
        z_tenant = np.array([p.jobs[int(kinds[k][0])].tenant for k in zj.tolist()], dtype=np.int64)
        v_tenant = rt.tenant[victims] if n_v else np.zeros(0, dtype=np.int64)
        v_held = rt.held[victims] if n_v else np.zeros((0, n_f))
        defined = [t for t in range(min(n_t, len(p.cluster.tenants)))]
        flat = not p.hierarchical
        members = [t for t in defined if p.tenant_cohort[t] >= 0] if flat else []
        idx = {(t, f): i for i, (t, f) in enumerate((t, f) for t in members for f in range(n_f))}
        extra_cols = 2 * len(idx)

        def usage_terms(r: int, t: int, f: int) -> None:
            zcols = np.flatnonzero((z_tenant == t) & (bin_use[:, f] > 0))
            rows.add(np.full(len(zcols), r), z0 + zcols, bin_use[zcols, f])
            vk = np.flatnonzero((v_tenant == t) & (v_held[:, f] > 0))
            for col0 in (ep0, er0):
                rows.add(np.full(len(vk), r), col0 + vk, -v_held[vk, f])

        for t in defined:
            for f in range(n_f):
                nominal, u0 = float(p.nominal[t, f]), float(before[t, f])
                # u = u0 + (the usage terms): the rows hold the terms, u0 moves to the right side
                if p.tenant_cohort[t] < 0:
                    r = rows.new(1, -np.inf, max(nominal, u0) - u0)  # u <= N
                elif (t, f) in idx:
                    r = rows.new(1, -np.inf, nominal - u0)  # u - b <= N, b bounded by B (loosened there)
                    rows.add(np.array([r]), np.array([n_cols + 2 * idx[(t, f)]]), -1.0)
                    lr = rows.new(1, -np.inf, nominal - u0)  # l + u - b <= N
                    usage_terms(lr, t, f)
                    b = n_cols + 2 * idx[(t, f)]
                    rows.add(np.array([lr, lr]), np.array([b, b + 1]), np.array([-1.0, 1.0]))
                else:  # hierarchical cohorts: the tenant's own borrowing limit only
                    r = rows.new(1, -np.inf, max(nominal + float(p.borrow_limit[t, f]), u0) - u0)
                usage_terms(r, t, f)
        for c in sorted({int(p.tenant_cohort[t]) for t in members}):
            ts = [t for t in members if p.tenant_cohort[t] == c]
            for f in range(n_f):
                borrowed0 = sum(max(0.0, float(before[t, f] - p.nominal[t, f])) for t in ts)
                lent0 = sum(min(float(p.lend_limit[t, f]), max(0.0, float(p.nominal[t, f] - before[t, f])))
                            for t in ts)
                r = rows.new(1, -np.inf, max(0.0, borrowed0 - lent0))  # sum (b - l) <= 0
                bs = np.array([n_cols + 2 * idx[(t, f)] for t in ts], dtype=np.int64)
                rows.add(np.full(2 * len(ts), r), np.concatenate([bs, bs + 1]),
                         np.concatenate([np.ones(len(ts)), -np.ones(len(ts))]))

    # ---------------------------------------------------------------- T1, T2: required topology, colocation
    y_first = n_cols + extra_cols
    n_y = 0
    y_kind: list[IArray] = []
    y_dom: list[IArray] = []
    by_kind: dict[int, list[tuple[int, IArray, IArray, IArray]]] = {}
    level_of: dict[int, int] = {}
    for k, gi, zm, ze, where, _fit in group_cols:
        bound_to = _binding(p, p.jobs[int(kinds[k][0])])
        if bound_to is not None and gi in bound_to[1]:
            by_kind.setdefault(k, []).append((gi, zm, ze, where))
            level_of[k] = bound_to[0]
    for k, parts in by_kind.items():
        job = p.jobs[int(kinds[k][0])]
        at = cells.at_level(p, level_of[k])
        doms = np.unique(np.concatenate([at[where] for *_, where in parts]))
        ycol = y_first + n_y + np.arange(len(doms))
        y_kind.append(np.full(len(doms), k))
        y_dom.append(doms)
        n_y += len(doms)
        r = rows.new(1, 0.0, 0.0)  # T1: each admitted job of the kind in one domain
        rows.add(np.full(len(doms) + 1, r), np.append(ycol, k), np.append(np.ones(len(doms)), -1.0))
        for gi, zm, ze, where in parts:  # T2: a domain holds its jobs' replicas
            g = job.groups[gi]
            pos = np.searchsorted(doms, at[where])
            for part, count, low in ((zm, g.rmin, 0.0 if job.gang else -np.inf), (ze, g.rmax - g.rmin, -np.inf)):
                if not len(part):
                    continue
                first = rows.new(len(doms), low, 0.0)
                rows.add(first + pos, z0 + part, 1.0)
                rows.add(first + np.arange(len(doms)), ycol, -float(count))

    total = y_first + n_y
    value = np.zeros(total)
    value[z0:z0 + n_z] = zval
    lost = rt.lost[victims] if n_v else np.zeros(0)
    cost = -value.copy()
    cost[ep0:ep0 + n_v] = lost_price * lost
    cost[er0:er0 + n_v] = lost_price * lost
    lower = np.zeros(total)
    upper = np.full(total, np.inf)
    upper[:n_kinds] = x_ub
    upper[z0:z0 + n_z] = zub
    upper[ep0:er0 + n_v] = 1.0
    integrality = np.ones(total, dtype=np.int64)
    if extra_cols:
        integrality[n_cols:n_cols + extra_cols] = 0
        pairs = sorted(idx, key=idx.__getitem__)
        upper[n_cols:n_cols + extra_cols:2] = [max(float(p.borrow_limit[t, f]), float(before[t, f] - p.nominal[t, f]))
                                               for t, f in pairs]
        upper[n_cols + 1:n_cols + extra_cols:2] = [float(p.lend_limit[t, f]) for t, f in pairs]
    if n_y:
        upper[y_first:total] = x_ub[_cat_i(y_kind)]
    a, lo, hi = rows.matrix(total)
    clock.charge(clock.NONZERO_S * a.nnz)  # deterministic mode's measure of the build
    bound_valid = not any(v.migratable for v in p.running)
    return DomainModel(p, cells, victims, kinds, cost, value, integrality, lower, upper, a, lo, hi, zg, zj, zb,
                       ze_flag, bin_slot[zb] if n_z else np.zeros(0, dtype=bool), z0, ep0, er0, y_first,
                       _cat_i(y_kind), _cat_i(y_dom), clock.now() - start, bound_valid)


def value_bound(m: DomainModel, time_limit: float) -> float | None:
    """The LP value of admitted value alone over the model (no price on lost work): an upper bound
    on the admitted value of every valid plan on the existing nodes (None: not valid, or HiGHS
    did not finish)."""
    if not m.bound_valid:
        return None
    if not len(m.cost):
        return 0.0
    res = _relaxation(m, -m.value, time_limit)
    if res.status != 0 or res.fun is None:
        return None
    return max(0.0, -float(res.fun)) * (1 + 1e-9) + 1e-6


def _relaxation(m: DomainModel, cost: FArray, time_limit: float, *extra: LinearConstraint) -> Any:
    """SciPy's HiGHS on the model's LP relaxation (every column continuous, the model's rows then
    `extra`), minimising `cost`: the result (`status` 0 optimal, 2 infeasible; `fun`)."""
    cons = [LinearConstraint(m.a, m.row_lo, m.row_hi)] if m.a.shape[0] else []
    return milp(cost, constraints=[*cons, *extra], integrality=np.zeros_like(m.integrality),
                bounds=Bounds(m.lower, m.upper), options=clock.scipy_highs_options(time_limit))


def lost_bound(m: DomainModel, value_at_least: float, time_limit: float) -> float | None:
    """A lower bound on the lost work (GPU-equivalent hours, the `disruption` term) of every valid
    plan whose admitted value is at least `value_at_least`: the LP minimum of `sum_v lost[v] (ep +
    er)` over the model with `value >= value_at_least` added. The mapping that makes the model a
    relaxation (docs/formulation.md, "Why it bounds every valid plan") keeps a plan's evictions and
    its value, so such a plan maps to a point of this LP with its own lost work. It answers what
    a value target costs in disruption: with `value_at_least` = 0.97 x the value of a known valid
    plan (so at most 0.97 x the round's optimum), the least lost work of any plan within 3% of the
    optimum. Infinite when no point reaches the value (neither does a plan); None where the model
    reports no bound (`bound_valid`) or HiGHS did not finish."""
    if not m.bound_valid:
        return None
    if not len(m.cost):
        return 0.0 if value_at_least <= 0 else math.inf
    n_v = len(m.victims)
    lost = np.zeros(len(m.cost))
    if n_v:
        lost[m.ep_first:m.ep_first + n_v] = running.running_table(m.p).lost[m.victims]
        lost[m.er_first:m.er_first + n_v] = lost[m.ep_first:m.ep_first + n_v]
    res = _relaxation(m, lost, time_limit, LinearConstraint(m.value[None, :], value_at_least, np.inf))
    if res.status == 2:  # infeasible: no plan reaches the value
        return math.inf
    if res.status != 0 or res.fun is None:
        return None
    return max(0.0, float(res.fun) * (1 - 1e-9) - 1e-6)


def _highs(m: DomainModel, upper: FArray, integral: bool) -> Any:
    """A quiet highspy `Highs` holding the model (minimise `m.cost`; columns integer where
    `integral` and the model says so)."""
    import highspy

    from optsched.solvers.milp.highs import quiet_highs

    h = quiet_highs()
    inf = highspy.kHighsInf
    a = m.a.tocsr()
    lo = np.where(np.isfinite(m.row_lo), m.row_lo, -inf)
    hi = np.where(np.isfinite(m.row_hi), m.row_hi, inf)
    kinds = m.integrality if integral else np.zeros_like(m.integrality)
    h.passModel(len(m.cost), a.shape[0], int(a.nnz), int(highspy.MatrixFormat.kRowwise),
                int(highspy.ObjSense.kMinimize), 0.0, m.cost.astype(np.float64), m.lower.astype(np.float64),
                np.where(np.isfinite(upper), upper, inf).astype(np.float64), lo, hi,
                a.indptr.astype(np.int32), a.indices.astype(np.int32), a.data.astype(np.float64),
                kinds.astype(np.int32))
    return h


def _mip(m: DomainModel, upper: FArray, end: float) -> tuple[FArray | None, float | None, str]:
    """The MIP with highspy, run in a thread and abandoned at `end` (`clock.now()` seconds) plus a
    grace (`solvers.milp.highs.run_until`: HiGHS may run far past its own time limit in root
    heuristics; on the 102,400-GPU round it took 7.6 s for a 2.9 s limit): (solution or None, dual
    bound of the minimised objective or None, status)."""
    from optsched.solvers.milp.highs import run_until, set_limits

    h = _highs(m, upper, integral=True)
    set_limits(h, end - clock.now())
    h.setOptionValue("mip_rel_gap", MIP_GAP)
    if not run_until(h, end):
        return None, None, "abandoned: HiGHS ran past the time limit"
    status = h.modelStatusToString(h.getModelStatus())
    sol = h.getSolution()
    info = h.getInfo()
    x = np.array(sol.col_value) if sol.value_valid else None
    dual = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else None
    return x, dual, "optimal" if status == "Optimal" else ("time_limit" if x is not None else status)


def _lp_levels(m: DomainModel, upper: FArray, end: float, tolerance: float) -> tuple[FArray | None, float | None,
                                                                                       str]:
    """The LP, then, from its basis (HiGHS's simplex warm start), the least lost work among
    solutions of at least (1 - tolerance) x its admitted value: (the second level's solution, or
    the first's when the second fails, the first level's optimum, status)."""
    from optsched.solvers.milp.highs import charge_run, set_limits

    h = _highs(m, upper, integral=False)
    set_limits(h, end - clock.now())
    h.run()
    charge_run(h)
    sol = h.getSolution()
    if h.modelStatusToString(h.getModelStatus()) != "Optimal" or not sol.value_valid:
        return None, None, h.modelStatusToString(h.getModelStatus())
    first = np.array(sol.col_value)
    dual = float(h.getInfo().objective_function_value)
    floor = (1.0 - tolerance) * float(m.value @ first)
    cols = np.flatnonzero(m.value > 0).astype(np.int32)
    h.addRow(floor, highspy_inf(), len(cols), cols, m.value[cols].astype(np.float64))
    n_v = len(m.victims)
    cost = np.where(m.value > 0, -LEVEL_TIE * m.value, 0.0)  # at equal lost work, more value
    lost = running.running_table(m.p).lost[m.victims] if n_v else np.zeros(0)
    cost[m.ep_first:m.ep_first + n_v] = lost
    cost[m.er_first:m.er_first + n_v] = lost
    h.changeColsCost(len(cost), np.arange(len(cost), dtype=np.int32), cost.astype(np.float64))
    set_limits(h, end - clock.now())
    h.run()
    charge_run(h)
    second = h.getSolution()
    if h.modelStatusToString(h.getModelStatus()) != "Optimal" or not second.value_valid:
        return first, dual, "optimal (the least lost work not found in time)"
    return np.array(second.col_value), dual, "optimal, then the least lost work"


def highspy_inf() -> float:
    """HiGHS's infinity."""
    import highspy

    return float(highspy.kHighsInf)


def job_kinds(p: Problem) -> list[IArray]:
    """Identical queued jobs, in priority-then-age order within each kind: same priority, tenant,
    gang, topology, spot policy and groups (eligibility shape, devices, replica counts). Their
    columns are the same, so the model counts them (`x[k]` in 0..n_k) instead of deciding each:
    on mixed-cloud-10k 1,000 jobs are 405 kinds, on the 102,400-GPU round 10,000 jobs are 278.
    The preemption rows (E1, E2) sum the kinds that hold an allowed preemptor, which only loosens
    them (the naming step judges each job)."""
    by_key: dict[tuple[object, ...], list[int]] = {}
    for job in sorted(p.jobs, key=lambda j: (-j.priority, j.submitted_at, j.index)):
        key = (job.priority, job.tenant, job.gang, job.topo_level, job.topo_required, job.spot, job.colocate,
               tuple((eligibility.shape_key(p, job, g), g.gpu, g.share, g.rmin, g.rmax) for g in job.groups))
        by_key.setdefault(key, []).append(job.index)
    return [np.array(members, dtype=np.int64) for members in by_key.values()]


def _take(bins: dict[int, int], count: int) -> dict[int, int]:
    """Take up to `count` replicas from `bins` (bin -> replicas left), in bin order."""
    got: dict[int, int] = {}
    for b in sorted(bins):
        if count <= 0:
            break
        n = min(bins[b], count)
        if n > 0:
            got[b] = n
            bins[b] -= n
            count -= n
    return got


def _split_kinds(m: DomainModel, x: FArray, out: DomainSolution) -> None:
    """The model's counts per kind handed to its jobs (`out.admitted`, `out.replicas`): the first
    round(x[k]) jobs of a kind are admitted (a kind bound to one domain: as many to each domain as
    its `y` says, in domain order), and each takes its minimum, then its elastic replicas from the
    kind's bins in bin order (within its domain's cells where it has one)."""
    p = m.p
    z = np.rint(x[m.z_first:m.z_first + len(m.z_cell)]).astype(np.int64)
    pools: dict[tuple[int, int, bool], dict[int, int]] = {}
    for c in np.flatnonzero(z > 0).tolist():
        key = (int(m.z_job[c]), int(m.z_group[c]), bool(m.z_elastic[c]))
        pool = pools.setdefault(key, {})
        pool[int(m.z_cell[c])] = pool.get(int(m.z_cell[c]), 0) + int(z[c])
    y = np.rint(x[m.y_first:m.y_first + len(m.y_kind)]).astype(np.int64)
    domains: dict[int, list[int]] = {}
    for c in np.flatnonzero(y > 0).tolist():
        domains.setdefault(int(m.y_kind[c]), []).extend([int(m.y_dom[c])] * int(y[c]))
    for k, members in enumerate(m.kinds):
        job0 = p.jobs[int(members[0])]
        admitted = min(len(members), round(float(x[k])))
        if admitted <= 0:
            continue
        bound_to = _binding(p, job0)
        at = m.cells.at_level(p, bound_to[0]) if k in domains and bound_to is not None else None
        for i, j in enumerate(members[:admitted].tolist()):
            dom = domains[k][i] if k in domains and i < len(domains[k]) else None
            for g in job0.groups:
                if bound_to is None or g.index not in bound_to[1]:
                    dom_g = None
                else:
                    dom_g = dom
                for elastic, count in ((False, g.rmin), (True, g.rmax - g.rmin)):
                    pool = pools.get((k, g.index, elastic), {})
                    if not pool or count <= 0:
                        continue
                    if dom_g is not None and at is not None:  # only the cells of its domain
                        mine = {b: n for b, n in pool.items() if at[b] == dom_g}
                        got = _take(mine, count)
                        for b, n in got.items():
                            pool[b] -= n
                    else:
                        got = _take(pool, count)
                    if got:
                        per = out.replicas.setdefault((j, g.index), {})
                        for b, n in got.items():
                            per[b] = per.get(b, 0) + n
            if any((j, g.index) in out.replicas for g in job0.groups):
                out.admitted.add(j)


def _cat_i(xs: list[IArray]) -> IArray:
    return np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, dtype=np.int64)


def _cat_f(xs: list[FArray]) -> FArray:
    return np.concatenate(xs).astype(float) if xs else np.zeros(0)


def solve_model(m: DomainModel, time_limit: float, *, integral: bool = True, provision: bool = True,
                least_lost_within: float | None = None) -> DomainSolution:
    """Solve the model with HiGHS within `time_limit` seconds (the MIP; `integral=False`: its LP)
    and read the solution (module docstring); `provision=False` keeps every replica off the
    provisioning slots (its bound is then not the round's where a pool may add nodes).

    `least_lost_within` (a tolerance; LP only): the LP, then the least lost work among solutions
    within that share of its admitted value (the second level of "admitted value within a
    tolerance of its best, then the least lost work"); the bound is the first level's."""
    start = clock.now()
    if not len(m.cost):  # nothing to decide (no queued job): the empty plan, and a bound of 0
        return DomainSolution(status="optimal", value=0.0, bound=0.0 if m.bound_valid else None)
    upper = m.upper
    if not provision and m.z_slot.any():  # no replica on a slot
        upper = upper.copy()
        upper[m.z_first + np.flatnonzero(m.z_slot)] = 0.0
    if least_lost_within is not None:
        x, dual, status = _lp_levels(m, upper, start + time_limit, least_lost_within)
    elif integral:
        x, dual, status = _mip(m, upper, start + time_limit)
    else:
        cons = [LinearConstraint(m.a, m.row_lo, m.row_hi)] if m.a.shape[0] else []
        res = milp(m.cost, constraints=cons, integrality=np.zeros_like(m.integrality), bounds=Bounds(m.lower, upper),
                   options=clock.scipy_highs_options(time_limit))
        x = res.x if res.status == 0 else None
        dual = res.fun if res.status == 0 else None
        status = "optimal" if res.status == 0 else str(res.message)
    out = DomainSolution(status=status, seconds=clock.now() - start)
    if dual is not None and np.isfinite(dual) and m.bound_valid and (provision or not m.z_slot.any()):
        # the objective's optimum (value - price x lost) <= -dual: the value alone is at most that
        # plus the price of every eviction
        n_v = len(m.victims)
        most_lost = float(np.sum(m.cost[m.ep_first:m.ep_first + n_v]))
        out.bound = max(0.0, -float(dual) + most_lost) * (1 + 1e-9) + 1e-6
    if x is None:
        return out
    n_v = len(m.victims)
    ep = np.rint(x[m.ep_first:m.ep_first + n_v]) > 0
    er = np.rint(x[m.er_first:m.er_first + n_v]) > 0
    out.preempted = m.victims[ep].tolist()
    out.reclaimed = m.victims[er & ~ep].tolist()
    _split_kinds(m, x, out)
    out.value = float(m.value @ np.where(m.integrality > 0, np.rint(x), x))
    return out


__all__ = ["LOST_WEIGHT", "DomainModel", "DomainSolution", "build_model", "job_kinds", "lost_bound", "solve_model",
           "value_bound"]
