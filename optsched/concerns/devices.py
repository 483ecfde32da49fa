"""Concern: devices, shares, models and interconnect groups (hard rules 2 and 3).

A whole-device replica takes exactly its count of distinct healthy devices of an allowed model on
one node; a device is used whole by one replica or shared by fractional replicas whose shares sum
to at most 1. `device_affinity: required` keeps a replica's devices inside one interconnect
group, or, for more devices than the largest group holds, in whole groups. `pick` chooses device
indices for search; `replica_problems` and `check` verify them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from optsched.concerns.base import Violation
from optsched.ledger import EPS, NODE_DEVICE_LISTS, NODE_ONE_GROUP, Ledger
from optsched.problem import GroupSpec, Problem
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import Key, RoundModel

MILLI = 1000

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
    a, healthy, groups = p.derived(NODE_DEVICE_LISTS)[node]
    # one node's few devices: plain Python (numpy's per-call cost dominated this in profiles)
    used = ledger.dev_used[a:a + len(healthy)].tolist()
    one = p.derived(NODE_ONE_GROUP)[node]  # all healthy, one group: no health to test, nothing to group
    if group.share:
        ok = [i for i, u in enumerate(used) if u + group.share <= 1.0 + EPS] if one else \
            [i for i, (h, u) in enumerate(zip(healthy, used, strict=True)) if h and u + group.share <= 1.0 + EPS]
        if not ok:
            return None
        i = max(ok, key=lambda i: (used[i], -i)) if policy == "best" else ok[0]
        return (a + i,), group.share
    k = group.whole
    free = [i for i, u in enumerate(used) if u <= EPS] if one else \
        [i for i, (h, u) in enumerate(zip(healthy, used, strict=True)) if h and u <= EPS]
    if len(free) < k:
        return None
    if one:  # the one group holds the request (k <= its free devices): its lowest free devices, as below
        return tuple(a + i for i in free[:k]), 1.0
    if group.affinity == "required" and k > p.node_max_group[node]:
        chosen = _whole_groups(p, ledger, node, k)
        return (chosen, 1.0) if chosen is not None else None
    if group.affinity != "none" or policy == "best":
        members: dict[int, list[int]] = {}
        for i in free:
            members.setdefault(groups[i], []).append(i)
        fitting = [gid for gid, m in members.items() if len(m) >= k]
        if fitting:
            gid = min(fitting, key=lambda g: (len(members[g]), g)) if policy == "best" else min(fitting)
            return tuple(a + i for i in members[gid][:k]), 1.0
        if group.affinity == "required":
            return None
    return tuple(a + i for i in free[:k]), 1.0


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


def _held_devices(r: RoundModel, v: int) -> tuple[dict[int, Any], dict[int, list[tuple[int, Any]]]]:
    """Devices of node `v` held by evictable running jobs: whole ones -> the holder's keep variable;
    shared ones -> [(share in thousandths, keep variable)]."""
    whole: dict[int, Any] = {}
    shares: dict[int, list[tuple[int, Any]]] = {}
    for keep, job, pls in r.held.get(v, []):
        for pl in pls:
            g = job.groups[pl.group]
            for d in pl.devices:
                if g.share and not g.whole:
                    shares.setdefault(d, []).append((round(pl.share * MILLI), keep))
                else:
                    whole[d] = keep
    return whole, shares


def cpsat(r: RoundModel) -> None:
    """CP-SAT: whole devices per interconnect group, fractional shares per device (formulation D1-D7).

    Per node v, with F_q the fully free healthy devices of interconnect group q:
    - fractional keys get per-device counts ``z[k, d]``; a fully free device that takes any share
      is marked ``u[d]`` and is no longer free for whole replicas (D1, D2);
    - on a node with one group, or without replicas that need affinity, the whole devices of all
      replicas plus the marked devices fit the free devices (D3);
    - otherwise, replicas with `device_affinity: required` are counted per group (``yq``), those
      larger than a group take whole groups (``kq``, nodes with equal group sizes only), the rest
      spread over groups as ``t[q]``, and each group's use fits its free devices (D4-D6);
    - the devices of an evictable running job are free in `base` and taken while it is kept: its
      shares add ``share x keep`` to their device's load and mark it, its whole devices count as
      used in D3 / their group and take no share (D7).
    Decoding reads these counts back to pick device indices (`pick_from_counts`).
    """
    p, m, base = r.p, r.model, r.base
    for v in r.held:  # D7: a kept job's devices are its own, whatever the base holds on them
        whole_held, share_held = _held_devices(r, v)
        for d, keep in whole_held.items():
            if float(base.dev_used[d]) > EPS or not p.dev_healthy[d]:
                m.add(keep == 0)
        for d, items in share_held.items():
            cap = math.floor((1.0 - float(base.dev_used[d])) * MILLI + 1e-6)
            if sum(c for c, _ in items) > cap:
                m.add(r.wsum((x for _, x in items), (c for c, _ in items)) <= cap)
    plan = r.device_plan
    z: dict[tuple[Key, int], Any] = plan.setdefault("z", {})
    u: dict[int, Any] = plan.setdefault("u", {})
    yq: dict[tuple[Key, int], Any] = plan.setdefault("yq", {})
    kq: dict[tuple[Key, int], Any] = plan.setdefault("kq", {})
    for v, keys in r.by_node.items():
        a, b = base.node_devices(v)
        if a == b:
            continue
        groups_of = {k: p.jobs[k[0]].groups[k[1]] for k in keys}
        dev_keys = [k for k in keys if groups_of[k].uses_devices]
        if not dev_keys:
            continue
        healthy = p.dev_healthy[a:b]
        used = base.dev_used[a:b]
        fully_free = [a + i for i in range(b - a) if healthy[i] and used[i] <= EPS]
        partial = [a + i for i in range(b - a) if healthy[i] and EPS < used[i] < 1 - EPS]
        frac = [k for k in dev_keys if groups_of[k].share]
        whole_held, share_held = _held_devices(r, v)  # evictable running jobs' devices (D7)
        for d in fully_free if frac else []:
            u[d] = m.new_bool_var(f"u[{d}]")
        for d in fully_free:
            if d in share_held and d not in u:
                u[d] = m.new_bool_var(f"u[{d}]")
            for _, keep in share_held.get(d, []):
                m.add(u[d] >= keep)  # a kept share makes the device partly used
            if d in whole_held and d in u:
                m.add(u[d] + whole_held[d] <= 1)  # a kept whole device takes no share
        for k in frac:  # D1, D2
            share = round(groups_of[k].share * MILLI)
            per_dev = []
            for d in [*partial, *fully_free]:
                cap = math.floor((1.0 - float(base.dev_used[d])) * MILLI + 1e-6)
                if cap >= share:
                    var = m.new_int_var(0, cap // share, f"z[{k},{d}]")
                    z[(k, d)] = var
                    per_dev.append(var)
            m.add(r.y[k] == r.sum(per_dev))
        on_node: dict[int, list[tuple[int, Any]]] = {}
        for k in frac:
            for d in [*partial, *fully_free]:
                if (k, d) in z:
                    on_node.setdefault(d, []).append((round(groups_of[k].share * MILLI), z[(k, d)]))
        for d, items in on_node.items():
            items = items + share_held.get(d, [])
            load = r.wsum((x for _, x in items), (c for c, _ in items))
            cap = MILLI if d in u else math.floor((1.0 - float(base.dev_used[d])) * MILLI + 1e-6)
            m.add(load <= (MILLI * u[d] if d in u else cap))
        whole = [k for k in dev_keys if groups_of[k].whole]
        if not whole:
            continue
        marks = r.sum([*(u[d] for d in fully_free if d in u), *(whole_held[d] for d in fully_free if d in whole_held)])
        gids = sorted(set(p.dev_group[a:b].tolist()))
        needs_affinity = [k for k in whole if groups_of[k].affinity == "required"]
        if len(gids) == 1 or not needs_affinity:  # D3
            m.add(r.wsum((r.y[k] for k in whole), (groups_of[k].whole for k in whole)) + marks
                  <= int(base.free_whole[v]))
            continue
        free_q = {q: [d for d in fully_free if p.dev_group[d] == q] for q in gids}
        sizes = {int(p.group_size[q]) for q in gids}
        t = {q: m.new_int_var(0, len(free_q[q]), f"t[{v},{q}]") for q in gids}
        use_q: dict[int, list[Any]] = {q: [t[q], *(u[d] for d in free_q[q] if d in u),
                                           *(whole_held[d] for d in free_q[q] if d in whole_held)] for q in gids}
        for k in needs_affinity:
            g = groups_of[k]
            if g.whole <= p.node_max_group[v]:  # D4: inside one group
                parts = []
                for q in gids:
                    if len(free_q[q]) >= g.whole:
                        var = m.new_int_var(0, len(free_q[q]) // g.whole, f"yq[{k},{q}]")
                        yq[(k, q)] = var
                        parts.append(var)
                        use_q[q].append(g.whole * var)
                m.add(r.y[k] == r.sum(parts))
            elif len(sizes) == 1 and g.whole % next(iter(sizes)) == 0:  # D5: whole groups
                size = next(iter(sizes))
                parts = []
                for q in gids:
                    if len(free_q[q]) == size:
                        var = m.new_bool_var(f"kq[{k},{q}]")
                        kq[(k, q)] = var
                        parts.append(var)
                        use_q[q].append(size * var)
                m.add(g.whole * r.y[k] == size * r.sum(parts))
            else:
                m.add(r.y[k] == 0)  # unequal groups: not modelled, not placed here
        rest = [k for k in whole if groups_of[k].affinity != "required"]
        m.add(r.sum(t.values()) == r.wsum((r.y[k] for k in rest), (groups_of[k].whole for k in rest)))  # D6
        for q in gids:
            m.add(r.sum(use_q[q]) <= len(free_q[q]))


BY_NODE = "counts_by_node"
"""Key of the device plan's per-node index of its count variables (built once per model)."""


