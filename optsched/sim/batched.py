"""Batched rounds under FGD's protocol: every `batch` arrivals are decided together by CP-SAT.

The protocol is `optsched.sim.fgd`'s (same inflated order, no departures, a task not placed in
its round fails), except that a round sees `batch` arrivals at once. Each round:

1. the round's tasks are placed one at a time, in arrival order, by the online policy
   (`fgd-bestfit` by default): the hint;
2. if the hint places every task, the round's allocation is at its upper bound (all of the
   round's GPUs) and the hint is the round's plan;
3. otherwise a CP-SAT model over the round's tasks and the nodes' free resources before the
   round (docs/fgd.md, "Batched rounds") decides which tasks run and where, maximising, in
   this order: allocated milli-GPU, tasks placed, placements that agree with the hint. The hint
   is given to the solver, so a round never allocates less than the online policy would.

Candidates keep the model small: per task, the `CANDIDATES` tightest devices (shares) or nodes
(whole GPUs, CPU only) it fits, by what would be left there, plus the hint's choice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from optsched.problem import BArray, IArray
from optsched.sim.fgd import MILLI, Nodes, Run, Tasks, Typical, apply_task, fit_mask, place

CANDIDATES = 400
"""Per task class: the tightest fitting devices (a share) or nodes (whole GPUs, CPU only) in the
model, besides the hint's."""


@dataclass
class BatchStats:
    """How the rounds went: rounds solved by the model, its wall time (s), tasks it added."""

    rounds: int = 0
    modelled: int = 0
    optimal: int = 0
    model_s: float = 0.0
    gained_tasks: int = 0
    gained_milli: int = 0
    worst_gain_milli: int = 0
    """The least milli-GPU a modelled round added over its hint (negative: a round lost some)."""


def place_batched(nodes: Nodes, tasks: Tasks, order: IArray, batch: int, rng: np.random.Generator,
                  typical: Typical, policy: str = "fgd-bestfit", time_limit: float = 2.0,
                  stats: BatchStats | None = None) -> Run:
    """`order`'s tasks in rounds of `batch` arrivals (module docstring); returns the same record
    as `fgd.place` (cumulative allocation after each task of the order)."""
    state = nodes.copy()
    placed = np.zeros(len(order), dtype=bool)
    node_of = np.full(len(order), -1, dtype=np.int64)
    dev_of = np.full(len(order), -1, dtype=np.int64)
    stats = stats if stats is not None else BatchStats()
    for start in range(0, len(order), batch):
        chunk = order[start:start + batch]
        hint = place(state, tasks, chunk, policy, rng, typical)
        assert hint.node is not None and hint.device is not None and hint.final is not None
        stats.rounds += 1
        if hint.placed.all():
            state = hint.final
            got, n_of, d_of = hint.placed, hint.node, hint.device
        else:
            t0 = time.perf_counter()
            got, n_of, d_of, optimal = solve_round(state, tasks, chunk, hint, time_limit)
            stats.modelled += 1
            stats.optimal += int(optimal)
            stats.model_s += time.perf_counter() - t0
            stats.gained_tasks += int(got.sum() - hint.placed.sum())
            gain = int(tasks.gpu_milli[chunk][got].sum() - tasks.gpu_milli[chunk][hint.placed].sum())
            stats.gained_milli += gain
            stats.worst_gain_milli = min(stats.worst_gain_milli, gain)
            apply_round(state, tasks, chunk, got, n_of, d_of)
        placed[start:start + len(chunk)] = got
        node_of[start:start + len(chunk)] = n_of
        dev_of[start:start + len(chunk)] = d_of
    allocated = np.cumsum(np.where(placed, tasks.gpu_milli[order], 0))
    arrived = np.cumsum(tasks.gpu_milli[order])
    return Run(placed, arrived, allocated, nodes.gpu_milli, final=state, node=node_of, device=dev_of)


def apply_round(state: Nodes, tasks: Tasks, chunk: IArray, got: BArray, n_of: IArray, d_of: IArray) -> None:
    """Take the round's placements from `state`: shares (on their devices) and CPU-only tasks
    first, then whole GPUs on the devices still fully free. Raises if anything goes negative or a
    whole-GPU task finds too few free devices (the model's plan would be wrong: never repaired)."""
    present = state.gpu >= 0
    whole_last = sorted(np.flatnonzero(got).tolist(), key=lambda k: bool(tasks.milli[chunk[k]] >= MILLI))
    for k in whole_last:
        i, n = int(chunk[k]), int(n_of[k])
        if tasks.milli[i] >= MILLI and (state.gpu[n] == MILLI).sum() < tasks.ngpu[i]:
            raise RuntimeError(f"task {i}: {tasks.ngpu[i]} whole GPUs asked on node {n}, fewer free")
        apply_task(state, tasks, i, n, int(d_of[k]))
    if (state.cpu < 0).any() or (state.mem < 0).any() or ((state.gpu < 0) & present).any():
        raise RuntimeError("a round's placements exceed a node's free CPU, memory or GPU")


