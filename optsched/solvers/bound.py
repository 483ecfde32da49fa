"""An upper bound on a round's admitted value: an aggregate linear relaxation solved by HiGHS.

CP-SAT's own bound holds only for the model it was given, and a round whose candidate nodes were
capped (every large round) has no bound from it. This relaxation forgets which node each replica
lands on and keeps what every plan must respect in aggregate over a node class (the real,
healthy nodes of one device model; nodes without devices form one class). Symbols as in
docs/formulation.md, section "Value bound":

- ``x[k]`` in [0, n_k]: jobs of kind k admitted (identical jobs, same priority, groups, gang
  and B7 outcome, are one kind of n_k jobs: the LP is the same, and far smaller on real
  queues); ``zm[g, c]``, ``ze[g, c]`` >= 0: replicas of group g below
  `min` and elastic replicas, on class c.
- B1  sum_c zm[g, c] = rmin_g x[k] (gang jobs; <= for the others);
  B2  sum_c ze[g, c] <= (rmax_g - rmin_g) x[k];
- B3  zm[g, c] + ze[g, c] <= sum over eligible nodes v of class c of fit(g, v), the replicas that
  v could hold alone (selectors, taints, models, per-node resources and devices), times n_k;
- B4  per class and resource: sum_g req[g, r] (zm + ze) <= free resource of the class;
- B5  per class and device count w: the whole devices of groups asking for >= w per replica fit
  only on nodes with >= w free devices: sum_{g: whole_g >= w} whole_g (zm + ze) <= sum of the
  free devices of those nodes;
- B6  per class: whole devices plus shares <= the free device capacity (fractions included);
- B7  x[k] = 0 when a gang job with a `required` topology needs more devices than any domain of its
  level has free on nodes it may use.

Objective: max sum priority_weight_j x size_g x speed_c x (zm + 0.5 ze), the `admitted_value` of
`optsched.metrics`. Every valid plan that keeps the running jobs where they are and places only on
existing nodes gives a feasible point of this LP, so its optimum bounds the admitted value of all
of them (provisioning and preemption come with their own issues and are not relaxed here).
Quota, spread, ratios, interconnect groups and bandwidth are dropped, which only loosens it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import coo_array

from optsched import clock
from optsched.concerns import eligibility
from optsched.ledger import EPS, Ledger
from optsched.problem import (
    CPU_PER_GPU_EQUIVALENT,
    ELASTIC_WEIGHT,
    FArray,
    GroupSpec,
    JobSpec,
    Problem,
    priority_weight,
)


@dataclass(frozen=True)
class ValueBound:
    """An upper bound on admitted value, how long it took, and the LP's status."""

    value: float | None
    seconds: float
    status: str
    admitted: dict[str, float] = field(default_factory=dict)
    """Share of each job's kind that the relaxation admits (x[k] / n_k, 0..1), by job id: the
    LP-guided hint of the CP-SAT round places the jobs the relaxation wants first."""


class _Rows:
    """Sparse constraint rows for `linprog` (A_ub x <= b_ub and A_eq x = b_eq)."""

    def __init__(self) -> None:
        self.ub: tuple[list[int], list[int], list[float], list[float]] = ([], [], [], [])
        self.eq: tuple[list[int], list[int], list[float], list[float]] = ([], [], [], [])

    def add(self, cols: list[int], coefs: list[float], rhs: float, equal: bool = False) -> None:
        rows, cs, vs, b = self.eq if equal else self.ub
        r = len(b)
        rows.extend([r] * len(cols))
        cs.extend(cols)
        vs.extend(coefs)
        b.append(rhs)

    def matrix(self, equal: bool, n: int) -> tuple[coo_array | None, FArray | None]:
        rows, cs, vs, b = self.eq if equal else self.ub
        if not b:
            return None, None
        return coo_array((vs, (rows, cs)), shape=(len(b), n)), np.array(b)


class EligibleFits:
    """Per replica shape, how many replicas each node it may use (among `real`) could hold alone
    on `base` (`Ledger.replicas_fit`): (nodes, counts), computed once per shape. Shared by the
    aggregate bound and the domain model (`optsched.domain.model`)."""

    def __init__(self, p: Problem, base: Ledger, real: np.ndarray) -> None:
        self.p, self.base, self.real = p, base, real
        self._by_shape: dict[tuple[object, ...], tuple[np.ndarray, FArray]] = {}
        self._share_slots: dict[float, FArray] = {}

    def __call__(self, job: JobSpec, g: GroupSpec, most: int | None = None) -> tuple[np.ndarray, FArray]:
        """(nodes, replicas each could hold alone), at most `most` per node (default: the group's
        `max`, what one job can place; the domain model counts several identical jobs at once)."""
        most = g.rmax if most is None else most
        shape = (eligibility.shape_key(self.p, job, g), g.gpu, g.share, most)
        got = self._by_shape.get(shape)
        if got is None:
            nodes = np.flatnonzero(eligibility.mask(self.p, job, g) & self.real)
            slots = None
            if g.share and not g.whole:
                slots = self._share_slots.get(g.share)
                if slots is None:
                    slots = self._share_slots[g.share] = self.base.share_slots(g.share)
            got = self._by_shape[shape] = (nodes, self.base.replicas_fit(g, nodes, slots, most=most).astype(float))
        return got


