"""Node scores: how each baseline ranks the nodes where a replica fits.

A score is ``(problem, ledger, group, nodes) -> one float per node`` (higher is better; ties go to
the lower node index). These are the scoring plugins the baselines are known for
(kube-scheduler's NodeResourcesFit MostAllocated / LeastAllocated and ImageLocality, Volcano's
binpack, Tetris's alignment, Slurm's best fit); the round model also orders candidate nodes by
MostAllocated. They read usage from the ledger and never change it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from optsched.ledger import Ledger
from optsched.problem import Derived, FArray, GroupSpec, IArray, Problem

Scorer = Callable[[Problem, Ledger, GroupSpec, IArray], FArray]
"""Scores candidate nodes for one replica (higher is better; ties go to the lower index)."""


@dataclass(frozen=True)
class NodeScales:
    """Per-node denominators of the allocation scores, computed once per problem: the same
    divisions as ``where(cap > 0, x / cap, 0)`` at a fraction of the numpy calls (a replica's
    placement re-scores one node at a time, where call overhead is all the cost)."""

    safe_cap: FArray
    """cpu and memory capacity (nodes x 2), 1 where the node has none."""
    safe_count: FArray
    """Devices per node as float, 1 where the node has none."""
    count: FArray
    """Devices per node as float."""
    has: FArray
    """Whether the node has cpu, memory, devices (nodes x 3, 0.0 or 1.0): the scores' weights."""
    safe_total: FArray
    """Scored resources per node (the row sums of `has`), 1 where there are none."""


def _node_scales(p: Problem) -> NodeScales:
    cap = p.cap[:, :2]
    count = p.node_dev_count.astype(float)
    has = np.concatenate([cap > 0, (count > 0)[:, None]], axis=1).astype(float)
    total = has.sum(axis=1)
    return NodeScales(np.where(cap > 0, cap, 1.0), np.where(count > 0, count, 1.0), count, has,
                      np.where(total > 0, total, 1.0))


NODE_SCALES: Derived[NodeScales] = Derived("scores.node_scales", _node_scales)


def _fractions(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray, nonzero: bool = False) -> FArray:
    """Fraction of cpu, memory and devices in use after placing one replica of `group`
    (nodes x 3; 0 where the node has none of it: such entries carry weight 0). With `nonzero`,
    kube-scheduler's rule: a replica without a cpu or memory request counts as 100 millicores or
    200 MiB (`Ledger.score_pad`, `GroupSpec.nonzero_pad`)."""
    s = p.derived(NODE_SCALES)
    out = np.empty((len(nodes), 3))
    if nonzero:
        pad = np.asarray(group.nonzero_pad)
        out[:, :2] = (ledger.used[nodes, :2] + ledger.score_pad[nodes] + group.req[:2] + pad) / s.safe_cap[nodes]
    else:
        out[:, :2] = (ledger.used[nodes, :2] + group.req[:2]) / s.safe_cap[nodes]
    out[:, 2] = (s.count[nodes] - ledger.free_whole[nodes] + float(group.whole)) / s.safe_count[nodes]
    return out


def _weighted_mean(p: Problem, fracs: FArray, group: GroupSpec, nodes: IArray, requested_only: bool) -> FArray:
    """Mean of `fracs` over the resources each node has (with `requested_only`, Volcano's
    binpack: only those the replica requests); 0 where none is scored."""
    s = p.derived(NODE_SCALES)
    w = s.has[nodes]
    if not requested_only:
        out: FArray = (fracs * w).sum(axis=1) / s.safe_total[nodes]
        return out
    w = w * np.array([group.req[0] > 0, group.req[1] > 0, group.gpu > 0], dtype=float)
    total = w.sum(axis=1)
    return np.where(total > 0, (fracs * w).sum(axis=1) / np.where(total > 0, total, 1), 0.0)


ScalarScorer = Callable[[Problem, Ledger, GroupSpec, int], float]
"""A `Scorer` for one node, in plain Python: the same floats in the same order (the greedy
engine re-scores the one node a placement changed; numpy's per-call cost was most of that)."""


