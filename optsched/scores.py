"""Node scores: how each baseline ranks the nodes where a replica fits.

A score is ``(problem, ledger, group, nodes) -> one float per node`` (higher is better; ties go to
the lower node index). These are the scoring plugins the baselines are known for
(kube-scheduler's NodeResourcesFit MostAllocated / LeastAllocated and ImageLocality, Volcano's
binpack, Tetris's alignment, Slurm's best fit); the round model also orders candidate nodes by
MostAllocated. They read usage from the ledger and never change it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from optsched.ledger import Ledger
from optsched.problem import Derived, FArray, GroupSpec, IArray, Problem

Scorer = Callable[[Problem, Ledger, GroupSpec, IArray], FArray]
"""Scores candidate nodes for one replica (higher is better; ties go to the lower index)."""


def _gpu_fraction(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """Fraction of each node's devices in use after adding one replica of `group`."""
    count = p.node_dev_count[nodes].astype(float)
    used = count - ledger.free_whole[nodes] + (group.whole if group.whole else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, used / np.where(count > 0, count, 1), 0.0)


def _resource_fractions(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray,
                        requested_only: bool) -> tuple[FArray, FArray]:
    """(fraction used after placing, weight) per node x scored resource: cpu, memory, gpu."""
    cap = p.cap[nodes][:, :2]
    after = ledger.used[nodes][:, :2] + group.req[:2]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(cap > 0, after / np.where(cap > 0, cap, 1), 0.0)
    gpu = _gpu_fraction(p, ledger, group, nodes)[:, None]
    fracs = np.concatenate([frac, gpu], axis=1)
    weights = np.ones(3)
    if requested_only:  # Volcano binpack scores only the resources the task requests
        weights = np.array([group.req[0] > 0, group.req[1] > 0, group.gpu > 0], dtype=float)
    has_cap = np.concatenate([cap > 0, (p.node_dev_count[nodes] > 0)[:, None]], axis=1)
    w = weights[None, :] * has_cap
    return fracs, w


def _weighted_mean(fracs: FArray, w: FArray) -> FArray:
    total = w.sum(axis=1)
    return np.where(total > 0, (fracs * w).sum(axis=1) / np.where(total > 0, total, 1), 0.0)


def score_first(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """First fit: the lowest node index wins (all scores equal)."""
    return np.zeros(len(nodes))


def score_most_allocated(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """kube-scheduler NodeResourcesFit `MostAllocated`: mean of requested/allocatable over cpu, memory, gpu."""
    fracs, w = _resource_fractions(p, ledger, group, nodes, requested_only=False)
    return _weighted_mean(fracs, w)


def score_least_allocated(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """kube-scheduler NodeResourcesFit `LeastAllocated`: mean of free/allocatable after placing."""
    fracs, w = _resource_fractions(p, ledger, group, nodes, requested_only=False)
    return _weighted_mean(1.0 - fracs, w)


def score_binpack(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """Volcano `binpack` plugin: weighted used/capacity after placing, over the requested resources."""
    fracs, w = _resource_fractions(p, ledger, group, nodes, requested_only=True)
    return _weighted_mean(fracs, w)


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