def solve_round(state: Nodes, tasks: Tasks, chunk: IArray, hint: Run, time_limit: float
                ) -> tuple[BArray, IArray, IArray, bool]:
    """The round's CP-SAT model (module docstring, docs/fgd.md "Batched rounds") on the free
    resources `state`; returns per task of `chunk`: placed, node, share device, and whether the
    solver proved the round optimal. Identical tasks form one class with integer counts, so the
    model has no symmetry between them; the hint's counts are the solver's starting point."""
    assert hint.node is not None and hint.device is not None
    shapes = np.concatenate([tasks.cpu[chunk, None], tasks.mem[chunk, None], tasks.ngpu[chunk, None],
                             tasks.milli[chunk, None], tasks.allowed[chunk].astype(np.int64)], axis=1)
    _, cls = np.unique(shapes, axis=0, return_inverse=True)
    cls = cls.reshape(-1)
    m = cp_model.CpModel()
    free = state.gpu
    x: dict[tuple[int, int, int], cp_model.IntVar] = {}  # (class, node, device or -1) -> tasks there
    members: dict[int, list[int]] = {}
    for k, c in enumerate(cls.tolist()):
        members.setdefault(c, []).append(k)
    share_on: dict[tuple[int, int], list[tuple[int, cp_model.IntVar]]] = {}
    whole_on: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
    node_use: dict[int, list[tuple[int, int, cp_model.IntVar]]] = {}
    value, count = [], []
    for c, ks in members.items():
        i = int(chunk[ks[0]])
        fits = np.flatnonzero(fit_mask(state, tasks, i))
        if not len(fits):
            continue
        ngpu, milli = int(tasks.ngpu[i]), int(tasks.milli[i])
        hinted: dict[tuple[int, int], int] = {}
        for k in ks:
            if hint.placed[k]:
                key = (int(hint.node[k]), int(hint.device[k]))
                hinted[key] = hinted.get(key, 0) + 1
        if ngpu == 1 and milli < MILLI:
            n_idx, d_idx = np.nonzero(free[fits] >= milli)
            nodes_c, left = fits[n_idx], free[fits][n_idx, d_idx] - milli
            opts = [(int(nodes_c[p]), int(d_idx[p])) for p in np.argsort(left, kind="stable")[:CANDIDATES]]
        else:
            left = (free[fits] == MILLI).sum(axis=1) - ngpu if ngpu else state.cpu[fits] - tasks.cpu[i]
            opts = [(int(fits[p]), -1) for p in np.argsort(left, kind="stable")[:CANDIDATES]]
        opts += [o for o in hinted if o not in opts]
        total = []
        for n, d in opts:
            if d >= 0:
                most = min(len(ks), int(free[n, d]) // milli)
            elif ngpu:
                most = min(len(ks), int((free[n] == MILLI).sum()) // ngpu)
            else:
                most = len(ks)
            v = x[(c, n, d)] = m.new_int_var(0, most, f"x{c}_{n}_{d}")
            m.add_hint(v, hinted.get((n, d), 0))
            total.append(v)
            node_use.setdefault(n, []).append((int(tasks.cpu[i]), int(tasks.mem[i]), v))
            if d >= 0:
                share_on.setdefault((n, d), []).append((milli, v))
            elif ngpu:
                whole_on.setdefault(n, []).append((ngpu, v))
        m.add(sum(total) <= len(ks))
        value.append(int(tasks.gpu_milli[i]) * sum(total))
        count.append(sum(total))
    for n, uses in node_use.items():
        m.add(sum(cpu * v for cpu, _, v in uses) <= int(state.cpu[n]))
        m.add(sum(mem * v for _, mem, v in uses) <= int(state.mem[n]))
    taken: dict[tuple[int, int], cp_model.IntVar] = {}
    for n, wants in whole_on.items():  # whole GPUs take fully free devices
        full = np.flatnonzero(free[n] == MILLI).tolist()
        for d in full:
            taken[(n, d)] = m.new_bool_var(f"w{n}_{d}")
        m.add(sum(g * v for g, v in wants) == sum(taken[(n, d)] for d in full))
    for (n, d), shares in share_on.items():  # no share on a device taken whole
        room = int(free[n, d])
        busy = taken.get((n, d))
        m.add(sum(mi * v for mi, v in shares) <= (room - room * busy if busy is not None else room))
    weight = len(chunk) + 1
    m.maximize(sum(value) * weight + sum(count))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    status = solver.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):  # keep the hint (always feasible)
        return hint.placed.copy(), hint.node.copy(), hint.device.copy(), False
    got = np.zeros(len(chunk), dtype=bool)
    n_of = np.full(len(chunk), -1, dtype=np.int64)
    d_of = np.full(len(chunk), -1, dtype=np.int64)
    queue = {c: list(ks) for c, ks in members.items()}  # the class's tasks in arrival order
    for (c, n, d), v in sorted(x.items()):
        for _ in range(solver.value(v)):
            k = queue[c].pop(0)
            got[k], n_of[k], d_of[k] = True, n, d
    return got, n_of, d_of, status == cp_model.OPTIMAL
