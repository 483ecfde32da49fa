"""The limit of FGD's protocol: an upper bound on the GPUs any placement could allocate (issue 23).

Offline, every arrived task known at once, any subset of them placed, each on one node of the
cluster (empty at the start, as in the protocol) under the same rules (CPU, memory, allowed
model, `ngpu` devices each with `milli` free; shares of one device add up to at most 1000): no
placement of the arrived tasks allocates more milli-GPU than this relaxation's optimum. It
forgets which node of a node type a task lands on and keeps, per node type, what every placement
must respect in aggregate (docs/fgd.md, "The limit"). Symbols as in the code:

- node type `j` (nodes equal in CPU, memory, model and devices): `N_j` nodes of `C_j` millicores,
  `M_j` MiB, `G_j` devices; task shape `s` (tasks equal in CPU, memory, GPUs, milli and allowed
  models): `n_s` arrived tasks asking `cpu_s`, `mem_s`, `ngpu_s` devices of `milli_s` each;
- `x[s, j]` in [0, n_s], integer in the MIP: tasks of shape `s` on type `j`, only where one task
  fits one empty node of the type (`cpu_s <= C_j`, `mem_s <= M_j`, `ngpu_s <= G_j`, model);
- L1 `sum_j x[s, j] <= n_s`;
- L2 CPU and memory per type: `sum_s cpu_s x[s, j] <= N_j C_j`, the same for memory;
- L3 milli-GPU per type: `sum_s ngpu_s milli_s x[s, j] <= 1000 N_j G_j`;
- L4 devices per type: a whole GPU takes a device, and a device holds at most one share above
  500: `sum_{s whole} ngpu_s x + sum_{s share, milli_s > 500} x <= N_j G_j`;
- L5 one per node: tasks asking more than half a node's CPU, or its memory, or its devices (whole
  GPUs), are at most one a node each: `sum_{s: cpu_s > C_j / 2} x[s, j] <= N_j`, and the same for
  memory and devices;
- objective: `max sum_{s, j} ngpu_s milli_s x[s, j]`, the allocated milli-GPU.

Every placement of the arrived tasks gives a feasible integer point (count, per shape and type,
the tasks it placed there), so the MIP's optimum, and the LP's above it, bound the allocation. The
MIP is solved by HiGHS to a `MIP_GAP` relative gap within a time limit; its dual bound is what is
reported, so a MIP stopped early still gives a valid (looser) limit. `device_limit` keeps the CPU
and memory rows and makes each device's shares exact (patterns within 1000 milli-GPU, by column
generation): rows L3 and L4 only approximate that.

The aggregate relaxation lets a node type pool its nodes' CPU. `pattern_limit` does not: it is the
configuration LP (Gilmore-Gomory) over the same shapes and types, whose columns are what one node
can hold, found by column generation (a small MIP per type prices a column, HiGHS), with the
Lagrangian bound `sum_s pi_s n_s + sum_j N_j max(0, best column value of type j under pi)`,
valid at every iteration, as its bound. Rounding its columns down onto the nodes and filling what
is left by best fit gives a placement, so the optimum lies between it and the smallest bound
(`PatternLimit`). In the columns which shares share a device is relaxed (`SHARES_PER_DEVICE`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import coo_array, hstack

from optsched.problem import IArray
from optsched.sim.fgd import MILLI, Nodes, Tasks, apply_task, fit_mask, place

MIP_GAP = 1e-5
"""Relative gap the limit's MIPs stop at: 62 milli-GPU on the openb cluster, under the reports'
two decimals of a percent."""


@dataclass(frozen=True)
class Limit:
    """The bound on allocated milli-GPU for a set of arrived tasks, from the LP and the MIP."""

    lp_milli: float
    mip_milli: float
    """The MIP's dual bound (its optimum when `mip_optimal`)."""
    mip_optimal: bool
    arrived_milli: int
    device_milli: float | None = None
    """The device-pattern LP's bound (`device_limit`), where computed and converged."""

    @property
    def bound_milli(self) -> float:
        """The tightest of the bounds computed."""
        return min(self.mip_milli, self.device_milli) if self.device_milli is not None else self.mip_milli


