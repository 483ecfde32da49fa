"""Concern: image and dataset locality (locality term).

Start-up time of a replica is the time to pull the layers of its image that its node lacks:
from a peer in the same leaf at `network.p2p_gbps` when one caches the layer (P2P distribution),
else from the registry at `network.registry_gbps`. A dataset read costs its bytes at the registry
rate times a distance factor: 0 when a domain that caches it contains the node, else the share of
topology levels to climb to reach one (1 when no domain caches it).
`locality` is the sum over placed replicas of those seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from optsched.problem import Derived, GroupSpec, Problem
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel

LOCALITY_SCALE = 1000
"""The CP-SAT locality term counts milliseconds (each replica's seconds rounded to 1 ms)."""


def _leaf_layers(p: Problem) -> set[tuple[int, str]]:
    leaf = p.node_dom[:, -1]
    return {(int(leaf[n]), d) for n in range(p.n_real) for d in p.cluster.nodes[n].images}


LEAF_LAYERS: Derived[set[tuple[int, str]]] = Derived("locality.leaf_layers", _leaf_layers)
"""(leaf domain, layer digest) for every layer some real node of the leaf caches."""


def pull_bytes(p: Problem, image: str, node: int) -> tuple[int, int]:
    """(registry bytes, peer bytes) to start `image` on `node`."""
    cached = set(p.cluster.nodes[node].images) if node < p.n_real else set()
    peers = p.derived(LEAF_LAYERS)
    leaf = int(p.node_dom[node, -1])
    reg = peer = 0
    for layer in p.cluster.images[image]:
        if layer.digest in cached:
            continue
        if (leaf, layer.digest) in peers:
            peer += layer.bytes
        else:
            reg += layer.bytes
    return reg, peer


def dataset_distance(p: Problem, dataset: str, node: int) -> float:
    """0 when a caching domain contains `node`, up to 1 when none does."""
    cached = {p.domain_index[d] for d in p.cluster.datasets[dataset].cached_at}
    if not cached:
        return 1.0
    path = p.node_dom[node]
    for climb in range(p.n_levels):
        level = p.n_levels - 1 - climb
        here = int(path[level])
        if here in cached or any(_is_below(p, c, here) for c in cached):
            return climb / p.n_levels
    return 1.0


def _is_below(p: Problem, d: int, ancestor: int) -> bool:
    while d >= 0:
        if d == ancestor:
            return True
        d = int(p.dom_parent[d])
    return False


def replica_seconds(p: Problem, group: GroupSpec, node: int) -> tuple[float, int]:
    """(seconds, image bytes) one replica of `group` spends on `node` pulling its image's missing
    layers and reading its datasets (module docstring)."""
    net = p.cluster.network
    seconds, pulled = 0.0, 0
    spec = group.spec
    if spec.image is not None:
        reg, peer = pull_bytes(p, spec.image, node)
        pulled = reg + peer
        seconds += reg * 8 / (net.registry_gbps * 1e9) + peer * 8 / (net.p2p_gbps * 1e9)
    for ds in spec.datasets:
        size = p.cluster.datasets[ds].bytes
        seconds += size * 8 / (net.registry_gbps * 1e9) * dataset_distance(p, ds, node)
    return seconds, pulled


def term(view: PlanView) -> dict[str, float]:
    """`locality` (seconds of pulls and reads) and `pull_bytes` (image bytes to fetch)."""
    p = view.problem
    seconds = 0.0
    total_bytes = 0.0
    for rep in view.replicas:
        s, pulled = replica_seconds(p, rep.job.groups[rep.group], rep.node)
        seconds += s
        total_bytes += pulled
    return {"locality": float(np.round(seconds, 9)), "pull_bytes": total_bytes}


def cpsat(r: RoundModel) -> None:
    """CP-SAT: the `locality` term, built only when the objective names it (docs/formulation.md
    L1): `locality` = sum over keys k = (job, group, node) of round(1000 x seconds(group, node)) x
    y[k], each replica's pull and read time in milliseconds. Groups without an image or datasets
    add nothing."""
    if "locality" not in r.wanted:
        return
    p = r.p
    coefs: list[int] = []
    items = []
    for (j, g, v), var in r.y.items():
        group = p.jobs[j].groups[g]
        if group.spec.image is None and not group.spec.datasets:
            continue
        ms = round(LOCALITY_SCALE * replica_seconds(p, group, v)[0])
        if ms:
            coefs.append(ms)
            items.append(var)
    r.add_term("locality", r.wsum(items, coefs), LOCALITY_SCALE, maximise=False)
    r.term_ub["locality"] = sum(c * r.model_ub(v) for c, v in zip(coefs, items, strict=True))
