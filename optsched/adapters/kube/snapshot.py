"""A cluster's Kubernetes objects -> one round's Cluster and Queue, and which pod is which replica."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from optsched.adapters.documents import Problems, split_unsatisfiable, validate_read_cluster, validate_read_queue
from optsched.adapters.kube.config import KubeConfig
from optsched.adapters.kube.kueue import UNMANAGED, read_kueue
from optsched.adapters.kube.nodes import read_nodes
from optsched.adapters.kube.objects import as_dict
from optsched.adapters.kube.pods import Held, PodRef, read_pods
from optsched.adapters.kube.volcano import read_volcano, totals_of
from optsched.adapters.kube.workloads import workload_pods
from optsched.model.cluster import Cluster, Tenant
from optsched.model.queue import Queue


@dataclass
class Snapshot:
    """One round's documents read from a cluster, and the way back from a plan to its pods."""

    cluster: Cluster
    queue: Queue
    replica_pod: dict[tuple[str, str, int], PodRef]
    """(job id, group, replica) -> the pod that replica is (queued and running jobs)."""
    job_pods: dict[str, list[PodRef]]
    """Job id -> its pods."""
    held: list[Held] = field(default_factory=list)
    """Pending pods not offered to the solver, with the reason they stay pending."""
    ignored: list[str] = field(default_factory=list)
    """Fields of the objects given that are not modelled (`Kind/name.field: why`)."""
    config: KubeConfig = field(default_factory=KubeConfig)
    """The configuration it was read with."""
    accelerator_of: dict[str, str] = field(default_factory=dict)
    """Node name -> the extended resource its devices are counted in (`nvidia.com/gpu`, ...)."""
    workloads: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Job id -> (namespace, name) of the Kueue Workload it was read from (it has no pods)."""
    workload_of_pod: dict[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, name) of a pod read from a Workload's pod set (it does not exist) -> its job id."""