def _types(nodes: Nodes) -> tuple[IArray, IArray, IArray]:
    """Node types: per type its first node and its node count, and per node its type."""
    devices = (nodes.gpu >= 0).sum(axis=1)
    keys = np.stack([nodes.cpu, nodes.mem, nodes.model, devices], axis=1)
    _, first, type_of, count = np.unique(keys, axis=0, return_index=True, return_inverse=True, return_counts=True)
    return first, count, type_of.reshape(-1)


def _caps(nodes: Nodes, first: IArray) -> tuple[IArray, IArray, IArray]:
    """Per node type (its `first` node): CPU, memory and devices."""
    return nodes.cpu[first], nodes.mem[first], (nodes.gpu[first] >= 0).sum(axis=1)


def allocation_limit(nodes: Nodes, tasks: Tasks, arrived: IArray, time_limit: float = 10.0) -> Limit:
    """The limit (module docstring) for the tasks `arrived` (indices into `tasks`, repeats allowed:
    the protocol's inflation draws a task more than once) on the empty `nodes`."""
    first, n_of_type, _ = _types(nodes)
    c_cap, m_cap, g_cap = _caps(nodes, first)
    t_model = nodes.model[first]
    keys = np.concatenate([np.stack([tasks.cpu, tasks.mem, tasks.ngpu, tasks.milli], axis=1)[arrived],
                           tasks.allowed[arrived].astype(np.int64)], axis=1)
    shapes, count = np.unique(keys, axis=0, return_counts=True)
    cpu, mem, ngpu, milli = shapes[:, 0], shapes[:, 1], shapes[:, 2], shapes[:, 3]
    allowed = shapes[:, 4:].astype(bool)
    any_model = np.asarray(~allowed.any(axis=1)) if allowed.shape[1] else np.ones(len(shapes), dtype=bool)
    model_ok = np.ones((len(shapes), len(first)), dtype=bool)
    if allowed.shape[1]:
        model_ok = (t_model[None, :] >= 0) & (allowed[:, np.maximum(t_model, 0)] | any_model[:, None])
    fits = (cpu[:, None] <= c_cap[None, :]) & (mem[:, None] <= m_cap[None, :]) \
        & ((ngpu[:, None] == 0) | ((ngpu[:, None] <= g_cap[None, :]) & model_ok))
    s_of, j_of = np.nonzero(fits)
    n_cols = len(s_of)
    arrived_milli = int((tasks.ngpu[arrived] * tasks.milli[arrived]).sum())
    if n_cols == 0:
        return Limit(0.0, 0.0, True, arrived_milli)
    whole = (milli >= MILLI) & (ngpu > 0)
    big_share = (ngpu > 0) & (milli < MILLI) & (2 * milli > MILLI)
    cols = np.arange(n_cols)
    blocks = [  # (row index per column, coefficient per column, right-hand side per row)
        (s_of, np.ones(n_cols), count.astype(float)),                                          # L1
        (j_of, cpu[s_of].astype(float), (n_of_type * c_cap).astype(float)),                   # L2
        (j_of, mem[s_of].astype(float), (n_of_type * m_cap).astype(float)),
        (j_of, (ngpu * milli)[s_of].astype(float), (MILLI * n_of_type * g_cap).astype(float)),  # L3
        (j_of, np.where(whole[s_of], ngpu[s_of], big_share[s_of]).astype(float),                 # L4
         (n_of_type * g_cap).astype(float)),
        (j_of, (2 * cpu[s_of] > c_cap[j_of]).astype(float), n_of_type.astype(float)),            # L5
        (j_of, (2 * mem[s_of] > m_cap[j_of]).astype(float), n_of_type.astype(float)),
        (j_of, (whole[s_of] & (2 * ngpu[s_of] > g_cap[j_of])).astype(float), n_of_type.astype(float)),
    ]
    rows, cols_in, data, rhs, offset = [], [], [], [], 0
    for row_of, coef, b in blocks:
        keep = coef != 0
        rows.append(row_of[keep] + offset)
        cols_in.append(cols[keep])
        data.append(coef[keep])
        rhs.append(b)
        offset += len(b)
    a = coo_array((np.concatenate(data), (np.concatenate(rows), np.concatenate(cols_in))),
                  shape=(offset, n_cols)).tocsr()
    gain = -(ngpu * milli)[s_of].astype(float)
    cons = LinearConstraint(a, -np.inf, np.concatenate(rhs))
    bounds = Bounds(0, count[s_of].astype(float))
    lp = milp(gain, constraints=cons, bounds=bounds, integrality=np.zeros(n_cols))
    if -lp.fun >= arrived_milli - 0.5:  # everything fits in aggregate: the MIP cannot say less
        return Limit(float(arrived_milli), float(arrived_milli), True, arrived_milli)
    mip = milp(gain, constraints=cons, bounds=bounds, integrality=np.ones(n_cols),
               options={"time_limit": time_limit, "mip_rel_gap": MIP_GAP})
    if lp.status != 0 or mip.status not in (0, 1):
        raise RuntimeError(f"the limit's LP/MIP did not solve: {lp.message}; {mip.message}")
    dual = getattr(mip, "mip_dual_bound", None)
    mip_bound = -float(dual) if dual is not None and math.isfinite(dual) else -float(lp.fun)
    lp_bound = -float(lp.fun)
    return Limit(lp_bound, min(mip_bound, lp_bound), mip.status == 0, arrived_milli)


