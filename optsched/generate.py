"""Synthetic inputs: fat-tree clusters, running load, and queues drawn from workload mixes.

Workload mixes are YAML files under ``optsched/data/workloads/`` (`optsched.bundled`) (each documents where its shape
distributions come from). Everything is deterministic under `seed`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from optsched.arguments import MAX_TIME_LIMIT_S
from optsched.bundled import DATA_DIR, names, resolve
from optsched.errors import InputError, InputIssue
from optsched.model.cluster import Cluster, NodeShape, ReplicaPlacement, RunningJob
from optsched.model.queue import Job, Queue, TaskGroup
from optsched.model.references import distinct_shapes, group_fits


# ----------------------------------------------------------------------------- mixes
def load_mix(name: str) -> list[tuple[dict[str, Any], float]]:
    """Templates of a mix (by name, `optsched.bundled.names("mix")`, or a path) with normalised weights."""
    path = resolve("mix", name)
    if not path.is_file():
        raise InputError([InputIssue("mix", "unreadable", f"no workload mix file {str(path)!r}; "
                                     f"bundled mixes: {names('mix')}")])
    doc = yaml.safe_load(path.read_text())
    out: list[tuple[dict[str, Any], float]] = []
    if "include" in doc:
        for sub, w in doc["include"].items():
            out.extend((t, w * tw) for t, tw in load_mix(sub))
    for t in doc.get("templates", []):
        out.append((t, float(t.get("weight", 1.0))))
    total = sum(w for _, w in out)
    return [(t, w / total) for t, w in out]


def _choice(rng: np.random.Generator, values: list[Any], weights: list[float] | None = None) -> Any:
    if weights is not None:
        w = np.asarray(weights, dtype=float)
        return values[int(rng.choice(len(values), p=w / w.sum()))]
    return values[int(rng.integers(len(values)))]


def _level(cluster: Cluster, wanted: str) -> str | None:
    levels = cluster.topology.levels
    if wanted in (*levels, "node"):
        return wanted
    return levels[-1] if wanted == "leaf" else None


def _satisfiable(spec: dict[str, Any], shapes: list[NodeShape]) -> bool:
    """Whether some node or template of the cluster could hold one replica of `spec` (a task
    group): a drawn job must pass the loader's `unsatisfiable` check. llm-training's 8-GPU worker
    asks 112 cores and 8 NICs, which no 96-core, 4-NIC A100 node gives; on a cluster of such nodes
    alone the job is drawn again."""
    group = TaskGroup.model_validate(spec)
    return any(group_fits(group, shape) for shape in shapes)


def _job_from_template(t: dict[str, Any], job_id: str, tenant: str, submitted: float,
                       cluster: Cluster, rng: np.random.Generator,
                       shapes: list[NodeShape] | None = None) -> dict[str, Any] | None:
    present = {n.devices.model for n in cluster.nodes if n.devices and n.devices.count}
    shapes = distinct_shapes(cluster) if shapes is None else shapes
    groups = []
    for g in t["groups"]:
        gpu = float(_choice(rng, g.get("gpu", [0]), g.get("gpu_weights")))
        rmin = int(_choice(rng, g["replicas"], g.get("replica_weights")))
        extra = int(_choice(rng, g.get("elastic", [0])))
        per = g.get("per_gpu", {})
        request = dict(g.get("request", {}))
        for k, v in per.items():
            request[k] = v * max(gpu, 1.0) if gpu >= 1 else v * max(gpu, 0.25)
        request["gpu"] = gpu
        spec: dict[str, Any] = {"name": g["name"], "replicas": {"min": rmin, "max": rmin + extra},
                                "request": request}
        if gpu > 0:
            models = {m: s for m, s in g.get("models", {}).items() if m in present} if "models" in g else None
            if models is not None:
                if not models:
                    return None
                spec["models"] = models
            spec["device_affinity"] = g.get("device_affinity", "none")
        if g.get("image") in cluster.images:
            spec["image"] = g["image"]
        for key in ("tolerations", "node_selector"):
            if key in g:
                spec[key] = g[key]
        if g.get("spread"):
            lvl = _level(cluster, g["spread"]["level"])
            if lvl:
                spec["spread"] = {**g["spread"], "level": lvl}
        if not _satisfiable(spec, shapes):
            return None
        groups.append(spec)
    job: dict[str, Any] = {
        "id": job_id, "tenant": tenant, "priority": int(_choice(rng, t.get("priority", [0]))),
        "submitted_at": submitted, "gang": t.get("gang"), "spot": t.get("spot", "allowed"),
        "preemptible": t.get("preemptible", False), "groups": groups,
        "bandwidth_gbps": float(_choice(rng, t.get("bandwidth_gbps", [0]))),
    }
    if t.get("topology"):
        lvl = _level(cluster, t["topology"]["level"])
        if lvl:
            required = rng.random() < float(t.get("required_fraction", 0.0))
            job["topology"] = {"level": lvl, "mode": "required" if required else t["topology"].get("mode", "preferred")}
    if t.get("ratios"):
        job["ratios"] = t["ratios"]
    if t.get("colocate"):
        job["colocate"] = [{**c, "level": _level(cluster, c["level"])} for c in t["colocate"]
                           if _level(cluster, c["level"])]
    return job


def _job_gpus(job: dict[str, Any]) -> float:
    return sum(g["replicas"]["min"] * g["request"]["gpu"] for g in job["groups"])


def _scale(job: dict[str, Any], factor: float, rng: np.random.Generator) -> None:
    """Scale every group's replica counts by `factor` (stochastic rounding, at least 1), keeping ratios."""
    for g in job["groups"]:
        r = g["replicas"]
        x = r["min"] * factor
        new = max(1, math.floor(x + rng.random()))
        r["max"] = new + (r["max"] - r["min"])
        r["min"] = new
    by_name = {g["name"]: g for g in job["groups"]}
    for ratio in job.get("ratios", []):
        g, per = by_name[ratio["group"]]["replicas"], by_name[ratio["per"]]["replicas"]
        g["min"] = max(g["min"], math.ceil(ratio["min"] * per["min"]))
        if ratio.get("max") is not None:
            g["min"] = min(g["min"], int(ratio["max"] * per["min"]))
            g["max"] = max(g["min"], min(g["max"], int(ratio["max"] * per["min"])))
        g["max"] = max(g["max"], g["min"])


