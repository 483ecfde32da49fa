"""Cross-reference checks that pydantic field validation cannot do alone.

Every problem is collected with its field path; `validate_cluster` and `validate_queue` raise one
`InputError` listing all of them. These run once, at the door: after them a solver may assume
that every id resolves and every request could fit some node.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from optsched.errors import InputError, InputIssue
from optsched.model.cluster import NODE_LEVEL, Cluster, Node, NodeShape, ReplicaPlacement
from optsched.model.queue import Job, Queue, TaskGroup

BASE_RESOURCES = ("cpu", "memory", "rdma_nics")
SHARE_TOLERANCE = 1e-6
"""Shares of one device may sum to 1 + this (float sums of thousandths)."""
CAPACITY_TOLERANCE = 1e-9
"""Relative (and absolute) slack of running work against a node's capacity (float sums)."""


def _duplicates(ids: Iterable[str]) -> set[str]:
    return {k for k, n in Counter(ids).items() if n > 1}


def _check_shape(shape: NodeShape, path: str, cluster: Cluster, out: list[InputIssue]) -> None:
    dev = shape.devices
    n_dev = dev.count if dev else 0
    if dev is not None:
        if cluster.device_models and dev.model not in cluster.device_models:
            out.append(InputIssue(f"{path}.devices.model", "unknown_reference",
                               f"device model {dev.model!r} is not in device_models"))
        for k, idx in enumerate(dev.unhealthy):
            if idx >= n_dev:
                out.append(InputIssue(f"{path}.devices.unhealthy[{k}]", "out_of_range",
                                   f"device index {idx} >= count {n_dev}"))
    if shape.interconnect is not None:
        seen: set[int] = set()
        for gi, group in enumerate(shape.interconnect):
            for idx in group:
                if idx >= n_dev:
                    out.append(InputIssue(f"{path}.interconnect[{gi}]", "out_of_range",
                                       f"device index {idx} >= device count {n_dev}"))
                if idx in seen:
                    out.append(InputIssue(f"{path}.interconnect[{gi}]", "overlapping_groups",
                                       f"device index {idx} is in more than one group"))
                seen.add(idx)