@dataclass(frozen=True)
class PatternLimit:
    """The configuration LP's bound on allocated milli-GPU, and a placement found from it."""

    bound_milli: float
    placed_milli: int
    """Allocated milli-GPU of a valid placement of the arrived tasks (a lower bound on the optimum)."""
    columns: int
    iterations: int
    seconds: float


@dataclass
class _Shapes:
    """The arrived GPU tasks by shape: per shape its request, count and one task index per copy."""

    cpu: IArray
    mem: IArray
    ngpu: IArray
    milli: IArray
    count: IArray
    members: list[list[int]]

    @property
    def gain(self) -> IArray:
        return self.ngpu * self.milli


def _gpu_shapes(tasks: Tasks, arrived: IArray) -> _Shapes:
    """CPU-only tasks add no milli-GPU: the optimum places none of them, so they are left out."""
    arrived = arrived[tasks.ngpu[arrived] > 0]
    keys = np.concatenate([np.stack([tasks.cpu, tasks.mem, tasks.ngpu, tasks.milli], axis=1)[arrived],
                           tasks.allowed[arrived].astype(np.int64)], axis=1)
    shapes, inverse, count = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    members: list[list[int]] = [[] for _ in range(len(shapes))]
    for task, s in zip(arrived.tolist(), inverse.tolist(), strict=True):
        members[s].append(task)
    return _Shapes(shapes[:, 0], shapes[:, 1], shapes[:, 2], shapes[:, 3], count, members)


