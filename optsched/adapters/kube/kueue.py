"""Kueue's objects -> the Cluster's tenants, resource flavors and cohorts, and each pod's tenant.

What is read (kueue.x-k8s.io v1beta1 and v1beta2, which differ here only in names noted below):
- **ResourceFlavor**: `metadata.name`, `spec.nodeLabels` (the flavor's nodes). `spec.nodeTaints`
  and `spec.tolerations` are not modelled (the nodes' own taints and the pods' own tolerations
  decide); a flavor that sets them is reported in `KueueRead.ignored`.
- **ClusterQueue** -> a tenant: `spec.cohort` (v1beta1) or `spec.cohortName` (v1beta2);
  `spec.resourceGroups[].flavors[]` in order, each resource's `nominalQuota`, `borrowingLimit`,
  `lendingLimit` -> the quota `<flavor>/<resource>` (an accelerator resource is `gpu`; cpu in
  millicores, memory in MiB, as requests are); `spec.preemption` (`withinClusterQueue`,
  `reclaimWithinCohort`, `borrowWithinCohort.policy` / `maxPriorityThreshold`);
  `spec.flavorFungibility` (`whenCanBorrow`: `Borrow` / `MayStopSearch` / `TryNextFlavor`,
  `whenCanPreempt`: `Preempt` / `MayStopSearch` / `TryNextFlavor`); `spec.fairSharing.weight`.
  `spec.queueingStrategy`, `namespaceSelector`, `admissionChecks` and `stopPolicy` are not read.
- **LocalQueue**: `metadata.namespace` / `metadata.name` -> `spec.clusterQueue`. A pod's tenant is
  the ClusterQueue of the LocalQueue its `kueue.x-k8s.io/queue-name` label names in its namespace.
- **Cohort** (v1alpha1, v1beta2): `metadata.name`, `spec.parentName` (`spec.parent` accepted),
  `spec.resourceGroups` as a ClusterQueue's -> a cohort with its own quota.
- **WorkloadPriorityClass**: `metadata.name`, `value`; a pod labelled
  `kueue.x-k8s.io/priority-class` takes that value as its priority (Kueue's workload priority).

Pods Kueue does not manage (no LocalQueue) are not queued when Kueue's objects are given (Kueue
leaves them to kube-scheduler; they are held, with the reason); those already running count, in
the tenant `UNMANAGED`, which has no quota.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from optsched.adapters.documents import Problems, get, items
from optsched.adapters.kube.config import KubeConfig
from optsched.adapters.kube.objects import in_units, named, quantity, reference, string_map

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The pod label naming its LocalQueue."""
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
"""The pod label naming its WorkloadPriorityClass."""
UNMANAGED = "unmanaged"
"""The tenant of running pods in no LocalQueue (no quota: their usage is what it is)."""

WITHIN = {"Never": "never", "LowerPriority": "lower_priority",
          "LowerOrNewerEqualPriority": "lower_or_newer_equal_priority"}
RECLAIM = {"Never": "never", "LowerPriority": "lower_priority", "Any": "any"}
BORROW = {"Never": "never", "LowerPriority": "lower_priority"}
FUNGIBILITY = {"Borrow": "may_stop_search", "Preempt": "may_stop_search", "MayStopSearch": "may_stop_search",
               "TryNextFlavor": "try_next_flavor"}


@dataclass
class KueueRead:
    """What Kueue's objects say, in documents' terms."""

    tenants: list[dict[str, Any]] = field(default_factory=list)
    resource_flavors: list[dict[str, Any]] = field(default_factory=list)
    cohorts: list[dict[str, Any]] = field(default_factory=list)
    cluster_queue_of: dict[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, LocalQueue) -> ClusterQueue."""
    priorities: dict[str, int] = field(default_factory=dict)
    """WorkloadPriorityClass name -> value."""
    ignored: list[str] = field(default_factory=list)
    """Fields given that are not modelled, as `Kind/name.field: why`."""
    refs: dict[str, str] = field(default_factory=dict)
    """Tenant name -> `ClusterQueue/<name>` (what errors name)."""

    local_queues: list[dict[str, Any]] = field(default_factory=list)
    """LocalQueue documents (`<namespace>/<name>`, tenant, weight, consumed usage)."""

    def tenant_of(self, namespace: str, labels: dict[str, str]) -> str | None:
        """The ClusterQueue of the pod's LocalQueue, or None when it names none that exists."""
        queue = labels.get(QUEUE_LABEL)
        return self.cluster_queue_of.get((namespace, queue)) if queue else None

    def local_queue_of(self, namespace: str, labels: dict[str, str]) -> str | None:
        """The pod's LocalQueue as `<namespace>/<name>`, or None when it names none that exists."""
        queue = labels.get(QUEUE_LABEL)
        return f"{namespace}/{queue}" if queue and (namespace, queue) in self.cluster_queue_of else None


