"""Kubernetes Pods -> queued jobs (pending pods) and running jobs (pods bound to a node).

Per Pod, what is read:
- `metadata` name, namespace, uid, labels, annotations, `creationTimestamp` (`submitted_at`);
- its request as kube-scheduler counts it: the sum of its containers' requests (a limit stands
  for an absent request, as the API server defaults it), the larger of that and each init
  container's (restartable "sidecar" init containers added to both), pod-level
  `spec.resources.requests` where given, plus `spec.overhead`; one replica also takes one of the
  node's `pods` (`KubeConfig.count_pods`);
- `spec.nodeSelector`, the required node affinity (`nodeSelectorTerms` with `matchExpressions`),
  `spec.tolerations`; `spec.priority`, else its `priorityClassName`'s value, else the global
  default class's, else 0;
- `spec.nodeName` and `status.phase`: a pod with a node is running (it holds its node's
  resources), a Pending pod without one is queued (if `KubeConfig.scheduler_name` is unset or
  names its `spec.schedulerName`), Succeeded and Failed pods are ignored;
- the container image, for image locality, when some node lists it in `status.images`.

Pods that carry the same group key (`KubeConfig.group_keys`: Kueue's pod groups, Volcano's
PodGroup annotation, coscheduling) in a namespace are one job `<namespace>/<group>`, a gang;
others are one job each, `<namespace>/<pod>`. Within a job, pods of one role
(`KubeConfig.role_keys`) and one spec are one task group, each pod one replica. Pending pods of
a group that also has running pods are the job `<namespace>/<group>/pending`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from optsched.adapters.documents import Problems, get, items, raw
from optsched.adapters.kube.config import (
    DEVICES_ANNOTATION,
    HOSTNAME_LABEL,
    PREEMPTIBLE_ANNOTATION,
    ROLE_ANNOTATION,
    KubeConfig,
)
from optsched.adapters.kube.kueue import PRIORITY_LABEL, QUEUE_LABEL, UNMANAGED, KueueRead
from optsched.adapters.kube.nodes import NodesRead
from optsched.adapters.kube.objects import (
    first_key,
    in_units,
    object_version,
    quantity,
    reference,
    string_map,
    timestamp,
)
from optsched.adapters.kube.volcano import GROUP_ANNOTATION, PREEMPTABLE_ANNOTATION, VolcanoRead
from optsched.model.base import PRIORITY_RANGE
from optsched.model.cluster import RunningJob
from optsched.model.queue import Job

TAS_ANNOTATIONS = (("kueue.x-k8s.io/podset-required-topology", "required"),
                   ("kueue.x-k8s.io/podset-preferred-topology", "preferred"))
"""Kueue's Topology Aware Scheduling annotations (a node label key naming a level) and their mode."""
KUEUE_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
"""Kueue's annotation on a pod group's pods: how many pods the group has in all."""
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True)
class PodRef:
    """A pod as a binding or an eviction names it."""

    namespace: str
    name: str
    uid: str | None = None

    def __str__(self) -> str:
        return f"Pod/{self.namespace}/{self.name}"


@dataclass
class PodRead:
    """One pod, read: where it belongs and what one replica of it is."""

    pod: PodRef
    job_key: str
    grouped: bool
    role: str | None
    group: dict[str, Any]
    """The task group document without `name` and `replicas`."""
    tenant: str
    priority: int
    created: float
    started: float | None
    node: str | None
    devices: list[int] | None
    preemptible: bool
    total_count: int | None
    topology: dict[str, str] | None = None
    """The job's topology wish from Kueue's TAS annotations (`{"level": ..., "mode": ...}`)."""
    local_queue: str | None = None
    """Its Kueue LocalQueue as `<namespace>/<name>`, when Kueue's objects are given and it names one."""


@dataclass
class PodMemo:
    """Pods read by an earlier `read_pods` call, by version (`pod_version`), kept for the next
    call in the same context (config, nodes, priority classes, queues: `context`, which the
    caller compares). A read that recorded a problem is not kept."""

    context: Hashable = None
    known: dict[Hashable, PodRead | None] = field(default_factory=dict)
    reused: int = 0
    """Pods taken from `known` by the last call."""


