"""The cluster as the service knows it between rounds: Kubernetes objects (Nodes, Pods,
PriorityClasses, Kueue's ClusterQueues, LocalQueues, ResourceFlavors, Cohorts and
WorkloadPriorityClasses and Workloads, Volcano's PodGroups and Queues), kept up to date.

The state holds the API objects (as API dicts) by identity, and takes changes three ways: a whole
listing (`replace`: what a poll of the API server returns, or `PUT /v1/state`; `replace_kind` for
one kind, what a watch re-lists after 410 Gone), watch events
(`apply`: `{"type": "ADDED" | "MODIFIED" | "DELETED", "object": {...}}`, the API server's watch
shape, or `POST /v1/state/events`), and the service's own bindings (`bind`: the pod is on its node
from then on, before the API server says so). Every change bumps `generation`; a change a round
would decide differently (a pending pod came or went, a node came, went or changed) also bumps
`pending_generation`, which is what wakes the round loop (the service's own bindings do not: they
carry out the current plan).

Objects are never mutated in place: an update stores a new dict, so a round reads a consistent
listing (`listing`) without holding the lock while it solves.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from optsched.adapters.kube.config import DEVICES_ANNOTATION
from optsched.adapters.kube.objects import as_dict
from optsched.errors import InputError, InputIssue

FIELDS = {"Node": "nodes", "Pod": "pods", "PriorityClass": "priority_classes", "ClusterQueue": "cluster_queues",
          "LocalQueue": "local_queues", "ResourceFlavor": "resource_flavors", "Cohort": "cohorts",
          "WorkloadPriorityClass": "workload_priority_classes", "Workload": "workloads", "PodGroup": "pod_groups",
          "Queue": "queues"}
"""The object kinds the state holds -> the listing field that carries them, which is also the
`optsched.adapters.kube.snapshot` argument that reads them (`snapshot(**listing.objects)`)."""
KINDS = tuple(FIELDS)
NAMESPACED = ("Pod", "LocalQueue", "Workload", "PodGroup")
"""Kinds whose identity is (namespace, name)."""
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")
"""Watch event types (BOOKMARK events carry no object change and are skipped)."""


@dataclass(frozen=True)
class Listing:
    """One consistent copy of the state's objects, as a round reads them."""

    objects: dict[str, list[dict[str, Any]]]
    """Listing field (`nodes`, `pods`, `cluster_queues`, ...) -> its objects."""
    generation: int
    pending_generation: int

    @property
    def pods(self) -> list[dict[str, Any]]:
        """The Pod objects."""
        return self.objects["pods"]


def _doc(obj: Any) -> dict[str, Any] | None:
    """The API dict of a client model or a dict; None for anything else."""
    try:
        return as_dict(obj)
    except TypeError:
        return None