def cluster_problems(cluster: Cluster) -> list[InputIssue]:
    """Every cross-reference problem in a cluster document."""
    out: list[InputIssue] = []
    levels = cluster.topology.levels
    if NODE_LEVEL in levels:
        out.append(InputIssue("topology.levels", "reserved_name",
                           f"{NODE_LEVEL!r} is the built-in per-node level"))
    for dup in _duplicates(levels):
        out.append(InputIssue("topology.levels", "duplicate_id", f"level {dup!r} listed twice"))
    doms = {d.id: d for d in cluster.topology.domains}
    for dup in _duplicates(d.id for d in cluster.topology.domains):
        out.append(InputIssue("topology.domains", "duplicate_id", f"domain {dup!r} defined twice"))
    for i, d in enumerate(cluster.topology.domains):
        path = f"topology.domains[{i}]"
        if d.level not in levels:
            out.append(InputIssue(f"{path}.level", "unknown_reference", f"level {d.level!r} not in topology.levels"))
            continue
        li = levels.index(d.level)
        if li == 0:
            if d.parent is not None:
                out.append(InputIssue(f"{path}.parent", "bad_parent", "a top-level domain has no parent"))
        elif d.parent is None:
            out.append(InputIssue(f"{path}.parent", "missing_parent", f"domain {d.id!r} below the top needs a parent"))
        elif d.parent not in doms:
            out.append(InputIssue(f"{path}.parent", "unknown_reference", f"parent {d.parent!r} is not a domain"))
        elif doms[d.parent].level != levels[li - 1]:
            out.append(InputIssue(f"{path}.parent", "bad_parent",
                                  f"parent {d.parent!r} is at level {doms[d.parent].level!r}, "
                                  f"expected {levels[li - 1]!r}"))
    leaf_level = levels[-1]
    leaves = {d.id for d in cluster.topology.domains if d.level == leaf_level}

    pools = {p.name: p for p in cluster.pools}
    for dup in _duplicates(p.name for p in cluster.pools):
        out.append(InputIssue("pools", "duplicate_id", f"pool {dup!r} defined twice"))
    for name, tmpl in cluster.node_templates.items():
        _check_shape(tmpl, f"node_templates.{name}", cluster, out)
    for i, p in enumerate(cluster.pools):
        prov = p.provisionable
        if prov is None:
            continue
        if prov.template not in cluster.node_templates:
            out.append(InputIssue(f"pools[{i}].provisionable.template", "unknown_reference",
                               f"template {prov.template!r} is not in node_templates"))
        if prov.domain not in leaves:
            out.append(InputIssue(f"pools[{i}].provisionable.domain", "unknown_reference",
                               f"{prov.domain!r} is not a {leaf_level} domain"))

    for dup in _duplicates(n.id for n in cluster.nodes):
        out.append(InputIssue("nodes", "duplicate_id", f"node {dup!r} defined twice"))
    for i, n in enumerate(cluster.nodes):
        path = f"nodes[{i}]"
        if "/" in n.id:
            out.append(InputIssue(f"{path}.id", "reserved_name", "'/' is reserved for provisioned nodes"))
        if n.domain not in leaves:
            out.append(InputIssue(f"{path}.domain", "unknown_reference", f"{n.domain!r} is not a {leaf_level} domain"))
        if n.pool is not None and n.pool not in pools:
            out.append(InputIssue(f"{path}.pool", "unknown_reference", f"pool {n.pool!r} is not defined"))
        if n.pool is None and pools:
            out.append(InputIssue(f"{path}.pool", "missing_reference",
                                  "the cluster defines pools; every node needs one"))
        _check_shape(n, path, cluster, out)

    for name, ds in cluster.datasets.items():
        for k, dom in enumerate(ds.cached_at):
            if dom not in doms:
                out.append(InputIssue(f"datasets.{name}.cached_at[{k}]", "unknown_reference",
                                      f"{dom!r} is not a domain"))

    resources = set(BASE_RESOURCES)
    models = set(cluster.device_models)
    for shape in [*cluster.nodes, *cluster.node_templates.values()]:
        resources |= set(shape.capacity)
        if shape.devices:
            models.add(shape.devices.model)
    rf_names = [f.name for f in cluster.resource_flavors]
    for dup in _duplicates(rf_names):
        out.append(InputIssue("resource_flavors", "duplicate_id", f"resource flavor {dup!r} defined twice"))
    for k, rf in enumerate(cluster.resource_flavors):
        if "/" in rf.name:
            out.append(InputIssue(f"resource_flavors[{k}].name", "reserved_name",
                                  "'/' separates a flavor from a resource in quota keys"))
    for dup in _duplicates(t.name for t in cluster.tenants):
        out.append(InputIssue("tenants", "duplicate_id", f"tenant {dup!r} defined twice"))
    for i, t in enumerate(cluster.tenants):
        for flavor in t.quotas:
            why = _quota_key_problem(flavor, models, resources, set(rf_names))
            if why:
                out.append(InputIssue(f"tenants[{i}].quotas.{flavor}", "unknown_reference", why))
    out.extend(_overlapping_quota_keys(cluster, models, resources))
    out.extend(_cohort_problems(cluster, models, resources, set(rf_names)))
    out.extend(_local_queue_problems(cluster, resources))

    out.extend(_running_problems(cluster))
    return out


def _quota_key_problem(key: str, models: set[str], resources: set[str], flavors: set[str]) -> str:
    """Why a quota key names nothing (empty when it names a device model, a resource, or
    ``<resource flavor>/<gpu or resource>``)."""
    if "/" not in key:
        return "" if key in models or key in resources else (
            f"flavor {key!r} is neither a device model, a resource nor <resource flavor>/<resource>")
    name, resource = key.split("/", 1)
    if name not in flavors:
        return f"{name!r} is not a resource flavor (resource_flavors)"
    if resource != "gpu" and resource not in resources:
        return f"{resource!r} is neither gpu nor a resource"
    return ""


