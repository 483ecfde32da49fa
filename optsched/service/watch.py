"""Watching the API server: list each kind once, then follow its changes as watch events.

This is what client-go's reflector does for kube-scheduler's informers, and what a scheduler of
thousands of nodes needs instead of a full listing every few seconds (1.4 MiB of JSON at 1,280
nodes, benchmarks/results/service.md):

1. **List** every kind the service reads (Nodes, Pods, PriorityClasses; Kueue's and Volcano's
   objects in the newest version the API server serves, as `optsched.service.source` lists them),
   and replace the state with all of them at once: the state is ready only with every kind read,
   so no round ever sees Nodes without their Pods, or jobs without their ClusterQueue's quotas.
2. **Watch** each kind from its listing's `metadata.resourceVersion` (with bookmarks), one thread
   per kind, applying each event to the state as it comes (`ClusterState.apply`: the watch shape).
   A watch the API server ends (its timeout, `WATCH_TIMEOUT_S` here) is resumed from the last
   resourceVersion seen.
3. **410 Gone** (the resourceVersion is too old: the API server no longer holds the events since)
   re-lists that kind and replaces it (`ClusterState.replace_kind`), then watches again. Any other
   failure is logged, waited out (`backoff`: 1 s doubling up to `MAX_BACKOFF_S`) and re-listed.

Lists and watches read the API server's JSON as it is (`_preload_content=False`): the objects are
never turned into client models and back. The events are those of the official client's
`kubernetes.watch.Watch` (its ERROR handling and line reading), given a plain function so that it
hands the raw objects through.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from optsched.adapters.kube.objects import object_version
from optsched.service.source import KUEUE_GROUP, KUEUE_KINDS, VOLCANO_GROUP, VOLCANO_KINDS, served
from optsched.service.state import FIELDS, ClusterState

LOG = logging.getLogger("optsched.service")

WATCH_TIMEOUT_S = 300
"""Seconds the API server keeps one watch open before it ends it (`timeoutSeconds`); the watch is
then resumed from the last resourceVersion (client-go picks 5-10 minutes)."""
MAX_BACKOFF_S = 30.0
"""Longest wait before re-listing after a failure (1 s, doubling)."""
GONE = 410
"""HTTP status of a resourceVersion the API server no longer holds events since."""

KIND_OF = {field: kind for kind, field in FIELDS.items()}
"""Listing field -> object kind (`nodes` -> `Node`)."""

Stream = Callable[..., Iterable[dict[str, Any]]]
"""`stream(call, resource_version=..., timeout_seconds=..., allow_watch_bookmarks=True)`: watch
events (`{"type": ..., "raw_object": {...}}`), as `kubernetes.watch.Watch().stream` yields them."""


@dataclass(frozen=True)
class Watched:
    """One kind the service lists and watches."""

    field: str
    """Its listing field (`nodes`, `pods`, `cluster_queues`, ...)."""
    call: Callable[..., Any]
    """The API call that lists it (and, with `watch=True`, watches it), given keyword arguments only."""


def core_kinds(core: Any, scheduling: Any) -> list[Watched]:
    """Nodes, Pods and PriorityClasses (CoreV1Api, SchedulingV1Api)."""
    return [Watched("nodes", core.list_node), Watched("pods", core.list_pod_for_all_namespaces),
            Watched("priority_classes", scheduling.list_priority_class)]


def custom_kinds(custom: Any) -> list[Watched]:
    """Kueue's and Volcano's kinds in the newest version the API server serves (one list call per
    version tried; a kind not served at all is not watched and stays empty)."""
    out = []
    for group, kinds in ((KUEUE_GROUP, KUEUE_KINDS), (VOLCANO_GROUP, VOLCANO_KINDS)):
        for field, plural, versions in kinds:
            got = served(custom, group, plural, versions, limit=1)
            if got is not None:
                out.append(Watched(field, functools.partial(custom.list_cluster_custom_object, group, got[0], plural)))
    return out


def list_kind(kind: Watched) -> tuple[list[dict[str, Any]], str | None]:
    """The kind's objects as API dicts (each with its `kind`), and the listing's resourceVersion."""
    answer = kind.call(_preload_content=False)
    data = json.loads(answer.data)
    items = list(data.get("items") or [])
    for obj in items:
        if isinstance(obj, dict):
            obj.setdefault("kind", KIND_OF[kind.field])
    return items, (data.get("metadata") or {}).get("resourceVersion")


def official_stream(call: Callable[..., Any], **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Watch events from the official client's `Watch().stream`, given a plain function (no return
    type it could read) so that it yields the objects as the API server sent them."""
    from kubernetes import watch

    def plain(**kw: Any) -> Any:
        return call(**kw)

    return watch.Watch().stream(plain, **kwargs)


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` failures in a row (1 s, doubling, at most `MAX_BACKOFF_S`)."""
    return float(min(MAX_BACKOFF_S, 2.0 ** max(0, failures - 1)))


class Reflector:
    """One kind's watch loop (module docstring, steps 2-3), from a listing's resourceVersion."""

    def __init__(self, kind: Watched, state: ClusterState, stream: Stream, stop: threading.Event,
                 resource_version: str | None, timeout_s: int = WATCH_TIMEOUT_S) -> None:
        self.kind = kind
        self.state = state
        self.stream = stream
        self.stop = stop
        self.resource_version = resource_version
        """The last resourceVersion seen (None: list again first)."""
        self.timeout_s = timeout_s
        self.lists = 0
        """Listings made after the first (each 410 or failure costs one)."""
        self.failures = 0

    def relist(self) -> None:
        """List the kind again and replace it in the state."""
        items, self.resource_version = list_kind(self.kind)
        self.state.replace_kind(self.kind.field, items)
        self.lists += 1

    def watch_once(self) -> None:
        """One watch from the last resourceVersion, applying its events, until it ends."""
        events = self.stream(self.kind.call, resource_version=self.resource_version, timeout_seconds=self.timeout_s,
                             allow_watch_bookmarks=True)
        for event in events:
            obj = event.get("raw_object", event.get("object"))
            version = object_version(obj)
            if event.get("type") != "BOOKMARK" and isinstance(obj, dict):
                obj.setdefault("kind", KIND_OF[self.kind.field])
                self.state.apply([{"type": event.get("type"), "object": obj}])
            if version is not None:
                self.resource_version = version[3]
            self.failures = 0
            if self.stop.is_set():
                return

    def run(self) -> None:
        """Watch until `stop` is set (module docstring)."""
        while not self.stop.is_set():
            try:
                if self.resource_version is None:
                    self.relist()
                self.watch_once()
            except Exception as exc:
                self.resource_version = None
                if getattr(exc, "status", None) == GONE:
                    LOG.info("watch of %s: resourceVersion too old (410), listing again", self.kind.field)
                    continue
                self.failures += 1
                LOG.warning("watch of %s failed (%s); listing again in %.0f s", self.kind.field, exc,
                            backoff(self.failures))
                self.stop.wait(backoff(self.failures))


def watcher(core: Any, scheduling: Any, custom: Any = None, stop: threading.Event | None = None,
            stream: Stream = official_stream, timeout_s: int = WATCH_TIMEOUT_S) -> Callable[[ClusterState], None]:
    """A source for `create_app` (module docstring): lists every kind into the state at once,
    then watches each in its own thread until `stop` is set. A first listing that fails is
    retried (with `backoff`) before anything is watched: the state stays empty, not ready."""
    stop = stop or threading.Event()

    def run(state: ClusterState) -> None:
        failures = 0
        while not stop.is_set():
            try:
                kinds = core_kinds(core, scheduling) + (custom_kinds(custom) if custom is not None else [])
                listed = {kind.field: list_kind(kind) for kind in kinds}
                break
            except Exception:
                failures += 1
                LOG.exception("listing the cluster failed; trying again in %.0f s", backoff(failures))
                stop.wait(backoff(failures))
        else:
            return
        objects = {field: items for field, (items, _) in listed.items()}
        state.replace(objects.pop("nodes"), objects.pop("pods"), objects.pop("priority_classes"), **objects)
        threads = [threading.Thread(target=Reflector(kind, state, stream, stop, listed[kind.field][1], timeout_s).run,
                                    name=f"optsched-watch-{kind.field}", daemon=True) for kind in kinds]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    return run


__all__ = ["Reflector", "Watched", "backoff", "core_kinds", "custom_kinds", "list_kind", "official_stream",
           "watcher"]
