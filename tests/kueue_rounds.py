"""Small GPU rounds for the `kueue` baseline's scenario tests: nodes of 8 GPUs of one model "G"
under one spine, one flavor "G" whose quota each tenant lists, tenants in one cohort "org" that
may preempt within the tenant (lower priority) and reclaim anything in the cohort."""

from __future__ import annotations

from typing import Any

from optsched.model import Cluster

POLICY = {"within_tenant": "lower_priority", "reclaim_within_cohort": "any"}


def gpu_node(i: int) -> dict[str, Any]:
    """Node n{i}: 8 GPUs, 64 CPUs, 256 GiB."""
    return {"id": f"n{i}", "domain": "s", "capacity": {"cpu": 64000, "memory": 262144},
            "devices": {"model": "G", "count": 8}}


def gpu_job(jid: str, tenant: str, priority: int, gpu: int, submitted: int = 0, most: int = 1) -> dict[str, Any]:
    """A job of 1 to `most` replicas of `gpu` GPUs and 1 CPU each."""
    return {"id": jid, "tenant": tenant, "priority": priority, "submitted_at": submitted,
            "groups": [{"name": "w", "replicas": {"min": 1, "max": most}, "request": {"gpu": gpu, "cpu": 1000}}]}


def gpu_running(jid: str, tenant: str, gpu: int, node: int, first: int, started: int,
                preemptible: bool = True) -> dict[str, Any]:
    """A running one-replica job (priority 10) on node n{node}'s devices from `first` on."""
    return {"job": {**gpu_job(jid, tenant, 10, gpu), "preemptible": preemptible}, "started_at": started,
            "placements": [{"group": "w", "replica": 0, "node": f"n{node}", "devices": list(range(first, first + gpu))}]}


def gpu_cluster(nominal: dict[str, int], running: list[dict[str, Any]], nodes: int) -> Cluster:
    """Nodes n1..n{nodes}; one tenant per `nominal` entry (GPUs of flavor G), all in cohort "org"."""
    return Cluster.model_validate({
        "topology": {"levels": ["spine"], "domains": [{"id": "s", "level": "spine"}]},
        "device_models": {"G": {}},
        "nodes": [gpu_node(i) for i in range(1, nodes + 1)],
        "tenants": [{"name": t, "cohort": "org", "quotas": {"G": {"nominal": n}}, "preemption": POLICY}
                    for t, n in nominal.items()],
        "running": running})