def quota_key_nodes(cluster: Cluster, key: str) -> tuple[str, list[bool]]:
    """(what the quota key counts: ``gpu`` or a resource name, and per node and then per node
    template whether it counts there): a device model's GPUs on its nodes, a resource on every
    node, ``<flavor>/<resource>`` on the resource flavor's nodes (labels include its node_labels)."""
    shapes = [*cluster.nodes, *cluster.node_templates.values()]
    if "/" in key:
        name, resource = key.split("/", 1)
        rf = next(f for f in cluster.resource_flavors if f.name == name)
        return resource, [all(s.labels.get(k) == v for k, v in rf.node_labels.items()) for s in shapes]
    models = {s.devices.model for s in shapes if s.devices} | set(cluster.device_models)
    if key in models:
        return "gpu", [s.devices is not None and s.devices.model == key for s in shapes]
    return key, [True] * len(shapes)


def _overlapping_quota_keys(cluster: Cluster, models: set[str], resources: set[str]) -> list[InputIssue]:
    """Two quota keys that count the same resource on one node: a replica there would be counted
    against two quotas (Kueue assigns one flavor per resource)."""
    names = {f.name for f in cluster.resource_flavors}
    keys: list[str] = []
    for owner_quotas in [*(t.quotas for t in cluster.tenants), *(c.quotas for c in cluster.cohorts)]:
        keys.extend(k for k in owner_quotas if k not in keys and not _quota_key_problem(k, models, resources, names))
    ids = [n.id for n in cluster.nodes] + [f"template {name}" for name in cluster.node_templates]
    owner: dict[tuple[str, int], str] = {}
    out = []
    for key in keys:
        what, nodes = quota_key_nodes(cluster, key)
        for n, there in enumerate(nodes):
            if not there:
                continue
            other = owner.setdefault((what, n), key)
            if other != key:
                out.append(InputIssue(f"tenants.quotas.{key}", "overlapping_flavors",
                                      f"{key!r} and {other!r} both count {what} on {ids[n]}: a replica there "
                                      "would use two quotas"))
                break
    return out


def _cohort_problems(cluster: Cluster, models: set[str], resources: set[str], flavors: set[str]) -> list[InputIssue]:
    """Cohort objects: unique names, parents that exist, no cycle, quota keys that name something."""
    out: list[InputIssue] = []
    names = [c.name for c in cluster.cohorts]
    for dup in _duplicates(names):
        out.append(InputIssue("cohorts", "duplicate_id", f"cohort {dup!r} defined twice"))
    parent = {c.name: c.parent for c in cluster.cohorts}
    for i, c in enumerate(cluster.cohorts):
        if c.parent is not None and c.parent not in parent:
            out.append(InputIssue(f"cohorts[{i}].parent", "unknown_reference", f"cohort {c.parent!r} is not defined"))
        seen, at = {c.name}, c.parent
        while at is not None and at in parent:
            if at in seen:
                out.append(InputIssue(f"cohorts[{i}].parent", "cycle", f"cohort {c.name!r} is its own ancestor"))
                break
            seen.add(at)
            at = parent[at]
        for key in c.quotas:
            why = _quota_key_problem(key, models, resources, flavors)
            if why:
                out.append(InputIssue(f"cohorts[{i}].quotas.{key}", "unknown_reference", why))
    return out


def _local_queue_problems(cluster: Cluster, resources: set[str]) -> list[InputIssue]:
    """LocalQueues: unique names, a defined tenant, usage of known resources (`gpu` or a resource);
    admission fair sharing's resource weights of known resources."""
    out: list[InputIssue] = []
    for dup in _duplicates(q.name for q in cluster.local_queues):
        out.append(InputIssue("local_queues", "duplicate_id", f"local queue {dup!r} defined twice"))
    tenants = {t.name for t in cluster.tenants}
    known = resources | {"gpu"}
    for i, q in enumerate(cluster.local_queues):
        if q.tenant not in tenants:
            out.append(InputIssue(f"local_queues[{i}].tenant", "unknown_reference",
                                  f"tenant {q.tenant!r} is not defined"))
        for name in q.consumed:
            if name not in known:
                out.append(InputIssue(f"local_queues[{i}].consumed.{name}", "unknown_reference",
                                      f"{name!r} is neither gpu nor a resource of a node"))
    afs = cluster.admission_fair_sharing
    for name in afs.resource_weights if afs is not None else ():
        if name not in known:
            out.append(InputIssue(f"admission_fair_sharing.resource_weights.{name}", "unknown_reference",
                                  f"{name!r} is neither gpu nor a resource of a node"))
    return out


