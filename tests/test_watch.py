"""Watching the API server (`optsched.service.watch`): list every kind into the state at once,
then follow watch events from each listing's resourceVersion; 410 Gone re-lists.

The API calls are faked at the HTTP response level (a list answers JSON bytes; a watch answers a
stream of JSON lines, as the API server sends them), and the events are read by the official
client's `kubernetes.watch.Watch`, so its line reading and ERROR handling are the real ones.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("kubernetes")

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from optsched.errors import InputError
from optsched.service import ClusterState
from optsched.service.watch import Reflector, Watched, backoff, list_kind, official_stream, watcher
from tests.test_kube_adapter import cluster_64, pod

API = ApiClient()


class Response:
    """What the client's calls return with `_preload_content=False` (urllib3's response): the
    body as `data`, or read in chunks with `stream` (a watch)."""

    status = 200

    def __init__(self, data: bytes = b"", lines: list[dict[str, Any]] | None = None) -> None:
        self.data = data
        self.lines = lines or []
        self.closed = False

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        for line in self.lines:  # split mid-line, as chunks come from a socket
            raw = (json.dumps(line) + "\n").encode()
            yield raw[:7]
            yield raw[7:]

    def close(self) -> None:
        self.closed = True

    def release_conn(self) -> None:
        pass


class FakeKube:
    """CoreV1Api, SchedulingV1Api and CustomObjectsApi list/watch calls on scripted objects and
    events: `watches[field]` is a list of event lists, one per watch call (then empty watches).
    Kueue is served in v1beta1 only; Volcano not at all (404)."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]],
                 watches: dict[str, list[list[dict[str, Any]]]] | None = None) -> None:
        self.objects = objects
        self.watches = watches or {}
        self.calls: list[tuple[str, str, str | None]] = []
        """(field, "list" | "watch", resourceVersion asked) per call."""
        self.version = 100

    def _call(self, field: str, kw: dict[str, Any]) -> Any:
        if kw.get("watch"):
            self.calls.append((field, "watch", kw.get("resource_version")))
            script = self.watches.get(field, [])
            if not script:
                time.sleep(0.01)
                return Response(lines=[])
            return Response(lines=script.pop(0))
        self.calls.append((field, "list", None))
        self.version += 1
        body = {"kind": "List", "metadata": {"resourceVersion": str(self.version)},
                "items": self.objects.get(field, [])}
        if not kw.get("_preload_content", True):
            return Response(data=json.dumps(body).encode())
        return body

    def list_node(self, **kw: Any) -> Any:
        return self._call("nodes", kw)

    def list_pod_for_all_namespaces(self, **kw: Any) -> Any:
        return self._call("pods", kw)

    def list_priority_class(self, **kw: Any) -> Any:
        return self._call("priority_classes", kw)

    def list_cluster_custom_object(self, group: str, version: str, plural: str, **kw: Any) -> Any:
        field = {"clusterqueues": "cluster_queues", "localqueues": "local_queues",
                 "resourceflavors": "resource_flavors"}.get(plural)
        if group != "kueue.x-k8s.io" or version != "v1beta1" or field is None:
            raise ApiException(status=404, reason="Not Found")
        return self._call(field, kw)

    def watched(self, field: str) -> list[str | None]:
        return [rv for f, what, rv in self.calls if f == field and what == "watch"]

    def listed(self, field: str) -> int:
        return sum(1 for f, what, _ in self.calls if f == field and what == "list")


def dicts() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes, pods = cluster_64()
    # a list's items carry no kind (the list has it); the watch adds it back
    return [API.sanitize_for_serialization(n) for n in nodes], [API.sanitize_for_serialization(p) for p in pods]


def with_rv(obj: dict[str, Any], rv: str, kind: str) -> dict[str, Any]:
    return {**obj, "kind": kind, "metadata": {**obj["metadata"], "resourceVersion": rv}}


def run_until(source: Any, state: ClusterState, stop: threading.Event, done: Any, seconds: float = 10.0) -> None:
    thread = threading.Thread(target=source, args=(state,), daemon=True)
    thread.start()
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_the_watcher_lists_every_kind_at_once_then_applies_events_from_the_listings_version() -> None:
    nodes, pods = dicts()
    late = with_rv(API.sanitize_for_serialization(pod("late", gpus=1)), "205", "Pod")
    gone_node = with_rv(nodes[63], "206", "Node")
    api = FakeKube({"nodes": nodes, "pods": pods},
                   {"pods": [[{"type": "ADDED", "object": late},
                              {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "300"}}}]],
                    "nodes": [[{"type": "DELETED", "object": gone_node}]]})
    state = ClusterState()
    stop = threading.Event()
    run_until(watcher(api, api, None, stop, timeout_s=1), state, stop,
              lambda: len(api.watched("pods")) >= 3 and len(api.watched("nodes")) >= 2)
    counts = state.counts()
    assert (counts["nodes"], counts["pods"]) == (63, 87)
    listed_at_once = ClusterState()
    listed_at_once.replace(nodes, pods)
    assert counts["pending_pods"] == listed_at_once.counts()["pending_pods"] + 1  # and the one added
    # listed once each, in one replace (one generation), then two events
    assert (api.listed("nodes"), api.listed("pods"), api.listed("priority_classes")) == (1, 1, 1)
    assert state.generation == 3 and state.pending_generation == 3
    # each watch starts from the listing's version, and resumes from the last one seen (a bookmark's)
    assert api.watched("nodes")[:2] == ["101", "206"]
    assert api.watched("pods")[:3] == ["102", "300", "300"]
    listing = state.listing()
    assert all(o["kind"] == "Node" for o in listing.objects["nodes"])