def _quotas(obj: dict[str, Any], ref: str, config: KubeConfig, problems: Problems) -> dict[str, dict[str, float]]:
    """`spec.resourceGroups` as quotas `<flavor>/<resource>`, in the flavors' order."""
    out: dict[str, dict[str, float]] = {}
    for gwhere, group in items(get(obj, "spec.resourceGroups", list, ref, problems), ref, "spec.resourceGroups",
                               problems):
        for fwhere, flavor in items(group.get("flavors"), ref, f"{gwhere}.flavors", problems):
            fname = flavor.get("name")
            if not isinstance(fname, str) or not fname:
                problems.add(ref, f"{fwhere}.name", "required", "a flavor needs a name")
                continue
            for rwhere, res in items(flavor.get("resources"), ref, f"{fwhere}.resources", problems):
                rname = res.get("name")
                if not isinstance(rname, str) or not rname:
                    problems.add(ref, f"{rwhere}.name", "required", "a resource needs a name")
                    continue
                key = f"{fname}/{config.quota_resource(rname)}"
                if key in out:
                    problems.add(ref, f"{rwhere}.name", "duplicate_id", f"{rname} of flavor {fname} given twice")
                    continue
                quota: dict[str, float] = {}
                for field_name, doc_name in (("nominalQuota", "nominal"), ("borrowingLimit", "borrowing_limit"),
                                             ("lendingLimit", "lending_limit")):
                    if res.get(field_name) is None:
                        continue
                    amount = quantity(res[field_name], ref, f"{rwhere}.{field_name}", problems)
                    if amount is not None:
                        quota[doc_name] = in_units(rname, amount)
                out[key] = quota
    return out


def _fair_weight(obj: dict[str, Any], ref: str, doc: dict[str, Any], out: KueueRead, problems: Problems) -> None:
    """`spec.fairSharing.weight` of a ClusterQueue or Cohort as the document's `weight`; 0 (Kueue:
    such a node borrows at an infinite share) is not modelled: weight 1, listed as ignored."""
    weight = get(obj, "spec.fairSharing.weight", (str, int, float), ref, problems)
    if weight is None:
        return
    amount = quantity(weight, ref, "spec.fairSharing.weight", problems)
    if amount is not None and amount > 0:
        doc["weight"] = float(amount)
    elif amount is not None:
        out.ignored.append(f"{ref}.spec.fairSharing.weight: 0 (an infinite share when borrowing) is not "
                           "modelled; weight 1 is used")


def _local_queue(obj: dict[str, Any], ref: str, name: str, tenant: str, config: KubeConfig,
                 problems: Problems) -> dict[str, Any]:
    """A LocalQueue document: its fair-sharing weight (`spec.fairSharing.weight`, default 1) and its
    decayed usage (`status.fairSharing.admissionFairSharingStatus.consumedResources`, in optsched's
    units: an accelerator resource as `gpu`)."""
    doc: dict[str, Any] = {"name": name, "tenant": tenant}
    weight = get(obj, "spec.fairSharing.weight", (str, int, float), ref, problems)
    if weight is not None:
        amount = quantity(weight, ref, "spec.fairSharing.weight", problems)
        if amount is not None:
            doc["weight"] = float(amount)
    where = "status.fairSharing.admissionFairSharingStatus.consumedResources"
    consumed: dict[str, float] = {}
    for rname, value in (get(obj, where, dict, ref, problems) or {}).items():
        amount = quantity(value, ref, f"{where}.{rname}", problems)
        if amount is not None:
            key = config.quota_resource(str(rname))
            consumed[key] = consumed.get(key, 0.0) + in_units(str(rname), amount)
    if consumed:
        doc["consumed"] = consumed
    return doc


def _known(value: Any, table: dict[str, str]) -> bool:
    """Whether `value` is one of an enum's spellings (a key of `table`); a list or mapping where
    a string belongs is not (and is not hashed: it would raise instead of being refused)."""
    return isinstance(value, str) and value in table


def _preemption(obj: dict[str, Any], ref: str, problems: Problems) -> dict[str, Any]:
    spec = get(obj, "spec.preemption", dict, ref, problems, {})
    out: dict[str, Any] = {}
    for key, doc_key, values in (("withinClusterQueue", "within_tenant", WITHIN),
                                 ("reclaimWithinCohort", "reclaim_within_cohort", RECLAIM)):
        value = spec.get(key)
        if value is None:
            continue
        if not _known(value, values):
            problems.add(ref, f"spec.preemption.{key}", "enum", f"{value!r} is not one of {list(values)}")
            continue
        out[doc_key] = values[value]
    borrow = spec.get("borrowWithinCohort")
    if isinstance(borrow, dict):
        policy = borrow.get("policy", "Never")
        if not _known(policy, BORROW):
            problems.add(ref, "spec.preemption.borrowWithinCohort.policy", "enum",
                         f"{policy!r} is not one of {list(BORROW)}")
        else:
            doc: dict[str, Any] = {"policy": BORROW[policy]}
            threshold = borrow.get("maxPriorityThreshold")
            if threshold is not None:
                doc["max_priority_threshold"] = threshold
            out["borrow_within_cohort"] = doc
    elif borrow is not None:
        problems.add(ref, "spec.preemption.borrowWithinCohort", "type", "expected a mapping")
    return out