def pattern_limit(nodes: Nodes, tasks: Tasks, arrived: IArray, time_limit: float = 30.0) -> PatternLimit:
    """The configuration LP's bound for `arrived` on the empty `nodes` and a placement rounded from
    it (module docstring). A column is what one node of a type holds: per shape a count, within the
    node's CPU, memory, milli-GPU and devices (`_device_rows`). Column generation stops when the
    bound is within `MIP_GAP` of the master LP, or at `time_limit` seconds (the bound stays valid,
    only looser). The placement comes from the columns found, solved as an integer master (a third
    of `time_limit`), then `_round_columns`."""
    t0 = time.perf_counter()
    sh = _gpu_shapes(tasks, arrived)
    first, n_of_type, _ = _types(nodes)
    c_cap, m_cap, g_cap = _caps(nodes, first)
    fits = [np.flatnonzero(column) for column in _shapes_fit(nodes, tasks, sh, first).T]
    columns: list[tuple[int, IArray]] = []
    pi, mu = np.zeros(len(sh.count)), np.zeros(len(first))
    best, master, iterations, lam = math.inf, 0.0, 0, np.zeros(0)
    while True:
        iterations += 1
        bound, added = float(pi @ sh.count), 0
        for j, idx in enumerate(fits):
            reduced = sh.gain[idx] - pi[idx]
            idx, reduced = idx[reduced > 1e-9], reduced[reduced > 1e-9]
            if not len(idx):
                continue
            value, upper, counts = _price(sh, idx, reduced, int(c_cap[j]), int(m_cap[j]), int(g_cap[j]))
            bound += float(n_of_type[j]) * max(0.0, upper)
            if value > mu[j] + 1e-6:
                column = np.zeros(len(sh.count), dtype=np.int64)
                column[idx] = counts
                columns.append((j, column))
                added += 1
        best = min(best, bound)
        if columns:
            a = np.array([c for _, c in columns]).T
            owner = np.zeros((len(first), len(columns)))
            owner[[j for j, _ in columns], np.arange(len(columns))] = 1.0
            gains = np.array([float(c @ sh.gain) for _, c in columns])
            res_lp = linprog(-gains, A_ub=np.vstack([a, owner]), b_ub=np.concatenate([sh.count, n_of_type]),
                             bounds=(0, None), method="highs")
            duals = -np.asarray(res_lp.ineqlin.marginals)
            pi, mu, master, lam = duals[: len(sh.count)], duals[len(sh.count):], -float(res_lp.fun), res_lp.x
        if not added or best - master <= MIP_GAP * best or time.perf_counter() - t0 > time_limit:
            break
    if columns:  # the master over the columns found, in integers (price and branch): whole nodes
        whole_master = milp(-gains, constraints=LinearConstraint(np.vstack([a, owner]), -np.inf,
                                                                 np.concatenate([sh.count, n_of_type])),
                            integrality=np.ones(len(columns)),
                            options={"time_limit": time_limit / 3, "mip_rel_gap": MIP_GAP})
        if whole_master.x is not None:
            lam = np.round(whole_master.x)
    placed = _round_columns(nodes, tasks, sh, first, columns, lam)
    return PatternLimit(best, placed, len(columns), iterations, time.perf_counter() - t0)


