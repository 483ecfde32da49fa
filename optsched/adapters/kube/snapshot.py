"""A cluster's Kubernetes objects -> one round's Cluster and Queue, and which pod is which replica."""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from optsched.adapters.documents import Problems, split_unsatisfiable, validate_read_cluster, validate_read_queue
from optsched.adapters.kube.config import KubeConfig
from optsched.adapters.kube.kueue import UNMANAGED, read_kueue
from optsched.adapters.kube.nodes import NodesRead, read_nodes
from optsched.adapters.kube.objects import as_dict, object_version
from optsched.adapters.kube.pods import Held, PodMemo, PodRef, read_pods
from optsched.adapters.kube.volcano import read_volcano, totals_of
from optsched.adapters.kube.workloads import workload_pods
from optsched.latency import without_gc
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


@dataclass
class SnapshotCache:
    """What `snapshot` read in the last call given this cache, kept for the next: a service reads
    its whole cluster every round, and most objects are the same as in the round before.

    An object is the same when its name, uid and `metadata.resourceVersion` are (the API server
    makes a new resourceVersion for every change), and for a Pod its `spec.nodeName` and devices
    annotation too (the service's own bindings set them before the API server's next version).
    The Nodes are read again unless every one of them is the same, and the pods that are the
    same are not read again unless the config, a Node, a PriorityClass or one of Kueue's or
    Volcano's objects changed. Objects without a resourceVersion are read every time; a read
    that recorded a problem is not kept. Not thread-safe: one cache per round loop."""

    nodes: tuple[Hashable, NodesRead] | None = None
    pods: PodMemo = field(default_factory=PodMemo)
    nodes_reused: bool = False
    """Whether the last call reused the Nodes' read."""

    @property
    def pods_reused(self) -> int:
        """Pods the last call did not read again."""
        return self.pods.reused


def _versions(objects: list[dict[str, Any]]) -> tuple[Hashable, ...] | None:
    """The versions of every object, None when one has none."""
    out = []
    for obj in objects:
        v = object_version(obj)
        if v is None:
            return None
        out.append(v)
    return tuple(out)


@without_gc  # reading makes no cyclic garbage: no collection need walk the listing
def snapshot(nodes: Iterable[Any], pods: Iterable[Any], priority_classes: Iterable[Any] = (), *,
             cluster_queues: Iterable[Any] = (), local_queues: Iterable[Any] = (),
             resource_flavors: Iterable[Any] = (), cohorts: Iterable[Any] = (),
             workload_priority_classes: Iterable[Any] = (), workloads: Iterable[Any] = (),
             pod_groups: Iterable[Any] = (),
             queues: Iterable[Any] = (), config: KubeConfig | None = None, now: float | None = None,
             cache: SnapshotCache | None = None) -> Snapshot:
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

    With a `cache` (the previous call's, `SnapshotCache`), objects the API server has not changed
    since are not read again: the same Snapshot, sooner.
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

    node_docs = docs("Node", nodes)
    config_key = config.model_dump_json() if cache is not None else None
    node_versions = _versions(node_docs) if cache is not None else None
    nodes_key = None if node_versions is None else (config_key, node_versions)
    if cache is not None and nodes_key is not None and cache.nodes is not None and cache.nodes[0] == nodes_key:
        read, cache.nodes_reused = cache.nodes[1], True
    else:
        before = len(problems.issues)
        read = read_nodes(node_docs, config, problems)
        if cache is not None:
            cache.nodes_reused = False
            cache.nodes = (nodes_key, read) if nodes_key is not None and len(problems.issues) == before else None
    cluster_queue_docs = docs("ClusterQueue", cluster_queues)
    local_queue_docs, flavor_docs = docs("LocalQueue", local_queues), docs("ResourceFlavor", resource_flavors)
    cohort_docs, wpc_docs = docs("Cohort", cohorts), docs("WorkloadPriorityClass", workload_priority_classes)
    kueue = read_kueue(cluster_queue_docs, local_queue_docs, flavor_docs, cohort_docs, wpc_docs, config,
                       problems) if cluster_queue_docs else None
    groups, volcano_queues = docs("PodGroup", pod_groups), docs("Queue", queues)
    class_docs = docs("PriorityClass", priority_classes)
    if cache is not None:  # what a pod's read depends on besides the pod: its context
        context = (nodes_key, *(_versions(d) for d in (cluster_queue_docs, local_queue_docs, flavor_docs, cohort_docs,
                                                        wpc_docs, groups, volcano_queues, class_docs)))
        if any(part is None for part in context) or context != cache.pods.context:
            cache.pods.known = {}
        cache.pods.context = context
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
    pods_read = read_pods(pod_docs, config, read, class_docs, now, problems, kueue, volcano, minimums,
                          memo=cache.pods if cache is not None else None)
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
        extra = {"resource_flavors": kueue.resource_flavors, "cohorts": kueue.cohorts,
                 "local_queues": kueue.local_queues, "fair_sharing": config.kueue_fair_sharing,
                 "admission_fair_sharing": config.kueue_admission_fair_sharing}
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
