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


def _go_fragmentation(cpu: int, gpu: list[int], model: int, typical: Typical) -> float:
    """The artifact's `NodeGpuShareFragAmountScore` as its Go code does it, node by node and task
    by task (pkg/utils/frag.go): each amount into its category, the categories added in order."""
    data = [0.0] * 7  # Q1, Q2, Q3, Q4, XL, XR, NA
    free = [g for g in gpu if g >= 0]
    left = sum(free)
    for t in range(len(typical.freq)):
        freq, milli, ngpu, tcpu = float(typical.freq[t]), int(typical.milli[t]), int(typical.ngpu[t]), int(typical.cpu[t])
        if milli == 0:
            data[4 if cpu >= tcpu else 5] += freq * float(left)
            continue
        named = bool(typical.allowed[t].any())
        if not free or (named and not typical.allowed[t, max(model, 0)]):
            data[6] += freq * float(left)
            continue
        hosts = sum(1 for g in free if g >= milli) >= ngpu
        if hosts and cpu >= tcpu:
            small = sum(g for g in free if g < milli)
            data[1] += freq * float(small)
            data[2] += freq * float(left - small)
        elif hosts:
            data[3] += freq * float(left)
        else:
            data[1 if cpu >= tcpu else 0] += freq * float(left)
    out = 0.0
    for i in (0, 1, 3, 4, 5, 6):
        out += data[i]
    return out


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fragmentation_adds_as_the_artifact_does_to_the_last_bit(data: st.DataObject) -> None:
    """`fragmentation` equals the Go code's sum exactly (==, not approx): FGD's score truncates a
    sigmoid of the drop in F, so one ulp moves a task (cpu250 seed 42 in tests/test_artifact.py)."""
    n_typ = data.draw(st.integers(1, 12))
    counts = data.draw(st.lists(st.integers(1, 400), min_size=n_typ, max_size=n_typ))
    freq = np.array(counts, dtype=float) / 977.0 / (float(sum(counts)) / 977.0)
    milli = data.draw(st.lists(st.sampled_from([0, 50, 160, 190, 230, 470, 810, 1000]), min_size=n_typ,
                               max_size=n_typ))
    ngpu = [0 if m == 0 else (data.draw(st.sampled_from([1, 2, 4])) if m == 1000 else 1) for m in milli]
    cpu_t = data.draw(st.lists(st.integers(1, 40).map(lambda c: c * 1000 + 150), min_size=n_typ, max_size=n_typ))
    allowed = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=2, max_size=2), min_size=n_typ,
                                          max_size=n_typ)), dtype=bool)
    typical = Typical(np.array(cpu_t, dtype=np.int64), np.array(ngpu, dtype=np.int64), np.array(milli, dtype=np.int64),
                      allowed, freq)
    rows = data.draw(st.lists(st.lists(st.sampled_from([-1, 0, 60, 190, 210, 680, 1000]), min_size=8, max_size=8),
                              min_size=1, max_size=6))
    gpu = np.array(rows, dtype=np.int64)
    cpu = np.array(data.draw(st.lists(st.integers(0, 96_000), min_size=len(rows), max_size=len(rows))),
                   dtype=np.int64)
    model = np.array(data.draw(st.lists(st.integers(0, 1), min_size=len(rows), max_size=len(rows))), dtype=np.int64)
    got = fragmentation(cpu, gpu, model, typical)
    for r in range(len(rows)):
        assert got[r] == _go_fragmentation(int(cpu[r]), rows[r], int(model[r]), typical)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1000, 4000, 8000, 12500]), st.sampled_from([0, 1, 2]),
                          st.sampled_from([0, 230, 470, 1000])), min_size=20, max_size=300))
def test_typical_popularity_is_the_artifact_s_float(rows: list[tuple[int, int, int]]) -> None:
    """`typical_tasks(artifact=True)`'s popularities are the Go code's floats (GetTypicalPods):
    count / total, then over (cumulative count / total) when the list is cut."""
    a = np.array([(c, g if m else 0, m if g else 0) for c, g, m in rows], dtype=np.int64)
    tasks = Tasks(a[:, 0], np.zeros(len(a), dtype=np.int64), a[:, 1], a[:, 2], np.ones((len(a), 1), dtype=bool),
                  tuple("" for _ in rows))
    typical = typical_tasks(tasks, artifact=True)
    counts: dict[tuple[int, int, int], int] = {}
    for c, g, m in a.tolist():
        counts[(c, m, g)] = counts.get((c, m, g), 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    total = float(len(rows))
    expected = 95 * total / 100.0
    cum, i = 0.0, 0
    while cum < expected:
        cum += float(ranked[i][1])
        i += 1
    want = [float(n) / total for _, n in ranked[:i]]
    if i < len(ranked):
        want = [w / (cum / total) for w in want]
    assert typical.freq.tolist() == want