def test_a_410_relists_that_kind_alone_and_watches_from_the_new_version() -> None:
    nodes, pods = dicts()
    gone = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                        "message": "too old resource version: 102 (250)", "reason": "Expired",
                                        "code": 410}}
    api = FakeKube({"nodes": nodes, "pods": pods}, {"pods": [[gone]]})
    state = ClusterState()
    stop = threading.Event()
    run_until(watcher(api, api, None, stop, timeout_s=1), state, stop, lambda: len(api.watched("pods")) >= 2)
    assert (api.listed("nodes"), api.listed("pods")) == (1, 2)
    assert api.watched("pods")[:2] == ["102", "104"]  # the re-list was the 104th version
    assert state.counts()["pods"] == 86


def test_kueue_kinds_are_watched_in_the_version_served_and_others_not_at_all() -> None:
    nodes, pods = dicts()
    cq = {"kind": "ClusterQueue", "metadata": {"name": "cq", "resourceVersion": "1"}, "spec": {"resourceGroups": [
        {"flavors": [{"name": "all", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 512}]}]}]}}
    cq2 = {**cq, "metadata": {"name": "cq2", "resourceVersion": "150"}}
    api = FakeKube({"nodes": nodes, "pods": pods, "cluster_queues": [cq]},
                   {"cluster_queues": [[{"type": "ADDED", "object": cq2}]]})
    state = ClusterState()
    stop = threading.Event()
    run_until(watcher(api, api, api, stop, timeout_s=1), state, stop,
              lambda: len(api.watched("cluster_queues")) >= 2)
    counts = state.counts()
    assert (counts["cluster_queues"], counts["local_queues"], counts["cohorts"], counts["pod_groups"]) == (2, 0, 0, 0)
    assert {f for f, what, _ in api.calls if what == "watch"} == {
        "nodes", "pods", "priority_classes", "cluster_queues", "local_queues", "resource_flavors"}


def test_a_failed_first_listing_leaves_the_state_not_loaded_and_is_retried() -> None:
    class Flaky(FakeKube):
        fails = 1

        def list_node(self, **kw: Any) -> Any:
            if self.fails:
                self.fails -= 1
                raise ApiException(status=500, reason="Internal Server Error")
            return super().list_node(**kw)

    nodes, pods = dicts()
    api = Flaky({"nodes": nodes, "pods": pods})
    state = ClusterState()
    stop = threading.Event()
    thread = threading.Thread(target=watcher(api, api, None, stop, timeout_s=1), args=(state,), daemon=True)
    thread.start()
    time.sleep(0.2)
    assert not state.loaded  # waiting out the backoff (1 s): nothing given to the state
    deadline = time.monotonic() + 10
    while not state.loaded and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(timeout=5)
    assert state.counts()["nodes"] == 64


def test_a_reflector_backs_off_after_other_failures_and_relists() -> None:
    nodes, _ = dicts()
    api = FakeKube({"nodes": nodes})
    state = ClusterState()
    stop = threading.Event()
    calls = []

    def broken(call: Any, **kw: Any) -> Any:
        calls.append(kw["resource_version"])
        stop.set()
        raise ConnectionError("connection reset")

    reflector = Reflector(Watched("nodes", api.list_node), state, broken, stop, "7")
    reflector.run()
    assert calls == ["7"] and reflector.failures == 1 and reflector.resource_version is None
    assert [backoff(n) for n in (1, 2, 3, 6, 10)] == [1.0, 2.0, 4.0, 30.0, 30.0]


def test_replace_kind_keeps_the_other_kinds_and_counts_pending_changes_only() -> None:
    nodes, pods = dicts()
    state = ClusterState()
    state.replace(nodes, pods)
    before = state.pending_generation
    state.replace_kind("nodes", nodes)
    assert state.pending_generation == before  # the same nodes
    state.replace_kind("pods", [*pods, API.sanitize_for_serialization(pod("p-new", gpus=1))])
    assert state.pending_generation == before + 1 and state.counts()["nodes"] == 64
    with pytest.raises(InputError, match="unknown_field"):
        state.replace_kind("secrets", [])
    with pytest.raises(InputError, match=r"pods\[0\].metadata.name"):
        state.replace_kind("pods", [{"metadata": {}}])


def test_list_kind_reads_the_json_and_official_stream_hands_raw_objects() -> None:
    nodes, _ = dicts()
    api = FakeKube({"nodes": nodes[:2]})
    items, rv = list_kind(Watched("nodes", api.list_node))
    assert rv == "101" and [o["metadata"]["name"] for o in items] == ["gpu-00", "gpu-01"]
    assert all(o["kind"] == "Node" for o in items)
    api.watches["nodes"] = [[{"type": "MODIFIED", "object": with_rv(nodes[0], "9", "Node")}]]
    events = list(official_stream(api.list_node, resource_version="101", timeout_seconds=1))
    assert [(e["type"], type(e["raw_object"]).__name__) for e in events] == [("MODIFIED", "dict")]
