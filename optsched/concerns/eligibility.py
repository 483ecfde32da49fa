"""Concern: which nodes may host a replica at all (hard rules 2, 7, 8, 9).

Node health, label selectors and required node affinity, taints (`NoSchedule`/`NoExecute` need a
toleration of their key), the spot policy (`spot: forbidden` never on spot nodes), allowed device
models, and provisioned slots. `mask` is the vectorised filter that search uses; `reasons` names the rule a given node
breaks, for the validator and for deferral reasons.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import numpy as np

from optsched.concerns.base import Violation
from optsched.model.plan import Provision
from optsched.problem import BArray, Derived, GroupSpec, JobSpec, Problem, tolerates
from optsched.view import PlanView


def _label_mask(p: Problem, key: str, value: str) -> BArray:
    return np.array([s.labels.get(key) == value for s in p.node_shapes], dtype=bool)


LABEL_MASK: Derived[BArray] = Derived("eligibility.label_mask", _label_mask)
"""Nodes whose label `key` equals `value`."""


def _affinity_mask(p: Problem, group: GroupSpec) -> BArray:
    terms = group.spec.node_affinity
    return np.array([any(t.matches(s.labels) for t in terms) for s in p.node_shapes], dtype=bool)


AFFINITY: Derived[BArray] = Derived("eligibility.affinity", _affinity_mask,
                                    key=lambda p, group: tuple(t.model_dump_json() for t in group.spec.node_affinity))
"""Nodes that match one of a group's required node affinity terms (used when it has terms)."""


def _taint_mask(p: Problem, group: GroupSpec) -> BArray:
    tols = group.spec.tolerations
    ok = np.ones(p.n_nodes, dtype=bool)
    for n, s in enumerate(p.node_shapes):
        for t in s.taints:
            if t.effect != "PreferNoSchedule" and not tolerates(tols, t.key, t.value, t.effect):
                ok[n] = False
                break
    return ok


TOLERATED: Derived[BArray] = Derived("eligibility.tolerated", _taint_mask,
                                     key=lambda p, group: tuple(group.spec.tolerations))
"""Nodes whose every scheduling taint a group's tolerations tolerate."""


def _shape_key(p: Problem, job: JobSpec, group: GroupSpec) -> tuple[object, ...]:
    return ("eligible", job.spot == "forbidden", tuple(sorted(group.spec.node_selector.items())),
            tuple(group.spec.tolerations),  # frozen models of plain fields: hashable, compared by value
            tuple(t.model_dump_json() for t in group.spec.node_affinity),
            group.model_speed.tobytes() if group.uses_devices else b"", group.whole, group.affinity,
            group.req.tobytes())


SHAPE_KEY: Derived[tuple[object, ...]] = Derived("eligibility.shape_key", _shape_key,
                                                 key=lambda p, job, group: id(group))
"""Per group (groups live as long as the problem: ids are not reused), see `shape_key`."""


def _shape_numbers(p: Problem) -> dict[int, int]:
    numbers: dict[tuple[object, ...], int] = {}
    out: dict[int, int] = {}
    for job in (*p.jobs, *p.running):
        for group in job.groups:
            out[id(group)] = numbers.setdefault(p.derived(SHAPE_KEY, job, group), len(numbers))
    return out


SHAPE_NUMBERS: Derived[dict[int, int]] = Derived("eligibility.shape_numbers", _shape_numbers)
"""Per group of the problem's jobs, queued and running (by id), the number of its replica shape:
the distinct `_shape_key`s numbered in the jobs' order (the same numbers on every computation)."""


def shape_key(p: Problem, job: JobSpec, group: GroupSpec) -> Hashable:
    """What decides where a replica of `group` may go: replicas with equal keys have equal masks.
    A group of the problem's jobs gets its shape's number (`SHAPE_NUMBERS`: the caches keyed by
    shapes hash and compare a small int, not a tuple holding selector, toleration and affinity
    models); any other group its shape's tuple, which equals no number (equal masks may then have
    unequal keys, never the reverse)."""
    number = p.derived(SHAPE_NUMBERS).get(id(group))
    return number if number is not None else p.derived(SHAPE_KEY, job, group)


def mask(p: Problem, job: JobSpec, group: GroupSpec) -> BArray:
    """Nodes (real and provisioning slots) that may ever hold a replica of `group`, ignoring usage."""
    return p.derived(ELIGIBLE, job, group)


def _mask(p: Problem, job: JobSpec, group: GroupSpec) -> BArray:
    ok = p.node_healthy.copy()
    for k, v in group.spec.node_selector.items():
        ok &= p.derived(LABEL_MASK, k, v)
    if group.spec.node_affinity:
        ok &= p.derived(AFFINITY, group)
    ok &= p.derived(TOLERATED, group)
    if job.spot == "forbidden":
        ok &= ~p.node_spot
    if group.uses_devices:
        ok &= _device_fit(p, group)
    ok &= np.all(p.cap >= group.req, axis=1)
    ok.setflags(write=False)
    return ok


