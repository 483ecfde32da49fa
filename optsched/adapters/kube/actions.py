"""A Plan -> what a scheduler writes back to the API server.

- **Bindings** (`V1Binding`, the `pods/binding` subresource kube-scheduler's DefaultBinder
  posts), one per placed pod, with the pod's uid as a precondition and the device indices in the
  `optsched.io/devices` annotation: the API server merges a Binding's annotations into the pod
  (pkg/registry/core/pod/storage/storage.go, `setPodHostAndAnnotations`), so the bound pod
  carries them and a device plugin or the next snapshot can read them.
- **Evictions**: every pod of an evicted running job, with the `DisruptionTarget` condition
  kube-scheduler's preemption sets (reason `PreemptionByScheduler`) and a message saying why and
  for whom; the caller patches the condition into the pod's status, then deletes the pod.
- **Pending**: every pod of a deferred or held job, with the `PodScheduled=False` condition
  (reason `Unschedulable`) kube-scheduler writes, its message the plan's reason and detail: the
  answer to "why is my workload pending".

- **Admissions**: per placed job, Kueue's admission shape (flavor per resource, usage, topology
  assignment per pod set: `optsched.adapters.kube.admissions`), for a Kueue admission hook.

Order: evictions first; bind once the evicted pods are gone (their room is what the plan used).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from optsched.adapters.kube.admissions import admissions
from optsched.adapters.kube.config import DEVICES_ANNOTATION
from optsched.adapters.kube.pods import PodRef
from optsched.adapters.kube.snapshot import Snapshot
from optsched.errors import InputError, InputIssue
from optsched.model.plan import Plan

SCHEDULER = "optsched"


@dataclass
class PodEviction:
    """A pod to remove: the condition to set on it first, and the job it makes room for."""

    pod: PodRef
    reason: str
    """`preempted`, `reclaimed` or `migrated`, as the plan says."""
    by: str | None
    condition: Any
    """A `V1PodCondition` (type `DisruptionTarget`)."""


@dataclass
class PodPending:
    """A pod left pending, with the condition that says why."""

    pod: PodRef
    reason: str
    condition: Any
    """A `V1PodCondition` (type `PodScheduled`, status `False`)."""


@dataclass
class Actions:
    """What to write back for one round: evictions, then bindings; pending pods' conditions."""

    bindings: list[Any] = field(default_factory=list)
    """`V1Binding` objects, gang members of one job together."""
    evictions: list[PodEviction] = field(default_factory=list)
    pending: list[PodPending] = field(default_factory=list)
    admissions: list[dict[str, Any]] = field(default_factory=list)
    """Kueue-style admissions of the placed jobs (`optsched.adapters.kube.admissions`)."""
    workloads: list[dict[str, str]] = field(default_factory=list)
    """Kueue Workloads (read without pods) left pending: namespace, name, reason, message."""

    def to_dict(self) -> dict[str, Any]:
        """The actions as JSON-ready API dicts (camelCase, as `kubectl` shows them)."""
        from kubernetes.client import ApiClient

        api = ApiClient()
        return {
            "bindings": [api.sanitize_for_serialization(b) for b in self.bindings],
            "evictions": [{"namespace": e.pod.namespace, "name": e.pod.name, "uid": e.pod.uid, "reason": e.reason,
                           "by": e.by, "condition": api.sanitize_for_serialization(e.condition)}
                          for e in self.evictions],
            "pending": [{"namespace": p.pod.namespace, "name": p.pod.name, "reason": p.reason,
                         "condition": api.sanitize_for_serialization(p.condition)} for p in self.pending],
            "admissions": self.admissions,
            "workloads": self.workloads,
        }


def actions(plan: Plan, snap: Snapshot) -> Actions:
    """The bindings, evictions and pending conditions that carry out `plan` on `snap`'s pods.

    Raises `InputError` for a plan that names replicas the snapshot has no pod for, or places a
    replica on a node still to be provisioned (a Binding needs a Node object)."""
    from kubernetes.client import V1Binding, V1ObjectMeta, V1ObjectReference, V1PodCondition

    out = Actions()
    issues: list[InputIssue] = []
    for i, pl in enumerate(plan.placements):
        pod = snap.replica_pod.get((pl.job, pl.group, pl.replica))
        if pod is None:
            issues.append(InputIssue(f"placements[{i}]", "unknown_reference",
                                     f"no pod is replica {pl.replica} of {pl.job}/{pl.group}"))
            continue
        if pl.job in snap.workloads:
            continue  # a Workload is admitted, not bound: its admission says where (out.admissions)
        if "/new-" in pl.node:
            issues.append(InputIssue(f"placements[{i}].node", "unsupported",
                                     f"{pl.node} is a node to provision; a Binding needs an existing Node"))
            continue
        annotations = {DEVICES_ANNOTATION: ",".join(str(d) for d in pl.devices)} if pl.devices else None
        out.bindings.append(V1Binding(
            api_version="v1", kind="Binding",
            metadata=V1ObjectMeta(name=pod.name, namespace=pod.namespace, uid=pod.uid, annotations=annotations),
            target=V1ObjectReference(api_version="v1", kind="Node", name=pl.node)))
    for i, ev in enumerate(plan.evictions):
        pods = snap.job_pods.get(ev.job)
        if pods is None:
            issues.append(InputIssue(f"evictions[{i}].job", "unknown_reference", f"no pods of job {ev.job!r}"))
            continue
        message = f"{SCHEDULER}: {ev.reason}" + (f" by {ev.by}" if ev.by else "") + \
            f", {ev.lost_gpu_hours:.2f} GPU-hours of work lost"
        for pod in pods:
            cond = V1PodCondition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler",
                                  message=message)
            out.evictions.append(PodEviction(pod=pod, reason=ev.reason, by=ev.by, condition=cond))
    waiting: list[tuple[list[PodRef], str, str]] = [(snap.job_pods.get(d.job, []), d.reason, d.detail)
                                                     for d in plan.deferred]
    bound = {(b.metadata.namespace, b.metadata.name) for b in out.bindings}
    for job in dict.fromkeys(pl.job for pl in plan.placements):  # an elastic job's pods beyond what is placed
        if job in snap.workloads:
            continue  # its admission carries the count
        pods = snap.job_pods.get(job, [])
        left = [p for p in pods if (p.namespace, p.name) not in bound]
        if left:
            waiting.append((left, "capacity", f"the plan places {len(pods) - len(left)} of the job's {len(pods)} pods"))
    waiting += [(h.pods, h.reason, h.detail) for h in snap.held]
    told: set[str] = set()
    for pods, reason, detail in waiting:
        for job_id in dict.fromkeys(snap.workload_of_pod[(p.namespace, p.name)] for p in pods
                                    if (p.namespace, p.name) in snap.workload_of_pod):
            if job_id not in told:  # a Workload has no pods to tell: say it of the Workload
                told.add(job_id)
                namespace, name = snap.workloads[job_id]
                out.workloads.append({"namespace": namespace, "name": name, "reason": reason,
                                      "message": f"{SCHEDULER}: {reason}" + (f": {detail}" if detail else "")})
        pods = [p for p in pods if (p.namespace, p.name) not in snap.workload_of_pod]
        for pod in pods:
            cond = V1PodCondition(type="PodScheduled", status="False", reason="Unschedulable",
                                  message=f"{SCHEDULER}: {reason}" + (f": {detail}" if detail else ""))
            out.pending.append(PodPending(pod=pod, reason=reason, condition=cond))
    if issues:
        raise InputError(issues)
    out.admissions = admissions(plan, snap)
    return out
