"""Volcano's objects read by the Kubernetes adapter (optsched.adapters.kube.volcano): PodGroups
(gang sizes, queue, priority) and Queues (tenants with deserved, capability and guarantee), and
plans that do what Volcano's own documentation says its gang actions do.

Fixtures are Volcano's own manifests (tests/data/kube/SOURCES.md names each); the jobs around them
are the documentation's Volcano Jobs written as the pods and PodGroups its job controller creates.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("kubernetes")

from optsched import InputError, check, solve
from optsched.adapters.kube import KubeConfig, actions, snapshot
from tests.test_kube_kueue import manifests

NOW = 1_796_122_800.0


def cpu_nodes(n: int, cpus: str = "2") -> list[dict[str, Any]]:
    """A cluster of `n` CPU nodes (the documentation's "four schedulable CPUs": 2 x 2)."""
    return [{"kind": "Node", "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
             "status": {"allocatable": {"cpu": cpus, "memory": "8Gi", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True"}]}} for i in range(n)]


def job(name: str, queue: str, replicas: int, min_available: int, priority_class: str | None = None,
        nodes: list[str] | None = None, preemptable: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Volcano Job as its controller leaves it: a PodGroup and `replicas` worker pods (1 CPU)."""
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"namespace": "default", "name": name},
             "spec": {"minMember": min_available, "queue": queue,
                      **({"priorityClassName": priority_class} if priority_class else {})}}
    pods = []
    for k in range(replicas):
        annotations = {"scheduling.k8s.io/group-name": name, "volcano.sh/task-spec": "worker"}
        if preemptable:
            annotations["volcano.sh/preemptable"] = "true"
        spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [
            {"name": "worker", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1"}}}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        status = {"phase": "Pending"}
        if nodes:
            spec["nodeName"] = nodes[k]
            status = {"phase": "Running", "startTime": "2026-12-01T10:00:00Z"}
        pods.append({"kind": "Pod", "metadata": {"namespace": "default", "name": f"{name}-worker-{k}",
                                                 "uid": f"uid-{name}-{k}", "annotations": annotations,
                                                 "creationTimestamp": "2026-12-01T09:00:00Z"},
                     "spec": spec, "status": status})
    return group, pods


@pytest.mark.parametrize("solver", ["kueue", "cpsat"])
def test_cross_queue_reclaim_evicts_one_whole_borrower_gang(solver: str) -> None:
    """how_to_use_gangpreempt_and_gangreclaim.md, Example 2: owner and borrower each deserve 2
    CPUs; two 2-pod borrower gangs fill the 4 CPUs; the owner's 2-pod gang runs by evicting one
    whole borrower gang, and the other keeps both pods."""
    queues = manifests("volcano-reclaim-queues.yaml")["Queue"]
    a, pods_a = job("borrower-victim-a", "borrower", 2, 2, nodes=["n0", "n0"], preemptable=True)
    b, pods_b = job("borrower-victim-b", "borrower", 2, 2, nodes=["n1", "n1"], preemptable=True)
    owner, pods_o = job("owner-requester", "owner", 2, 2)
    snap = snapshot(cpu_nodes(2), pods_a + pods_b + pods_o, pod_groups=[a, b, owner], queues=queues,
                    config=KubeConfig(), now=NOW)
    assert {t.name: t.quotas["volcano/cpu"].nominal for t in snap.cluster.tenants} == {"owner": 2000.0,
                                                                                      "borrower": 2000.0}
    plan = solve(snap.cluster, snap.queue, solver=solver, time_limit=3.0)
    assert check(snap.cluster, snap.queue, plan) == []
    todo = actions(plan, snap)
    assert {b.metadata.name for b in todo.bindings} == {"owner-requester-worker-0", "owner-requester-worker-1"}
    evicted = {e.pod.name for e in todo.evictions}
    assert evicted in ({p["metadata"]["name"] for p in pods_a}, {p["metadata"]["name"] for p in pods_b})
    assert all(e.reason == "reclaimed" for e in todo.evictions)


@pytest.mark.parametrize("solver", ["kueue", "cpsat"])
def test_same_queue_priority_preemption_evicts_one_whole_low_gang(solver: str) -> None:
    """Example 1: two gang-low (10) victim gangs fill the 4 CPUs of queue priority-demo; the gang-high
    (100) requester runs by evicting one whole victim gang."""
    m = manifests("volcano-priority-demo-prerequisites.yaml")
    a, pods_a = job("preemption-victim-a", "priority-demo", 2, 2, "gang-low", ["n0", "n0"], preemptable=True)
    b, pods_b = job("preemption-victim-b", "priority-demo", 2, 2, "gang-low", ["n1", "n1"], preemptable=True)
    req, pods_r = job("preemption-requester", "priority-demo", 2, 2, "gang-high")
    snap = snapshot(cpu_nodes(2), pods_a + pods_b + pods_r, m["PriorityClass"], pod_groups=[a, b, req],
                    queues=m["Queue"], config=KubeConfig(), now=NOW)
    assert [j.priority for j in snap.queue.jobs] == [100]
    plan = solve(snap.cluster, snap.queue, solver=solver, time_limit=3.0)
    assert check(snap.cluster, snap.queue, plan) == []
    todo = actions(plan, snap)
    assert len(todo.bindings) == 2
    evicted = {e.pod.name for e in todo.evictions}
    assert evicted in ({p["metadata"]["name"] for p in pods_a}, {p["metadata"]["name"] for p in pods_b})
    assert all(e.reason == "preempted" for e in todo.evictions)


def test_min_member_makes_an_elastic_gang_and_the_rest_wait_with_a_reason() -> None:
    """A PodGroup of 4 pods with minMember 2 on 3 free CPUs: the group runs with 3 pods (at least
    2), the 4th is told why it waits; capability caps a queue (volcano's example/deployment/queue.yaml)."""
    queues = [{"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}}]
    group, pods = job("elastic", "default", 4, 2)
    snap = snapshot(cpu_nodes(2, cpus="3"), pods, pod_groups=[group], queues=queues, config=KubeConfig(),
                    now=NOW)
    [j] = snap.queue.jobs
    assert (j.groups[0].replicas.min, j.groups[0].replicas.max, j.is_gang) == (2, 4, True)
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == [] and len(plan.placements) == 4
    capped = manifests("volcano-queue-capability.yaml")["Queue"]
    group, pods = job("capped", "test", 4, 1)
    snap = snapshot(cpu_nodes(2, cpus="3"), pods, pod_groups=[group], queues=capped, config=KubeConfig(), now=NOW)
    assert snap.cluster.tenants[0].quotas["volcano/cpu"].nominal == 2000.0  # capability caps the weight share
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == [] and len(plan.placements) == 2
    todo = actions(plan, snap)
    assert len(todo.pending) == 2 and all("places 2 of the job's 4 pods" in p.condition.message for p in todo.pending)


def test_volcano_errors_name_the_object() -> None:
    group, pods = job("g", "nowhere", 2, 2)
    bad = {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 0, "capability": {"cpu": "lots"}}}
    with pytest.raises(InputError) as err:
        snapshot(cpu_nodes(1), pods, pod_groups=[group], queues=[bad], config=KubeConfig(), now=NOW)
    paths = {(i.path, i.rule) for i in err.value.problems}
    assert ("Queue/q.spec.weight", "out_of_range") in paths
    assert ("Queue/q.spec.capability.cpu", "quantity") in paths