def snapshot(nodes: Iterable[Any], pods: Iterable[Any], priority_classes: Iterable[Any] = (), *,
             cluster_queues: Iterable[Any] = (), local_queues: Iterable[Any] = (),
             resource_flavors: Iterable[Any] = (), cohorts: Iterable[Any] = (),
             workload_priority_classes: Iterable[Any] = (), workloads: Iterable[Any] = (),
             pod_groups: Iterable[Any] = (),
             queues: Iterable[Any] = (), config: KubeConfig | None = None, now: float | None = None) -> Snapshot:
    """Read Nodes, Pods and PriorityClasses (client models or API dicts) into a round; with
    Kueue's ClusterQueues (and LocalQueues, ResourceFlavors, Cohorts, WorkloadPriorityClasses:
    API dicts, as `CustomObjectsApi` lists them), its tenants, quotas and cohorts too
    (`optsched.adapters.kube.kueue`), and pending Workloads whose pods do not exist yet as jobs
    (`optsched.adapters.kube.workloads`); or with Volcano's PodGroups and Queues, its gang sizes
    and queues (`optsched.adapters.kube.volcano`).

    `now` is the round's time, seconds since the epoch (default: the clock), the clock of pods'
    creation and start times. Raises one `InputError` listing every problem, each naming its
    object (`Pod/<namespace>/<name>`, `Node/<name>`) and field. A pending pod that no node could
    ever hold is not an error (Kubernetes keeps it pending): it is held, with its reason.
    """
    config = config or KubeConfig()
    now = time.time() if now is None else now
    problems = Problems()

    def docs(kind: str, objects: Iterable[Any]) -> list[dict[str, Any]]:
        """The API dicts of the objects; anything else is a problem naming its place."""
        out = []
        for i, obj in enumerate(objects):
            try:
                out.append(as_dict(obj))
            except TypeError as exc:
                problems.add(f"{kind}[{i}]", "", "type", str(exc))
        return out

    read = read_nodes(docs("Node", nodes), config, problems)
    cluster_queue_docs = docs("ClusterQueue", cluster_queues)
    kueue = read_kueue(cluster_queue_docs, docs("LocalQueue", local_queues), docs("ResourceFlavor", resource_flavors),
                       docs("Cohort", cohorts), docs("WorkloadPriorityClass", workload_priority_classes), config,
                       problems) if cluster_queue_docs else None
    groups, volcano_queues = docs("PodGroup", pod_groups), docs("Queue", queues)
    volcano = None
    if groups or volcano_queues:
        if kueue is not None:
            problems.add("Queue", "", "exclusive", "give Kueue's objects or Volcano's, not both")
        volcano = read_volcano(groups, volcano_queues, totals_of(read.nodes), config, problems)
    pod_docs = docs("Pod", pods)
    workload_jobs: dict[str, tuple[str, str]] = {}
    minimums: dict[str, dict[str, int]] = {}
    virtual_pods: list[dict[str, Any]] = []
    workload_docs = docs("Workload", workloads)
    if workload_docs:
        if kueue is None:
            problems.add("Workload", "", "requires", "Workloads need Kueue's ClusterQueues and LocalQueues")
        virtual_pods, minimums, workload_jobs = workload_pods(workload_docs, problems)
        pod_docs += virtual_pods
    pods_read = read_pods(pod_docs, config, read, docs("PriorityClass", priority_classes), now, problems, kueue,
                          volcano, minimums)
    problems.raise_if_any()
    assert read.topology is not None  # a node was read, else a problem was raised
    node_refs = [read.ref_of[n.id] for n in read.nodes]
    running_refs = [pods_read.job_ref[r.job.id] for r in pods_read.running]
    tenant_names = sorted({j.tenant for j in pods_read.jobs} | {r.job.tenant for r in pods_read.running})
    extra: dict[str, Any] = {}
    if volcano is not None and volcano.tenants:
        tenants: list[Any] = list(volcano.tenants)
        tenant_refs = [volcano.refs[t["name"]] for t in volcano.tenants]
        extra = {"resource_flavors": volcano.resource_flavors, "cohorts": volcano.cohorts}
        given = {t["name"] for t in tenants}
        for job in [*pods_read.jobs, *(r.job for r in pods_read.running)]:
            if job.tenant not in given:
                problems.add(pods_read.job_ref.get(job.id, job.id), "metadata.annotations", "unknown_reference",
                             f"Queue {job.tenant!r} was not given")
                given.add(job.tenant)
    elif kueue is None:
        tenants = [Tenant(name=name, preemption=config.preemption) for name in tenant_names]
        tenant_refs = [f"Tenant/{name}" for name in tenant_names]
    else:
        tenants = list(kueue.tenants) + ([{"name": UNMANAGED}] if UNMANAGED in tenant_names else [])
        tenant_refs = [kueue.refs[t["name"]] for t in kueue.tenants] + ["Tenant/" + UNMANAGED]
        extra = {"resource_flavors": kueue.resource_flavors, "cohorts": kueue.cohorts}
    cluster = problems.build(Cluster, {
        "topology": read.topology, "device_models": read.device_models, "nodes": read.nodes,
        "images": read.images, "tenants": tenants, "running": pods_read.running, **extra}, "Cluster", "")
    problems.raise_if_any()
    assert cluster is not None

    validate_read_cluster(cluster, {"nodes": node_refs, "running": running_refs, "tenants": tenant_refs})
    jobs, never = split_unsatisfiable(pods_read.jobs, cluster)
    held = list(pods_read.held) + [Held(pods_read.job_pods[job.id], "capacity", why) for job, why in never]
    queue = Queue(now=now, jobs=jobs)
    validate_read_queue(queue, cluster, [pods_read.job_ref[j.id] for j in jobs])
    ignored = (kueue.ignored if kueue is not None else []) + (volcano.ignored if volcano is not None else [])
    return Snapshot(cluster=cluster, queue=queue, replica_pod=pods_read.replica_pod, job_pods=pods_read.job_pods,
                    held=held, config=config, accelerator_of=read.accelerator_of, ignored=ignored + pods_read.ignored,
                    workloads=workload_jobs, workload_of_pod={
                        (p["metadata"]["namespace"], p["metadata"]["name"]):
                        f'{p["metadata"]["namespace"]}/{p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]}'
                        for p in virtual_pods})