def free_gpus(cluster: Cluster) -> float:
    """Healthy devices on healthy nodes minus what running jobs hold."""
    total = sum(n.devices.count - len(set(n.devices.unhealthy)) for n in cluster.nodes
                if n.devices is not None and n.healthy)
    used = sum(len(p.devices) * (p.share or 1.0) for r in cluster.running for p in r.placements)
    return max(0.0, total - used)


def generate_queue(cluster: Cluster, mix: str, *, jobs: int | None = None, load: float | None = None,
                   seed: int = 0, now: float = 86_400.0, id_prefix: str = "") -> Queue:
    """Draw a queue from a workload mix.

    With `load` only, jobs are drawn until their minimum GPU demand reaches `load` x the free
    GPUs; with `jobs` only, exactly that many jobs; with both, `jobs` jobs whose replica counts
    are scaled so that the demand is about `load` x free GPUs.
    """
    if jobs is None and load is None:
        raise InputError([InputIssue("jobs", "missing", "give the number of jobs, the load, or both")])
    rng = np.random.default_rng(seed)
    templates = load_mix(mix)
    weights = np.array([w for _, w in templates])
    tenants = [t.name for t in cluster.tenants] or ["default"]
    t_weights = np.array([t.weight for t in cluster.tenants] or [1.0])
    target = load * free_gpus(cluster) if load is not None else math.inf
    shapes = distinct_shapes(cluster)
    out: list[dict[str, Any]] = []
    demand = 0.0
    attempts = 0
    while (jobs is None and demand < target) or (jobs is not None and len(out) < jobs):
        attempts += 1
        if attempts > 100 * (jobs or 10_000):
            break
        t, _ = templates[int(rng.choice(len(templates), p=weights))]
        tenant = tenants[int(rng.choice(len(tenants), p=t_weights / t_weights.sum()))]
        job = _job_from_template(t, f"{id_prefix}{t['name']}-{len(out):05d}", tenant,
                                 float(max(0.0, now - rng.uniform(0, 3600))), cluster, rng, shapes)
        if job is None:
            continue
        out.append(job)
        demand += _job_gpus(job)
    if jobs is not None and load is not None and demand > 0:
        for _ in range(3):
            factor = target / max(sum(_job_gpus(j) for j in out), 1e-9)
            if abs(factor - 1) < 0.02:
                break
            for j in out:
                if _job_gpus(j) >= 1:
                    _scale(j, factor, rng)
    return Queue(now=now, jobs=[Job.model_validate(j) for j in out])


# ----------------------------------------------------------------------------- clusters
@dataclass(frozen=True)
class NodeGroup:
    """`count` identical nodes of one shape and pool."""

    count: int
    model: str
    gpus: int
    interconnect: list[list[int]]
    capacity: dict[str, float]
    pool: str
    nic_gbps: float = 400.0
    """Per-GPU network bandwidth (for sizing uplinks)."""
    taints: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    images: list[str] = field(default_factory=list)