def _group_size(p: Problem, group: GroupSpec, cls: int) -> float:
    """GPU-equivalents x speed of one replica of `group` on a node of device model `cls`."""
    if group.gpu > 0:
        return group.gpu * float(group.model_speed[cls]) if cls >= 0 else 0.0
    return float(group.req[0]) / CPU_PER_GPU_EQUIVALENT


def _fits_required_domain(p: Problem, base: Ledger, job: JobSpec, real: np.ndarray) -> bool:
    """B7: some domain of the job's required level has enough free devices of usable nodes."""
    assert job.topo_level is not None
    need = sum(g.gpu * g.rmin for g in job.groups)
    if need <= 0:
        return True
    usable = eligibility.device_nodes(p, job)
    free = np.where(usable & real, base.free_whole, 0).astype(float)
    for g in job.groups:  # fractional groups can use partly used devices
        if g.share and not g.whole:
            free = np.maximum(free, np.where(usable & real, base.max_share_free, 0.0))
    at = p.node_domain_at(job.topo_level)
    best = np.bincount(at, weights=free).max() if len(at) else 0.0
    return bool(best >= need - EPS)


def _admitted(solution: FArray, kinds: dict[tuple[object, ...], tuple[JobSpec, bool, int]],
              kind_of_job: dict[str, tuple[object, ...]], x_of_kind: dict[tuple[object, ...], int],
              min_cols: dict[tuple[object, ...], list[int]]) -> dict[str, float]:
    """Admitted share of each job's kind in an LP solution: the share of its minimum replicas
    placed (sum zm / (sum rmin x n_k); for a non-gang job x alone says nothing, since B1 lets it
    be admitted with no replica), or x / n_k for a job without minimum replicas."""
    share: dict[tuple[object, ...], float] = {}
    for kind, (job, _, count) in kinds.items():
        need = sum(g.rmin for g in job.groups) * count
        placed = float(solution[min_cols[kind]].sum()) if min_cols[kind] else 0.0
        share[kind] = min(1.0, placed / need) if need > 0 else float(solution[x_of_kind[kind]]) / count
    return {j: share[kind] for j, kind in kind_of_job.items()}


def relaxed_base(p: Problem) -> Ledger:
    """The running jobs' usage without every job some queued job may evict (a plan may free
    their devices): the base of a bound that holds for plans with evictions too."""
    from optsched.concerns.tenancy import preemption

    base = Ledger.with_running(p)
    if p.running and p.jobs:
        base.add_running_many(preemption.evictable_jobs(p), sign=-1.0)
    return base


