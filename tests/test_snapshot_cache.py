"""The snapshot cache (`optsched.adapters.kube.SnapshotCache`): a round reads again only the objects
the API server changed (a new resourceVersion), and the Snapshot is the one a fresh read gives.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

pytest.importorskip("kubernetes")

from kubernetes.client import ApiClient

from optsched.adapters.kube.snapshot import Snapshot, SnapshotCache, snapshot
from optsched.errors import InputError
from tests.test_kube_adapter import CONFIG, NOW, cluster_64, pod

API = ApiClient()


def versioned() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The 64-node cluster as the API server lists it: every object with a uid and a resourceVersion."""
    nodes, pods = cluster_64()
    out = []
    for i, obj in enumerate([*nodes, *pods]):
        doc = API.sanitize_for_serialization(obj)
        doc["metadata"]["resourceVersion"] = str(1000 + i)
        doc["metadata"].setdefault("uid", f"uid-{doc['metadata']['name']}")
        out.append(doc)
    return out[:len(nodes)], out[len(nodes):]


def bumped(obj: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A new version of an object (a new resourceVersion), with `changes` to its spec."""
    new = copy.deepcopy(obj)
    new["metadata"]["resourceVersion"] = str(int(new["metadata"]["resourceVersion"]) + 100_000)
    new.setdefault("spec", {}).update(changes)
    return new


def same(a: Snapshot, b: Snapshot) -> None:
    assert a.cluster == b.cluster and a.queue == b.queue
    assert a.replica_pod == b.replica_pod and a.job_pods == b.job_pods
    assert [(h.pods, h.reason) for h in a.held] == [(h.pods, h.reason) for h in b.held]


def read(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], cache: SnapshotCache | None) -> Snapshot:
    return snapshot(nodes, pods, config=CONFIG, now=NOW, cache=cache)


def test_an_unchanged_cluster_is_not_read_again_and_reads_the_same() -> None:
    nodes, pods = versioned()
    cache = SnapshotCache()
    first = read(nodes, pods, cache)
    assert (cache.nodes_reused, cache.pods_reused) == (False, 0)
    second = read(nodes, pods, cache)
    assert (cache.nodes_reused, cache.pods_reused) == (True, len(pods))
    same(first, second)
    same(second, read(nodes, pods, None))


def test_a_changed_pod_is_read_again_and_a_changed_node_rereads_everything() -> None:
    nodes, pods = versioned()
    cache = SnapshotCache()
    read(nodes, pods, cache)
    waiting = next(i for i, p in enumerate(pods) if p["metadata"]["name"] == "notebook-3")
    pods[waiting] = bumped(pods[waiting], priority=900)
    got = read(nodes, pods, cache)
    assert (cache.nodes_reused, cache.pods_reused) == (True, len(pods) - 1)
    same(got, read(nodes, pods, None))
    nodes[5] = bumped(nodes[5], unschedulable=True)
    got = read(nodes, pods, cache)
    assert (cache.nodes_reused, cache.pods_reused) == (False, 0)
    same(got, read(nodes, pods, None))
    assert not next(n for n in got.cluster.nodes if n.id == "gpu-05").healthy


def test_a_binding_without_a_new_version_is_read_again() -> None:
    """The service's own bindings set `spec.nodeName` before the API server's next version."""
    nodes, pods = versioned()
    cache = SnapshotCache()
    before = read(nodes, pods, cache)
    single = next(i for i, p in enumerate(pods) if p["metadata"]["name"] == "notebook-0")
    bound = copy.deepcopy(pods[single])
    bound["spec"]["nodeName"] = "gpu-60"
    pods[single] = bound
    after = read(nodes, pods, cache)
    assert cache.pods_reused == len(pods) - 1
    same(after, read(nodes, pods, None))
    assert len(after.cluster.running) == len(before.cluster.running) + 1


def test_objects_without_a_resource_version_are_read_every_time() -> None:
    nodes, pods = versioned()
    del nodes[0]["metadata"]["resourceVersion"]
    cache = SnapshotCache()
    read(nodes, pods, cache)
    read(nodes, pods, cache)
    assert (cache.nodes_reused, cache.pods_reused) == (False, 0)  # the nodes' key and every pod's context
    nodes, pods = versioned()
    del pods[3]["metadata"]["resourceVersion"]
    read(nodes, pods, cache)
    read(nodes, pods, cache)
    assert (cache.nodes_reused, cache.pods_reused) == (True, len(pods) - 1)


def test_a_pod_with_a_problem_is_refused_again_in_the_next_round() -> None:
    nodes, pods = versioned()
    bad = API.sanitize_for_serialization(pod("bad", gpus=1, priority_class_name="missing"))
    bad["metadata"]["resourceVersion"] = "7"
    cache = SnapshotCache()
    for _ in range(2):
        with pytest.raises(InputError, match=r"spec\.priorityClassName"):
            read(nodes, [*pods, bad], cache)
    read(nodes, pods, cache)  # and without it, the others were kept


def test_a_changed_config_or_priority_class_rereads_the_pods() -> None:
    nodes, pods = versioned()
    cache = SnapshotCache()
    read(nodes, pods, cache)
    snapshot(nodes, pods, config=CONFIG.model_copy(update={"running_preemptible": True}), now=NOW, cache=cache)
    assert (cache.nodes_reused, cache.pods_reused) == (False, 0)
    classes = [{"metadata": {"name": "high", "uid": "pc", "resourceVersion": "1"}, "value": 1000}]
    snapshot(nodes, pods, classes, config=CONFIG, now=NOW, cache=cache)
    assert (cache.nodes_reused, cache.pods_reused) == (False, 0)
    snapshot(nodes, pods, classes, config=CONFIG, now=NOW, cache=cache)
    assert (cache.nodes_reused, cache.pods_reused) == (True, len(pods))


def test_random_changes_read_as_a_fresh_snapshot_does() -> None:
    rng = random.Random(7)
    nodes, pods = versioned()
    cache = SnapshotCache()
    extra = compared = reused = refused = 0
    for step in range(16):
        pods = [p for p in pods if p["metadata"]["name"] != "bad"]
        for _ in range(rng.randint(1, 4)):
            what = rng.random()
            single = [i for i, p in enumerate(pods) if p["metadata"]["name"].startswith(("notebook", "new"))]
            if what < 0.3 and single:
                i = rng.choice(single)
                pods[i] = bumped(pods[i], priority=rng.choice([0, 100, 500]))
            elif what < 0.45:
                pods.pop(rng.randrange(len(pods)))
            elif what < 0.65:
                extra += 1
                new = API.sanitize_for_serialization(pod(f"new-{extra}", gpus=rng.choice([1, 2, 8])))
                new["metadata"]["resourceVersion"] = str(5000 + extra)
                pods.append(new)
            elif what < 0.8:
                i = rng.randrange(len(nodes))
                nodes[i] = bumped(nodes[i])
            else:
                i = rng.randrange(len(pods))
                if not pods[i]["spec"].get("nodeName"):
                    pods[i] = copy.deepcopy(pods[i])
                    pods[i]["metadata"].setdefault("annotations", {})["optsched.io/preemptible"] = "true"
                    pods[i] = bumped(pods[i])
        if step % 5 == 2:  # a pod the next round drops again: refused now, not kept
            bad = API.sanitize_for_serialization(pod("bad", gpus=1, priority_class_name="missing"))
            bad["metadata"]["resourceVersion"] = "9"
            pods.append(bad)
        try:
            fresh = read(nodes, pods, None)
        except InputError as exc:
            with pytest.raises(InputError) as again:
                read(nodes, pods, cache)
            assert str(again.value) == str(exc)
            refused += 1
            continue
        same(read(nodes, pods, cache), fresh)
        compared += 1
        reused += cache.pods_reused
    assert compared >= 10 and refused >= 2 and reused > 0, (compared, refused, reused)
