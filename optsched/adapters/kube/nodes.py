"""Kubernetes Nodes -> the Cluster's topology, nodes, device models and cached images.

What is read, per Node:
- `metadata.name`, `metadata.labels`; `spec.taints`; `spec.unschedulable` and the `Ready`
  condition (a node that is cordoned or not Ready is unhealthy: nothing new goes there);
- `status.allocatable` (what kube-scheduler fits against; `status.capacity` where it is
  absent): cpu in millicores, memory, ephemeral storage and hugepages in MiB, `pods`, other
  extended resources as counted; an accelerator resource (`KubeConfig.accelerators`) becomes the
  node's devices: `status.capacity` of them, those missing from allocatable (the device plugin
  withdrew them as unhealthy) marked unhealthy from the highest index down;
- the device model from the accelerator's product label (GPU feature discovery's
  `nvidia.com/gpu.product`), its memory from `nvidia.com/gpu.memory` (MiB);
- the domain of each `KubeConfig.topology` level from its label; a node without the label hangs
  under that level's `unlabelled` domain;
- `status.images` (names and sizes): each image is one layer whose digest is its `@sha256:` name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from optsched.adapters.documents import Problems, get, items
from optsched.adapters.kube.config import HOSTNAME_LABEL, Accelerator, KubeConfig, TopologyLevel
from optsched.adapters.kube.objects import in_units, named, quantity, string_map
from optsched.model.base import MAX_DEVICES_PER_NODE
from optsched.model.cluster import DeviceModel, Domain, Layer, Node, Topology

CLUSTER_LEVEL = "cluster"
"""The one level (and domain) when no topology is configured."""
UNLABELLED = "unlabelled"
"""The domain value of a node that lacks a level's label."""
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass
class NodesRead:
    """What the nodes say: the Cluster's parts, and per node what pods need to be read against it."""

    topology: Topology | None
    """None when no node was read."""
    nodes: list[Node]
    device_models: dict[str, DeviceModel]
    images: dict[str, list[Layer]]
    accelerator_of: dict[str, str] = field(default_factory=dict)
    """Node name -> the accelerator resource its devices are counted in."""
    device_count: dict[str, int] = field(default_factory=dict)
    """Node name -> its number of devices."""
    unhealthy: dict[str, set[int]] = field(default_factory=dict)
    """Node name -> indices of devices withdrawn by the device plugin."""
    ref_of: dict[str, str] = field(default_factory=dict)
    """Node name -> `Node/<name>` (what errors name)."""


def levels(config: KubeConfig) -> list[TopologyLevel]:
    """The configured levels without a last `kubernetes.io/hostname` (optsched's `node` level)."""
    out = list(config.topology)
    if out and out[-1].label == HOSTNAME_LABEL:
        out.pop()
    return out


def _accelerator(capacity: dict[str, Any], config: KubeConfig) -> Accelerator | None:
    for acc in config.accelerators:
        if acc.resource in capacity:
            return acc
    return None


def _resources(source: dict[str, Any], skip: str | None, config: KubeConfig, ref: str, where: str,
               problems: Problems) -> dict[str, float]:
    """Allocatable amounts in optsched's units; rdma resources summed into `rdma_nics`."""
    out: dict[str, float] = {}
    for name, raw in source.items():
        if name == skip or (name == "pods" and not config.count_pods):
            continue
        amount = quantity(raw, ref, f"{where}.{name}", problems)
        if amount is None:
            continue
        if name in config.rdma_resources:
            out["rdma_nics"] = out.get("rdma_nics", 0.0) + float(amount)
        else:
            out[name] = in_units(name, amount)
    return out


def _count(raw: Any, ref: str, where: str, problems: Problems) -> int | None:
    amount = quantity(raw, ref, where, problems)
    if amount is None:
        return None
    if amount != amount.to_integral_value():
        problems.add(ref, where, "quantity", f"a device count must be whole, got {raw!r}")
        return None
    return int(amount)


def _healthy(obj: dict[str, Any], ref: str, problems: Problems) -> bool:
    if get(obj, "spec.unschedulable", bool, ref, problems, False):
        return False
    for _, cond in items(get(obj, "status.conditions", list, ref, problems), ref, "status.conditions", problems):
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return True  # no conditions reported (a manifest, not a live object): taken as ready


