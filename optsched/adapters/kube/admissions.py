"""A Plan -> Kueue-style admissions: per admitted job and pod set, the flavor of each resource, the
quota it uses, and the topology assignment (the shapes of Kueue's `Workload.status.admission`).

For each job the plan places, one admission (`workload`: the Kueue Workload it was read from,
when it was read from one rather than from pods):

    {"job": "team-a/train", "clusterQueue": "team-a-cq", "pods": ["train-0", ...], "workload": None,
     "podSetAssignments": [{"name": "worker", "count": 4,
                            "flavors": {"nvidia.com/gpu": "reserved", "cpu": "reserved"},
                            "resourceUsage": {"nvidia.com/gpu": "32", "cpu": "96", "memory": "1Ti"},
                            "topologyAssignment": {"levels": ["<block label>", "<rack label>",
                                                              "kubernetes.io/hostname"],
                                                   "domains": [{"values": ["b1", "r3", "gpu-17"],
                                                                "count": 2}, ...]}}]}

- `flavors`: per Kubernetes resource the pod set requests, the first of the tenant's resource
  flavors that quota it (the ClusterQueue's order) whose node labels every node of the pod set
  carries; a resource no flavor quotas has none. A pod set whose nodes belong to different
  flavors (Kueue assigns one per resource) lists them all, comma separated.
- `resourceUsage`: the pod set's total request, as quantities (`cpu` in cores, `memory` in Mi).
- `topologyAssignment`: the levels are `KubeConfig.topology`'s labels, then
  `kubernetes.io/hostname`; each domain is a node with the pod set's replicas on it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from optsched.adapters.kube.config import HOSTNAME_LABEL
from optsched.adapters.kube.snapshot import Snapshot
from optsched.model.cluster import Cluster
from optsched.model.plan import Plan
from optsched.model.queue import Request


def _quantity(resource: str, amount: float) -> str:
    """optsched's unit back to a Kubernetes quantity string."""
    if resource == "cpu":
        return f"{amount / 1000:g}" if amount % 1000 == 0 else f"{amount:g}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return f"{amount:g}Mi"
    return f"{amount:g}"


def _usage(request: Request, count: int, gpu_resource: str | None) -> dict[str, float]:
    """Per Kubernetes resource name, what `count` replicas of `request` ask (optsched units)."""
    out: dict[str, float] = {}
    for name, amount in (("cpu", request.cpu), ("memory", request.memory)):
        if amount > 0:
            out[name] = amount * count
    if request.gpu > 0 and gpu_resource is not None:
        out[gpu_resource] = request.gpu * count
    for name, amount in request.resources.items():
        if amount > 0 and name != "pods":
            out[name] = amount * count
    return out


def _flavor(cluster: Cluster, tenant: str, resource_key: str, nodes: list[str]) -> str | None:
    """The tenant's first flavor quotaing `resource_key` whose labels all `nodes` carry (module docstring)."""
    t = next((t for t in cluster.tenants if t.name == tenant), None)
    if t is None:
        return None
    labels = {n.id: n.labels for n in cluster.nodes}
    by_name = {f.name: f for f in cluster.resource_flavors}
    found: list[str] = []
    for node in nodes:
        for key in t.quotas:
            flavor, _, resource = key.partition("/")
            f = by_name.get(flavor)
            if resource == resource_key and f is not None and \
                    all(labels[node].get(k) == v for k, v in f.node_labels.items()):
                if flavor not in found:
                    found.append(flavor)
                break
    return ",".join(found) or None


def admissions(plan: Plan, snap: Snapshot) -> list[dict[str, Any]]:
    """One Kueue-style admission per job the plan places (module docstring)."""
    cluster, config = snap.cluster, snap.config
    jobs = {j.id: j for j in snap.queue.jobs}
    labels = {n.id: n.labels for n in cluster.nodes}
    levels = [t.label for t in config.topology if t.label != HOSTNAME_LABEL] + [HOSTNAME_LABEL]
    by_group: dict[tuple[str, str], list[str]] = {}
    for pl in plan.placements:
        by_group.setdefault((pl.job, pl.group), []).append(pl.node)
    out: list[dict[str, Any]] = []
    for job_id in dict.fromkeys(pl.job for pl in plan.placements):
        job = jobs.get(job_id)
        if job is None:
            continue
        pod_sets = []
        for group in job.groups:
            nodes = by_group.get((job_id, group.name), [])
            if not nodes:
                continue
            gpu_resource = next((snap.accelerator_of[n] for n in nodes if n in snap.accelerator_of), None)
            usage = _usage(group.request, len(nodes), gpu_resource)
            keys = {name: "gpu" if name == gpu_resource else name for name in usage}
            flavors = {name: f for name, key in keys.items() if (f := _flavor(cluster, job.tenant, key, nodes))}
            counts = Counter(nodes)
            pod_sets.append({
                "name": group.name, "count": len(nodes), "flavors": flavors,
                "resourceUsage": {name: _quantity(name, amount) for name, amount in usage.items()},
                "topologyAssignment": {"levels": levels, "domains": [
                    {"values": [labels[n].get(level, n if level == HOSTNAME_LABEL else "") for level in levels],
                     "count": c} for n, c in counts.items()]}})
        workload = snap.workloads.get(job_id)
        pods = [] if workload is not None else [p.name for p in snap.job_pods.get(job_id, [])]
        out.append({"job": job_id, "clusterQueue": job.tenant, "pods": pods,
                    "workload": None if workload is None else {"namespace": workload[0], "name": workload[1]},
                    "podSetAssignments": pod_sets})
    return out