def _fungibility(obj: dict[str, Any], ref: str, problems: Problems) -> dict[str, str]:
    spec = get(obj, "spec.flavorFungibility", dict, ref, problems, {})
    out: dict[str, str] = {}
    for key, doc_key in (("whenCanBorrow", "when_can_borrow"), ("whenCanPreempt", "when_can_preempt")):
        value = spec.get(key)
        if value is None:
            continue
        if not _known(value, FUNGIBILITY):
            problems.add(ref, f"spec.flavorFungibility.{key}", "enum", f"{value!r} is not one of {list(FUNGIBILITY)}")
            continue
        out[doc_key] = FUNGIBILITY[value]
    return out


def read_kueue(cluster_queues: list[dict[str, Any]], local_queues: list[dict[str, Any]],
               resource_flavors: list[dict[str, Any]], cohorts: list[dict[str, Any]],
               workload_priority_classes: list[dict[str, Any]], config: KubeConfig,
               problems: Problems) -> KueueRead:
    """Read Kueue's objects (module docstring); problems are recorded, not raised."""
    out = KueueRead()
    for obj in resource_flavors:
        ref, name = named(obj, "ResourceFlavor", problems)
        if name is None:
            continue
        labels = string_map(get(obj, "spec.nodeLabels", dict, ref, problems), ref, "spec.nodeLabels", problems)
        out.resource_flavors.append({"name": name, "node_labels": labels})
        for key in ("nodeTaints", "tolerations", "topologyName"):
            if get(obj, f"spec.{key}", (list, str), ref, problems):
                out.ignored.append(f"{ref}.spec.{key}: not modelled (the nodes' taints and the pods' tolerations "
                                   "decide; topology comes from KubeConfig.topology)")
    for obj in cluster_queues:
        ref, name = named(obj, "ClusterQueue", problems)
        if name is None:
            continue
        cohort = get(obj, "spec.cohortName", str, ref, problems) or get(obj, "spec.cohort", str, ref, problems)
        tenant: dict[str, Any] = {"name": name, "quotas": _quotas(obj, ref, config, problems),
                                  "preemption": _preemption(obj, ref, problems),
                                  "flavor_fungibility": _fungibility(obj, ref, problems)}
        if cohort:
            tenant["cohort"] = cohort
        mode = get(obj, "spec.admissionScope.admissionMode", str, ref, problems)
        if mode == "UsageBasedAdmissionFairSharing":
            tenant["admission_fair_sharing"] = True
        elif mode not in (None, "NoAdmissionFairSharing"):
            problems.add(ref, "spec.admissionScope.admissionMode", "enum",
                         f"{mode!r} is not UsageBasedAdmissionFairSharing or NoAdmissionFairSharing")
        _fair_weight(obj, ref, tenant, out, problems)
        out.tenants.append(tenant)
        out.refs[name] = ref
    for obj in cohorts:
        ref, name = named(obj, "Cohort", problems)
        if name is None:
            continue
        doc: dict[str, Any] = {"name": name, "quotas": _quotas(obj, ref, config, problems)}
        _fair_weight(obj, ref, doc, out, problems)
        parent = get(obj, "spec.parentName", str, ref, problems) or get(obj, "spec.parent", str, ref, problems)
        if parent:
            doc["parent"] = parent
        out.cohorts.append(doc)
    known = {t["name"] for t in out.tenants}
    for obj in local_queues:
        ref = reference(obj, "LocalQueue")
        name = get(obj, "metadata.name", str, ref, problems)
        namespace = get(obj, "metadata.namespace", str, ref, problems) or "default"
        target = get(obj, "spec.clusterQueue", str, ref, problems)
        if not name or not target:
            problems.add(ref, "spec.clusterQueue" if name else "metadata.name", "required",
                         "a LocalQueue needs a name and a ClusterQueue")
            continue
        if target not in known:
            problems.add(ref, "spec.clusterQueue", "unknown_reference", f"ClusterQueue {target!r} was not given")
            continue
        out.cluster_queue_of[(namespace, name)] = target
        out.local_queues.append(_local_queue(obj, ref, f"{namespace}/{name}", target, config, problems))
    for obj in workload_priority_classes:
        ref = reference(obj, "WorkloadPriorityClass")
        name = get(obj, "metadata.name", str, ref, problems)
        value = get(obj, "value", int, ref, problems)
        if not name or value is None:
            problems.add(ref, "value", "priority", "a WorkloadPriorityClass needs a name and an int32 value")
            continue
        out.priorities[name] = value
    return out
