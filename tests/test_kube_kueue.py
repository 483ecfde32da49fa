"""Kueue's objects read by the Kubernetes adapter (optsched.adapters.kube.kueue): ClusterQueues,
LocalQueues, ResourceFlavors, Cohorts and WorkloadPriorityClasses -> tenants, quotas and cohorts,
and plans that keep Kueue's quota rules as Kueue's own documentation states them.

Fixtures are Kueue's own example manifests (tests/data/kube/SOURCES.md names each).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("kubernetes")

from kubernetes.client import ApiClient

from optsched import InputError, check, solve
from optsched.adapters.kube import KubeConfig, TopologyLevel, actions, snapshot
from tests.test_kube_adapter import NOW, gpu_node, pod

DATA = Path(__file__).parent / "data" / "kube"
API = ApiClient()
CONFIG = KubeConfig(topology=[TopologyLevel(label="example.com/block", name="block"),
                              TopologyLevel(label="example.com/rack", name="rack")])


def manifests(name: str) -> dict[str, list[dict[str, Any]]]:
    """The documents of a fixture by kind."""
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in yaml.safe_load_all((DATA / name).read_text()):
        if doc:
            out.setdefault(doc["kind"], []).append(doc)
    return out


def nodes(n: int, gpus: int = 8) -> list[dict[str, Any]]:
    return [API.sanitize_for_serialization(gpu_node(f"gpu-{i}", rack=f"r{i // 4}", gpus=gpus)) for i in range(n)]


def queued(name: str, namespace: str, queue: str | None, **kw: Any) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    labels.update(kw.pop("labels", {}))
    return API.sanitize_for_serialization(pod(name, namespace=namespace, labels=labels, **kw))


def local_queue(namespace: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"namespace": namespace, "name": name}, "spec": {"clusterQueue": cluster_queue}}


def test_a_cluster_queue_becomes_a_tenant_with_its_quotas_in_optsched_units() -> None:
    m = manifests("kueue-provisioning-setup.yaml")
    pods = [queued(f"w{i}", "default", "user-queue", gpus=4, cpu="2", memory="8Gi") for i in range(4)]
    snap = snapshot(nodes(4), pods, cluster_queues=m["ClusterQueue"], local_queues=m["LocalQueue"],
                    resource_flavors=m["ResourceFlavor"], config=CONFIG, now=NOW)
    [tenant] = snap.cluster.tenants
    assert tenant.name == "cluster-queue" and tenant.cohort is None
    assert {k: q.nominal for k, q in tenant.quotas.items()} == {
        "default-flavor/cpu": 9000.0, "default-flavor/memory": 36 * 1024.0, "default-flavor/gpu": 9.0}
    assert [f.name for f in snap.cluster.resource_flavors] == ["default-flavor"]
    assert {j.tenant for j in snap.queue.jobs} == {"cluster-queue"}
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == []
    assert len({p.job for p in plan.placements}) == 2  # 2 x 4 GPUs within the nominal 9; a third would be 12
    assert {d.reason for d in plan.deferred} == {"quota"}


@pytest.mark.parametrize("solver", ["kueue", "cpsat"])
def test_borrowing_limit_as_kueue_documents_it(solver: str) -> None:
    """cluster_queue.md, "BorrowingLimit": with team-b-cq idle, team-a-cq admits up to 9+1 = 10 CPUs."""
    m = manifests("kueue-borrowing-limit.yaml")
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}
    pods = [queued(f"w{i}", "team-a", "main", cpu="2", memory="1Gi") for i in range(7)]
    snap = snapshot(nodes(2), pods, cluster_queues=m["ClusterQueue"], resource_flavors=[flavor],
                    local_queues=[local_queue("team-a", "main", "team-a-cq"), local_queue("team-b", "main", "team-b-cq")],
                    config=CONFIG, now=NOW)
    assert {t.name: t.cohort for t in snap.cluster.tenants} == {"team-a-cq": "team-ab", "team-b-cq": "team-ab"}
    assert snap.cluster.tenants[0].quotas["default-flavor/cpu"].borrowing_limit == 1000.0
    plan = solve(snap.cluster, snap.queue, solver=solver, time_limit=3.0)
    assert check(snap.cluster, snap.queue, plan) == []
    assert len({p.job for p in plan.placements}) == 5  # 5 x 2 CPUs = 10 = 9 nominal + 1 borrowed
    assert len(plan.deferred) == 2 and {d.reason for d in plan.deferred} == {"quota"}
    told = {p.pod.name: p.condition.message for p in actions(plan, snap).pending}
    assert len(told) == 2 and all(m.startswith("optsched: quota") for m in told.values())


def test_preemption_policy_fungibility_weight_and_cohort_objects_are_read() -> None:
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-a-cq"},
          "spec": {"cohortName": "org", "fairSharing": {"weight": "2"},
                   "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerOrNewerEqualPriority",
                                  "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}},
                   "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "Preempt"},
                   "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                       {"name": "reserved", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16,
                                                           "lendingLimit": 4}]},
                       {"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 0,
                                                       "borrowingLimit": 8}]}]}]}}
    cohort = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "org"},
              "spec": {"parentName": "company", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                       "flavors": [{"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}
    root = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "company"}}
    flavors = [{"kind": "ResourceFlavor", "metadata": {"name": "reserved"}, "spec": {"nodeLabels": {"pool": "r"}}},
               *manifests("kueue-resource-flavor-tolerations.yaml")["ResourceFlavor"]]
    flavors[1] = {**flavors[1], "metadata": {"name": "spot"}}
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": "prod"},
           "value": 10000}
    pods = [queued("w", "team-a", "main", gpus=1, labels={"kueue.x-k8s.io/priority-class": "prod"})]
    snap = snapshot(nodes(2), pods, cluster_queues=[cq], cohorts=[cohort, root], resource_flavors=flavors,
                    workload_priority_classes=[wpc], local_queues=[local_queue("team-a", "main", "team-a-cq")],
                    config=CONFIG, now=NOW)
    [t] = snap.cluster.tenants
    assert (t.cohort, t.weight) == ("org", 2.0)
    assert (t.preemption.within_tenant, t.preemption.reclaim_within_cohort) == ("lower_or_newer_equal_priority", "any")
    assert t.preemption.borrow_within_cohort is not None
    assert (t.preemption.borrow_within_cohort.policy, t.preemption.borrow_within_cohort.max_priority_threshold) == (
        "lower_priority", 100)
    assert (t.flavor_fungibility.when_can_borrow, t.flavor_fungibility.when_can_preempt) == (
        "try_next_flavor", "may_stop_search")
    assert list(t.quotas) == ["reserved/gpu", "spot/gpu"]  # the ClusterQueue's flavor order
    assert (t.quotas["reserved/gpu"].lending_limit, t.quotas["spot/gpu"].borrowing_limit) == (4.0, 8.0)
    assert {c.name: (c.parent, {k: q.nominal for k, q in c.quotas.items()}) for c in snap.cluster.cohorts} == {
        "org": ("company", {"spot/gpu": 8.0}), "company": (None, {})}
    assert {f.name: f.node_labels for f in snap.cluster.resource_flavors} == {
        "reserved": {"pool": "r"}, "spot": {"instance-type": "spot"}}
    assert snap.ignored == ["ResourceFlavor/spot.spec.tolerations: not modelled (the nodes' taints and the pods' "
                            "tolerations decide; topology comes from KubeConfig.topology)"]
    assert snap.queue.jobs[0].priority == 10000  # the WorkloadPriorityClass, not the pod's priority


def test_pods_kueue_does_not_manage_are_held_and_their_running_usage_counted() -> None:
    m = manifests("kueue-provisioning-setup.yaml")
    pods = [queued("mine", "default", "user-queue", gpus=1, memory="8Gi"), queued("stray", "default", None, gpus=1),
            queued("other-ns", "team-x", "user-queue", gpus=1),  # no LocalQueue user-queue in team-x
            queued("daemon", "kube-system", None, cpu="1", node="gpu-0")]
    snap = snapshot(nodes(2), pods, cluster_queues=m["ClusterQueue"], local_queues=m["LocalQueue"],
                    resource_flavors=m["ResourceFlavor"], config=CONFIG, now=NOW)
    assert [j.id for j in snap.queue.jobs] == ["default/mine"]
    assert sorted(p.name for h in snap.held for p in h.pods) == ["other-ns", "stray"]
    assert all(h.reason == "other" and "no Kueue LocalQueue" in h.detail for h in snap.held)
    assert [(r.job.id, r.job.tenant) for r in snap.cluster.running] == [("kube-system/daemon", "unmanaged")]
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == [] and len(plan.placements) == 1


def test_kueue_object_errors_name_the_object_and_the_field() -> None:
    m = manifests("kueue-provisioning-setup.yaml")
    bad_cq = {"kind": "ClusterQueue", "metadata": {"name": "cq"},
              "spec": {"preemption": {"withinClusterQueue": "Sometimes"},
                       "resourceGroups": [{"flavors": [{"name": "f", "resources": [
                           {"name": "cpu", "nominalQuota": "lots"}]}]}]}}
    queues = [*m["LocalQueue"], local_queue("team-a", "q", "missing-cq")]
    pods = [queued("w", "default", "user-queue", gpus=1, labels={"kueue.x-k8s.io/priority-class": "nope"})]
    with pytest.raises(InputError) as err:
        snapshot(nodes(1), pods, cluster_queues=[*m["ClusterQueue"], bad_cq], local_queues=queues,
                 resource_flavors=m["ResourceFlavor"], config=CONFIG, now=NOW)
    paths = {(i.path, i.rule) for i in err.value.problems}
    assert ("ClusterQueue/cq.spec.preemption.withinClusterQueue", "enum") in paths
    assert ("ClusterQueue/cq.spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", "quantity") in paths
    assert ("LocalQueue/team-a/q.spec.clusterQueue", "unknown_reference") in paths
    assert ("Pod/default/w.metadata.labels.kueue.x-k8s.io/priority-class", "unknown_reference") in paths


@pytest.mark.parametrize("preemption", [{"withinClusterQueue": []}, {"reclaimWithinCohort": {"a": 1}},
                                        {"borrowWithinCohort": {"policy": ["Never"]}}])
def test_a_list_or_mapping_where_a_kueue_enum_belongs_is_refused(preemption: dict[str, Any]) -> None:
    """Found by tests/test_kube_fuzz.py: `withinClusterQueue: []` raised a TypeError (a list is
    not hashable) instead of an InputError naming the field."""
    m = manifests("kueue-provisioning-setup.yaml")
    bad_cq = {"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {"preemption": preemption}}
    with pytest.raises(InputError) as err:
        snapshot(nodes(1), [], cluster_queues=[*m["ClusterQueue"], bad_cq], local_queues=m["LocalQueue"],
                 resource_flavors=m["ResourceFlavor"], config=CONFIG, now=NOW)
    assert any(i.path.startswith("ClusterQueue/cq.spec.preemption.") and i.rule == "enum" for i in err.value.problems)


def test_a_quota_naming_an_unknown_flavor_is_refused_with_the_cluster_queue() -> None:
    m = manifests("kueue-borrowing-limit.yaml")  # its flavor default-flavor is not given
    with pytest.raises(InputError) as err:
        snapshot(nodes(1), [queued("w", "team-a", "main", cpu="1")], cluster_queues=m["ClusterQueue"],
                 local_queues=[local_queue("team-a", "main", "team-a-cq")], config=CONFIG, now=NOW)
    assert any(i.path.startswith("ClusterQueue/team-a-cq") for i in err.value.problems), err.value.problems


def test_kueue_topology_annotations_keep_a_gang_in_one_domain() -> None:
    """`kueue.x-k8s.io/podset-required-topology: <rack label>` on a pod group: the job is required to
    fit one rack; `preferred` asks for as few as possible; `kubernetes.io/hostname` is one node."""
    from tests.test_kube_adapter import CONFIG as FABRIC
    from tests.test_kube_adapter import RACK

    racks = [API.sanitize_for_serialization(gpu_node(f"gpu-{i}", rack=f"r{i // 4}")) for i in range(8)]
    busy = [queued(f"busy-{i}", "team-a", None, gpus=8, node=f"gpu-{i}") for i in (0, 1, 4)]  # 2 free in r0, 3 in r1
    gang = [queued(f"w{k}", "team-a", None, gpus=8, labels={"kueue.x-k8s.io/pod-group-name": "g"},
                   annotations={"kueue.x-k8s.io/podset-required-topology": RACK}) for k in range(3)]
    snap = snapshot(racks, busy + gang, config=FABRIC, now=NOW)
    [job] = snap.queue.jobs
    assert job.topology is not None and (job.topology.level, job.topology.mode) == (RACK, "required")
    for solver in ("best-fit", "kueue", "cpsat"):
        plan = solve(snap.cluster, snap.queue, solver=solver, time_limit=2.0)
        assert check(snap.cluster, snap.queue, plan) == []
        assert {p.node for p in plan.placements} == {"gpu-5", "gpu-6", "gpu-7"}, solver  # the rack with 3 free
    preferred = [queued("p", "team-a", None, gpus=1, annotations={
        "kueue.x-k8s.io/podset-preferred-topology": "kubernetes.io/hostname"})]
    [job] = snapshot(racks, preferred, config=FABRIC, now=NOW).queue.jobs
    assert job.topology is not None and (job.topology.level, job.topology.mode) == ("node", "preferred")
    unknown = [queued("u", "team-a", None, gpus=1, annotations={
        "kueue.x-k8s.io/podset-required-topology": "example.com/no-such-level"})]
    with pytest.raises(InputError) as err:
        snapshot(racks, unknown, config=FABRIC, now=NOW)
    assert [i.path for i in err.value.problems] == [
        "Pod/team-a/u.metadata.annotations.kueue.x-k8s.io/podset-required-topology"]


def test_admissions_say_the_flavor_of_each_resource_and_the_topology_assignment() -> None:
    """Two flavors of one GPU model (reserved, spot) with separate quotas: the plan's admissions
    name, per pod set, the flavor whose nodes it got, its usage, and the nodes as Kueue's
    topologyAssignment (levels: the fabric labels, then the hostname)."""
    from tests.test_kube_adapter import BLOCK, HOST, RACK
    from tests.test_kube_adapter import CONFIG as FABRIC

    nodes_ = []
    for i in range(4):
        node = API.sanitize_for_serialization(gpu_node(f"gpu-{i}", rack=f"r{i // 2}"))
        node["metadata"]["labels"]["pool"] = "reserved" if i < 2 else "spot"
        nodes_.append(node)
    flavors = [{"kind": "ResourceFlavor", "metadata": {"name": f}, "spec": {"nodeLabels": {"pool": f}}}
               for f in ("reserved", "spot")]
    cq = {"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"flavors": [
        {"name": "reserved", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]},
        {"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}]}}
    pods = [queued("a", "team-a", "main", gpus=8, cpu="16", memory="64Gi", priority=10)]
    pods += [queued(f"b{k}", "team-a", "main", gpus=8, cpu="16", memory="64Gi", priority=5,
                    labels={"kueue.x-k8s.io/pod-group-name": "b"}) for k in range(2)]
    snap = snapshot(nodes_, pods, cluster_queues=[cq], resource_flavors=flavors,
                    local_queues=[local_queue("team-a", "main", "cq")], config=FABRIC, now=NOW)
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == []
    by_job = {a["job"]: a for a in actions(plan, snap).admissions}
    assert set(by_job) == {"team-a/a", "team-a/b"}
    [a] = by_job["team-a/a"]["podSetAssignments"]
    [b] = by_job["team-a/b"]["podSetAssignments"]
    assert by_job["team-a/a"]["clusterQueue"] == "cq" and by_job["team-a/b"]["pods"] == ["b0", "b1"]
    assert (a["flavors"], b["flavors"]) == ({"nvidia.com/gpu": "reserved"}, {"nvidia.com/gpu": "spot"})
    assert b["count"] == 2 and b["resourceUsage"] == {"cpu": "32", "memory": "131072Mi", "nvidia.com/gpu": "16"}
    assert b["topologyAssignment"]["levels"] == [BLOCK, RACK, HOST]
    assert sorted(tuple(d["values"]) for d in b["topologyAssignment"]["domains"]) == [
        ("b1", "r1", "gpu-2"), ("b1", "r1", "gpu-3")]
    assert all(d["count"] == 1 for d in b["topologyAssignment"]["domains"])


def _workload_setup(nominal_cpu: str) -> dict[str, Any]:
    flavor = {"kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}
    cq = {"kind": "ClusterQueue", "metadata": {"name": "team-a-cq"}, "spec": {"resourceGroups": [{"flavors": [
        {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": nominal_cpu}]}]}]}}
    return {"cluster_queues": [cq], "resource_flavors": [flavor],
            "local_queues": [local_queue("team-a", "team-a-queue", "team-a-cq")]}


def test_a_pending_workload_without_pods_is_a_job_admitted_by_its_admission() -> None:
    """workload.md's Workload (3 pods of 1 CPU, 200Mi): one gang job; the plan admits it through an
    admission (no Binding: its pods do not exist); with 2 CPUs of quota it waits, said of the Workload."""
    [workload] = manifests("kueue-workload.yaml")["Workload"]
    snap = snapshot(nodes(2), [], workloads=[workload], **_workload_setup("9"), config=CONFIG, now=NOW)
    [job] = snap.queue.jobs
    assert (job.id, job.tenant, [(g.name, g.replicas.min, g.replicas.max) for g in job.groups]) == (
        "team-a/sample-job", "team-a-cq", [("main", 3, 3)])
    assert job.groups[0].request.cpu == 1000.0 and job.groups[0].request.memory == 200.0
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == [] and len(plan.placements) == 3
    todo = actions(plan, snap)
    assert todo.bindings == [] and todo.pending == [] and todo.workloads == []
    [admission] = todo.admissions
    assert admission["workload"] == {"namespace": "team-a", "name": "sample-job"} and admission["pods"] == []
    assert admission["podSetAssignments"][0]["count"] == 3
    assert admission["podSetAssignments"][0]["flavors"] == {"cpu": "default-flavor"}

    snap = snapshot(nodes(2), [], workloads=[workload], **_workload_setup("2"), config=CONFIG, now=NOW)
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=2.0)
    todo = actions(plan, snap)
    assert plan.placements == [] and todo.pending == []
    assert [(w["name"], w["reason"]) for w in todo.workloads] == [("sample-job", "quota")]


def test_workload_min_count_topology_and_what_is_not_read() -> None:
    [workload] = manifests("kueue-workload.yaml")["Workload"]
    partial = {**workload, "spec": {**workload["spec"], "podSets": [
        {**workload["spec"]["podSets"][0], "minCount": 1,
         "topologyRequest": {"required": "cloud.provider.com/topology-rack"}}]}}
    from tests.test_kube_adapter import CONFIG as FABRIC

    snap = snapshot(nodes(2), [], workloads=[partial], **_workload_setup("2"), config=FABRIC, now=NOW)
    [job] = snap.queue.jobs
    assert (job.groups[0].replicas.min, job.groups[0].replicas.max) == (1, 3)
    assert job.topology is not None and job.topology.mode == "required"
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == [] and len(plan.placements) == 2  # partial admission: 2 CPUs
    admitted = {**workload, "metadata": {**workload["metadata"], "name": "admitted"},
                "status": {"admission": {"clusterQueue": "team-a-cq"}}}
    inactive = {**workload, "metadata": {**workload["metadata"], "name": "inactive"},
                "spec": {**workload["spec"], "active": False}}
    of_pods = {**workload, "metadata": {**workload["metadata"], "name": "pods",
                                        "ownerReferences": [{"kind": "Pod", "name": "p", "apiVersion": "v1"}]}}
    snap = snapshot(nodes(1), [], workloads=[admitted, inactive, of_pods], **_workload_setup("9"), config=CONFIG,
                    now=NOW)
    assert snap.queue.jobs == []
    with pytest.raises(InputError) as err:
        snapshot(nodes(1), [], workloads=[workload], config=CONFIG, now=NOW)
    assert err.value.problems[0].rule == "requires"


def test_admission_fair_sharing_reads_local_queue_usage_and_orders_by_it() -> None:
    """Kueue's admission_fair_sharing.md: a ClusterQueue with `admissionScope.admissionMode:
    UsageBasedAdmissionFairSharing`, two LocalQueues whose `status.fairSharing.admissionFairSharing
    Status.consumedResources` differ; the pods' LocalQueues become the jobs' `local_queue`, and the
    `kueue` baseline admits the job of the less used queue first (quota for one: 8 GPUs)."""
    m = manifests("kueue-provisioning-setup.yaml")
    cq = m["ClusterQueue"][0]
    cq = {**cq, "spec": {**cq["spec"], "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}}}
    busy = local_queue("default", "busy", "cluster-queue") | {
        "spec": {"clusterQueue": "cluster-queue", "fairSharing": {"weight": "2"}},
        "status": {"fairSharing": {"admissionFairSharingStatus": {"consumedResources": {
            "nvidia.com/gpu": "40", "cpu": "31999m"}}}}}
    quiet = local_queue("default", "quiet", "cluster-queue") | {
        "status": {"fairSharing": {"admissionFairSharingStatus": {"consumedResources": {"nvidia.com/gpu": "4"}}}}}
    pods = [queued(name, "default", queue, gpus=8, cpu="1", memory="1Gi")
            for name, queue in (("a-busy", "busy"), ("b-quiet", "quiet"))]
    config = KubeConfig.model_validate({**CONFIG.model_dump(), "kueue_admission_fair_sharing": {}})
    snap = snapshot(nodes(2), pods, cluster_queues=[cq], local_queues=[busy, quiet],
                    resource_flavors=m["ResourceFlavor"], config=config, now=NOW)
    assert snap.cluster.tenants[0].admission_fair_sharing
    queues = {q.name: q for q in snap.cluster.local_queues}
    assert queues["default/busy"].weight == 2.0
    assert queues["default/busy"].consumed == {"gpu": 40.0, "cpu": 31999.0}
    assert {j.local_queue for j in snap.queue.jobs} == {"default/busy", "default/quiet"}
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == []
    admitted = {p.job for p in plan.placements}
    assert len(admitted) == 1 and "quiet" in next(iter(admitted))
