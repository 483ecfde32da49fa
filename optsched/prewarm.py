"""The pre-warm advisor: which image layers to pull ahead of time onto which nodes, so that the
next rounds' replicas start sooner (docs/prewarm.md).

After a plan, the jobs it deferred (or an `upcoming` queue) will start in later rounds on nodes
not known yet. Each of their replicas is assumed to land on any node its group is eligible for
with equal probability, so node n expects ``W[n, l] = sum_g rmin_g / |E_g|`` replicas that need
layer l (g over upcoming groups whose image has l, n in g's eligible nodes E_g). A layer costs a
replica ``t_reg = 8 b / registry_gbps`` seconds from the registry, ``t_p2p = 8 b / p2p_gbps`` from
a peer of the node's leaf that holds it, nothing when the node holds it. Nodes hold, after the
plan, their cached layers plus the layers of the images the plan starts on them.

The choice is a small MILP (HiGHS through scipy):

- ``x[n, l]`` (binary): pre-pull layer l onto node n (only where n lacks it and ``W[n, l] > 0``);
- ``z[L, l]`` (0..1): layer l is in leaf L after the pre-pulls (leaves that lack it), ``z[L, l] <=
  sum_{n in L} x[n, l]``;
- maximise the expected seconds saved: ``sum W[n, l] (t_p2p x[n, l] + (t_reg - t_p2p) z[L(n), l])``
  over nodes whose leaf lacks l, ``sum W[n, l] t_p2p x[n, l]`` where the leaf has it;
- per node, pre-pulled bytes <= `node_budget_bytes`; in all <= `total_budget_bytes`.

The chosen pulls are ranked greedily: each next one is the chosen pull that saves most given
those ranked before it (the first pull of a layer into a leaf also speeds up its peers).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from optsched.concerns import eligibility
from optsched.errors import InputError, InputIssue
from optsched.model.cluster import Cluster
from optsched.model.plan import Plan
from optsched.model.queue import Queue
from optsched.problem import BArray, FArray, IArray, JobSpec, Problem, compile_problem

GB = 10**9


@dataclass(frozen=True)
class Pull:
    """One advised pre-pull: the layer, the node, its size, and the expected start-up seconds it
    saves given the pulls ranked before it."""

    node: str
    layer: str
    bytes: int
    seconds_saved: float


@dataclass(frozen=True)
class PrewarmAdvice:
    """The ranked pre-pulls, and the upcoming replicas' expected start-up seconds without and
    with them (image pulls only; datasets are not pre-warmed)."""

    pulls: list[Pull]
    seconds_before: float
    seconds_after: float
    status: str
    wall_s: float
    upcoming_jobs: list[str] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        """Bytes pre-pulled in all."""
        return sum(p.bytes for p in self.pulls)


def prewarm(cluster: Cluster, queue: Queue, plan: Plan, *, node_budget_bytes: float = 50 * GB,
            total_budget_bytes: float | None = None, upcoming: Queue | None = None,
            time_limit: float = 10.0) -> PrewarmAdvice:
    """Advise pre-pulls for the jobs `plan` deferred (or `upcoming`, a queue for the same
    cluster) after `plan` is applied (module docstring). Budgets in bytes."""
    if node_budget_bytes < 0 or (total_budget_bytes is not None and total_budget_bytes < 0):
        raise InputError([InputIssue("budget", "non_negative", "pre-pull budgets must be >= 0 bytes")])
    start = time.perf_counter()
    p = compile_problem(cluster, queue)
    held = _held_after(p, plan)
    if upcoming is None:
        placed = {pl.job for pl in plan.placements}
        jobs = [j for j in p.jobs if j.id not in placed]
        q = p
    else:
        q = compile_problem(cluster, upcoming)
        jobs = list(q.jobs)
    weight = _expected_replicas(q, jobs)  # layer digest -> (nodes,) expected replicas needing it
    leaf = p.node_dom[: p.n_real, -1]
    sizes = {layer.digest: layer.bytes for layers in cluster.images.values() for layer in layers}
    net = cluster.network
    t_reg = {d: 8 * b / (net.registry_gbps * 1e9) for d, b in sizes.items()}
    t_p2p = {d: 8 * b / (net.p2p_gbps * 1e9) for d, b in sizes.items()}

    holds = {d: np.array([d in h for h in held]) for d in weight}  # layer -> (nodes,) held after the plan
    n_leaves = int(leaf.max()) + 1 if len(leaf) else 0

    def expected_seconds(extra: set[tuple[int, str]]) -> float:
        """Expected pull seconds of the upcoming replicas with the `extra` pulls done."""
        total = 0.0
        for d, w in weight.items():
            hold = holds[d].copy()
            for n, dd in extra:
                if dd == d:
                    hold[n] = True
            leaf_has = np.bincount(leaf, weights=hold, minlength=n_leaves) > 0
            each = np.where(leaf_has[leaf], t_p2p[d], t_reg[d])
            total += float(np.dot(w[~hold], each[~hold]))
        return total

    before = expected_seconds(set())
    # variables: x[n, l] for candidate pairs, then z[L, l] for leaves lacking l
    pairs = [(n, d) for d, w in weight.items() for n in np.flatnonzero((w > 0) & ~holds[d]).tolist()]
    if not pairs:
        return PrewarmAdvice([], before, before, "nothing to pull", time.perf_counter() - start, [j.id for j in jobs])
    has = {d: set(leaf[holds[d]].tolist()) for d in weight}
    zs = sorted({(int(leaf[n]), d) for n, d in pairs if int(leaf[n]) not in has[d]})
    z_index = {k: len(pairs) + i for i, k in enumerate(zs)}
    gain = np.zeros(len(pairs) + len(zs))
    for i, (n, d) in enumerate(pairs):
        gain[i] = weight[d][n] * t_p2p[d]
        zi = z_index.get((int(leaf[n]), d))
        if zi is not None:
            gain[zi] += weight[d][n] * (t_reg[d] - t_p2p[d])
    entries: list[tuple[int, int, float]] = []  # (row, column, coefficient)
    upper: list[float] = []
    in_leaf: dict[tuple[int, str], list[int]] = {}
    on_node: dict[int, list[int]] = {}
    for i, (n, d) in enumerate(pairs):
        in_leaf.setdefault((int(leaf[n]), d), []).append(i)
        on_node.setdefault(n, []).append(i)
    for key, zi in z_index.items():  # z[L, l] - sum_{n in L} x[n, l] <= 0
        entries.append((len(upper), zi, 1.0))
        entries += [(len(upper), i, -1.0) for i in in_leaf[key]]
        upper.append(0.0)
    for idx in on_node.values():  # per node budget
        entries += [(len(upper), i, float(sizes[pairs[i][1]])) for i in idx]
        upper.append(float(node_budget_bytes))
    if total_budget_bytes is not None:
        entries += [(len(upper), i, float(sizes[d])) for i, (_, d) in enumerate(pairs)]
        upper.append(float(total_budget_bytes))
    rows, cols, vals = zip(*entries, strict=True)
    a = coo_matrix((vals, (rows, cols)), shape=(len(upper), len(gain))).tocsr()
    lo, hi = np.full(len(upper), -np.inf), np.array(upper)
    integrality = np.r_[np.ones(len(pairs)), np.zeros(len(zs))]
    res = milp(-gain, constraints=LinearConstraint(a, lo, hi), integrality=integrality, bounds=Bounds(0, 1),
               options={"time_limit": max(0.1, time_limit - (time.perf_counter() - start)), "disp": False})
    if res.x is None:
        return PrewarmAdvice([], before, before, f"no solution ({res.message})", time.perf_counter() - start,
                             [j.id for j in jobs])
    chosen = [pairs[i] for i in np.flatnonzero(res.x[: len(pairs)] > 0.5).tolist()]
    ranked = _rank(chosen, weight, holds, leaf, t_reg, t_p2p)
    ranked_pulls = [Pull(p.node_ids[n], d, sizes[d], saved) for (n, d), saved in ranked]
    status = "optimal" if res.status == 0 else f"feasible ({res.message})"
    return PrewarmAdvice(ranked_pulls, before, expected_seconds(set(chosen)), status, time.perf_counter() - start,
                         [j.id for j in jobs])


def _rank(chosen: list[tuple[int, str]], weight: dict[str, FArray], holds: dict[str, BArray], leaf: IArray,
          t_reg: dict[str, float], t_p2p: dict[str, float]) -> list[tuple[tuple[int, str], float]]:
    """The chosen pulls in greedy order with their marginal seconds saved: pulling l onto n saves
    n's own pull (from the registry if its leaf lacks l, else from a peer), and, when it is the
    first copy in the leaf, turns the leaf's other nodes' registry pulls into peer pulls."""
    hold = {d: h.copy() for d, h in holds.items()}
    leaf_has = {d: set(leaf[h].tolist()) for d, h in hold.items()}
    members = {int(lf): np.flatnonzero(leaf == lf) for lf in np.unique(leaf)}

    def marginal(n: int, d: str) -> float:
        lf = int(leaf[n])
        if lf in leaf_has[d]:
            return float(weight[d][n]) * t_p2p[d]
        peers = members[lf]
        peers = peers[(peers != n) & ~hold[d][peers]]
        return float(weight[d][n]) * t_reg[d] + float(weight[d][peers].sum()) * (t_reg[d] - t_p2p[d])

    out: list[tuple[tuple[int, str], float]] = []
    left = list(chosen)
    while left:
        scores = [marginal(n, d) for n, d in left]
        k = int(np.argmax(scores))
        n, d = left.pop(k)
        hold[d][n] = True
        leaf_has[d].add(int(leaf[n]))
        out.append(((n, d), scores[k]))
    return out


def _held_after(p: Problem, plan: Plan) -> list[set[str]]:
    """Layer digests each real node holds once the plan's replicas have pulled their images."""
    held = [set(node.images) for node in p.cluster.nodes]
    groups = {(j.id, g.name): g for j in p.jobs for g in j.groups}
    for pl in plan.placements:
        g = groups.get((pl.job, pl.group))
        node = p.node_index.get(pl.node)
        if g is None or node is None or node >= p.n_real or g.spec.image is None:
            continue
        held[node] |= {layer.digest for layer in p.cluster.images[g.spec.image]}
    return held


def _expected_replicas(p: Problem, jobs: list[JobSpec]) -> dict[str, FArray]:
    """Per layer digest, per real node: expected upcoming replicas that need it there."""
    out: dict[str, FArray] = {}
    for job in jobs:
        for g in job.groups:
            if g.spec.image is None or g.rmin == 0:
                continue
            ok = eligibility.mask(p, job, g)[: p.n_real]
            if not ok.any():
                continue
            w = np.where(ok, g.rmin / ok.sum(), 0.0)
            for layer in p.cluster.images[g.spec.image]:
                out[layer.digest] = out.get(layer.digest, np.zeros(p.n_real)) + w
    return out