def _taints(obj: dict[str, Any], ref: str, problems: Problems) -> list[dict[str, Any]]:
    out = []
    for where, t in items(get(obj, "spec.taints", list, ref, problems), ref, "spec.taints", problems):
        effect = t.get("effect")
        if effect not in TAINT_EFFECTS:
            problems.add(ref, f"{where}.effect", "taint_effect", f"{effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
            continue
        out.append({"key": t.get("key"), "value": t.get("value") or None, "effect": effect})
    return out


def _images(obj: dict[str, Any], ref: str, problems: Problems, images: dict[str, list[Layer]]) -> list[str]:
    digests = []
    for where, img in items(get(obj, "status.images", list, ref, problems), ref, "status.images", problems):
        given = img.get("names")
        names = [n for n in given if isinstance(n, str)] if isinstance(given, list) else []
        size = img.get("sizeBytes")
        if not names or isinstance(size, bool) or not isinstance(size, int) or size < 0:
            problems.add(ref, where, "image", "an image needs names and a non-negative sizeBytes")
            continue
        digest = next((n for n in names if "@sha256:" in n), names[0])
        layer = problems.build(Layer, {"digest": digest, "bytes": size}, ref, where)
        if layer is None:
            continue
        for n in names:
            images.setdefault(n, [layer])
        digests.append(digest)
    return digests


def read_nodes(objects: list[dict[str, Any]], config: KubeConfig, problems: Problems) -> NodesRead:
    """Read every Node; problems are recorded, not raised (the caller raises them together)."""
    lvls = levels(config)
    names = [lvl.level for lvl in lvls] or [CLUSTER_LEVEL]
    domains: dict[str, Domain] = {}
    if not lvls:
        domains[CLUSTER_LEVEL] = Domain(id=CLUSTER_LEVEL, level=CLUSTER_LEVEL)
    out = NodesRead(topology=None,
                    nodes=[], device_models={}, images={})
    for obj in objects:
        ref, name = named(obj, "Node", problems)
        if name is None:
            continue
        if name in out.ref_of:
            problems.add(ref, "metadata.name", "duplicate_id", f"node {name!r} given twice")
            continue
        out.ref_of[name] = ref
        labels = string_map(get(obj, "metadata.labels", dict, ref, problems), ref, "metadata.labels", problems)
        capacity = get(obj, "status.capacity", dict, ref, problems, {})
        allocatable = get(obj, "status.allocatable", dict, ref, problems) or capacity
        where = "status.allocatable" if get(obj, "status.allocatable", dict, ref, problems) else "status.capacity"
        acc = _accelerator({**capacity, **allocatable}, config)
        doc: dict[str, Any] = {
            "id": name, "labels": labels, "taints": _taints(obj, ref, problems),
            "healthy": _healthy(obj, ref, problems),
            "capacity": _resources(allocatable, acc.resource if acc else None, config, ref, where, problems),
            "images": _images(obj, ref, problems, out.images),
        }
        if acc is not None:
            devices = _node_devices(obj, acc, labels, capacity, allocatable, config, ref, problems, out)
            if devices is not None:
                doc.update(devices)
        parent = None
        for lvl in lvls:
            value = labels.get(lvl.label) or UNLABELLED
            dom_id = value if parent is None else f"{parent}/{value}"
            if dom_id not in domains:
                uplink = config.uplinks_gbps.get(dom_id, lvl.uplink_gbps)
                domains[dom_id] = Domain(id=dom_id, level=lvl.level, parent=parent, uplink_gbps=uplink)
            parent = dom_id
        doc["domain"] = parent or CLUSTER_LEVEL
        node = problems.build(Node, doc, ref, "")
        if node is not None:
            out.nodes.append(node)
    if not out.ref_of:
        problems.add("Node", "", "required", "no Node was given: a cluster needs at least one")
    elif domains:
        out.topology = Topology(levels=names, domains=list(domains.values()))
    return out


def _node_devices(obj: dict[str, Any], acc: Accelerator, labels: dict[str, str], capacity: dict[str, Any],
                  allocatable: dict[str, Any], config: KubeConfig, ref: str, problems: Problems,
                  out: NodesRead) -> dict[str, Any] | None:
    name = obj["metadata"]["name"]
    total = _count(capacity.get(acc.resource, allocatable.get(acc.resource)), ref,
                   f"status.capacity.{acc.resource}", problems)
    usable = _count(allocatable.get(acc.resource, total), ref, f"status.allocatable.{acc.resource}", problems)
    if total is None or usable is None:
        return None
    if total > MAX_DEVICES_PER_NODE:
        problems.add(ref, f"status.capacity.{acc.resource}", "out_of_range",
                     f"{total} devices; optsched holds at most {MAX_DEVICES_PER_NODE} per node")
        return None
    if total == 0:
        return {}
    model = (labels.get(acc.product_label) if acc.product_label else None) or acc.resource
    memory_mib = Decimal(0)
    if acc.memory_label and acc.memory_label in labels:
        amount = quantity(labels[acc.memory_label], ref, f"metadata.labels.{acc.memory_label}", problems)
        memory_mib = amount if amount is not None else Decimal(0)
    known = out.device_models.get(model)
    memory_gib = max(float(memory_mib) / 1024, known.memory_gib if known else 0.0)
    out.device_models[model] = DeviceModel(memory_gib=memory_gib, speed=config.speeds.get(model, 1.0))
    unhealthy = set(range(max(usable, 0), total))
    out.accelerator_of[name] = acc.resource
    out.device_count[name] = total
    out.unhealthy[name] = unhealthy
    devices: dict[str, Any] = {"devices": {"model": model, "count": total, "unhealthy": sorted(unhealthy)}}
    if model in config.interconnect:
        devices["interconnect"] = config.interconnect[model]
    return devices