def _running_problems(cluster: Cluster) -> list[InputIssue]:
    out: list[InputIssue] = []
    nodes = {n.id: n for n in cluster.nodes}
    ids = [r.job.id for r in cluster.running]
    for dup in _duplicates(ids):
        out.append(InputIssue("running", "duplicate_id", f"running job {dup!r} listed twice"))
    for i, r in enumerate(cluster.running):
        path = f"running[{i}]"
        out.extend(job_problems(r.job, f"{path}.job", cluster, check_fit=False))
        groups = {g.name: g for g in r.job.groups}
        seen: set[tuple[str, int]] = set()
        for k, p in enumerate(r.placements):
            pp = f"{path}.placements[{k}]"
            if p.group not in groups:
                out.append(InputIssue(f"{pp}.group", "unknown_reference", f"group {p.group!r} not in job {r.job.id!r}"))
            if (p.group, p.replica) in seen:
                out.append(InputIssue(f"{pp}.replica", "duplicate_id", f"replica {p.group}/{p.replica} placed twice"))
            seen.add((p.group, p.replica))
            node = nodes.get(p.node)
            if node is None:
                out.append(InputIssue(f"{pp}.node", "unknown_reference", f"node {p.node!r} is not defined"))
                continue
            n_dev = node.devices.count if node.devices else 0
            for idx in p.devices:
                if idx >= n_dev:
                    out.append(InputIssue(f"{pp}.devices", "out_of_range", f"device {idx} >= {n_dev} on {p.node!r}"))
    out.extend(_running_state_problems(cluster, nodes))
    return out


def _placement_device_problems(group: TaskGroup, p: ReplicaPlacement, pp: str) -> list[InputIssue]:
    """A running replica's devices against its request: whole devices are `gpu` distinct indices
    at share 1; a fractional request holds one device at its share; no gpu request holds none."""
    out: list[InputIssue] = []
    req = group.request
    if len(set(p.devices)) != len(p.devices):
        out.append(InputIssue(f"{pp}.devices", "duplicate_device", f"device indices {p.devices} repeat"))
    if req.gpu == 0:
        if p.devices:
            out.append(InputIssue(f"{pp}.devices", "device_count", "a replica without a gpu request holds devices"))
    elif req.is_fractional:
        if len(p.devices) != 1:
            out.append(InputIssue(f"{pp}.devices", "device_count",
                                  f"a fractional replica holds exactly 1 device, got {len(p.devices)}"))
        if p.share is not None and abs(p.share - req.gpu) > SHARE_TOLERANCE:
            out.append(InputIssue(f"{pp}.share", "share_mismatch", f"share {p.share:g} differs from the request "
                                                                    f"{req.gpu:g}"))
    else:
        if len(p.devices) != req.whole_gpus:
            out.append(InputIssue(f"{pp}.devices", "device_count",
                                  f"the request is {req.whole_gpus} whole devices, got {len(p.devices)}"))
        if p.share is not None and abs(p.share - 1.0) > SHARE_TOLERANCE:
            out.append(InputIssue(f"{pp}.share", "share_mismatch", f"whole devices held at share {p.share:g}"))
    return out