def _name(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else None


def _namespace(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return ns if isinstance(ns, str) and ns else "default"


def _pending(pod: dict[str, Any] | None) -> bool:
    """A pod a round would queue: not on a node, not finished."""
    if pod is None:
        return False
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    phase = status.get("phase") if isinstance(status, dict) else None
    return not (isinstance(spec, dict) and spec.get("nodeName")) and phase not in ("Succeeded", "Failed")


def _decides(kind: str, old: dict[Any, dict[str, Any]], new: dict[Any, dict[str, Any]]) -> bool:
    """Whether replacing the objects of `kind` changes what a round would decide: any change but
    to Pods, and for Pods a change of which ones are pending (`pending_generation`)."""
    if kind != "Pod":
        return new != old
    return {k for k, p in new.items() if _pending(p)} != {k for k, p in old.items() if _pending(p)}


class ClusterState:
    """Nodes, Pods, PriorityClasses and Kueue's objects by identity; thread-safe (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: dict[str, dict[Any, dict[str, Any]]] = {kind: {} for kind in KINDS}
        self.generation = 0
        self.pending_generation = 0
        self.loaded = False
        """Whether any listing or event has been given (readiness)."""

    def replace(self, nodes: Iterable[Any], pods: Iterable[Any], priority_classes: Iterable[Any] = (),
                **kueue: Iterable[Any]) -> None:
        """Replace every object with a listing (client models or API dicts); Kueue's objects by
        their listing field (`cluster_queues=...`, `local_queues=...`, ...). Raises `InputError`
        naming `nodes[i]`, `pods[i]`, ... for an object without a name."""
        unknown = set(kueue) - set(FIELDS.values())
        if unknown:
            raise InputError([InputIssue(name, "unknown_field", f"not one of {sorted(FIELDS.values())}")
                              for name in sorted(unknown)])
        given = {"nodes": nodes, "pods": pods, "priority_classes": priority_classes, **kueue}
        issues: list[InputIssue] = []
        new = {kind: self._keyed(field, kind, given.get(field, ()), issues) for kind, field in FIELDS.items()}
        if issues:
            raise InputError(issues)
        with self._lock:
            changed = any(_decides(k, self._stores[k], new[k]) for k in KINDS)
            self._stores = new
            self.generation += 1
            self.pending_generation += changed or not self.loaded
            self.loaded = True

    def replace_kind(self, field: str, objects: Iterable[Any]) -> None:
        """Replace the objects of one kind (by its listing field: `nodes`, `pods`, ...), the others
        kept: what a watch re-lists after its resourceVersion expired (`optsched.service.watch`).
        Raises `InputError` naming `<field>[i]` for an object without a name, or the field itself
        when it is not one the state holds."""
        kind = next((k for k, f in FIELDS.items() if f == field), None)
        if kind is None:
            raise InputError([InputIssue(field, "unknown_field", f"not one of {sorted(FIELDS.values())}")])
        issues: list[InputIssue] = []
        new = self._keyed(field, kind, objects, issues)
        if issues:
            raise InputError(issues)
        with self._lock:
            changed = _decides(kind, self._stores[kind], new)
            self._stores[kind] = new
            self.generation += 1
            self.pending_generation += changed or not self.loaded
            self.loaded = True

    @staticmethod
    def _keyed(field: str, kind: str, objects: Iterable[Any], issues: list[InputIssue]) -> dict[Any, dict[str, Any]]:
        out: dict[Any, dict[str, Any]] = {}
        for i, obj in enumerate(objects):
            doc = _doc(obj)
            if doc is None:
                issues.append(InputIssue(f"{field}[{i}]", "type", "expected a Kubernetes object"))
                continue
            name = _name(doc)
            if name is None:
                issues.append(InputIssue(f"{field}[{i}].metadata.name", "required", "an object needs a name"))
                continue
            out[(_namespace(doc), name) if kind in NAMESPACED else name] = doc
        return out
    def apply(self, events: Iterable[Any]) -> int:
        """Apply watch events in order; returns how many changed the state. Raises `InputError`
        (naming `events[i]` and the field) before applying any, if one is malformed."""
        parsed: list[tuple[str, str, Any, dict[str, Any]]] = []
        issues: list[InputIssue] = []
        for i, event in enumerate(events):
            ev = event if isinstance(event, dict) else None
            if ev is None:
                issues.append(InputIssue(f"events[{i}]", "type", "expected a watch event mapping"))
                continue
            kind_of = ev.get("type")
            if kind_of == "BOOKMARK":
                continue
            if kind_of not in EVENT_TYPES:
                issues.append(InputIssue(f"events[{i}].type", "event_type", f"{kind_of!r} is not one of {EVENT_TYPES}"))
                continue
            obj = _doc(ev.get("object"))
            if obj is None:
                issues.append(InputIssue(f"events[{i}].object", "type", "expected an API object"))
                continue
            kind = obj.get("kind")
            if kind not in KINDS:
                issues.append(InputIssue(f"events[{i}].object.kind", "kind", f"{kind!r} is not one of {KINDS}"))
                continue
            name = _name(obj)
            if name is None:
                issues.append(InputIssue(f"events[{i}].object.metadata.name", "required", "an object needs a name"))
                continue
            key: Any = (_namespace(obj), name) if kind in NAMESPACED else name
            parsed.append((kind_of, kind, key, obj))
        if issues:
            raise InputError(issues)
        changed = 0
        with self._lock:
            for kind_of, kind, key, obj in parsed:
                store = self._stores[kind]
                before = store.get(key)
                if kind_of == "DELETED":
                    if store.pop(key, None) is None:
                        continue
                else:
                    store[key] = obj
                changed += 1
                self.generation += 1
                if kind != "Pod" or _pending(before) or _pending(obj if kind_of != "DELETED" else None):
                    self.pending_generation += 1
            self.loaded = True
        return changed

    def bind(self, namespace: str, name: str, uid: str | None, node: str, devices: list[int] | None = None) -> bool:
        """Record that a pending pod is bound to `node` (with the plan's device indices in its
        `optsched.io/devices` annotation, as the API server copies them from the Binding).
        False when the pod is not known, not pending, has another uid, or the node is unknown."""
        with self._lock:
            pod = self._stores["Pod"].get((namespace, name))
            if pod is None or not _pending(pod) or node not in self._stores["Node"]:
                return False
            if uid and (pod.get("metadata") or {}).get("uid") not in (None, uid):
                return False
            new = copy.deepcopy(pod)
            new.setdefault("spec", {})["nodeName"] = node
            if devices:
                new.setdefault("metadata", {}).setdefault("annotations", {})[DEVICES_ANNOTATION] = \
                    ",".join(str(d) for d in devices)
            self._stores["Pod"][(namespace, name)] = new
            self.generation += 1  # not pending_generation: the bind carries out the plan, nothing to re-decide
            return True

    def listing(self) -> Listing:
        """A consistent copy of the objects (the dicts are shared: they are never mutated)."""
        with self._lock:
            return Listing(objects={FIELDS[k]: list(store.values()) for k, store in self._stores.items()},
                           generation=self.generation, pending_generation=self.pending_generation)

    def has_node(self, name: str) -> bool:
        """Whether the node is (still) in the state."""
        with self._lock:
            return name in self._stores["Node"]

    def counts(self) -> dict[str, int]:
        """How many objects of each kind (by listing field), and how many pods are pending."""
        with self._lock:
            out = {FIELDS[k]: len(store) for k, store in self._stores.items()}
            out["pending_pods"] = sum(_pending(p) for p in self._stores["Pod"].values())
            return out