ELIGIBLE: Derived[BArray] = Derived("eligibility.mask", _mask, key=shape_key)
"""`mask` per replica shape."""


def _device_fit(p: Problem, group: GroupSpec) -> BArray:
    """Nodes with an allowed device model and enough healthy devices for one replica."""
    has_model = p.node_model >= 0
    allowed = np.zeros(p.n_nodes, dtype=bool)
    allowed[has_model] = group.model_speed[p.node_model[has_model]] > 0
    healthy_devs = np.bincount(p.dev_node, weights=p.dev_healthy, minlength=p.n_nodes)
    return allowed & (healthy_devs >= max(1, group.whole))


def no_node_reason(p: Problem, job: JobSpec, group: GroupSpec) -> str:
    """The deferral reason when `mask` holds no node: `device_model` when no node has the devices
    a replica asks for, `selector` when some has but labels, affinity, taints, the spot policy or
    health keep it out (or, for a group without devices, always)."""
    if group.uses_devices and not (_device_fit(p, group) & np.all(p.cap >= group.req, axis=1)).any():
        return "device_model"
    return "selector"


def device_nodes(p: Problem, job: JobSpec) -> BArray:
    """Nodes that may hold a replica of at least one of the job's device groups."""
    usable = np.zeros(p.n_nodes, dtype=bool)
    for g in job.groups:
        if g.uses_devices:
            usable |= mask(p, job, g)
    return usable


def reasons(p: Problem, job: JobSpec, group: GroupSpec, node: int) -> list[tuple[str, str]]:
    """(rule, message) for every eligibility rule that `node` breaks for `group`."""
    shape = p.node_shapes[node]
    out = []
    if not p.node_healthy[node]:
        out.append(("health", "node is unhealthy"))
    for k, v in group.spec.node_selector.items():
        if shape.labels.get(k) != v:
            out.append(("selector", f"label {k}={v} required, node has {k}={shape.labels.get(k)}"))
    terms = group.spec.node_affinity
    if terms and not any(t.matches(shape.labels) for t in terms):
        out.append(("selector", f"node matches none of the {len(terms)} required node affinity term(s)"))
    for t in shape.taints:
        if t.effect != "PreferNoSchedule" and not tolerates(group.spec.tolerations, t.key, t.value, t.effect):
            out.append(("taint", f"taint {t.key}:{t.effect} not tolerated"))
    if job.spot == "forbidden" and p.node_spot[node]:
        out.append(("spot", "job forbids spot, node is in a spot pool"))
    return out


def slot_number(p: Problem, node: int) -> int:
    """The i of a provisioning slot ``<pool>/new-<i>``."""
    return int(p.node_ids[node].rsplit("-", 1)[1])


def provisioning_of(p: Problem, nodes: Iterable[int]) -> list[Provision]:
    """What a plan must provision for replicas on `nodes`: per pool, its highest slot used + 1."""
    count: dict[int, int] = {}
    for v in nodes:
        if p.node_provisioned[v]:
            pool = int(p.node_pool[v])
            count[pool] = max(count.get(pool, 0), slot_number(p, v) + 1)
    return [Provision(pool=p.pool_names[q], count=n) for q, n in sorted(count.items())]


def check(view: PlanView) -> list[Violation]:
    """Placements on nodes the replica may not use, and on provisioning slots not provisioned."""
    p = view.problem
    out = []
    pool_slot: dict[str, int] = {}
    for rep in view.replicas:
        group = rep.job.groups[rep.group]
        node_id = p.node_ids[rep.node]
        for rule, msg in reasons(p, rep.job, group, rep.node):
            out.append(Violation(rule, msg, job=rep.job.id, group=group.name, replica=rep.replica, node=node_id))
        if p.node_provisioned[rep.node]:
            pool = int(p.node_pool[rep.node])
            slot = pool_slot.setdefault(node_id, slot_number(p, rep.node))
            if slot >= view.provisioned.get(pool, 0):
                out.append(Violation("provisioning", f"node {node_id} is not provisioned by the plan",
                                     job=rep.job.id, group=group.name, replica=rep.replica, node=node_id))
    for pool, count in view.provisioned.items():
        limit = int(p.pool_max_nodes[pool])
        if count > limit:
            out.append(Violation("provisioning", f"pool {p.pool_names[pool]} provisions {count} > max_nodes {limit}",
                                 values={"count": count, "max_nodes": limit}))
    return out
