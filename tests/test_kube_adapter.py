"""The Kubernetes adapter: Nodes, Pods and PriorityClasses in (the official client's models and
plain API dicts), Bindings, evictions and pending conditions out, checked by the validator.

Fixtures under tests/data/kube/ are copied from Kueue's repository (SOURCES.md names them); the
nodes are the `kubernetes` client's own model classes with GPU feature discovery's labels.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes = pytest.importorskip("kubernetes")  # the `k8s` extra; `make test` installs it

from kubernetes.client import (  # noqa: E402
    ApiClient,
    V1Affinity,
    V1Container,
    V1ContainerImage,
    V1Node,
    V1NodeAffinity,
    V1NodeCondition,
    V1NodeSelector,
    V1NodeSelectorRequirement,
    V1NodeSelectorTerm,
    V1NodeSpec,
    V1NodeStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodSpec,
    V1PodStatus,
    V1ResourceRequirements,
    V1Taint,
    V1Toleration,
)
from kubernetes.utils import parse_quantity  # noqa: E402

from optsched import InputError, check, solve  # noqa: E402
from optsched.adapters.kube import (  # noqa: E402
    DEVICES_ANNOTATION,
    PREEMPTIBLE_ANNOTATION,
    KubeConfig,
    TopologyLevel,
    actions,
    snapshot,
)

DATA = Path(__file__).parent / "data" / "kube"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()
BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"
CONFIG = KubeConfig(topology=[TopologyLevel(label=BLOCK, uplink_gbps=3200), TopologyLevel(label=RACK),
                              TopologyLevel(label=HOST)])
IMAGE = "nvcr.io/nvidia/pytorch:24.01-py3"


def gpu_node(name: str, block: str = "b1", rack: str = "r1", gpus: int = 8, allocatable_gpus: int | None = None,
             ready: bool = True, unschedulable: bool | None = None, taints: list[V1Taint] | None = None) -> V1Node:
    """An 8-GPU H100 node as the API server returns it, with GPU feature discovery's labels."""
    labels = {HOST: name, BLOCK: block, RACK: rack, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
              "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": str(gpus)}
    capacity = {"cpu": "192", "memory": "2063731812Ki", "pods": "110", "ephemeral-storage": "3840Gi",
                "nvidia.com/gpu": str(gpus), "hugepages-2Mi": "0"}
    allocatable = {**capacity, "cpu": "191500m", "memory": "2060000000Ki",
                   "nvidia.com/gpu": str(gpus if allocatable_gpus is None else allocatable_gpus)}
    return V1Node(
        metadata=V1ObjectMeta(name=name, labels=labels),
        spec=V1NodeSpec(unschedulable=unschedulable, taints=taints),
        status=V1NodeStatus(capacity=capacity, allocatable=allocatable,
                            conditions=[V1NodeCondition(type="Ready", status="True" if ready else "False")],
                            images=[V1ContainerImage(names=[f"nvcr.io/nvidia/pytorch@sha256:{'a' * 64}", IMAGE],
                                                     size_bytes=9_000_000_000)]))


