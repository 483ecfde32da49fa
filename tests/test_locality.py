"""Image and dataset locality: the CP-SAT term equals the metric, and with everything else equal
it ranks nodes as kube-scheduler's ImageLocality score does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from optsched import check, evaluate
from optsched.model import Cluster, Queue
from optsched.problem import compile_problem
from optsched.solvers.cpsat import solve_cpsat

GB = 10**9
LAYERS = {"base": 1 * GB, "cuda": 2 * GB, "torch": 4 * GB, "app": 500_000_000}


def _cluster(cached: list[list[str]], *, leaves: int | None = None, datasets: dict[str, Any] | None = None) -> Cluster:
    """One 8-GPU node per entry of `cached` (the layers it holds), each in its own leaf unless
    `leaves` puts them round-robin in fewer (then peers share layers at the P2P rate)."""
    n_leaves = leaves or len(cached)
    return Cluster.model_validate({
        "topology": {"levels": ["spine", "leaf"], "domains": [{"id": "s", "level": "spine"}]
                     + [{"id": f"l{i}", "level": "leaf", "parent": "s"} for i in range(n_leaves)]},
        "network": {"registry_gbps": 10, "p2p_gbps": 100},
        "device_models": {"H100": {"speed": 1.0}},
        "nodes": [{"id": f"n{i}", "domain": f"l{i % n_leaves}", "capacity": {"cpu": 64000, "memory": 512000},
                   "devices": {"model": "H100", "count": 8}, "images": layers} for i, layers in enumerate(cached)],
        "images": {"train": [{"digest": d, "bytes": b} for d, b in LAYERS.items()]},
        "datasets": datasets or {},
    })


def _queue(jobs: int = 1, gpus: int = 8, datasets: list[str] | None = None) -> Queue:
    return Queue.model_validate({"jobs": [{"id": f"j{i}", "groups": [
        {"name": "w", "image": "train", "datasets": datasets or [], "request": {"gpu": gpus, "cpu": 1000}}]}
        for i in range(jobs)]})


def image_locality_scores(cluster: Cluster, image: str) -> dict[str, float]:
    """kube-scheduler's ImageLocality score (pkg/scheduler/framework/plugins/imagelocality),
    with an image's layers as its images: per node, the sum over cached layers of size x
    (nodes caching it / all nodes), clipped to [23 MB, 1,000 MB x containers] and scaled to
    0..100."""
    layers = {layer.digest: layer.bytes for layer in cluster.images[image]}
    spread = {d: sum(d in n.images for n in cluster.nodes) / len(cluster.nodes) for d in layers}
    lo, hi = 23 * 2**20, 1000 * 2**20
    out = {}
    for n in cluster.nodes:
        raw = sum(layers[d] * spread[d] for d in n.images if d in layers)
        out[n.id] = 100 * (min(max(raw, lo), hi) - lo) / (hi - lo)
    return out


def _chosen(cluster: Cluster, queue: Queue) -> str:
    plan = solve_cpsat(compile_problem(cluster, queue), objective=["admitted_value", "locality"], time_limit=5.0)
    assert check(cluster, queue, plan) == []
    (node,) = {p.node for p in plan.placements}
    return node


def test_with_everything_else_equal_the_model_ranks_nodes_as_image_locality_does() -> None:
    """Four identical nodes, each layer cached on one node (equal spread): taking away the
    chosen node each time, the model picks the nodes in ImageLocality's order."""
    cached = [["base"], ["torch"], ["cuda", "app"], []]
    cluster = _cluster(cached)
    kube = image_locality_scores(cluster, "train")
    picked = []
    for _ in range(len(cached) - 1):  # the last two may tie at ImageLocality's lower clip
        node = _chosen(cluster, _queue())
        picked.append(node)
        nodes = [n.model_copy(update={"healthy": False}) if n.id == node else n for n in cluster.nodes]
        cluster = cluster.model_copy(update={"nodes": nodes})
    assert picked == sorted(kube, key=lambda n: -kube[n])[:3] == ["n1", "n2", "n0"]


def test_a_peer_in_the_leaf_makes_a_layer_cheaper_than_the_registry() -> None:
    """n0 and n1 share a leaf; n1 caches torch. n0 pulls torch from n1 at 100 Gbps, n2 (own leaf,
    caches the small app layer) from the registry at 10 Gbps: n0 is faster although
    ImageLocality (which ignores peers) scores n2 higher."""
    cluster = _cluster([[], ["torch"], ["app"]], leaves=2)
    cluster = cluster.model_copy(update={"nodes": [
        cluster.nodes[0].model_copy(update={"domain": "l0"}), cluster.nodes[1].model_copy(update={"domain": "l0"}),
        cluster.nodes[2].model_copy(update={"domain": "l1"})]})
    busy = [n.model_copy(update={"healthy": False}) if n.id == "n1" else n for n in cluster.nodes]
    cluster = cluster.model_copy(update={"nodes": busy})
    assert image_locality_scores(cluster, "train")["n2"] > image_locality_scores(cluster, "train")["n0"]
    assert _chosen(cluster, _queue()) == "n0"


def test_the_model_term_equals_the_metric() -> None:
    """Several replicas with an image and a dataset: the model's locality (ms) is the metric's."""
    cluster = _cluster([["base"], ["torch", "cuda"], [], ["app"]], leaves=2,
                       datasets={"corpus": {"bytes": 50 * GB, "cached_at": ["l1"]}})
    queue = _queue(jobs=6, gpus=2, datasets=["corpus"])
    p = compile_problem(cluster, queue)
    plan = solve_cpsat(p, objective=["admitted_value", "locality"], time_limit=5.0)
    assert check(cluster, queue, plan) == []
    model = plan.solver.model
    assert model is not None
    actual = model.plan_terms or plan.objective
    assert model.terms["locality"] == pytest.approx(actual["locality"], abs=1e-3 * len(plan.placements))
    assert evaluate(cluster, queue, plan).locality == pytest.approx(plan.objective["locality"])
    # every replica on l1 (the dataset's cache), on the nodes with most layers first
    assert {p.node for p in plan.placements} <= {"n1", "n3"}


def test_the_image_best_fit_baseline_scores_as_kube_image_locality() -> None:
    """The `image-best-fit` baseline's ImageLocality part equals kube-scheduler's formula (as in
    this file), and on identical empty nodes it takes the node with the highest score."""
    from optsched import solve
    from optsched.scores import image_locality

    cluster = _cluster([["base"], ["torch"], ["cuda", "app"], [], ["app"]])
    queue = _queue()
    p = compile_problem(cluster, queue)
    ours = image_locality(p, p.jobs[0].groups[0], np.arange(p.n_real))
    kube = image_locality_scores(cluster, "train")
    assert ours.tolist() == pytest.approx([kube[n.id] for n in cluster.nodes])
    plan = solve(cluster, queue, solver="image-best-fit")
    assert check(cluster, queue, plan) == [] and plan.placements[0].node == max(kube, key=lambda n: kube[n])