def _running_state_problems(cluster: Cluster, nodes: dict[str, Node]) -> list[InputIssue]:
    """States no real cluster can be in: a replica beyond its group's `max`, devices that do not
    match the request or repeat, a device used whole by two replicas or shared beyond 1, a running
    gang below its minimum, and a node's resources held beyond its capacity. Tolerated (the cluster
    changed under running work): a running job on an unhealthy node or on unhealthy devices."""
    out: list[InputIssue] = []
    device_use: dict[tuple[str, int], list[tuple[float, str]]] = {}
    held: dict[str, dict[str, float]] = {}
    for i, r in enumerate(cluster.running):
        path = f"running[{i}]"
        groups = {g.name: g for g in r.job.groups}
        placed: Counter[str] = Counter()
        for k, p in enumerate(r.placements):
            group = groups.get(p.group)
            node = nodes.get(p.node)
            if group is None or node is None:
                continue  # reported above
            pp = f"{path}.placements[{k}]"
            placed[p.group] += 1
            if p.replica >= group.replicas.max:
                out.append(InputIssue(f"{pp}.replica", "out_of_range",
                                      f"replica {p.replica} of {p.group!r}, whose max is {group.replicas.max}"))
            out.extend(_placement_device_problems(group, p, pp))
            share = 1.0 if not group.request.is_fractional else (p.share or group.request.gpu)
            for d in set(p.devices):
                device_use.setdefault((p.node, d), []).append((share, f"{pp}.devices"))
            req = group.request
            on_node = held.setdefault(p.node, {})
            for name, amount in (("cpu", req.cpu), ("memory", req.memory), ("rdma_nics", req.rdma_nics),
                                 *req.resources.items()):
                if amount > 0:
                    on_node[name] = on_node.get(name, 0.0) + amount
        if r.job.is_gang:
            for g in r.job.groups:
                if placed[g.name] < g.replicas.min:
                    out.append(InputIssue(f"{path}.placements", "gang_below_min",
                                          f"a running gang with {placed[g.name]} replicas of {g.name!r}, "
                                          f"whose min is {g.replicas.min}"))
    for (node_id, d), uses in device_use.items():
        total = math.fsum(share for share, _ in uses)
        if total > 1.0 + SHARE_TOLERANCE:
            out.append(InputIssue(uses[-1][1], "device_overcommitted",
                                  f"device {d} of {node_id!r} is held {total:g} times over by {len(uses)} replicas"))
    index = {n.id: i for i, n in enumerate(cluster.nodes)}
    for node_id, amounts in held.items():
        capacity = nodes[node_id].capacity
        for name, amount in amounts.items():
            cap = capacity.get(name, 0.0)
            if amount > cap * (1 + CAPACITY_TOLERANCE) + CAPACITY_TOLERANCE:  # named where it breaks: the node
                out.append(InputIssue(f"nodes[{index[node_id]}].capacity.{name}", "over_capacity",
                                      f"running replicas hold {amount:g} {name} on {node_id!r}, capacity {cap:g}"))
    return out


def group_fits(group: TaskGroup, shape: NodeShape) -> bool:
    """Whether an empty node of `shape` could hold one replica of `group` (its resources, and its
    devices: an allowed model, enough healthy ones)."""
    req = group.request
    need = {"cpu": req.cpu, "memory": req.memory, "rdma_nics": req.rdma_nics, **req.resources}
    if any(v > 0 and shape.capacity.get(k, 0.0) < v for k, v in need.items()):
        return False
    if req.gpu > 0:
        dev = shape.devices
        if dev is None or (group.models is not None and dev.model not in group.models):
            return False
        if dev.count - len(set(dev.unhealthy)) < max(1, req.whole_gpus):
            return False
    return True


def _group_fits_somewhere(group: TaskGroup, shapes: list[NodeShape]) -> bool:
    return any(group_fits(group, shape) for shape in shapes)


def distinct_shapes(cluster: Cluster) -> list[NodeShape]:
    """One node or template per distinct (capacity, devices) shape, for the can-it-ever-fit test."""
    seen: dict[tuple[object, ...], NodeShape] = {}
    for shape in [*cluster.nodes, *cluster.node_templates.values()]:
        dev = shape.devices
        key = (tuple(sorted(shape.capacity.items())),
               None if dev is None else (dev.model, dev.count, tuple(dev.unhealthy)))
        seen.setdefault(key, shape)
    return list(seen.values())