def pod_version(obj: dict[str, Any]) -> Hashable | None:
    """What identifies this version of a pod (`object_version`), with its `spec.nodeName` and
    devices annotation, which the service's own bindings set before the API server's next version.
    None without a resourceVersion (such a pod is read every time)."""
    version = object_version(obj)
    if version is None:
        return None
    spec, annotations = obj.get("spec"), obj["metadata"].get("annotations")
    return (*version, spec.get("nodeName") if isinstance(spec, dict) else None,
            annotations.get(DEVICES_ANNOTATION) if isinstance(annotations, dict) else None)


@dataclass
class Held:
    """Pending pods not offered to the solver this round, and why (they stay pending)."""

    pods: list[PodRef]
    reason: str
    detail: str


@dataclass
class PodsRead:
    """The queue's jobs, the running jobs, and which pod is which replica."""

    jobs: list[Job] = field(default_factory=list)
    running: list[RunningJob] = field(default_factory=list)
    replica_pod: dict[tuple[str, str, int], PodRef] = field(default_factory=dict)
    """(job id, group, replica) -> the pod that replica is."""
    job_pods: dict[str, list[PodRef]] = field(default_factory=dict)
    """Job id (queued or running) -> its pods."""
    held: list[Held] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    """Fields given that are not modelled, as `Kind/namespace/name.field: why`."""
    job_ref: dict[str, str] = field(default_factory=dict)
    """Job id -> what errors about it name (its first pod)."""


def priority_values(classes: list[dict[str, Any]], problems: Problems) -> tuple[dict[str, int], int]:
    """PriorityClass name -> value, and the global default's value (0 when none is)."""
    values: dict[str, int] = {}
    default = 0
    for obj in classes:
        ref = reference(obj, "PriorityClass")
        name = get(obj, "metadata.name", str, ref, problems)
        value = obj.get("value")
        if not name or isinstance(value, bool) or not isinstance(value, int) \
                or not PRIORITY_RANGE[0] <= value <= PRIORITY_RANGE[1]:
            problems.add(ref, "value", "priority", "a PriorityClass needs a name and an int32 value")
            continue
        values[name] = value
        if obj.get("globalDefault") is True:
            default = value
    return values, default


def _add(total: dict[str, Decimal], more: dict[str, Decimal]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, Decimal(0)) + v


def _max(total: dict[str, Decimal], more: dict[str, Decimal]) -> None:
    for k, v in more.items():
        total[k] = max(total.get(k, Decimal(0)), v)


def _requests(res: Any, ref: str, where: str, problems: Problems) -> dict[str, Decimal]:
    """One container's requests; a limit stands for an absent request (the API server's default)."""
    if not isinstance(res, dict):
        return {}
    out: dict[str, Decimal] = {}
    for kind in ("limits", "requests"):  # requests last: they win
        for name, given in (get(res, kind, dict, ref, problems, {}) or {}).items():
            amount = quantity(given, ref, f"{where}.{kind}.{name}", problems)
            if amount is not None:
                out[name] = amount
    return out


def pod_requests(obj: dict[str, Any], ref: str, problems: Problems) -> dict[str, Decimal]:
    """The pod's effective request per resource, as kube-scheduler's NodeResourcesFit counts it."""
    total: dict[str, Decimal] = {}
    for where, c in items(get(obj, "spec.containers", list, ref, problems), ref, "spec.containers", problems):
        _add(total, _requests(c.get("resources"), ref, f"{where}.resources", problems))
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for where, c in items(get(obj, "spec.initContainers", list, ref, problems), ref, "spec.initContainers",
                          problems):
        req = _requests(c.get("resources"), ref, f"{where}.resources", problems)
        if c.get("restartPolicy") == "Always":
            _add(total, req)
            _add(sidecars, req)
            _max(init_peak, sidecars)
        else:
            step = dict(req)
            _add(step, sidecars)
            _max(init_peak, step)
    _max(total, init_peak)
    pod_level = _requests(get(obj, "spec.resources", dict, ref, problems), ref, "spec.resources", problems)
    total.update({k: v for k, v in pod_level.items() if k in ("cpu", "memory")})
    for name, given in (get(obj, "spec.overhead", dict, ref, problems, {}) or {}).items():
        amount = quantity(given, ref, f"spec.overhead.{name}", problems)
        if amount is not None:
            _add(total, {name: amount})
    return total