def pod(name: str, gpus: int = 0, cpu: str = "8", memory: str = "64Gi", node: str | None = None,
        namespace: str = "team-a", priority: int | None = None, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> V1Pod:
    """A one-container pod asking for `gpus` H100s; bound (Running) when `node` is given."""
    requests = {"cpu": cpu, "memory": memory}
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else None  # extended resources: a limit is the request
    return V1Pod(
        metadata=V1ObjectMeta(name=name, namespace=namespace, uid=f"uid-{name}", labels=labels,
                              annotations=annotations,
                              creation_timestamp=datetime(2026, 12, 1, 10, 0, tzinfo=UTC)),
        spec=V1PodSpec(containers=[V1Container(name="main", image=IMAGE,
                                               resources=V1ResourceRequirements(requests=requests, limits=limits))],
                       node_name=node, priority=priority, **spec),
        status=V1PodStatus(phase="Running" if node else "Pending",
                           start_time=datetime(2026, 12, 1, 11, 0, tzinfo=UTC) if node else None))


def test_nodes_from_client_models() -> None:
    """Units, devices (withdrawn ones unhealthy), the fabric from labels, health, taints, images."""
    nodes = [gpu_node("n1", allocatable_gpus=7),
             gpu_node("n2", rack="r2", taints=[V1Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")]),
             gpu_node("n3", block="b2", rack="r1", unschedulable=True), gpu_node("n4", block="b2", ready=False)]
    c = snapshot(nodes, [], config=CONFIG, now=NOW).cluster
    assert c.topology.levels == [BLOCK, RACK]  # the hostname level is optsched's `node` pseudo-level
    assert {(d.id, d.parent, d.uplink_gbps) for d in c.topology.domains} == {
        ("b1", None, 3200), ("b1/r1", "b1", None), ("b1/r2", "b1", None), ("b2", None, 3200), ("b2/r1", "b2", None)}
    n1, n2, n3, n4 = c.nodes
    assert n1.domain == "b1/r1" and n3.domain == "b2/r1" and n4.domain == "b2/r1"
    assert n1.capacity["cpu"] == 191_500 and n1.capacity["pods"] == 110
    assert n1.capacity["memory"] == pytest.approx(2_060_000_000 / 1024)
    assert n1.capacity["ephemeral-storage"] == 3840 * 1024 and "nvidia.com/gpu" not in n1.capacity
    assert n1.devices is not None and n1.devices.model == "NVIDIA-H100-80GB-HBM3"
    assert (n1.devices.count, n1.devices.unhealthy) == (8, [7])
    assert c.device_models["NVIDIA-H100-80GB-HBM3"].memory_gib == pytest.approx(81559 / 1024)
    assert [(t.key, t.value, t.effect) for t in n2.taints] == [("nvidia.com/gpu", "present", "NoSchedule")]
    assert (n1.healthy, n2.healthy, n3.healthy, n4.healthy) == (True, True, False, False)
    assert n1.images == [f"nvcr.io/nvidia/pytorch@sha256:{'a' * 64}"] and IMAGE in c.images


def test_models_and_api_dicts_read_the_same() -> None:
    """`kubectl get -o json` dicts and client models are one reader (the client's serializer)."""
    api = ApiClient()
    nodes = [gpu_node(f"n{i}", rack=f"r{i % 2}") for i in range(4)]
    pods = [pod("run-0", gpus=8, node="n0"), pod("wait-0", gpus=4, priority=10)]
    a = snapshot(nodes, pods, config=CONFIG, now=NOW)
    b = snapshot([api.sanitize_for_serialization(n) for n in nodes], [api.sanitize_for_serialization(p) for p in pods],
                 config=CONFIG, now=NOW)
    assert a.cluster == b.cluster and a.queue == b.queue


def named(docs: list[dict[str, Any]], namespace: str = "default") -> list[dict[str, Any]]:
    """Manifests as the API server stores them: a `generateName` completed with a suffix."""
    out = []
    for i, doc in enumerate(docs):
        meta = dict(doc["metadata"])
        meta.setdefault("name", f"{meta.pop('generateName', 'pod-')}{i:05d}")
        meta.setdefault("namespace", namespace)
        out.append({**doc, "metadata": meta})
    return out


def test_kueue_pod_group_and_priority_classes_from_kueue_examples() -> None:
    """Kueue's plain-pod group example is one gang job of two 3-CPU replicas; its PriorityClass
    example gives the high-prio pod 1,000,000 and others the global default's 100."""
    group = named(list(yaml.safe_load_all((DATA / "kueue-pod-group.yaml").read_text())))
    high = named([yaml.safe_load((DATA / "high-prio-pod.yaml").read_text())])
    classes = list(yaml.safe_load_all((DATA / "prios.yaml").read_text()))
    nodes = [gpu_node(f"n{i}") for i in range(2)]
    snap = snapshot(nodes, group + high, classes, config=KubeConfig(), now=NOW)
    jobs = {j.id: j for j in snap.queue.jobs}
    assert set(jobs) == {"default/sample-group", "default/high-prio-1m-sleep"}
    gang = jobs["default/sample-group"]
    assert gang.is_gang and gang.priority == 100
    [g] = gang.groups
    assert (g.replicas.min, g.replicas.max, g.request.cpu, g.request.resources) == (2, 2, 3000, {"pods": 1})
    assert "memory" not in g.request.model_fields_set  # unset, as kube-scheduler's scores tell apart
    assert jobs["default/high-prio-1m-sleep"].priority == 1_000_000
    plan = solve(snap.cluster, snap.queue, solver="best-fit")
    assert check(snap.cluster, snap.queue, plan) == []
    bound = {b.metadata.name: b.target.name for b in actions(plan, snap).bindings}
    assert set(bound) == {"sample-pod-00000", "sample-pod-00001", "high-prio-1m-sleep"}
    incomplete = named(list(yaml.safe_load_all((DATA / "kueue-pod-group.yaml").read_text()))[:1])
    held = snapshot(nodes, incomplete, classes, now=NOW)
    assert held.queue.jobs == [] and [h.reason for h in held.held] == ["gang"]  # 1 of its 2 pods exists
    [pending] = actions(solve(held.cluster, held.queue, solver="best-fit"), held).pending
    assert pending.condition.reason == "Unschedulable" and "1 of its 2 pods" in pending.condition.message


def test_pod_requests_as_kube_scheduler_counts_them() -> None:
    """Containers add up, an init container is a peak, a sidecar adds to both, overhead adds,
    a limit stands for an absent request."""
    p = V1Pod(metadata=V1ObjectMeta(name="p", namespace="ns"), spec=V1PodSpec(
        containers=[V1Container(name="a", resources=V1ResourceRequirements(requests={"cpu": "1", "memory": "1Gi"})),
                    V1Container(name="b", resources=V1ResourceRequirements(limits={"cpu": "500m"}))],
        init_containers=[
            V1Container(name="sidecar", restart_policy="Always",
                        resources=V1ResourceRequirements(requests={"cpu": "250m"})),
            V1Container(name="setup", resources=V1ResourceRequirements(requests={"cpu": "3", "memory": "4Gi"}))],
        overhead={"cpu": "100m"}))
    [job] = snapshot([gpu_node("n")], [p], now=NOW).queue.jobs
    req = job.groups[0].request
    # app 1 + 0.5 + sidecar 0.25 = 1.75 CPU; init peak: setup 3 + sidecar 0.25 = 3.25; + overhead 0.1
    assert req.cpu == pytest.approx(3350)
    assert req.memory == pytest.approx(4096)


def test_selectors_affinity_and_tolerations_are_followed() -> None:
    """A NotIn affinity keeps a pod off a rack, Kubernetes' default toleration operator is Equal."""
    nodes = [gpu_node("n1", rack="r1"), gpu_node("n2", rack="r2",
                                                 taints=[V1Taint(key="dedicated", value="ml", effect="NoSchedule")])]
    away = V1Affinity(node_affinity=V1NodeAffinity(required_during_scheduling_ignored_during_execution=V1NodeSelector(
        node_selector_terms=[V1NodeSelectorTerm(match_expressions=[
            V1NodeSelectorRequirement(key=RACK, operator="NotIn", values=["r1"])])])))
    tolerant = pod("tolerant", gpus=8, affinity=away, tolerations=[V1Toleration(key="dedicated", value="ml")])
    intolerant = pod("intolerant", gpus=8, affinity=away, tolerations=[V1Toleration(key="dedicated", value="gpu")])
    snap = snapshot(nodes, [tolerant, intolerant], config=CONFIG, now=NOW)
    [tol] = snap.queue.jobs[1].groups[0].tolerations  # jobs in (namespace, name) order: intolerant, tolerant
    assert (tol.key, tol.operator, tol.value) == ("dedicated", "Equal", "ml")
    plan = solve(snap.cluster, snap.queue, solver="best-fit")
    assert check(snap.cluster, snap.queue, plan) == []
    assert [(b.metadata.name, b.target.name) for b in actions(plan, snap).bindings] == [("tolerant", "n2")]
    assert {d.job: d.reason for d in plan.deferred} == {"team-a/intolerant": "selector"}


def test_errors_name_the_object_and_the_field() -> None:
    bad_cpu = pod("bad-cpu", cpu="lots")
    unknown_class = pod("classless", priority_class_name="nope")
    stray = pod("stray", gpus=1, node="gone")
    bad_taint = gpu_node("n2", taints=[V1Taint(key="k", effect="Sometimes")])
    with pytest.raises(InputError) as err:
        snapshot([gpu_node("n1"), bad_taint], [bad_cpu, unknown_class, stray], now=NOW)
    paths = {(i.path, i.rule) for i in err.value.problems}
    assert paths == {
        ("Pod/team-a/bad-cpu.spec.containers[0].resources.requests.cpu", "quantity"),
        ("Pod/team-a/classless.spec.priorityClassName", "unknown_reference"),
        ("Pod/team-a/stray.spec.nodeName", "unknown_reference"),
        ("Node/n2.spec.taints[0].effect", "taint_effect"),
    }
    with pytest.raises(InputError) as err:  # a running state no node can be in, found by the validator
        snapshot([gpu_node("n1")], [pod("a", cpu="150", node="n1"), pod("b", cpu="150", node="n1")], now=NOW)
    assert [i.rule for i in err.value.problems] == ["over_capacity"]


def test_unsatisfiable_pods_are_held_not_refused() -> None:
    """A pod no node could ever hold stays pending, as Kubernetes keeps it, with the reason."""
    snap = snapshot([gpu_node("n1")], [pod("huge", gpus=16), pod("fine", gpus=8)], now=NOW)
    assert [j.id for j in snap.queue.jobs] == ["team-a/fine"]
    [held] = snap.held
    assert held.reason == "capacity" and [p.name for p in held.pods] == ["huge"]


def cluster_64() -> tuple[list[V1Node], list[V1Pod]]:
    """64 H100 nodes (2 blocks x 4 racks x 8); 40 of them run 10 four-node gangs (two low-priority
    and preemptible, the others not); 30 pods wait: 6 four-node gangs (Volcano's PodGroup
    annotation), a high-priority 4-node gang, 16 single-GPU pods and a 2-GPU pair that tolerates
    a tainted node. Some running pods carry the devices annotation, others do not."""
    nodes = []
    for i in range(64):
        block, rack = f"b{i // 32}", f"r{(i // 8) % 4}"
        taints = [V1Taint(key="maintenance", value="soon", effect="NoSchedule")] if i == 63 else None
        nodes.append(gpu_node(f"gpu-{i:02d}", block=block, rack=rack, taints=taints,
                              allocatable_gpus=7 if i == 50 else None))
    pods = []
    for j in range(10):
        low = j < 2
        for k in range(4):
            ann = {DEVICES_ANNOTATION: "0,1,2,3,4,5,6,7"} if k % 2 == 0 else {}
            if low:
                ann["optsched.io/preemptible"] = "true"
            pods.append(pod(f"train-{j}-{k}", gpus=8, node=f"gpu-{j * 4 + k:02d}", priority=10 if low else 500,
                            labels={"kueue.x-k8s.io/pod-group-name": f"train-{j}"}, annotations=ann))
    for j in range(6):
        for k in range(4):
            pods.append(pod(f"pretrain-{j}-{k}", gpus=8, priority=100, namespace="team-b",
                            annotations={"scheduling.k8s.io/group-name": f"pretrain-{j}",
                                         "volcano.sh/task-spec": "worker"}))
    for k in range(4):
        pods.append(pod(f"urgent-{k}", gpus=8, priority=1000, namespace="team-a",
                        labels={"kueue.x-k8s.io/pod-group-name": "urgent"}))
    for k in range(16):
        pods.append(pod(f"notebook-{k}", gpus=1, cpu="4", memory="32Gi", priority=50, namespace="team-c"))
    for k in range(2):
        pods.append(pod(f"eval-{k}", gpus=2, priority=50, namespace="team-c",
                        tolerations=[V1Toleration(key="maintenance", operator="Exists")],
                        labels={"scheduling.x-k8s.io/pod-group": "eval"}))
    return nodes, pods


def _amounts(p: V1Pod) -> Counter[str]:
    out: Counter[str] = Counter()
    for c in p.spec.containers:
        for name, q in {**(c.resources.limits or {}), **(c.resources.requests or {})}.items():
            out[name] += parse_quantity(q)
    out["pods"] += 1
    return out


@pytest.mark.parametrize("solver", ["best-fit", "kueue", "auto"])
def test_round_trip_on_64_nodes(solver: str) -> None:
    """Objects -> snapshot -> plan (checked by the validator) -> actions; then, from the objects
    alone: every binding lands on a node with room once the evicted pods are gone, no device is
    given twice, gangs bind whole, and every pending pod is bound or told why it waits."""
    nodes, pods = cluster_64()
    snap = snapshot(nodes, pods, config=CONFIG, now=NOW)
    assert len(snap.cluster.nodes) == 64 and len(snap.cluster.running) == 10 and len(snap.queue.jobs) == 24
    plan = solve(snap.cluster, snap.queue, solver=solver, time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == []
    todo = actions(plan, snap)
    by_name = {p.metadata.name: p for p in pods}
    evicted = {e.pod.name for e in todo.evictions}
    assert all(by_name[name].spec.node_name for name in evicted)
    used: dict[str, Counter[str]] = defaultdict(Counter)
    devices: dict[str, list[int]] = defaultdict(list)
    for p in pods:
        if p.spec.node_name and p.metadata.name not in evicted:
            used[p.spec.node_name] += _amounts(p)
            ann = (p.metadata.annotations or {}).get(DEVICES_ANNOTATION)
            if ann:
                devices[p.spec.node_name] += [int(d) for d in ann.split(",")]
    for b in todo.bindings:
        p = by_name[b.metadata.name]
        assert p.spec.node_name is None and b.metadata.uid == p.metadata.uid and b.target.kind == "Node"
        used[b.target.name] += _amounts(p)
        gpus = int(_amounts(p)["nvidia.com/gpu"])
        given = [int(d) for d in b.metadata.annotations[DEVICES_ANNOTATION].split(",")] if gpus else []
        assert len(given) == gpus
        devices[b.target.name] += given
    allocatable = {n.metadata.name: n.status.allocatable for n in nodes}
    for node, amounts in used.items():
        for name, amount in amounts.items():
            assert amount <= parse_quantity(allocatable[node][name]), (node, name)
    for node, held in devices.items():
        assert len(held) == len(set(held)) and all(0 <= d < 8 for d in held), node
    bound = {b.metadata.name for b in todo.bindings}
    for prefix in [f"pretrain-{j}-" for j in range(6)] + ["urgent-", "eval-"]:
        members = {name for name in by_name if name.startswith(prefix)}
        assert members <= bound or not members & bound, prefix  # a gang binds whole or not at all
    waiting = {p.metadata.name for p in pods if not p.spec.node_name}
    told = {x.pod.name for x in todo.pending}
    assert bound | told == waiting and not bound & told
    assert {"urgent-0", "urgent-1", "urgent-2", "urgent-3"} <= bound  # the priority-1000 gang runs
    if evicted:
        assert evicted <= {f"train-{j}-{k}" for j in range(2) for k in range(4)}  # only the preemptible ones
        assert all(e.condition.type == "DisruptionTarget" for e in todo.evictions)


@pytest.mark.parametrize("solver", ["kueue", "cpsat"])
def test_a_full_cluster_evicts_lower_priority_preemptible_pods(solver: str) -> None:
    """kube-scheduler's DefaultPreemption (the adapter's default policy): a priority-1000 gang of two
    8-GPU pods on 8 full nodes evicts two priority-10 preemptible pods, never a non-preemptible one,
    and each eviction carries Kubernetes' DisruptionTarget condition with the reason."""
    nodes = [gpu_node(f"gpu-{i}", rack=f"r{i // 4}") for i in range(8)]
    pods = [pod(f"low-{i}", gpus=8, node=f"gpu-{i}", priority=10,
                annotations={PREEMPTIBLE_ANNOTATION: "true" if i < 4 else "false"}) for i in range(8)]
    pods += [pod(f"urgent-{k}", gpus=8, priority=1000, labels={"kueue.x-k8s.io/pod-group-name": "urgent"})
             for k in range(2)]
    snap = snapshot(nodes, pods, config=CONFIG, now=NOW)
    plan = solve(snap.cluster, snap.queue, solver=solver, time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == []
    todo = actions(plan, snap)
    evicted = {e.pod.name for e in todo.evictions}
    assert len(evicted) == 2 and evicted <= {f"low-{i}" for i in range(4)}
    assert {b.metadata.name for b in todo.bindings} == {"urgent-0", "urgent-1"}
    node_of = {p.metadata.name: p.spec.node_name for p in pods}
    assert {b.target.name for b in todo.bindings} == {node_of[e.pod.name] for e in todo.evictions}
    for e in todo.evictions:
        assert (e.condition.type, e.condition.reason) == ("DisruptionTarget", "PreemptionByScheduler")
        assert "preempted by" in e.condition.message