def _node_rows(p: Problem) -> list[tuple[float, ...]]:
    s = p.derived(NODE_SCALES)
    return [tuple(row) for row in np.column_stack([s.safe_cap, s.count, s.safe_count, s.has, s.safe_total]).tolist()]


NODE_ROWS: Derived[list[tuple[float, ...]]] = Derived("scores.node_rows", _node_rows)
"""Per node, `NodeScales` as Python floats: safe cpu cap, safe memory cap, devices, safe
devices, has cpu, has memory, has devices, safe total."""


def _fractions_one(p: Problem, ledger: Ledger, group: GroupSpec, node: int,
                   nonzero: bool = False) -> tuple[float, ...]:
    """`_fractions` and the weights of one node: (f_cpu, f_mem, f_dev, h_cpu, h_mem, h_dev, safe total)."""
    cap0, cap1, count, safe_count, h0, h1, h2, total = p.derived(NODE_ROWS)[node]
    u0, u1 = ledger.used[node, :2].tolist()
    r0, r1 = group.req_row[:2]
    if nonzero:
        s0, s1 = ledger.score_pad[node].tolist()
        q0, q1 = group.nonzero_pad
        u0, u1, r0, r1 = u0 + s0 + r0 + q0, u1 + s1 + r1 + q1, 0.0, 0.0  # the vectorised sum's order
    f2 = (count - int(ledger.free_whole[node]) + float(group.whole)) / safe_count
    return (u0 + r0) / cap0, (u1 + r1) / cap1, f2, h0, h1, h2, total


def _most_allocated_one(p: Problem, ledger: Ledger, group: GroupSpec, node: int) -> float:
    f0, f1, f2, h0, h1, h2, total = _fractions_one(p, ledger, group, node, nonzero=True)
    return (f0 * h0 + f1 * h1 + f2 * h2) / total


def _least_allocated_one(p: Problem, ledger: Ledger, group: GroupSpec, node: int) -> float:
    f0, f1, f2, h0, h1, h2, total = _fractions_one(p, ledger, group, node, nonzero=True)
    return ((1.0 - f0) * h0 + (1.0 - f1) * h1 + (1.0 - f2) * h2) / total


def _binpack_one(p: Problem, ledger: Ledger, group: GroupSpec, node: int) -> float:
    f0, f1, f2, h0, h1, h2, _ = _fractions_one(p, ledger, group, node)
    w0, w1, w2 = h0 * float(group.req[0] > 0), h1 * float(group.req[1] > 0), h2 * float(group.gpu > 0)
    total = w0 + w1 + w2
    return (f0 * w0 + f1 * w1 + f2 * w2) / total if total > 0 else 0.0


def _first_one(p: Problem, ledger: Ledger, group: GroupSpec, node: int) -> float:
    return 0.0