def _request_doc(req: dict[str, Decimal], config: KubeConfig, ref: str, problems: Problems) -> dict[str, Any]:
    accelerators = {a.resource for a in config.accelerators}
    doc: dict[str, Any] = {}
    resources: dict[str, float] = {}
    asked = [name for name in req if name in accelerators and req[name] > 0]
    if len(asked) > 1:
        problems.add(ref, "spec.containers", "accelerators", f"asks for devices of {len(asked)} kinds: {asked}")
    for name, amount in req.items():
        if name in accelerators:
            if amount != amount.to_integral_value():
                problems.add(ref, "spec.containers", "quantity", f"{name} must be a whole count, got {amount}")
            doc["gpu"] = float(amount)
        elif name in ("cpu", "memory"):
            doc[name] = in_units(name, amount)
        elif name in config.rdma_resources:
            doc["rdma_nics"] = doc.get("rdma_nics", 0.0) + float(amount)
        elif name != "pods" and amount > 0:
            resources[name] = in_units(name, amount)
    if config.count_pods:
        resources["pods"] = 1.0
    if resources:
        doc["resources"] = resources
    return doc


def _affinity(obj: dict[str, Any], ref: str, problems: Problems) -> list[dict[str, Any]] | None:
    """The required node affinity terms; None when no term can match (Kubernetes' empty term)."""
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    raw = get(obj, path, list, ref, problems)
    if raw is None:
        return []
    terms = []
    for where, term in items(raw, ref, path, problems):
        if term.get("matchFields"):
            problems.add(ref, f"{where}.matchFields", "unsupported",
                         "matchFields (node names) are not read; use matchExpressions on node labels")
            continue
        exprs = []
        for ewhere, e in items(term.get("matchExpressions"), ref, f"{where}.matchExpressions", problems):
            if e.get("operator") not in OPERATORS:
                problems.add(ref, f"{ewhere}.operator", "operator", f"{e.get('operator')!r} is not one of {OPERATORS}")
                continue
            exprs.append({"key": e.get("key"), "operator": e["operator"], "values": e.get("values") or []})
        if exprs:
            terms.append({"match_expressions": exprs})
    return terms or None


def _tolerations(obj: dict[str, Any], ref: str, problems: Problems) -> list[dict[str, Any]]:
    out = []
    for where, t in items(get(obj, "spec.tolerations", list, ref, problems), ref, "spec.tolerations", problems):
        operator = t.get("operator") or "Equal"  # Kubernetes' default operator
        if operator not in ("Equal", "Exists"):
            problems.add(ref, f"{where}.operator", "operator", f"{operator!r} is not Equal or Exists")
            continue
        out.append({"key": t.get("key") or None, "operator": operator, "value": t.get("value") or None,
                    "effect": t.get("effect") or None})
    return out


def _image(obj: dict[str, Any], nodes: NodesRead) -> str | None:
    known = []
    containers = raw(obj, "spec.containers")
    for c in containers if isinstance(containers, list) else []:
        image = c.get("image") if isinstance(c, dict) else None
        if isinstance(image, str) and image in nodes.images:
            known.append((sum(layer.bytes for layer in nodes.images[image]), image))
    return max(known)[1] if known else None


