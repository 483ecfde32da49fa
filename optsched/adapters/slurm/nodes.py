"""Slurm nodes (`scontrol show nodes --json`, slurmrestd `GET /slurm/v0.0.4x/nodes`) -> Cluster nodes.

What is read, per node:
- `name`; `effective_cpus` (CPUs less specialized ones; `cpus` where absent) as millicores;
  `real_memory` less `specialized_memory`, MiB; `temporary_disk` (MiB) as the resource `tmp_disk`;
- `gres`: the `SlurmConfig.gpu_gres` entries are the node's devices, their type its device model
  (`gpu:h100:4(S:0-1)` -> 4 devices of model `h100`, or `SlurmConfig.models[h100]`); other GRES
  are node resources by name (`tmpsize:7T`, `shard:16`); `gres_drained` devices are unhealthy;
- `state`: a node that is DOWN, DRAIN(ING/ED), FAIL(ING), NOT_RESPONDING, FUTURE, INVALID_REG,
  REBOOT_ISSUED or PLANNED, or in a reservation, is unhealthy (its running jobs stay; nothing new
  goes there); POWERED_DOWN nodes are healthy (Slurm powers them up for a job);
- `active_features` (`features` where absent) and `partitions` as labels (`FEATURE_LABEL` +
  name, `PARTITION_LABEL` + name: `"true"`), the name as `NODE_LABEL`, so `--constraint`,
  `--partition`, `--nodelist` and `--exclude` are node selectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from optsched.adapters.documents import Problems
from optsched.adapters.slurm.config import FEATURE_LABEL, NODE_LABEL, PARTITION_LABEL, SlurmConfig
from optsched.adapters.slurm.values import csv, flags, gres_entries, named, number, text
from optsched.model.base import MAX_DEVICES_PER_NODE

UNHEALTHY_STATES = frozenset({"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING",
                              "FUTURE", "INVALID_REG", "REBOOT_ISSUED", "PLANNED", "INVALID", "UNKNOWN"})
"""Node state flags under which Slurm starts no new job on a node."""


@dataclass
class NodesRead:
    """The nodes as Cluster node documents (without their domain yet), and what jobs are read against."""

    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Node name -> its node document."""
    device_models: dict[str, dict[str, float]] = field(default_factory=dict)
    """Device model -> its document (`memory_gib`, `speed`)."""
    model_of: dict[str, str] = field(default_factory=dict)
    """Node name -> its device model (nodes with devices only)."""
    ref_of: dict[str, str] = field(default_factory=dict)
    """Node name -> `Node/<name>` (what errors name)."""
    allocated: dict[str, tuple[float, float, set[int]]] = field(default_factory=dict)
    """Node name -> what Slurm says its jobs hold: (millicores, MiB, device indices)."""


def model_name(kind: str | None, config: SlurmConfig) -> str:
    """The device model of a GRES type (`h100`); an untyped GRES is the model named as the GRES."""
    if kind is None:
        return config.gpu_gres
    return config.models.get(kind, kind)


def read_nodes(objects: list[dict[str, Any]], partitions: dict[str, list[str]], config: SlurmConfig,
               problems: Problems) -> NodesRead:
    """Read every node; `partitions` is partition name -> its node names (from the partitions
    given, added to each node's own `partitions`)."""
    out = NodesRead()
    member_of: dict[str, set[str]] = {}
    for part, members in partitions.items():
        for member in members:
            member_of.setdefault(member, set()).add(part)
    for i, obj in enumerate(objects):
        ref, name = named(obj, "Node", i, problems)
        if name is None:
            continue
        if name in out.ref_of:
            problems.add(ref, "name", "duplicate_id", f"node {name!r} given twice")
            continue
        out.ref_of[name] = ref
        cpus = number(obj, "effective_cpus", ref, problems) or number(obj, "cpus", ref, problems) or 0.0
        memory = (number(obj, "real_memory", ref, problems) or 0.0) - (number(obj, "specialized_memory", ref,
                                                                                 problems) or 0.0)
        capacity: dict[str, float] = {"cpu": cpus * 1000.0, "memory": max(memory, 0.0)}
        disk = number(obj, "temporary_disk", ref, problems)
        if disk:
            capacity["tmp_disk"] = disk
        features = csv(obj, "active_features", ref, problems) or csv(obj, "features", ref, problems)
        parts = set(csv(obj, "partitions", ref, problems)) | member_of.get(name, set())
        labels = {NODE_LABEL: name, **{FEATURE_LABEL + f: "true" for f in features},
                  **{PARTITION_LABEL + p: "true" for p in sorted(parts)}}
        state = set(flags(obj, "state", ref, problems))
        reserved = bool(text(obj, "reservation", ref, problems))
        doc: dict[str, Any] = {"id": name, "labels": labels, "capacity": capacity,
                               "healthy": not (state & UNHEALTHY_STATES) and not reserved}
        used: set[int] = set()
        for g in gres_entries(text(obj, "gres_used", ref, problems), ref, "gres_used", problems):
            if g.name == config.gpu_gres:
                used |= set(g.indices() or [])
        out.allocated[name] = ((number(obj, "alloc_cpus", ref, problems) or 0.0) * 1000.0,
                               number(obj, "alloc_memory", ref, problems) or 0.0, used)
        devices = _devices(obj, name, ref, config, problems, capacity, out)
        if devices is not None:
            doc["devices"] = devices
        out.docs[name] = doc
    return out


def _devices(obj: dict[str, Any], name: str, ref: str, config: SlurmConfig, problems: Problems,
             capacity: dict[str, float], out: NodesRead) -> dict[str, Any] | None:
    """The node's devices from its `gpu_gres` GRES (other GRES go into `capacity`)."""
    models: dict[str, int] = {}
    for g in gres_entries(text(obj, "gres", ref, problems), ref, "gres", problems):
        if g.name != config.gpu_gres:
            capacity[g.name] = capacity.get(g.name, 0.0) + g.count
            continue
        model = model_name(g.type, config)
        models[model] = models.get(model, 0) + int(g.count)
    if not models:
        return None
    if len(models) > 1:
        problems.add(ref, "gres", "device_models", f"devices of {len(models)} models ({', '.join(sorted(models))}); "
                     "optsched holds one device model per node")
        return None
    model, count = next(iter(models.items()))
    if count > MAX_DEVICES_PER_NODE:
        problems.add(ref, "gres", "out_of_range", f"{count} devices; optsched holds at most {MAX_DEVICES_PER_NODE}")
        return None
    unhealthy: set[int] = set()
    for g in gres_entries(text(obj, "gres_drained", ref, problems), ref, "gres_drained", problems):
        if g.name == config.gpu_gres:
            idx = g.indices()
            unhealthy |= set(idx) if idx else set(range(count - int(g.count), count))
    out.device_models[model] = {"memory_gib": config.device_memory_gib.get(model, 0.0),
                                "speed": config.speeds.get(model, 1.0)}
    out.model_of[name] = model
    return {"model": model, "count": count, "unhealthy": sorted(i for i in unhealthy if 0 <= i < count)}