def _counts_on_node(plan: dict[str, Any]) -> dict[int, dict[str, list[tuple[Key, int, Any]]]]:
    """The device plan's `z`, `yq` and `kq` count variables grouped by node, in their order (the
    decoder asks per node: scanning every variable per node was quadratic, 1.9 s of a 5 s MILP
    round on ascend-910b-4k)."""
    index = plan.get(BY_NODE)
    if index is None:
        index = {}
        for kind in ("z", "yq", "kq"):
            for (key, x), var in plan.get(kind, {}).items():
                index.setdefault(key[2], {}).setdefault(kind, []).append((key, x, var))
        plan[BY_NODE] = index
    return index


def pick_from_counts(r: RoundModel, solver: Any, v: int,
                     replicas: list[tuple[Key, GroupSpec]]) -> list[tuple[tuple[int, ...], float]] | None:
    """Device indices for the replicas placed on node `v`, read from the model's per-group counts.

    Order: fractional replicas on their devices, affinity replicas in their groups, then the
    rest on any free devices. Returns None if the counts cannot be realised (a model bug).
    """
    p, base = r.p, r.base
    on_node = _counts_on_node(r.device_plan).get(v, {})
    a, b = base.node_devices(v)
    free = [d for d in range(a, b) if p.dev_healthy[d] and base.dev_used[d] <= EPS]
    taken: set[int] = set()
    out: list[tuple[tuple[int, ...], float] | None] = [None] * len(replicas)
    todo: dict[Key, list[int]] = {}
    for i, (key, _) in enumerate(replicas):
        todo.setdefault(key, []).append(i)
    for key, d, var in on_node.get("z", []):
        if key not in todo:
            continue
        for _ in range(int(solver.value(var))):
            i = todo[key].pop(0)
            out[i] = ((d,), replicas[i][1].share)
            taken.add(d)
    for key, q, var in on_node.get("yq", []):
        if key not in todo:
            continue
        g = p.jobs[key[0]].groups[key[1]]
        for _ in range(int(solver.value(var))):
            devs = [d for d in free if p.dev_group[d] == q and d not in taken][: g.whole]
            if len(devs) < g.whole:
                return None
            taken.update(devs)
            out[todo[key].pop(0)] = (tuple(devs), 1.0)
    big: dict[Key, list[int]] = {}
    for key, q, var in on_node.get("kq", []):
        if key in todo and solver.value(var):
            big.setdefault(key, []).extend(d for d in free if p.dev_group[d] == q)
    for key, devs in big.items():
        g = p.jobs[key[0]].groups[key[1]]
        for c in range(0, len(devs), g.whole):
            chunk = devs[c:c + g.whole]
            taken.update(chunk)
            out[todo[key].pop(0)] = (tuple(chunk), 1.0)
    for key, idx in todo.items():
        g = p.jobs[key[0]].groups[key[1]]
        for i in idx:
            if out[i] is not None:
                continue
            if not g.uses_devices:
                out[i] = ((), 1.0)
                continue
            devs = [d for d in free if d not in taken][: g.whole]
            if len(devs) < g.whole or not g.whole:
                return None
            taken.update(devs)
            out[i] = (tuple(devs), 1.0)
    if any(x is None for x in out):
        return None
    return [x for x in out if x is not None]
