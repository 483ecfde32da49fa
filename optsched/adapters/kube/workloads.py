"""Kueue's Workload objects -> queued jobs, for workloads whose pods do not exist yet.

Kueue suspends a Job (JobSet, RayJob, ...) until it is admitted, so its pods are not created: the
Workload is all there is to read. A pending Workload becomes one gang job `<namespace>/<name>`
with one task group per pod set:
- `spec.podSets[]`: `name` (the group), `count` (its replicas), `minCount` (the fewest Kueue's
  partial admission accepts: the group's minimum), `template` (the pod spec: requests,
  `nodeSelector`, required node affinity, tolerations, read as a pod's are),
  `topologyRequest.required` / `.preferred` (a level's node label, as the pods' TAS annotations);
- `spec.queueName` (the LocalQueue: the tenant is its ClusterQueue), `spec.priority` (what Kueue
  resolved from the PriorityClass or WorkloadPriorityClass), `metadata.creationTimestamp`.

Not read as jobs: an admitted Workload (`status.admission`: its pods exist, and are read), one
whose `spec.active` is false, one `Finished`, and one owned by Pods (Kueue's plain-pod groups:
the pods are read). A plan places a Workload's job through its admission (`Actions.admissions`);
nothing is bound, and a deferred one is reported in `Actions.workloads` rather than on pods.
"""

from __future__ import annotations

import copy
from typing import Any

from optsched.adapters.documents import Problems, get, items
from optsched.adapters.kube.config import ROLE_ANNOTATION
from optsched.adapters.kube.kueue import QUEUE_LABEL
from optsched.adapters.kube.objects import named
from optsched.adapters.kube.pods import TAS_ANNOTATIONS


def workload_pods(objects: list[dict[str, Any]], problems: Problems) -> tuple[
        list[dict[str, Any]], dict[str, dict[str, int]], dict[str, tuple[str, str]]]:
    """The pods a pending Workload's pod sets describe (module docstring), grouped by Kueue's
    pod-group label under the Workload's name, each pod set a role (`ROLE_ANNOTATION`); the
    minimum replicas per job and group (`minCount`); and job id -> (namespace, Workload name)."""
    pods: list[dict[str, Any]] = []
    minimums: dict[str, dict[str, int]] = {}
    jobs: dict[str, tuple[str, str]] = {}
    for obj in objects:
        ref, name = named(obj, "Workload", problems)
        if name is None:
            continue
        namespace = get(obj, "metadata.namespace", str, ref, problems) or "default"
        owners = get(obj, "metadata.ownerReferences", list, ref, problems) or []
        if any(isinstance(o, dict) and o.get("kind") == "Pod" for o in owners):
            continue
        if get(obj, "status.admission", dict, ref, problems) is not None:
            continue
        if get(obj, "spec.active", bool, ref, problems, True) is False:
            continue
        conditions = get(obj, "status.conditions", list, ref, problems) or []
        if any(isinstance(c, dict) and c.get("type") == "Finished" and c.get("status") == "True"
               for c in conditions):
            continue
        queue = get(obj, "spec.queueName", str, ref, problems)
        priority = get(obj, "spec.priority", int, ref, problems)
        created = get(obj, "metadata.creationTimestamp", str, ref, problems)
        job_id = f"{namespace}/{name}"
        jobs[job_id] = (namespace, name)
        for where, podset in items(get(obj, "spec.podSets", list, ref, problems), ref, "spec.podSets", problems):
            ps_name = podset.get("name")
            count = podset.get("count")
            if not isinstance(ps_name, str) or not ps_name:
                problems.add(ref, f"{where}.name", "required", "a pod set needs a name")
                continue
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                problems.add(ref, f"{where}.count", "type", "expected a non-negative integer")
                continue
            min_count = podset.get("minCount")
            if min_count is not None:
                if not isinstance(min_count, int) or isinstance(min_count, bool) or not 0 <= min_count <= count:
                    problems.add(ref, f"{where}.minCount", "out_of_range", f"{min_count!r}: from 0 to count ({count})")
                else:
                    minimums.setdefault(job_id, {})[ps_name] = min_count
            template = podset.get("template") or {}
            meta = template.get("metadata") or {} if isinstance(template, dict) else None
            spec = template.get("spec") or {} if isinstance(template, dict) else None
            if not isinstance(meta, dict) or not isinstance(spec, dict) or \
                    not all(isinstance(meta.get(k) or {}, dict) for k in ("labels", "annotations")):
                problems.add(ref, f"{where}.template", "type", "expected a pod template (metadata and spec mappings)")
                continue
            labels = {**(meta.get("labels") or {}), "kueue.x-k8s.io/pod-group-name": name}
            if queue:
                labels[QUEUE_LABEL] = queue
            annotations = {**(meta.get("annotations") or {}), ROLE_ANNOTATION: ps_name}
            request = podset.get("topologyRequest") or {}
            for key, mode in TAS_ANNOTATIONS:  # modes are the topologyRequest field names
                if isinstance(request, dict) and isinstance(request.get(mode), str):
                    annotations[key] = request[mode]
            spec = copy.deepcopy(spec)
            if priority is not None:
                spec["priority"] = priority
            spec.pop("nodeName", None)
            for i in range(count):
                pods.append({"kind": "Pod", "metadata": {
                    "name": f"{name}-{ps_name}-{i}", "namespace": namespace, "labels": labels,
                    "annotations": annotations, **({"creationTimestamp": created} if created else {})},
                    "spec": spec, "status": {"phase": "Pending"}})
    return pods, minimums, jobs
