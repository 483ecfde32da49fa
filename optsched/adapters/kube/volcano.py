"""Volcano's objects -> gang sizes, job priorities and tenants (scheduling.volcano.sh/v1beta1).

What is read:
- **PodGroup** (namespaced): `metadata.namespace` / `metadata.name` (its pods carry
  `scheduling.k8s.io/group-name: <name>`); `spec.minMember` and `spec.minTaskMember` (per task:
  the role of `volcano.sh/task-spec`) -> the job's minimum replicas, the pods -> its maximum, so a
  group admits between `minMember` and all of its pods, or none (Volcano's gang plugin);
  `spec.queue` -> the job's tenant (default `default`, Volcano's default queue);
  `spec.priorityClassName` -> the job's priority (the PriorityClass's value). `spec.minResources`
  (Volcano's enqueue gate) is not modelled: it is listed in `VolcanoRead.ignored`.
- **Queue** (cluster-scoped) -> a tenant in the cohort `volcano` (every queue may use what the
  others leave idle, as Volcano's proportion and capacity plugins let them): its quota on every
  node (the resource flavor `volcano`, which holds every node) per resource is `spec.deserved`
  where given, else the queue's weight share (`spec.weight`, default 1) of the cluster's
  allocatable; `spec.capability` caps it (borrowing limit = capability - nominal);
  `spec.guarantee.resource` is never lent (lending limit = nominal - guarantee); `spec.weight` is
  its fair-share weight. Queues preempt lower-priority jobs of their own (Volcano's preempt
  action) and reclaim from queues that use more than their share (its reclaim action). A queue
  with `spec.reclaimable: false` keeps what it borrowed: its running pods are not evictable.
  `spec.parent` (hierarchical queues) is listed in `VolcanoRead.ignored`.

Pods name their queue without a PodGroup through the `scheduling.volcano.sh/queue-name`
annotation; a running pod annotated `volcano.sh/preemptable: "true"` may be evicted (unless
`optsched.io/preemptible` says otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from optsched.adapters.documents import Problems, get
from optsched.adapters.kube.config import KubeConfig
from optsched.adapters.kube.objects import in_units, named, quantity, string_map

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
"""The pod annotation naming its PodGroup."""
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
"""The pod annotation naming its Queue when it has no PodGroup."""
TASK_KEY = "volcano.sh/task-spec"
"""The pod annotation (or label) naming its task within a Volcano job."""
PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
"""Volcano's pod (and job) annotation `"true"`: the pod may be preempted or reclaimed."""
DEFAULT_QUEUE = "default"
COHORT = "volcano"
FLAVOR = "volcano"
"""The one resource flavor (every node) Volcano's per-queue quotas are written against."""


@dataclass(frozen=True)
class PodGroupRead:
    """One PodGroup's rules for its pods' job."""

    min_member: int | None
    min_task_member: dict[str, int]
    queue: str
    priority_class: str | None


@dataclass
class VolcanoRead:
    """What Volcano's objects say."""

    groups: dict[tuple[str, str], PodGroupRead] = field(default_factory=dict)
    """(namespace, PodGroup name) -> its rules."""
    tenants: list[dict[str, Any]] = field(default_factory=list)
    cohorts: list[dict[str, Any]] = field(default_factory=list)
    resource_flavors: list[dict[str, Any]] = field(default_factory=list)
    unreclaimable: set[str] = field(default_factory=set)
    """Queues whose running pods are not evictable (`reclaimable: false`)."""
    refs: dict[str, str] = field(default_factory=dict)
    """Tenant name -> `Queue/<name>`."""
    ignored: list[str] = field(default_factory=list)

    def queue_of(self, namespace: str, annotations: dict[str, str]) -> str:
        """The pod's queue: its PodGroup's, else its queue annotation's, else `default`."""
        group = annotations.get(GROUP_ANNOTATION)
        if group and (namespace, group) in self.groups:
            return self.groups[(namespace, group)].queue
        return annotations.get(QUEUE_ANNOTATION) or DEFAULT_QUEUE


def _resources(value: Any, ref: str, where: str, config: KubeConfig, problems: Problems) -> dict[str, float]:
    """A resource list (`cpu: 2`, `nvidia.com/gpu: 8`) as quota resources in optsched units."""
    out: dict[str, float] = {}
    if value is None:
        return out
    if not isinstance(value, dict):
        problems.add(ref, where, "type", "expected a map of resource names to quantities")
        return out
    for name, raw_amount in value.items():
        amount = quantity(raw_amount, ref, f"{where}.{name}", problems)
        if amount is None:
            continue
        key = config.quota_resource(name)
        out[key] = out.get(key, 0.0) + in_units(name, amount)
    return out