def score_first(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """First fit: the lowest node index wins (all scores equal)."""
    return np.zeros(len(nodes))


def score_most_allocated(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """kube-scheduler NodeResourcesFit `MostAllocated`: mean of requested/allocatable over cpu, memory, gpu
    (requests as kube-scheduler counts them: non-zero)."""
    return _weighted_mean(p, _fractions(p, ledger, group, nodes, nonzero=True), group, nodes, requested_only=False)


def score_least_allocated(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """kube-scheduler NodeResourcesFit `LeastAllocated`: mean of free/allocatable after placing
    (requests as kube-scheduler counts them: non-zero)."""
    return _weighted_mean(p, 1.0 - _fractions(p, ledger, group, nodes, nonzero=True), group, nodes,
                          requested_only=False)


def score_binpack(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """Volcano `binpack` plugin: weighted used/capacity after placing, over the requested resources."""
    return _weighted_mean(p, _fractions(p, ledger, group, nodes), group, nodes, requested_only=True)


def score_alignment(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """Tetris (Grandl et al., SIGCOMM'14): dot product of the normalised demand and free vectors."""
    cap = p.cap[nodes][:, :2]
    free = cap - ledger.used[nodes][:, :2]
    with np.errstate(divide="ignore", invalid="ignore"):
        demand = np.where(cap > 0, group.req[:2] / np.where(cap > 0, cap, 1), 0.0)
        avail = np.where(cap > 0, free / np.where(cap > 0, cap, 1), 0.0)
    count = p.node_dev_count[nodes].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        g_dem = np.where(count > 0, group.gpu / np.where(count > 0, count, 1), 0.0)
        g_av = np.where(count > 0, ledger.free_whole[nodes] / np.where(count > 0, count, 1), 0.0)
    return (demand * avail).sum(axis=1) + g_dem * g_av


def score_tightest(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """Slurm-style best fit: the node with the fewest free devices, then the least free cpu."""
    free_dev = ledger.free_whole[nodes].astype(float)
    free_cpu = (p.cap[nodes, 0] - ledger.used[nodes, 0]) / max(float(p.cap[:, 0].max()), 1.0)
    return -(free_dev + free_cpu * 0.5)


IMAGE_LOCALITY_MIN = 23 * 2**20
"""kube-scheduler ImageLocality's thresholds (bytes): scores clip to [23 MB, 1,000 MB] per container."""
IMAGE_LOCALITY_MAX = 1000 * 2**20


def image_locality(p: Problem, group: GroupSpec, nodes: IArray) -> FArray:
    """kube-scheduler's ImageLocality score (0..100) of `group`'s image on `nodes`, an image's
    layers taken as its images: the sum over layers the node caches of bytes x (nodes caching
    the layer / all nodes), clipped to [23 MB, 1,000 MB] and scaled. 0 without an image."""
    image = group.spec.image
    if image is None:
        return np.zeros(len(nodes))
    out: FArray = p.derived(IMAGE_LOCALITY, image)[nodes]
    return out


def _image_locality_per_node(p: Problem, image: str) -> FArray:
    layers = p.cluster.images[image]
    held = np.array([[layer.digest in set(node.images) for layer in layers] for node in p.cluster.nodes],
                    dtype=float).reshape(len(p.cluster.nodes), len(layers))
    sizes = np.array([layer.bytes for layer in layers], dtype=float)
    raw = np.zeros(p.n_nodes)
    raw[: p.n_real] = held @ (sizes * held.mean(axis=0)) if len(held) else 0.0
    clipped = np.clip(raw, IMAGE_LOCALITY_MIN, IMAGE_LOCALITY_MAX)
    scores: FArray = 100 * (clipped - IMAGE_LOCALITY_MIN) / (IMAGE_LOCALITY_MAX - IMAGE_LOCALITY_MIN)
    return scores


IMAGE_LOCALITY: Derived[FArray] = Derived("scores.image_locality", _image_locality_per_node)
"""ImageLocality's score (0..100) of an image on every node (slots score 0)."""


def score_image_best_fit(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """kube-scheduler with the MostAllocated and ImageLocality score plugins at equal weights
    (each 0..100)."""
    return 100 * score_most_allocated(p, ledger, group, nodes) + image_locality(p, group, nodes)


SCALAR_SCORERS: dict[Scorer, ScalarScorer] = {
    score_first: _first_one,
    score_most_allocated: _most_allocated_one,
    score_least_allocated: _least_allocated_one,
    score_binpack: _binpack_one,
}
"""The one-node form of the scores that have one (tests/test_scores.py: equal to the vectorised
score, float for float, on random usage)."""

MONOTONE_SCORERS: frozenset[Scorer] = frozenset({
    score_first, score_most_allocated, score_binpack, score_tightest, score_image_best_fit})
"""The scores that never fall on a node when a replica is added to it (fuller is better, or all
equal): after a placement, the node just used is still the best while the next replica of the
same shape fits there, so the greedy engine places it there without a pass over the other nodes
(tests/test_scores.py: never lower, float for float, on random usage). Least-allocated and
Tetris's alignment prefer emptier nodes and are not among them."""
