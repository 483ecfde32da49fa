"""Concern: devices, shares, models and interconnect groups (hard rules 2 and 3).

A whole-device replica takes exactly its count of distinct healthy devices of an allowed model on
one node; a device is used whole by one replica or shared by fractional replicas whose shares sum
to at most 1. `device_affinity: required` keeps a replica's devices inside one interconnect
group, or, for more devices than the largest group holds, in whole groups. `pick` chooses device
indices for search; `replica_problems` and `check` verify them.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from optsched.concerns.base import Violation
from optsched.ledger import EPS, Ledger
from optsched.problem import GroupSpec, Problem
from optsched.view import PlanView

DevicePolicy = Literal["first", "best"]


def _whole_groups(p: Problem, ledger: Ledger, node: int, k: int) -> tuple[int, ...] | None:
    """Fully free interconnect groups whose sizes add up to exactly `k` devices (largest first)."""
    a, b = ledger.node_devices(node)
    groups = p.dev_group[a:b]
    free = p.dev_healthy[a:b] & (ledger.dev_used[a:b] <= EPS)
    chosen: list[int] = []
    for gid in sorted(set(groups.tolist()), key=lambda x: -int(p.group_size[x])):
        members = np.flatnonzero(groups == gid)
        if free[members].all() and len(chosen) + len(members) <= k:
            chosen.extend((a + members).tolist())
        if len(chosen) == k:
            return tuple(chosen)
    return None


def pick(p: Problem, ledger: Ledger, node: int, group: GroupSpec,
         policy: DevicePolicy = "first") -> tuple[tuple[int, ...], float] | None:
    """Device indices (flat) and share for one replica of `group` on `node`, or None.

    `first` takes the lowest free indices (the device plugin's default order); `best` packs
    into the interconnect group with the fewest free devices that still holds the request
    (fractional: the device with the least free share that fits), leaving whole groups free.
    """
    if not group.uses_devices:
        return (), 1.0
    if group.model_speed[p.node_model[node]] <= 0:
        return None
    a, b = ledger.node_devices(node)
    healthy = p.dev_healthy[a:b]
    used = ledger.dev_used[a:b]
    if group.share:
        ok = np.flatnonzero(healthy & (used + group.share <= 1.0 + EPS))
        if not len(ok):
            return None
        i = int(ok[np.argmax(used[ok])]) if policy == "best" else int(ok[0])
        return (a + i,), group.share
    k = group.whole
    free = healthy & (used <= EPS)
    if int(free.sum()) < k:
        return None
    if group.affinity == "required" and k > p.node_max_group[node]:
        chosen = _whole_groups(p, ledger, node, k)
        return (chosen, 1.0) if chosen is not None else None
    if group.affinity != "none" or policy == "best":
        groups = p.dev_group[a:b]
        per_group = {}
        for gid in np.unique(groups[free]):
            members = np.flatnonzero((groups == gid) & free)
            if len(members) >= k:
                per_group[int(gid)] = members
        if per_group:
            if policy == "best":
                gid = min(per_group, key=lambda g: (len(per_group[g]), g))
            else:
                gid = min(per_group)
            return tuple((a + per_group[gid][:k]).tolist()), 1.0
        if group.affinity == "required":
            return None
    return tuple((a + np.flatnonzero(free)[:k]).tolist()), 1.0


def replica_problems(p: Problem, group: GroupSpec, node: int, devices: tuple[int, ...],
                     share: float) -> list[str]:
    """What is wrong with one replica's device assignment (empty when valid)."""
    out = []
    if not group.uses_devices:
        if devices:
            out.append(f"a replica without a gpu request holds devices {devices}")
        return out
    model = p.node_model[node]
    if model < 0 or group.model_speed[model] <= 0:
        name = p.models[model] if model >= 0 else "none"
        out.append(f"device model {name} is not allowed")
    unhealthy = [int(p.dev_local[d]) for d in devices if not p.dev_healthy[d]]
    if unhealthy:
        out.append(f"unhealthy devices {unhealthy}")
    if group.share:
        if len(devices) != 1:
            out.append(f"a fractional replica needs exactly 1 device, got {len(devices)}")
        if abs(share - group.share) > EPS:
            out.append(f"share {share:g} differs from the request {group.share:g}")
        return out
    if len(devices) != group.whole:
        out.append(f"needs {group.whole} devices, got {len(devices)}")
    if abs(share - 1.0) > EPS:
        out.append(f"whole-device replica with share {share:g}")
    if group.affinity == "required" and devices:
        gids = p.dev_group[list(devices)]
        uniq = set(gids.tolist())
        if group.whole <= p.node_max_group[node]:
            if len(uniq) > 1:
                local = [int(p.dev_local[d]) for d in devices]
                out.append(f"devices {local} span {len(uniq)} interconnect groups (affinity required)")
        elif sum(int(p.group_size[g]) for g in uniq) != len(devices):
            out.append("devices do not form whole interconnect groups (affinity required)")
    return out


def check(view: PlanView) -> list[Violation]:
    """Per-replica device validity and per-device oversubscription."""
    p = view.problem
    out = []
    for rep in view.replicas:
        group = rep.job.groups[rep.group]
        for msg in replica_problems(p, group, rep.node, rep.devices, rep.share):
            rule = "device_model" if "model" in msg else ("interconnect" if "interconnect" in msg else "devices")
            out.append(Violation(rule, msg, job=rep.job.id, group=group.name, replica=rep.replica,
                                 node=p.node_ids[rep.node]))
    touched = view.new_usage.dev_used > 0
    for d in np.flatnonzero(touched & (view.ledger.dev_used > 1.0 + EPS)):
        out.append(Violation("devices", f"device {int(p.dev_local[d])} used {view.ledger.dev_used[d]:g} > 1",
                             node=p.node_ids[p.dev_node[d]], values={"used": float(view.ledger.dev_used[d])}))
    return out