def fat_tree_cluster(groups: list[NodeGroup], *, nodes_per_leaf: int, leaves_per_spine: int,
                     oversubscription: float = 1.0, pools: list[dict[str, Any]] | None = None,
                     tenants: list[dict[str, Any]] | None = None,
                     device_models: dict[str, dict[str, Any]] | None = None,
                     extra: dict[str, Any] | None = None) -> Cluster:
    """A three-level fat tree (core > spine > leaf); leaf and spine uplinks oversubscribed by the factor.

    A leaf's uplink is its nodes' GPU bandwidth divided by `oversubscription`; a spine's uplink
    is the sum of its leaves' uplinks divided by it again.
    """
    catalogue = yaml.safe_load((DATA_DIR / "accelerators.yaml").read_text())
    models = device_models or {
        g.model: {k: v for k, v in catalogue[g.model].items() if k in ("memory_gib", "speed")} for g in groups}
    nodes: list[dict[str, Any]] = []
    domains: list[dict[str, Any]] = [{"id": "core-0", "level": "core"}]
    leaf_bw: list[float] = []
    leaf_nodes: list[dict[str, Any]] = []
    for g in groups:
        for i in range(g.count):
            leaf_nodes.append({"group": g, "i": i})
    n_leaves = math.ceil(len(leaf_nodes) / nodes_per_leaf)
    n_spines = math.ceil(n_leaves / leaves_per_spine)
    for leaf in range(n_leaves):
        members = leaf_nodes[leaf * nodes_per_leaf:(leaf + 1) * nodes_per_leaf]
        bw = sum(m["group"].gpus * m["group"].nic_gbps for m in members) / oversubscription
        leaf_bw.append(bw)
        for m in members:
            ng: NodeGroup = m["group"]
            node: dict[str, Any] = {
                "id": f"{ng.pool}-{m['i']:05d}", "domain": f"leaf-{leaf:03d}", "pool": ng.pool,
                "capacity": ng.capacity, "devices": {"model": ng.model, "count": ng.gpus},
                "interconnect": ng.interconnect,
            }
            if ng.taints:
                node["taints"] = ng.taints
            if ng.labels:
                node["labels"] = ng.labels
            if ng.images:
                node["images"] = ng.images
            nodes.append(node)
    for s in range(n_spines):
        leaves = range(s * leaves_per_spine, min((s + 1) * leaves_per_spine, n_leaves))
        domains.append({"id": f"spine-{s:02d}", "level": "spine", "parent": "core-0",
                        "uplink_gbps": round(sum(leaf_bw[x] for x in leaves) / oversubscription, 3)})
        domains.extend({"id": f"leaf-{x:03d}", "level": "leaf", "parent": f"spine-{s:02d}",
                        "uplink_gbps": round(leaf_bw[x], 3)} for x in leaves)
    doc: dict[str, Any] = {
        "topology": {"levels": ["core", "spine", "leaf"], "domains": domains},
        "device_models": models,
        "pools": pools or [{"name": g.pool, "pricing": "reserved"} for g in {g.pool: g for g in groups}.values()],
        "nodes": nodes,
    }
    if tenants:
        doc["tenants"] = tenants
    doc.update(extra or {})
    return Cluster.model_validate(doc)


def populate_running(cluster: Cluster, mix: str, busy_fraction: float, *, seed: int = 0,
                     solver: str = "best-fit") -> Cluster:
    """Fill about `busy_fraction` of the GPUs with running jobs drawn from `mix`, placed by a baseline."""
    from optsched.problem import compile_problem
    from optsched.solve import solve_problem

    queue = generate_queue(cluster, mix, load=busy_fraction * 1.15, seed=seed, id_prefix="run-")
    p = compile_problem(cluster, queue)
    plan = solve_problem(p, solver=solver, time_limit=MAX_TIME_LIMIT_S)  # a baseline runs to completion
    total = free_gpus(cluster)
    by_job: dict[str, list[ReplicaPlacement]] = {}
    used = 0.0
    rng = np.random.default_rng(seed)
    admitted = {pl.job for pl in plan.placements}
    for job in queue.jobs:
        if job.id not in admitted:
            continue
        places = [pl for pl in plan.placements if pl.job == job.id]
        gpus = sum(len(pl.devices) * (pl.share or 1.0) for pl in places)
        if used + gpus > busy_fraction * total:
            continue
        used += gpus
        by_job[job.id] = [ReplicaPlacement(group=pl.group, replica=pl.replica, node=pl.node,
                                           devices=pl.devices, share=pl.share) for pl in places]
    jobs = {j.id: j for j in queue.jobs}
    running = [RunningJob(job=jobs[jid], started_at=float(rng.uniform(0, queue.now)),
                          checkpoint_age_s=float(rng.uniform(0, jobs[jid].checkpoint_interval_s)),
                          placements=pls) for jid, pls in by_job.items()]
    return cluster.model_copy(update={"running": running})
