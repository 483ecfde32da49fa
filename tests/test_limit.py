"""The limit of FGD's protocol (`optsched.sim.limit`): its bounds hold against the optimum found by
exhaustive search on small clusters, and its placement is one that exists."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from optsched.sim.fgd import MILLI, Nodes, Tasks, apply_task, fit_mask
from optsched.sim.limit import allocation_limit, device_limit, limit_curve, pattern_limit


def _nodes(specs: list[tuple[int, int, int]]) -> Nodes:
    width = max(g for _, _, g in specs)
    gpu = np.full((len(specs), width), -1, dtype=np.int64)
    for i, (_, _, g) in enumerate(specs):
        gpu[i, :g] = MILLI
    return Nodes(np.array([c for c, _, _ in specs]), np.array([m for _, m, _ in specs]), gpu,
                 np.zeros(len(specs), dtype=np.int64), ("G",))


def _tasks(specs: list[tuple[int, int, int, int]]) -> Tasks:
    arr = np.array(specs, dtype=np.int64)
    return Tasks(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], np.ones((len(specs), 1), dtype=bool))


def _optimum(nodes: Nodes, tasks: Tasks) -> int:
    """The most milli-GPU any placement of `tasks` allocates, by exhaustive search over (out, or
    node and share device) per task."""
    best = 0

    def search(k: int, state: Nodes, got: int) -> None:
        nonlocal best
        if k == len(tasks):
            best = max(best, got)
            return
        search(k + 1, state, got)  # task k left out
        ok = fit_mask(state, tasks, k)
        for n in np.flatnonzero(ok).tolist():
            share = 0 < tasks.milli[k] < MILLI
            devices = np.flatnonzero(state.gpu[n] >= tasks.milli[k]).tolist() if share else [-1]
            for d in devices:
                nxt = state.copy()
                apply_task(nxt, tasks, k, n, d)
                search(k + 1, nxt, got + int(tasks.ngpu[k] * tasks.milli[k]))

    search(0, nodes.copy(), 0)
    return best


CASES = [
    # CPU binds: three 6-core 1-GPU tasks cannot share an 8-core node
    ([(8000, 4096, 2), (8000, 4096, 2)], [(6000, 100, 1, 1000)] * 3 + [(1000, 100, 1, 1000), (1000, 100, 1, 500)]),
    # shares that fit the milli-GPU in total but not device by device (600 + 600 on two devices with a whole GPU)
    ([(16000, 4096, 2)], [(1000, 100, 1, 600), (1000, 100, 1, 600), (1000, 100, 1, 1000), (1000, 100, 1, 300)]),
    # memory binds, and a 2-GPU task on a 1-GPU node does not fit
    ([(32000, 1000, 2), (32000, 4000, 1)], [(1000, 900, 1, 1000), (1000, 900, 1, 1000), (1000, 3000, 2, 1000),
                                           (1000, 100, 1, 400), (1000, 3500, 1, 1000)]),
]


@pytest.mark.parametrize(("node_specs", "task_specs"), CASES)
def test_the_bounds_hold_and_the_placement_exists(node_specs: list[tuple[int, int, int]],
                                                  task_specs: list[tuple[int, int, int, int]]) -> None:
    nodes, tasks = _nodes(node_specs), _tasks(task_specs)
    arrived = np.arange(len(tasks))
    best = _optimum(nodes, tasks)
    agg = allocation_limit(nodes, tasks, arrived)
    pattern = pattern_limit(nodes, tasks, arrived)
    assert agg.lp_milli >= agg.mip_milli - 1e-6 >= best - 1e-6
    assert pattern.bound_milli >= best - 1e-6
    assert pattern.placed_milli <= best  # a placement: never above the optimum found by search
    assert agg.arrived_milli == int((tasks.ngpu * tasks.milli).sum())
    device = device_limit(nodes, tasks, arrived)
    assert device is not None and device >= best - 1e-6


def test_the_bound_is_below_what_arrived_where_the_cpu_binds() -> None:
    nodes, tasks = _nodes(CASES[0][0]), _tasks(CASES[0][1])
    arrived = np.arange(len(tasks))
    best = _optimum(nodes, tasks)
    agg = allocation_limit(nodes, tasks, arrived)
    pattern = pattern_limit(nodes, tasks, arrived)
    assert best == 3000 + 500 and agg.arrived_milli == 4500
    assert agg.mip_milli < agg.arrived_milli  # one-per-node rows (L5) cut the pooled CPU
    assert pattern.bound_milli == pytest.approx(best) and pattern.placed_milli == best


def test_repeated_arrivals_count_each_time() -> None:
    nodes, tasks = _nodes([(64000, 4096, 8)]), _tasks([(1000, 100, 2, 1000)])
    assert allocation_limit(nodes, tasks, np.zeros(3, dtype=np.int64)).mip_milli == pytest.approx(6000)
    assert allocation_limit(nodes, tasks, np.zeros(5, dtype=np.int64)).mip_milli == pytest.approx(8000)


def test_the_curve_bounds_each_load_by_its_last_arrival() -> None:
    nodes, tasks = _nodes([(64000, 4096, 4)]), _tasks([(1000, 100, 1, 1000)])
    order = np.zeros(6, dtype=np.int64)  # 25% a task: 25, 50, ..., 150%
    curve = limit_curve(nodes, tasks, order, [0, 50, 100, 130, 150], pattern_loads=(100,))
    assert set(curve) == {50, 100, 150}  # 0% and 130%: no arrival rounds to them or within a point
    assert curve[50][0].mip_milli == pytest.approx(2000) and curve[150][0].mip_milli == pytest.approx(4000)
    assert curve[100][1] is None  # everything that arrived fits: no column generation needed


def test_combinations_of_small_clusters_hold() -> None:
    rng = np.random.default_rng(7)
    for _ in range(6):
        nodes = _nodes([(int(rng.choice([4000, 8000, 16000])), 4096, int(rng.choice([1, 2, 4]))) for _ in range(2)])
        shapes = [(int(rng.choice([1000, 3000, 6000])), 512, int(g), int(m))
                  for g, m in itertools.islice(((rng.choice([1, 1, 2]), rng.choice([250, 500, 700, 1000]))
                                                for _ in itertools.count()), 5)]
        tasks = _tasks([(c, mem, g if m == MILLI else 1, m) for c, mem, g, m in shapes])
        arrived = np.arange(len(tasks))
        best = _optimum(nodes, tasks)
        assert allocation_limit(nodes, tasks, arrived).mip_milli >= best - 1e-6
        pattern = pattern_limit(nodes, tasks, arrived)
        assert pattern.bound_milli >= best - 1e-6 >= pattern.placed_milli - 1e-6
        device = device_limit(nodes, tasks, arrived)
        assert device is not None and device >= best - 1e-6


def test_the_device_patterns_see_shares_that_do_not_combine() -> None:
    # two devices; shares of 600, 600, 450, 450, 450: a device holds {600} or {450, 450}, so at most
    # 1,500 milli-GPU; the aggregate rows (2,000 milli-GPU, 4 shares above 333) allow 1,950
    nodes = _nodes([(64000, 4096, 2)])
    tasks = _tasks([(1000, 100, 1, 600)] * 2 + [(1000, 100, 1, 450)] * 3)
    arrived = np.arange(len(tasks))
    assert _optimum(nodes, tasks) == 1500
    assert allocation_limit(nodes, tasks, arrived).mip_milli == pytest.approx(1950)
    device = device_limit(nodes, tasks, arrived)
    assert device is not None and 1500 - 1e-6 <= device < 1950 - 1
    curve = limit_curve(nodes, tasks, arrived, [128], device_from=0, pattern_loads=())
    assert curve[128][0].bound_milli == pytest.approx(device)