def _price(sh: _Shapes, idx: IArray, reduced: np.ndarray, cpu: int, mem: int, devices: int
           ) -> tuple[float, float, IArray]:
    """The best column of a node type under the duals: max `sum_s reduced_s a_s` over what one node
    of `cpu` millicores, `mem` MiB and `devices` devices holds, its devices counted by
    `_device_rows` (which shares share a device is relaxed: placing each device's shares exactly
    made this MIP take up to 10 s on 8-device nodes). Returns the best value found, the MIP's dual
    bound, and the counts per shape of `idx`."""
    most = np.minimum(sh.count[idx], np.minimum(cpu // np.maximum(sh.cpu[idx], 1), (MILLI * devices) // sh.gain[idx]))
    rows = np.stack([sh.cpu[idx], sh.mem[idx], sh.gain[idx], *_device_rows(sh, idx)])
    rhs = [cpu, mem, MILLI * devices, *(k * devices for k in SHARES_PER_DEVICE)]
    res = milp(-reduced, constraints=LinearConstraint(rows, -np.inf, rhs), bounds=Bounds(0, most),
               integrality=np.ones(len(idx)), options={"mip_rel_gap": 1e-9})
    if res.x is None:
        raise RuntimeError(f"the limit's pricing MIP did not solve: {res.message}")
    dual = getattr(res, "mip_dual_bound", None)
    value = -float(res.fun)
    return value, -float(dual) if dual is not None and math.isfinite(dual) else value, \
        np.round(res.x).astype(np.int64)


SHARES_PER_DEVICE = (1, 2, 3, 4)
"""k: a device holds at most k shares of more than 1000 / (k + 1) milli-GPU, and none beside a
whole GPU's task."""


def _device_rows(sh: _Shapes, idx: IArray) -> list[IArray]:
    """Per k of `SHARES_PER_DEVICE`, the row `k sum_{whole} ngpu a + sum_{share > 1000/(k+1)} a`,
    at most `k` per device: the devices a node's column takes."""
    whole = sh.milli[idx] >= MILLI
    return [np.where(whole, k * sh.ngpu[idx], (k + 1) * sh.milli[idx] > MILLI) for k in SHARES_PER_DEVICE]


def _shapes_fit(nodes: Nodes, tasks: Tasks, sh: _Shapes, first: IArray) -> np.ndarray:
    """(shapes, types): whether one task of the shape fits an empty node of the type (its CPU,
    memory, devices and model)."""
    c_cap, m_cap, g_cap = _caps(nodes, first)
    return np.stack([(sh.cpu <= c_cap[j]) & (sh.mem <= m_cap[j]) & (sh.ngpu <= g_cap[j])
                     & _model_ok(tasks, sh, int(nodes.model[first[j]])) for j in range(len(first))], axis=1)


def _model_ok(tasks: Tasks, sh: _Shapes, model: int) -> np.ndarray:
    """Per shape: whether a node of `model` is allowed (one member's allowed models stand for the shape)."""
    if not tasks.allowed.shape[1]:
        return np.ones(len(sh.count), dtype=bool)
    rows = tasks.allowed[[m[0] for m in sh.members]]
    return (model >= 0) & (rows[:, max(model, 0)] | ~rows.any(axis=1))


def _round_columns(nodes: Nodes, tasks: Tasks, sh: _Shapes, first: IArray, columns: list[tuple[int, IArray]],
                   lam: np.ndarray) -> int:
    """A placement from the master LP's columns: per type, its columns rounded down (then the largest
    fractions while nodes are left) onto its nodes, each node packed by the rules of `fgd.place`;
    then every arrived GPU task still out, largest first, by best fit. Returns its allocated
    milli-GPU."""
    type_of = _types(nodes)[2]
    state = nodes.copy()
    pool = [list(m) for m in sh.members]
    for j in range(len(first)):
        free_nodes = np.flatnonzero(type_of == j).tolist()
        mine = [(k, lam[k]) for k, (t, _) in enumerate(columns) if t == j and lam[k] > 1e-9]
        copies = [k for k, v in mine for _ in range(math.floor(v + 1e-9))]
        copies += [k for k, v in sorted(mine, key=lambda kv: -(kv[1] % 1)) if v % 1 > 1e-9]
        for k in copies[: len(free_nodes)]:
            n = free_nodes.pop()
            wanted = [s for s in np.flatnonzero(columns[k][1]).tolist() for _ in range(int(columns[k][1][s]))]
            for s in sorted(wanted, key=lambda s: (-int(sh.ngpu[s] * (sh.milli[s] >= MILLI)), -int(sh.milli[s]))):
                if pool[s] and _fits_node(state, tasks, pool[s][-1], n):
                    i = pool[s].pop()
                    apply_task(state, tasks, i, n, _share_device(state, tasks, i, n))
    rest = np.array([i for p in pool for i in p], dtype=np.int64)
    rest = rest[np.lexsort((-tasks.cpu[rest], -tasks.milli[rest], -tasks.ngpu[rest]))]
    filled = place(state, tasks, rest, "best-fit", np.random.default_rng(0)) if len(rest) else None
    left = filled.final if filled is not None and filled.final is not None else state
    return nodes.gpu_milli - left.gpu_milli


def _fits_node(state: Nodes, tasks: Tasks, i: int, n: int) -> bool:
    return bool(fit_mask(Nodes(state.cpu[n:n + 1], state.mem[n:n + 1], state.gpu[n:n + 1], state.model[n:n + 1],
                               state.models), tasks, i)[0])


def _share_device(state: Nodes, tasks: Tasks, i: int, n: int) -> int:
    """The fullest device of node n a share fits (best fit, as `fgd.place`); -1 for whole GPUs."""
    milli = int(tasks.milli[i])
    if milli >= MILLI or tasks.ngpu[i] == 0:
        return -1
    gpu = state.gpu[n]
    return int(np.argmin(np.where(gpu >= milli, gpu, MILLI + 1)))


def device_limit(nodes: Nodes, tasks: Tasks, arrived: IArray, max_iterations: int = 400) -> float | None:
    """The device-pattern LP's bound on allocated milli-GPU for `arrived` on the empty `nodes`:
    the aggregate relaxation's CPU, memory and one-per-node rows (L1, L2, L5 for CPU and memory),
    with what each device holds made exact. A device of type `j` holds whole GPUs of one task, or a
    pattern `q` of shares (counts per share shape, at most 1000 milli-GPU in all): `z[q, j]`
    devices hold pattern `q`, and

    - D1 `sum_{s whole} ngpu_s x[s, j] + sum_q z[q, j] <= N_j G_j` (devices per type);
    - D2 `x[s, j] <= sum_q q_s z[q, j]` for each share shape `s` (shares sit in patterns);
    - L5 for whole GPUs: tasks asking more than half a node's devices, at most one a node.

    Any placement gives a feasible point (each device's shares are a pattern), so the LP's
    optimum bounds it. Patterns come by column generation: per type an unbounded knapsack of the
    share sizes into 1000 milli-GPU under the duals of D2, solved exactly by dynamic programming,
    so the LP is optimal over all patterns when none prices out. Returns None when it did not
    converge within `max_iterations` (no bound is claimed then)."""
    sh = _gpu_shapes(tasks, arrived)
    first, n_of_type, _ = _types(nodes)
    c_cap, m_cap, g_cap = _caps(nodes, first)
    whole = sh.milli >= MILLI
    ok = _shapes_fit(nodes, tasks, sh, first)
    s_of, j_of = np.nonzero(ok)
    n_x, n_s, n_t = len(s_of), len(sh.count), len(first)
    if n_x == 0:
        return 0.0
    share_pairs = np.flatnonzero(~whole[s_of])  # x columns that are shares: one D2 row each
    d2_row = np.full(n_x, -1)
    d2_row[share_pairs] = np.arange(len(share_pairs))
    # fixed rows: L1 (n_s), CPU (n_t), memory (n_t), D1 (n_t), L5 CPU, memory, devices (3 n_t), D2
    r_l1, r_cpu, r_mem, r_d1, r_l5 = 0, n_s, n_s + n_t, n_s + 2 * n_t, n_s + 3 * n_t
    r_d2 = n_s + 6 * n_t
    n_rows = r_d2 + len(share_pairs)
    rows = [s_of + r_l1, j_of + r_cpu, j_of + r_mem, j_of[whole[s_of]] + r_d1,
            j_of + r_l5, j_of + r_l5 + n_t, j_of[whole[s_of]] + r_l5 + 2 * n_t, d2_row[share_pairs] + r_d2]
    cols = [np.arange(n_x)] * 3 + [np.flatnonzero(whole[s_of])] + [np.arange(n_x)] * 2 \
        + [np.flatnonzero(whole[s_of]), share_pairs]
    vals = [np.ones(n_x), sh.cpu[s_of].astype(float), sh.mem[s_of].astype(float),
            sh.ngpu[s_of][whole[s_of]].astype(float), (2 * sh.cpu[s_of] > c_cap[j_of]).astype(float),
            (2 * sh.mem[s_of] > m_cap[j_of]).astype(float),
            (2 * sh.ngpu[s_of][whole[s_of]] > g_cap[j_of][whole[s_of]]).astype(float), np.ones(len(share_pairs))]
    rhs = np.concatenate([sh.count, n_of_type * c_cap, n_of_type * m_cap, n_of_type * g_cap,
                          n_of_type, n_of_type, n_of_type, np.zeros(len(share_pairs))]).astype(float)
    x_matrix = coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(n_rows, n_x)).tocsc()
    pair_of = {(int(s_of[k]), int(j_of[k])): int(d2_row[k]) for k in share_pairs.tolist()}
    patterns: list[tuple[int, dict[int, int]]] = []  # (type, share shape -> count)
    for (s, j) in pair_of:
        patterns.append((j, {s: int(MILLI // sh.milli[s])}))
    gain = sh.gain[s_of].astype(float)
    for _ in range(max_iterations):
        z_rows, z_cols, z_vals = [], [], []
        for c, (j, q) in enumerate(patterns):
            z_rows.append(r_d1 + j)
            z_cols.append(c)
            z_vals.append(1.0)
            for s, k in q.items():
                z_rows.append(r_d2 + pair_of[(s, j)])
                z_cols.append(c)
                z_vals.append(-float(k))
        z_matrix = coo_array((z_vals, (z_rows, z_cols)), shape=(n_rows, len(patterns))).tocsc()
        a = hstack([x_matrix, z_matrix]).tocsr()
        upper = np.concatenate([sh.count[s_of].astype(float), np.full(len(patterns), np.inf)])
        res = linprog(-np.concatenate([gain, np.zeros(len(patterns))]), A_ub=a, b_ub=rhs,
                      bounds=np.stack([np.zeros(len(upper)), upper], axis=1), method="highs")
        if res.status != 0:
            raise RuntimeError(f"the device-pattern LP did not solve: {res.message}")
        dual = -np.asarray(res.ineqlin.marginals)
        added = 0
        for j in range(n_t):
            sizes = [(s, int(sh.milli[s]), float(dual[r_d2 + pair_of[(s, j)]])) for (s, t) in pair_of if t == j]
            sizes = [(s, m, v) for s, m, v in sizes if v > 1e-9]
            if not sizes:
                continue
            value, q = _knapsack(sizes)
            if value > dual[r_d1 + j] * (1 + 1e-9) + 1e-6:
                patterns.append((j, q))
                added += 1
        if not added:
            return -float(res.fun)
    return None


def _knapsack(items: list[tuple[int, int, float]]) -> tuple[float, dict[int, int]]:
    """The most value of shares (shape, milli-GPU, value) packed into one device of 1000 milli-GPU,
    any count of each (unbounded knapsack): each shape split into 0/1 items of 1, 2, 4, ... copies
    (binary splitting, up to what fits), each applied to the whole capacity vector at once; returns
    the value and the counts per shape."""
    best = np.zeros(MILLI + 1)
    stages: list[tuple[int, int, int, np.ndarray]] = []  # (shape, copies, their milli-GPU, taken per capacity)
    for s, m, v in items:
        most, copies = MILLI // m, 1
        while most > 0:
            k = min(copies, most)
            shifted = np.full(MILLI + 1, -np.inf)
            shifted[k * m:] = best[: MILLI + 1 - k * m] + k * v
            taken = shifted > best + 1e-12
            best = np.where(taken, shifted, best)
            stages.append((s, k, k * m, taken))
            most -= k
            copies *= 2
    counts: dict[int, int] = {}
    c = MILLI
    for s, k, size, taken in reversed(stages):
        if taken[c]:
            counts[s] = counts.get(s, 0) + k
            c -= size
    return float(best[MILLI]), counts


def limit_curve(nodes: Nodes, tasks: Tasks, order: IArray, loads: list[int], time_limit: float = 10.0,
                pattern_loads: tuple[int, ...] = (100, 130), device_from: int = 70
                ) -> dict[int, tuple[Limit, PatternLimit | None]]:
    """Per load (% of the cluster's milli-GPU), the limits for the tasks of `order` arrived by the
    last arrival the artifact's measure counts at that load (`Run.allocation_artifact`: arrived %
    rounding to it, else within 1 point), so they bound the measure at every one of them: the
    aggregate LP and MIP, from `device_from` % the device-pattern LP (`Limit.device_milli`), and at
    `pattern_loads` the configuration LP with its placement (where the aggregate LP leaves a task
    out). Loads no arrival reaches are left out."""
    scale = nodes.gpu_milli / 100
    arrived = np.round(np.cumsum(tasks.ngpu[order] * tasks.milli[order]) / scale)
    out: dict[int, tuple[Limit, PatternLimit | None]] = {}
    for load in loads:
        at = np.flatnonzero(arrived == load)
        if not len(at):
            at = np.flatnonzero(np.abs(arrived - load) <= 1)
        if not len(at):
            continue
        prefix = order[: int(at[-1]) + 1]
        agg = allocation_limit(nodes, tasks, prefix, time_limit)
        if load >= device_from:
            agg = replace(agg, device_milli=device_limit(nodes, tasks, prefix))
        pattern = None
        if load in pattern_loads and agg.lp_milli < agg.arrived_milli - 0.5:
            pattern = pattern_limit(nodes, tasks, prefix, 3 * time_limit)
        out[load] = (agg, pattern)
    return out


__all__ = ["MIP_GAP", "Limit", "PatternLimit", "allocation_limit", "device_limit", "limit_curve", "pattern_limit"]