def read_volcano(pod_groups: list[dict[str, Any]], queues: list[dict[str, Any]], totals: dict[str, float],
                 config: KubeConfig, problems: Problems) -> VolcanoRead:
    """Read PodGroups and Queues (module docstring). `totals` is the cluster's allocatable per quota
    resource (`cpu`, `memory`, `gpu`, ...), the base of weight shares."""
    out = VolcanoRead()
    for obj in pod_groups:
        ref, name = named(obj, "PodGroup", problems)
        if name is None:
            continue
        namespace = get(obj, "metadata.namespace", str, ref, problems) or "default"
        min_member = get(obj, "spec.minMember", int, ref, problems)
        if min_member is not None and min_member < 0:
            problems.add(ref, "spec.minMember", "out_of_range", f"{min_member} is negative")
            min_member = None
        tasks: dict[str, int] = {}
        for task, count in (get(obj, "spec.minTaskMember", dict, ref, problems) or {}).items():
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                problems.add(ref, f"spec.minTaskMember.{task}", "type", "expected a non-negative integer")
            else:
                tasks[task] = count
        if get(obj, "spec.minResources", dict, ref, problems):
            out.ignored.append(f"{ref}.spec.minResources: Volcano's enqueue gate is not modelled (the round "
                               "places the pods or defers the group)")
        out.groups[(namespace, name)] = PodGroupRead(
            min_member=min_member, min_task_member=tasks,
            queue=get(obj, "spec.queue", str, ref, problems) or DEFAULT_QUEUE,
            priority_class=get(obj, "spec.priorityClassName", str, ref, problems) or None)
    read: list[tuple[str, str, float, dict[str, float], dict[str, float], dict[str, float]]] = []
    for obj in queues:
        ref, name = named(obj, "Queue", problems)
        if name is None:
            continue
        weight = get(obj, "spec.weight", int, ref, problems, 1)
        amounts = [_resources(get(obj, f"spec.{key}", dict, ref, problems), ref, f"spec.{key}", config, problems)
                   for key in ("deserved", "capability", "guarantee.resource")]
        if weight <= 0:
            problems.add(ref, "spec.weight", "out_of_range", f"{weight}: a queue's weight is at least 1")
            continue
        read.append((name, ref, float(weight), amounts[0], amounts[1], amounts[2]))
        if get(obj, "spec.reclaimable", bool, ref, problems, True) is False:
            out.unreclaimable.add(name)
        if get(obj, "spec.parent", str, ref, problems):
            out.ignored.append(f"{ref}.spec.parent: hierarchical queues are not modelled (each queue is a tenant "
                               "of one cohort)")
        string_map(get(obj, "metadata.labels", dict, ref, problems), ref, "metadata.labels", problems)
    if not read:
        return out
    total_weight = sum(w for _, _, w, _, _, _ in read)
    managed = sorted(set(totals) | {r for _, _, _, d, c, g in read for r in (*d, *c, *g)} - {"pods"})
    for name, ref, weight, deserved, capability, guarantee in read:
        quotas: dict[str, dict[str, float]] = {}
        for resource in managed:
            nominal = deserved.get(resource, totals.get(resource, 0.0) * weight / total_weight)
            if resource in capability:
                nominal = min(nominal, capability[resource])
            quota: dict[str, float] = {"nominal": nominal}
            if resource in capability:
                quota["borrowing_limit"] = max(0.0, capability[resource] - nominal)
            if resource in guarantee:
                quota["lending_limit"] = max(0.0, nominal - guarantee[resource])
            quotas[f"{FLAVOR}/{resource}"] = quota
        out.tenants.append({"name": name, "cohort": COHORT, "weight": weight, "quotas": quotas,
                            "preemption": {"within_tenant": "lower_priority", "reclaim_within_cohort": "any"}})
        out.refs[name] = ref
    out.cohorts.append({"name": COHORT})
    out.resource_flavors.append({"name": FLAVOR, "node_labels": {}})
    return out


def totals_of(nodes: list[Any]) -> dict[str, float]:
    """The cluster's allocatable per quota resource (`cpu` millicores, `memory` MiB, `gpu`, ...)
    from the Cluster's nodes (healthy devices only)."""
    out: dict[str, Decimal] = {}
    for node in nodes:
        for key, amount in (("cpu", node.capacity.get("cpu", 0.0)), ("memory", node.capacity.get("memory", 0.0))):
            out[key] = out.get(key, Decimal(0)) + Decimal(str(amount))
        if node.devices is not None:
            healthy = node.devices.count - len(set(node.devices.unhealthy))
            out["gpu"] = out.get("gpu", Decimal(0)) + Decimal(healthy)
    return {k: float(v) for k, v in out.items()}
