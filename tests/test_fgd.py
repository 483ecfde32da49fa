"""The FGD protocol: fragmentation as FGD defines it, placements within capacity, reproducible."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.sim.batched import BatchStats, place_batched
from optsched.sim.fgd import MILLI, POLICIES, Nodes, Tasks, Typical, fragmentation, inflate, place, typical_tasks


def _nodes(gpus: list[int], cpu: int = 64_000) -> Nodes:
    width = max(gpus)
    gpu = np.full((len(gpus), width), -1, dtype=np.int64)
    for i, n in enumerate(gpus):
        gpu[i, :n] = MILLI
    return Nodes(np.full(len(gpus), cpu, dtype=np.int64), np.full(len(gpus), 10**6, dtype=np.int64), gpu,
                 np.zeros(len(gpus), dtype=np.int64), ("G",))


def _tasks(rows: list[tuple[int, int, int]]) -> Tasks:
    """(cpu millicores, GPUs, milli-GPU per GPU) per task."""
    a = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return Tasks(a[:, 0], np.zeros(len(a), dtype=np.int64), a[:, 1], a[:, 2], np.ones((len(a), 1), dtype=bool))


def test_fragmentation_is_what_typical_tasks_cannot_use() -> None:
    """8 free GPUs, typical tasks: one whole GPU (1/2) and a 500-milli share (1/2): F = 0. After a
    300-milli share on one device, 700 milli there is useless to the whole-GPU task: F = 0.5 x 700.
    With too little CPU for both, every free milli-GPU counts: F = 7,700."""
    typical = Typical(np.array([1000, 1000]), np.array([1, 1]), np.array([1000, 500]), np.ones((2, 1), bool),
                      np.array([0.5, 0.5]))
    gpu = np.array([[1000] * 8, [700] + [1000] * 7, [700] + [1000] * 7])
    cpu = np.array([64_000, 64_000, 500])
    f = fragmentation(cpu, gpu, np.zeros(3, dtype=np.int64), typical)
    assert f.tolist() == pytest.approx([0.0, 350.0, 7700.0])


def test_fgd_packs_a_share_onto_the_partly_used_device() -> None:
    """Node 0 is empty; node 1 has 500 milli left on one device. The typical whole-GPU task
    cannot use that 500: FGD puts the next 500-milli share there (fragmentation drops), while the
    first node in order would have been node 0."""
    nodes = _nodes([4, 4])
    nodes.gpu[1, 0] = 500
    tasks = _tasks([(1000, 1, 1000), (1000, 1, 500)])
    typical = typical_tasks(tasks)
    run = place(nodes, tasks, np.array([1]), "fgd", np.random.default_rng(0), typical)
    assert run.final is not None and run.final.gpu[1, 0] == 0 and run.final.gpu[0].tolist() == [1000] * 4


@st.composite
def instances(draw: st.DrawFn) -> tuple[Nodes, Tasks]:
    nodes = _nodes(draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=6)),
                   cpu=draw(st.sampled_from([8_000, 64_000])))
    shape = st.one_of(st.tuples(st.sampled_from([0, 2000, 8000]), st.just(1), st.integers(1, 9).map(lambda k: 100 * k)),
                      st.tuples(st.sampled_from([0, 4000]), st.sampled_from([1, 2, 4, 8]), st.just(MILLI)),
                      st.tuples(st.sampled_from([1000, 4000]), st.just(0), st.just(0)))
    return nodes, _tasks(draw(st.lists(shape, min_size=1, max_size=12)))


@settings(max_examples=60, deadline=None)
@given(data=instances(), policy=st.sampled_from(POLICIES), seed=st.integers(0, 3))
def test_runs_stay_within_capacity_and_repeat_under_a_seed(data: tuple[Nodes, Tasks], policy: str, seed: int) -> None:
    nodes, tasks = data
    typical = typical_tasks(tasks)
    order = inflate(tasks, nodes.gpu_milli, 1.3, np.random.default_rng(seed))
    run = place(nodes, tasks, order, policy, np.random.default_rng(seed), typical)
    final = run.final
    assert final is not None
    assert (final.cpu >= 0).all() and (final.mem >= 0).all()
    assert ((final.gpu >= 0) | (nodes.gpu < 0)).all() and (final.gpu <= nodes.gpu).all()
    used = int(np.where(nodes.gpu > 0, nodes.gpu, 0).sum() - np.where(final.gpu > 0, final.gpu, 0).sum())
    assert run.allocated_milli[-1] == used == int(tasks.gpu_milli[order][run.placed].sum())
    again = place(nodes, tasks, order, policy, np.random.default_rng(seed), typical)
    assert (again.placed == run.placed).all()


def test_inflation_keeps_the_trace_and_stops_at_the_ratio() -> None:
    tasks = _tasks([(1000, 1, 1000), (1000, 1, 500), (1000, 2, 1000)])
    order = inflate(tasks, cluster_gpu_milli=10_000, ratio=1.3, rng=np.random.default_rng(1))
    assert sorted(order[:3].tolist()) == [0, 1, 2]
    assert int(tasks.gpu_milli[order].sum()) <= 13_000 + 2 * MILLI  # the simulator's one-GPU test


def test_a_batched_round_trades_a_share_for_a_whole_gpu() -> None:
    """One GPU; a 500-milli share arrives, then a whole-GPU task. Online, the share takes the GPU
    and the whole task fails (500 milli); a round that sees both places the whole GPU (1,000)."""
    nodes, tasks = _nodes([1]), _tasks([(1000, 1, 500), (1000, 1, 1000)])
    typical = typical_tasks(tasks)
    order = np.array([0, 1])
    online = place(nodes, tasks, order, "fgd-bestfit", np.random.default_rng(0), typical)
    stats = BatchStats()
    batched = place_batched(nodes, tasks, order, 2, np.random.default_rng(0), typical, stats=stats)
    assert online.allocated_milli[-1] == 500 and batched.allocated_milli[-1] == 1000
    assert batched.placed.tolist() == [False, True] and stats.modelled == 1 and stats.gained_milli == 500


@settings(max_examples=40, deadline=None)
@given(instances(), st.sampled_from([1, 2, 3, 5]))
def test_batched_rounds_stay_within_capacity_and_never_allocate_less_per_round(data: tuple[Nodes, Tasks],
                                                                               batch: int) -> None:
    """Every round's plan is applied only if it fits (apply_round raises otherwise); the free
    resources account for exactly the placed tasks; no round allocates less than its hint."""
    nodes, tasks = data
    typical = typical_tasks(tasks)
    order = np.arange(len(tasks))
    stats = BatchStats()
    run = place_batched(nodes, tasks, order, batch, np.random.default_rng(0), typical, stats=stats)
    assert run.final is not None
    assert (run.final.cpu >= 0).all() and (run.final.gpu[nodes.gpu >= 0] >= 0).all()
    assert nodes.gpu_milli - run.final.gpu_milli == run.allocated_milli[-1]
    assert nodes.cpu.sum() - run.final.cpu.sum() == tasks.cpu[order][run.placed].sum()
    assert stats.worst_gain_milli == 0  # no modelled round allocated less than its hint