def job_problems(job: Job, path: str, cluster: Cluster, *, check_fit: bool = True,
                 shapes: list[NodeShape] | None = None) -> list[InputIssue]:
    """Cross-reference problems of one job against the cluster it is meant for."""
    out: list[InputIssue] = []
    tenants = {t.name for t in cluster.tenants}
    if tenants and job.tenant not in tenants:
        out.append(InputIssue(f"{path}.tenant", "unknown_reference", f"tenant {job.tenant!r} is not defined"))
    if job.local_queue is not None:
        queue = next((q for q in cluster.local_queues if q.name == job.local_queue), None)
        if queue is None:
            out.append(InputIssue(f"{path}.local_queue", "unknown_reference",
                                  f"local queue {job.local_queue!r} is not in local_queues"))
        elif queue.tenant != job.tenant:
            out.append(InputIssue(f"{path}.local_queue", "tenant_mismatch",
                                  f"local queue {job.local_queue!r} feeds tenant {queue.tenant!r}, not {job.tenant!r}"))
    level_names = {*cluster.topology.levels, NODE_LEVEL}
    if job.topology is not None and job.topology.level not in level_names:
        out.append(InputIssue(f"{path}.topology.level", "unknown_reference", f"level {job.topology.level!r} unknown"))
    names = [g.name for g in job.groups]
    for dup in _duplicates(names):
        out.append(InputIssue(f"{path}.groups", "duplicate_id", f"group {dup!r} defined twice"))
    if check_fit and shapes is None:
        shapes = distinct_shapes(cluster)
    for gi, g in enumerate(job.groups):
        gp = f"{path}.groups[{gi}]"
        if g.models is not None:
            for m in g.models:
                if m not in cluster.device_models:
                    out.append(InputIssue(f"{gp}.models.{m}", "unknown_reference", f"device model {m!r} unknown"))
        if g.image is not None and g.image not in cluster.images:
            out.append(InputIssue(f"{gp}.image", "unknown_reference", f"image {g.image!r} is not in cluster.images"))
        for k, ds in enumerate(g.datasets):
            if ds not in cluster.datasets:
                out.append(InputIssue(f"{gp}.datasets[{k}]", "unknown_reference", f"dataset {ds!r} unknown"))
        if g.spread is not None and g.spread.level not in level_names:
            out.append(InputIssue(f"{gp}.spread.level", "unknown_reference", f"level {g.spread.level!r} unknown"))
        if g.request.gpu == 0 and g.device_affinity == "required":
            out.append(InputIssue(f"{gp}.device_affinity", "meaningless", "device_affinity without a gpu request"))
        if shapes is not None and not _group_fits_somewhere(g, shapes):
            out.append(InputIssue(f"{gp}.request", "unsatisfiable",
                               f"no node or node template could ever hold one replica of {g.name!r}"))
    for k, r in enumerate(job.ratios):
        for field in ("group", "per"):
            if getattr(r, field) not in names:
                out.append(InputIssue(f"{path}.ratios[{k}].{field}", "unknown_reference",
                                   f"group {getattr(r, field)!r} not in job"))
        if r.max is not None and r.max < r.min:
            out.append(InputIssue(f"{path}.ratios[{k}].max", "bad_range", f"max {r.max} < min {r.min}"))
    for k, c in enumerate(job.colocate):
        if c.level not in level_names:
            out.append(InputIssue(f"{path}.colocate[{k}].level", "unknown_reference", f"level {c.level!r} unknown"))
        for name in c.groups:
            if name not in names:
                out.append(InputIssue(f"{path}.colocate[{k}].groups", "unknown_reference",
                                      f"group {name!r} not in job"))
    return out


def queue_problems(queue: Queue, cluster: Cluster) -> list[InputIssue]:
    """Every cross-reference problem of a queue against its cluster."""
    out: list[InputIssue] = []
    ids = [j.id for j in queue.jobs]
    for dup in _duplicates(ids):
        out.append(InputIssue("jobs", "duplicate_id", f"job {dup!r} queued twice"))
    running = {r.job.id for r in cluster.running}
    shapes = distinct_shapes(cluster)
    for i, job in enumerate(queue.jobs):
        if job.id in running:
            out.append(InputIssue(f"jobs[{i}].id", "duplicate_id", f"job {job.id!r} is already running"))
        out.extend(job_problems(job, f"jobs[{i}]", cluster, shapes=shapes))
    return out


def validate_cluster(cluster: Cluster) -> None:
    """Raise `InputError` listing every cross-reference problem of `cluster`."""
    problems = cluster_problems(cluster)
    if problems:
        raise InputError(problems)


def validate_queue(queue: Queue, cluster: Cluster) -> None:
    """Raise `InputError` listing every cross-reference problem of `queue` against `cluster`."""
    problems = queue_problems(queue, cluster)
    if problems:
        raise InputError(problems)