def value_bound(p: Problem, base: Ledger | None = None, integral: bool = False,
                time_limit: float = 1.0) -> ValueBound:
    """Upper bound on the admitted value of any plan for the round (module docstring)."""
    start = clock.now()
    base = Ledger.with_running(p) if base is None else base
    real = ~p.node_provisioned & p.node_healthy
    classes = np.unique(p.node_model[real])
    cls_of_node = p.node_model
    free = np.clip(p.cap - base.used, 0.0, None)
    dev_free = np.where(p.dev_healthy, np.clip(1.0 - base.dev_used, 0.0, 1.0), 0.0)
    node_dev_free = np.bincount(p.dev_node, weights=dev_free, minlength=p.n_nodes)

    n_vars = 0
    objective: list[float] = []
    upper: list[float] = []
    rows = _Rows()
    per_class: dict[int, list[tuple[GroupSpec, int, int | None]]] = {int(c): [] for c in classes}
    fit_cache: dict[tuple[object, ...], dict[int, float]] = {}
    node_fits = EligibleFits(p, base, real)

    def new_var(coef: float, ub: float) -> int:
        nonlocal n_vars
        objective.append(-coef)  # linprog minimises
        upper.append(ub)
        n_vars += 1
        return n_vars - 1

    # identical jobs (same priority, groups, gang and B7 outcome) are one column with a count
    kinds: dict[tuple[object, ...], tuple[JobSpec, bool, int]] = {}
    kind_of_job: dict[str, tuple[object, ...]] = {}
    for job in p.jobs:
        feasible = not (job.gang and job.topo_required and job.topo_level is not None) \
            or _fits_required_domain(p, base, job, real)
        kind: tuple[object, ...] = (
            job.priority, job.gang, feasible,
            tuple((eligibility.shape_key(p, job, g), g.gpu, g.share, g.rmin, g.rmax) for g in job.groups))
        first, ok, n = kinds.get(kind, (job, feasible, 0))
        kinds[kind] = (first, ok, n + 1)
        kind_of_job[job.id] = kind

    x_of_kind: dict[tuple[object, ...], int] = {}
    min_cols: dict[tuple[object, ...], list[int]] = {}  # the zm columns of each kind
    for kind, (job, feasible, count) in kinds.items():
        x = x_of_kind[kind] = new_var(0.0, float(count) if feasible else 0.0)
        min_cols[kind] = []
        weight = priority_weight(job.priority)
        for g in job.groups:
            shape = (eligibility.shape_key(p, job, g), g.gpu, g.share, g.rmax)
            fits = fit_cache.get(shape)
            if fits is None:
                nodes, counts = node_fits(job, g)
                by_cls = np.bincount(np.searchsorted(classes, cls_of_node[nodes]), weights=counts,
                                     minlength=len(classes))
                fits = fit_cache[shape] = {int(c): float(n) for c, n in zip(classes, by_cls, strict=True) if n > 0}
            zm_cols: list[int] = []
            ze_cols: list[int] = []
            for c, cap in fits.items():
                size = _group_size(p, g, c)
                zm = new_var(weight * size, cap * count)
                zm_cols.append(zm)
                ze = None
                if g.rmax > g.rmin:
                    ze = new_var(weight * size * ELASTIC_WEIGHT, cap * count)
                    ze_cols.append(ze)
                    rows.add([zm, ze], [1.0, 1.0], cap * count)  # B3 for `count` jobs
                per_class[c].append((g, zm, ze))
            rows.add([*zm_cols, x], [1.0] * len(zm_cols) + [-float(g.rmin)], 0.0, equal=job.gang)  # B1
            min_cols[kind] += zm_cols
            if ze_cols:
                rows.add([*ze_cols, x], [1.0] * len(ze_cols) + [-float(g.rmax - g.rmin)], 0.0)  # B2

    for c, items in per_class.items():
        if not items:
            continue
        in_cls = real & (cls_of_node == c)
        for r in range(len(p.resources)):  # B4
            used = [(g.req[r], z) for g, zm, ze in items for z in (zm, ze) if z is not None and g.req[r] > 0]
            if used:
                rows.add([z for _, z in used], [float(q) for q, _ in used], float(free[in_cls, r].sum()))
        whole_sizes = sorted({g.whole for g, _, _ in items if g.whole})
        for w in whole_sizes:  # B5
            big = in_cls & (base.free_whole >= w)
            used = [(g.whole, z) for g, zm, ze in items for z in (zm, ze) if z is not None and g.whole >= w]
            rows.add([z for _, z in used], [float(q) for q, _ in used], float(base.free_whole[big].sum()))
        devs = [(g.whole or g.share, z) for g, zm, ze in items for z in (zm, ze) if z is not None and g.gpu > 0]
        if devs:  # B6
            rows.add([z for _, z in devs], [float(q) for q, _ in devs], float(node_dev_free[in_cls].sum()))

    if n_vars == 0:
        return ValueBound(0.0, clock.now() - start, "optimal")
    a_ub, b_ub = rows.matrix(False, n_vars)
    a_eq, b_eq = rows.matrix(True, n_vars)
    if integral:
        cons = []
        if a_ub is not None:
            cons.append(LinearConstraint(a_ub, -np.inf, b_ub))
        if a_eq is not None:
            cons.append(LinearConstraint(a_eq, b_eq, b_eq))
        res = milp(np.array(objective), constraints=cons, integrality=np.ones(n_vars),
                   bounds=Bounds(np.zeros(n_vars), np.floor(np.array(upper) + EPS)),
                   options=clock.scipy_highs_options(time_limit - (clock.now() - start)))
        seconds = clock.now() - start
        dual = getattr(res, "mip_dual_bound", None)
        if dual is None or not np.isfinite(dual):
            return ValueBound(None, seconds, str(res.message))
        value = max(0.0, -float(dual))
        admitted = {} if res.x is None else _admitted(res.x, kinds, kind_of_job, x_of_kind, min_cols)
        return ValueBound(value * (1 + 1e-9) + 1e-6, seconds, "optimal" if res.status == 0 else "time_limit",
                          admitted)
    res = linprog(np.array(objective), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq,
                  bounds=np.stack([np.zeros(n_vars), np.array(upper)], axis=1) if n_vars else None,
                  method="highs")
    seconds = clock.now() - start
    if res.status != 0:
        return ValueBound(None, seconds, str(res.message))
    value = max(0.0, -float(res.fun))
    admitted = _admitted(res.x, kinds, kind_of_job, x_of_kind, min_cols)
    return ValueBound(value * (1 + 1e-9) + 1e-6, seconds, "optimal", admitted)  # LP tolerances