def _devices(annotations: dict[str, str], ref: str, problems: Problems) -> list[int] | None:
    raw = annotations.get(DEVICES_ANNOTATION)
    if raw is None:
        return None
    try:
        return [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        problems.add(ref, f"metadata.annotations.{DEVICES_ANNOTATION}", "devices",
                     f"{raw!r} is not a comma-separated list of device indices")
        return None


def read_pod(obj: dict[str, Any], config: KubeConfig, nodes: NodesRead, classes: tuple[dict[str, int], int],
             problems: Problems, kueue: KueueRead | None = None, volcano: VolcanoRead | None = None) -> PodRead | None:
    """One pod, or None when it is not the round's business (finished, deleted while pending,
    for another scheduler) or could not be read (the problem is recorded). With Kueue's objects,
    its tenant is its LocalQueue's ClusterQueue (`UNMANAGED` in none) and a WorkloadPriorityClass
    label sets its priority."""
    ref = reference(obj, "Pod")
    name = get(obj, "metadata.name", str, ref, problems)
    if not name:
        problems.add(ref, "metadata.name", "required", "a Pod needs a name (the API server gives one)")
        return None
    namespace = get(obj, "metadata.namespace", str, ref, problems) or "default"
    phase = get(obj, "status.phase", str, ref, problems, "Pending")
    node = get(obj, "spec.nodeName", str, ref, problems) or None
    if phase in ("Succeeded", "Failed"):
        return None
    deleting = raw(obj, "metadata.deletionTimestamp") is not None
    if node is None and (deleting or (config.scheduler_name is not None and
                                      get(obj, "spec.schedulerName", str, ref, problems) != config.scheduler_name)):
        return None
    labels = string_map(get(obj, "metadata.labels", dict, ref, problems), ref, "metadata.labels", problems)
    annotations = string_map(get(obj, "metadata.annotations", dict, ref, problems), ref, "metadata.annotations",
                             problems)
    group_value = first_key(config.group_keys, labels, annotations)
    priority = get(obj, "spec.priority", int, ref, problems)
    if priority is None:
        class_name = get(obj, "spec.priorityClassName", str, ref, problems)
        if class_name and class_name not in classes[0]:
            problems.add(ref, "spec.priorityClassName", "unknown_reference",
                         f"PriorityClass {class_name!r} was not given")
        priority = classes[0].get(class_name, classes[1]) if class_name else classes[1]
    tenant = labels.get(config.tenant_label, "default") if config.tenant_label else "default"
    local_queue = None
    if kueue is not None:
        tenant = kueue.tenant_of(namespace, labels) or UNMANAGED
        local_queue = kueue.local_queue_of(namespace, labels)
        workload_class = labels.get(PRIORITY_LABEL)
        if workload_class is not None:
            if workload_class in kueue.priorities:
                priority = kueue.priorities[workload_class]
            else:
                problems.add(ref, f"metadata.labels.{PRIORITY_LABEL}", "unknown_reference",
                             f"WorkloadPriorityClass {workload_class!r} was not given")
    preemptible = annotations.get(PREEMPTIBLE_ANNOTATION)
    evictable = (preemptible == "true") if preemptible in ("true", "false") else config.running_preemptible
    if volcano is not None:
        tenant = volcano.queue_of(namespace, annotations)
        pod_group = volcano.groups.get((namespace, annotations.get(GROUP_ANNOTATION, "")))
        if pod_group is not None and pod_group.priority_class is not None:
            if pod_group.priority_class in classes[0]:
                priority = classes[0][pod_group.priority_class]
            else:
                problems.add(ref, f"metadata.annotations.{GROUP_ANNOTATION}", "unknown_reference",
                             f"its PodGroup's PriorityClass {pod_group.priority_class!r} was not given")
        marked = annotations.get(PREEMPTABLE_ANNOTATION)
        if marked in ("true", "false") and preemptible is None:
            evictable = marked == "true"  # Volcano's own marker, unless optsched's says otherwise
        if tenant in volcano.unreclaimable:
            evictable = False  # Volcano reclaims nothing from a queue with reclaimable: false
    affinity = _affinity(obj, ref, problems)
    group: dict[str, Any] = {
        "request": _request_doc(pod_requests(obj, ref, problems), config, ref, problems),
        "node_selector": string_map(get(obj, "spec.nodeSelector", dict, ref, problems), ref, "spec.nodeSelector",
                                    problems),
        "node_affinity": affinity if affinity is not None else [],
        "tolerations": _tolerations(obj, ref, problems),
    }
    if affinity is None:  # only empty terms: Kubernetes matches no node with them
        group["node_affinity"] = [{"match_expressions": [{"key": "optsched.io/no-node", "operator": "Exists"}]}]
    image = _image(obj, nodes)
    if image is not None:
        group["image"] = image
    total = annotations.get(KUEUE_TOTAL_COUNT)
    return PodRead(
        pod=PodRef(namespace, name, get(obj, "metadata.uid", str, ref, problems)),
        job_key=f"{namespace}/{group_value or name}", grouped=group_value is not None,
        role=annotations.get(ROLE_ANNOTATION) or first_key(config.role_keys, labels, annotations), group=group,
        tenant=tenant, priority=priority, local_queue=local_queue,
        created=timestamp(raw(obj, "metadata.creationTimestamp"), ref, "metadata.creationTimestamp", problems) or 0.0,
        started=timestamp(raw(obj, "status.startTime"), ref, "status.startTime", problems),
        node=node, devices=_devices(annotations, ref, problems),
        preemptible=evictable,
        total_count=int(total) if total is not None and total.isdigit() else None,
        topology=_topology_wish(annotations, config, ref, problems),
    )


def _topology_wish(annotations: dict[str, str], config: KubeConfig, ref: str,
                   problems: Problems) -> dict[str, str] | None:
    """Kueue's `podset-required-topology` / `podset-preferred-topology` (a level's node label key;
    `kubernetes.io/hostname` is one node) as the job's topology wish."""
    for key, mode in TAS_ANNOTATIONS:
        label = annotations.get(key)
        if label is None:
            continue
        if label == HOSTNAME_LABEL:
            return {"level": "node", "mode": mode}
        level = next((t.level for t in config.topology if t.label == label), None)
        if level is None:
            problems.add(ref, f"metadata.annotations.{key}", "unknown_reference",
                         f"{label!r} is not the label of a KubeConfig.topology level "
                         f"({', '.join(t.label for t in config.topology) or 'none configured'})")
            return None
        return {"level": level, "mode": mode}
    return None


def _task_groups(pods: list[PodRead]) -> list[tuple[str, dict[str, Any], list[PodRead]]]:
    """(group name, group document, its pods): one group per (role, spec), in the pods' order."""
    by_spec: dict[tuple[str | None, str], list[PodRead]] = defaultdict(list)
    for p in pods:
        by_spec[(p.role, json.dumps(p.group, sort_keys=True))].append(p)
    out = []
    used: set[str] = set()
    for (role, _), members in by_spec.items():
        base = role or ("pod" if len(pods) == 1 else "pods")
        name, k = base, 1
        while name in used:
            name, k = f"{base}-{k}", k + 1
        used.add(name)
        out.append((name, members[0].group, members))
    return out


def _job_doc(job_id: str, pods: list[PodRead], groups: list[tuple[str, dict[str, Any], list[PodRead]]],
             problems: Problems) -> dict[str, Any]:
    first = pods[0]
    for p in pods[1:]:
        for attr in ("tenant", "priority", "topology", "local_queue"):
            if getattr(p, attr) != getattr(first, attr):
                problems.add(str(p.pod), "metadata", "inconsistent_group",
                             f"{attr} {getattr(p, attr)!r} differs from {getattr(first, attr)!r} of {first.pod} "
                             f"in the same job {job_id!r}")
    topology = {"topology": first.topology} if first.topology is not None else {}
    queue = {"local_queue": first.local_queue} if first.local_queue is not None else {}
    return {
        **topology, **queue, "id": job_id, "tenant": first.tenant, "priority": first.priority,
        "submitted_at": min(p.created for p in pods),
        "groups": [{"name": name, "replicas": {"min": len(members), "max": len(members)}, **doc}
                   for name, doc, members in groups],
    }


def read_pods(objects: list[dict[str, Any]], config: KubeConfig, nodes: NodesRead,
              priority_classes: list[dict[str, Any]], now: float, problems: Problems,
              kueue: KueueRead | None = None, volcano: VolcanoRead | None = None,
              minimums: dict[str, dict[str, int]] | None = None, memo: PodMemo | None = None) -> PodsRead:
    """Read every pod into queued and running jobs; problems are recorded, not raised. With
    Kueue's objects, pending pods in no LocalQueue are held (Kueue does not admit them); with
    Volcano's PodGroups, a group admits from its `minMember` pods to all of them; `minimums` (job
    key -> group -> fewest replicas: a Workload's `minCount`) lowers a group's minimum. With a
    `memo` of the same context, a pod of the same version is not read again (`PodMemo`)."""
    classes = priority_values(priority_classes, problems)
    kept: dict[Hashable, PodRead | None] = {}

    def read_one(obj: dict[str, Any]) -> PodRead | None:
        version = pod_version(obj) if memo is not None else None
        if memo is not None and version is not None and version in memo.known:
            memo.reused += 1
            got = kept[version] = memo.known[version]
            return got
        before = len(problems.issues)
        got = read_pod(obj, config, nodes, classes, problems, kueue, volcano)
        if version is not None and len(problems.issues) == before:
            kept[version] = got
        return got

    if memo is not None:
        memo.reused = 0
    pods = [p for obj in objects if (p := read_one(obj)) is not None]
    if memo is not None:
        memo.known = kept
    seen: set[tuple[str, str]] = set()
    for p in pods:
        if (p.pod.namespace, p.pod.name) in seen:
            problems.add(str(p.pod), "metadata.name", "duplicate_id", "pod given twice")
        seen.add((p.pod.namespace, p.pod.name))
    out = PodsRead()
    by_job: dict[str, list[PodRead]] = defaultdict(list)
    for p in sorted(pods, key=lambda p: (p.pod.namespace, p.pod.name)):
        by_job[p.job_key].append(p)
    taken = _taken_devices(pods, nodes)
    for key, members in by_job.items():
        running = [p for p in members if p.node is not None]
        pending = [p for p in members if p.node is None]
        if running:
            _running_job(key, running, nodes, taken, now, out, problems)
        if pending:
            job_id = f"{key}/pending" if running else key
            total = max((p.total_count or 0) for p in members)
            if kueue is not None and pending[0].tenant == UNMANAGED:
                out.held.append(Held([p.pod for p in pending], "other",
                                     f"in no Kueue LocalQueue (label {QUEUE_LABEL}): Kueue does not admit it"))
                continue
            if total > len(members):
                out.held.append(Held([p.pod for p in pending], "gang",
                                     f"pod group {key!r} has {len(members)} of its {total} pods"))
                continue
            groups = _task_groups(pending)
            doc = _job_doc(job_id, pending, groups, problems)
            if volcano is not None and members[0].grouped:
                _pod_group_minimum(doc, key, groups, len(running), volcano, out, problems)
            for g in doc["groups"]:
                if minimums and g["name"] in minimums.get(key, {}):
                    g["replicas"]["min"] = minimums[key][g["name"]]
            job = problems.build(Job, doc, str(pending[0].pod), "spec")
            if job is None:
                continue
            out.jobs.append(job)
            out.job_ref[job_id] = str(pending[0].pod)
            out.job_pods[job_id] = [p.pod for p in pending]
            for name, _, group_pods in groups:
                for i, p in enumerate(group_pods):
                    out.replica_pod[(job_id, name, i)] = p.pod
    return out


def _pod_group_minimum(doc: dict[str, Any], key: str, groups: list[tuple[str, dict[str, Any], list[PodRead]]],
                       running: int, volcano: VolcanoRead, out: PodsRead, problems: Problems) -> None:
    """A Volcano PodGroup's `minMember` / `minTaskMember` as the job's minimum replicas (the pods
    already running count towards them); every pod is still its maximum."""
    namespace, _, name = key.partition("/")
    pod_group = volcano.groups.get((namespace, name))
    if pod_group is None:
        return
    doc["gang"] = True
    if pod_group.min_task_member:
        for g in doc["groups"]:
            if g["name"] in pod_group.min_task_member:
                g["replicas"]["min"] = min(g["replicas"]["max"], pod_group.min_task_member[g["name"]])
        return
    if pod_group.min_member is None:
        return
    needed = max(0, pod_group.min_member - running)
    if len(doc["groups"]) == 1:
        g = doc["groups"][0]
        g["replicas"]["min"] = min(g["replicas"]["max"], needed)
        if g["replicas"]["min"] == 0:
            doc["gang"] = False  # the group's minimum already runs: each further pod stands alone
    elif needed < sum(g["replicas"]["max"] for g in doc["groups"]):
        out.ignored.append(f"PodGroup/{namespace}/{name}.spec.minMember: {pod_group.min_member} over "
                           f"{len(doc['groups'])} tasks without minTaskMember cannot be split: all pods are required")


def _taken_devices(pods: list[PodRead], nodes: NodesRead) -> dict[str, set[int]]:
    """Per node, the device indices that running pods' annotations name."""
    taken: dict[str, set[int]] = defaultdict(set)
    for p in pods:
        if p.node is not None and p.devices:
            taken[p.node].update(p.devices)
    return taken


def _running_job(key: str, pods: list[PodRead], nodes: NodesRead, taken: dict[str, set[int]], now: float,
                 out: PodsRead, problems: Problems) -> None:
    groups = _task_groups(pods)
    doc = _job_doc(key, pods, groups, problems)
    doc.pop("topology", None)  # where it runs is a fact of the cluster, not a wish to check again
    doc["preemptible"] = all(p.preemptible for p in pods)
    placements = []
    for name, group, members in groups:
        gpus = int(group["request"].get("gpu", 0))
        for i, p in enumerate(members):
            assert p.node is not None
            if p.node not in nodes.ref_of:
                problems.add(str(p.pod), "spec.nodeName", "unknown_reference", f"node {p.node!r} was not given")
                continue
            devices = p.devices if p.devices is not None else _free_devices(p, gpus, nodes, taken, problems)
            placements.append({"group": name, "replica": i, "node": p.node, "devices": devices})
            out.replica_pod[(key, name, i)] = p.pod
    if not placements:
        return  # every pod names a node that was not given (recorded above)
    started = min((p.started if p.started is not None else p.created) for p in pods)
    running = problems.build(RunningJob, {"job": doc, "started_at": started,
                                          "checkpoint_age_s": max(0.0, now - started), "placements": placements},
                             str(pods[0].pod), "spec")
    if running is not None:
        out.running.append(running)
        out.job_ref[key] = str(pods[0].pod)
        out.job_pods[key] = [p.pod for p in pods]


def _free_devices(p: PodRead, gpus: int, nodes: NodesRead, taken: dict[str, set[int]],
                  problems: Problems) -> list[int]:
    """The lowest free indices (healthy first) for a running pod no annotation says the devices of:
    the device plugin does not publish which devices it gave a pod."""
    if gpus == 0:
        return []
    assert p.node is not None
    count = nodes.device_count.get(p.node, 0)
    unhealthy = nodes.unhealthy.get(p.node, set())
    free = [d for d in range(count) if d not in taken[p.node]]
    free.sort(key=lambda d: (d in unhealthy, d))
    if len(free) < gpus:
        problems.add(str(p.pod), "spec.nodeName", "over_capacity",
                     f"holds {gpus} devices of {p.node!r}, which has {len(free)} not held by other pods")
        return free
    chosen = free[:gpus]
    taken[p.node].update(chosen)
    return chosen
