"""The scheduling service (`optsched.service`): rounds over HTTP, the state, the extender verbs,
metrics, and bad requests answered with 4xx and field paths, never 500.

Extender request and answer shapes are those of k8s.io/kube-scheduler/extender/v1 (types.go: Go
field names, no json tags); the cluster is the 64-node one of test_kube_adapter.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

from fastapi.testclient import TestClient
from kubernetes.client import ApiClient

from optsched import check, load_plan, reference_cluster
from optsched.adapters.kube import DEVICES_ANNOTATION, snapshot
from optsched.generate import generate_queue
from optsched.model import dump
from optsched.service import ClusterState, RoundSettings, ServiceSettings, create_app
from tests.test_kube_adapter import CONFIG, NOW, cluster_64, gpu_node, pod

API = ApiClient()


def objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes, pods = cluster_64()
    return [API.sanitize_for_serialization(n) for n in nodes], [API.sanitize_for_serialization(p) for p in pods]


def service(binder: Any = None, **settings: Any) -> TestClient:
    opts = {"rounds": RoundSettings(kube=CONFIG, time_limit=1.0, solver="kueue"), "loop": False, **settings}
    return TestClient(create_app(ServiceSettings(**opts), binder=binder))


def names(items: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in items]


def by_name(pods: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(p for p in pods if p["metadata"]["name"] == name)


def test_a_round_on_documents_returns_a_plan_the_validator_accepts() -> None:
    cluster = reference_cluster("dgx-h100-1k")
    queue = generate_queue(cluster, "mixed", jobs=40, load=1.0, seed=3)
    body = {"cluster": _doc(cluster), "queue": _doc(queue), "solver": "best-fit", "time_limit": 2.0}
    with service() as client:
        r = client.post("/v1/rounds", json=body)
    assert r.status_code == 200, r.text
    plan = load_plan(r.json()["plan"])
    assert check(cluster, queue, plan) == []
    summary = r.json()["summary"]
    assert summary["queued_jobs"] == 40 and summary["placed_replicas"] == len(plan.placements)
    assert summary["solver"]["name"] == "best-fit" and "actions" not in r.json()


def _doc(model: Any) -> Any:
    import json

    return json.loads(dump(model, fmt="json"))


def test_a_round_on_kubernetes_objects_returns_the_actions() -> None:
    nodes, pods = objects()
    body = {"kubernetes": {"nodes": nodes, "pods": pods, "config": CONFIG.model_dump(mode="json"), "now": NOW},
            "solver": "kueue", "time_limit": 2.0}
    with service() as client:
        r = client.post("/v1/rounds", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    snap = snapshot(nodes, pods, config=CONFIG, now=NOW)
    plan = load_plan(out["plan"])
    assert check(snap.cluster, snap.queue, plan) == []
    bindings = out["actions"]["bindings"]
    assert len(bindings) == len(plan.placements) > 0
    assert all(b["kind"] == "Binding" and b["target"]["kind"] == "Node" for b in bindings)
    told = {p["name"] for p in out["actions"]["pending"]}
    waiting = {p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")}
    assert {b["metadata"]["name"] for b in bindings} | told == waiting


@pytest.mark.parametrize(("body", "status", "loc", "rule"), [
    (b"not json", 400, "<body>", "syntax"),
    (b"[1, 2]", 400, "<body>", "syntax"),
    (b"\xff\xfe{}", 400, "<body>", "syntax"),
    (b'{"cluster": {}, "cluster": {}}', 422, "<body>", "duplicate_key"),
    (b'{"cluster": {"nodes": []}, "queue": {}, "time_limit": 1}', 422, "cluster.topology", "missing"),
    (b'{"queue": {"jobs": []}}', 422, "cluster", "required"),
    (b'{"cluster": {}, "queue": {}, "time_limit": "1"}', 422, "time_limit", "float_type"),
    (b'{"cluster": {}, "queue": {}, "time_limit": 1e9}', 422, "time_limit", "out_of_range"),
    (b'{"cluster": {}, "queue": {}, "time_limit": NaN}', 422, "time_limit", "finite_number"),
    (b'{"kubernetes": {"nodes": []}, "cluster": {}}', 422, "kubernetes", "exclusive"),
    (b'{"kubernetes": {"nodes": [], "config": {"topology": 3}}}', 422, "kubernetes.config.topology", "list_type"),
    (b'{"extra": 1}', 422, "extra", "extra_forbidden"),
])
def test_bad_round_requests_get_4xx_with_the_field(body: bytes, status: int, loc: str, rule: str) -> None:
    with service() as client:
        r = client.post("/v1/rounds", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert any(d["loc"] == loc and d["rule"] == rule for d in r.json()["detail"]), r.json()


def test_object_errors_name_the_object_and_the_field() -> None:
    nodes, pods = objects()
    pods[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with service() as client:
        r = client.post("/v1/rounds", json={"kubernetes": {"nodes": nodes, "pods": pods}})
    assert r.status_code == 422
    name = pods[0]["metadata"]["name"]
    assert [d["loc"] for d in r.json()["detail"]] == [
        f"kubernetes.Pod/team-a/{name}.spec.containers[0].resources.requests.cpu"]


def test_an_unknown_solver_and_a_body_over_the_limit_are_refused() -> None:
    cluster = reference_cluster("dgx-h100-1k")
    body = {"cluster": _doc(cluster), "queue": {"jobs": []}, "solver": "no-such-solver"}
    with service(max_body_bytes=10**7) as client:
        r = client.post("/v1/rounds", json=body)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == "solver"
        r = client.post("/v1/rounds", content=b"{" + b" " * (10**7 + 1) + b"}")
        assert r.status_code == 413 and r.json()["detail"][0]["rule"] == "too_large"
        assert client.get("/healthz").status_code == 200  # still serving


def state_round(client: TestClient) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    nodes, pods = objects()
    assert client.put("/v1/state", json={"nodes": nodes, "pods": pods}).status_code == 200
    assert client.get("/readyz").status_code == 503  # a state without a round: not ready
    r = client.post("/v1/state/round")
    assert r.status_code == 200, r.text
    assert client.get("/readyz").status_code == 200
    plan = client.get("/v1/plan").json()
    return nodes, pods, plan


def test_filter_and_prioritize_answer_from_the_plan_for_every_pod_of_a_gang() -> None:
    with service() as client:
        nodes, pods, current = state_round(client)
        node_names = names(nodes)
        planned = {(b["metadata"]["name"]): b["target"]["name"] for b in current["actions"]["bindings"]}
        gang = [p for p in pods if p["metadata"]["name"].startswith("urgent-")]
        assert {p["metadata"]["name"] for p in gang} <= set(planned)
        for p in gang:
            r = client.post("/v1/extender/filter", json={"Pod": p, "NodeNames": node_names}).json()
            target = planned[p["metadata"]["name"]]
            assert r["NodeNames"] == [target] and r["Error"] == ""
            assert set(r["FailedNodes"]) == set(node_names) - {target} and r["FailedAndUnresolvableNodes"] == {}
            scores = client.post("/v1/extender/prioritize", json={"Pod": p, "NodeNames": node_names}).json()
            assert {h["Host"] for h in scores if h["Score"] == 10} == {target}
            assert all(h["Score"] == 0 for h in scores if h["Host"] != target)
        # not node-cache-capable: the Node objects come and go back
        p = gang[0]
        r = client.post("/v1/extender/filter", json={"Pod": p, "Nodes": {"items": nodes}}).json()
        assert names(r["Nodes"]["items"]) == [planned[p["metadata"]["name"]]]
        assert r["Nodes"]["items"][0] == next(n for n in nodes if n["metadata"]["name"] == planned[
            p["metadata"]["name"]])


def test_filter_tells_a_deferred_pod_why_and_an_unknown_pod_to_wait() -> None:
    nodes, pods = objects()
    pods.append(API.sanitize_for_serialization(pod("huge", gpus=8, cpu="999")))  # no node has 999 cores
    with service() as client:
        client.put("/v1/state", json={"nodes": nodes, "pods": pods})
        client.post("/v1/state/round")
        r = client.post("/v1/extender/filter", json={"Pod": by_name(pods, "huge"), "NodeNames": names(nodes)})
        out = r.json()
        assert out["NodeNames"] == [] and set(out["FailedAndUnresolvableNodes"]) == set(names(nodes))
        assert all(m.startswith("optsched: capacity") for m in out["FailedAndUnresolvableNodes"].values())
        stranger = API.sanitize_for_serialization(pod("late", gpus=1))
        out = client.post("/v1/extender/filter", json={"Pod": stranger, "NodeNames": names(nodes)}).json()
        assert out["NodeNames"] == [] and all("not planned yet" in m for m in out["FailedNodes"].values())
        renamed = by_name(pods, "urgent-0") | {"metadata": {**by_name(pods, "urgent-0")["metadata"], "uid": "other"}}
        out = client.post("/v1/extender/filter", json={"Pod": renamed, "NodeNames": names(nodes)}).json()
        assert out["NodeNames"] == []  # same name, another pod (uid): the plan was not for it


def test_preempt_keeps_only_the_plans_victims_on_the_planned_node() -> None:
    with service() as client:
        _, pods, current = state_round(client)
        evicted = {e["name"]: e for e in current["actions"]["evictions"]}
        assert evicted, "the round evicts the two low-priority gangs"
        by = next(iter(evicted.values()))["by"]
        node_of = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
        uid_of = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
        job_pods = [b for b in current["actions"]["bindings"]
                    if f"{b['metadata']['namespace']}/{b['metadata']['name']}".startswith(by.rsplit("/", 1)[0])]
        preemptor = next(b for b in job_pods if any(node_of[v] == b["target"]["name"] for v in evicted))
        target = preemptor["target"]["name"]
        proposed = {n: {"Pods": [{"UID": uid_of[name]} for name, at in node_of.items() if at == n],
                        "NumPDBViolations": 0} for n in {target, "gpu-60"}}
        body = {"Pod": by_name(pods, preemptor["metadata"]["name"]), "NodeNameToMetaVictims": proposed}
        out = client.post("/v1/extender/preempt", json=body).json()["NodeNameToMetaVictims"]
        assert list(out) == [target]
        assert {v["UID"] for v in out[target]["Pods"]} == {uid_of[n] for n in evicted if node_of[n] == target}
        waiting = {"Pod": by_name(pods, "eval-0"), "NodeNameToMetaVictims": proposed}
        if "eval-0" not in evicted:
            assert client.post("/v1/extender/preempt", json=waiting).json()["NodeNameToMetaVictims"] in (
                {}, {node: v for node, v in out.items() if node == target})


def test_bind_creates_the_binding_with_devices_and_the_next_round_sees_the_pod_running() -> None:
    made: list[dict[str, Any]] = []
    with service(binder=made.append) as client:
        _, pods, current = state_round(client)
        b = next(b for b in current["actions"]["bindings"] if b["metadata"]["name"] == "urgent-0")
        args = {"PodName": "urgent-0", "PodNamespace": b["metadata"]["namespace"], "PodUID": b["metadata"]["uid"],
                "Node": b["target"]["name"]}
        wrong = {**args, "Node": "gpu-00" if args["Node"] != "gpu-00" else "gpu-01"}
        assert "planned for node" in client.post("/v1/extender/bind", json=wrong).json()["Error"]
        assert client.post("/v1/extender/bind", json=args).json() == {"Error": ""}
        assert made[0]["target"]["name"] == args["Node"]
        assert made[0]["metadata"]["annotations"][DEVICES_ANNOTATION] == \
            b["metadata"]["annotations"][DEVICES_ANNOTATION]
        before = client.get("/v1/state").json()
        assert before["pending_pods"] == len([p for p in pods if not p["spec"].get("nodeName")]) - 1
        client.post("/v1/state/round")
        nxt = client.get("/v1/plan").json()
        assert "urgent-0" not in {b["metadata"]["name"] for b in nxt["actions"]["bindings"]}
        assert nxt["number"] == current["number"] + 1
    with service() as client:  # no API access: the bind verb says so
        state_round(client)
        assert "no API server access" in client.post("/v1/extender/bind", json=args).json()["Error"]


def test_watch_events_change_the_state_and_bad_events_are_refused_whole() -> None:
    with service() as client:
        nodes, pods = objects()
        client.put("/v1/state", json={"nodes": nodes, "pods": pods})
        before = client.get("/v1/state").json()
        new = API.sanitize_for_serialization(pod("late", gpus=1)) | {"kind": "Pod"}
        r = client.post("/v1/state/events", json={"events": [{"type": "ADDED", "object": new}]})
        assert r.status_code == 200 and r.json()["pending_pods"] == before["pending_pods"] + 1
        after = client.get("/v1/state").json()
        assert after["pending_generation"] == before["pending_generation"] + 1
        running = by_name(pods, "train-5-0") | {"kind": "Pod"}
        client.post("/v1/state/events", json={"events": [{"type": "MODIFIED", "object": running}]})
        assert client.get("/v1/state").json()["pending_generation"] == after["pending_generation"]
        bad = [{"type": "DELETED", "object": new}, {"type": "ADDED", "object": {"kind": "Secret"}},
               {"type": "SOMETIMES", "object": new}]
        r = client.post("/v1/state/events", json={"events": bad})
        assert r.status_code == 422
        assert [(d["loc"], d["rule"]) for d in r.json()["detail"]] == [
            ("events[1].object.kind", "kind"), ("events[2].type", "event_type")]
        assert client.get("/v1/state").json()["pods"] == after["pods"]  # nothing applied
        gone = {"type": "DELETED", "object": new}
        assert client.post("/v1/state/events", json={"events": [gone]}).json()["pending_pods"] == \
            before["pending_pods"]


def test_a_failed_round_keeps_the_last_plan_answering() -> None:
    with service() as client:
        nodes, pods, current = state_round(client)
        stray = API.sanitize_for_serialization(pod("stray", gpus=1, node="no-such-node")) | {"kind": "Pod"}
        client.post("/v1/state/events", json={"events": [{"type": "ADDED", "object": stray}]})
        r = client.post("/v1/state/round")
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == "Pod/team-a/stray.spec.nodeName"
        assert client.get("/v1/plan").json()["number"] == current["number"]
        p = by_name(pods, "urgent-0")
        out = client.post("/v1/extender/filter", json={"Pod": p, "NodeNames": names(nodes)}).json()
        assert len(out["NodeNames"]) == 1
        metrics = client.get("/metrics").text
        assert 'optsched_rounds_total{source="state",status="input"} 1.0' in metrics
        assert 'optsched_extender_requests_total{outcome="planned",verb="filter"} 1.0' in metrics
        assert client.get("/v1/state").json()["last_error"]
        assert client.get("/readyz").status_code == 200  # it still has a plan to answer from


def test_the_metrics_count_rounds_evictions_and_deferrals() -> None:
    with service() as client:
        _, _, current = state_round(client)
        text = client.get("/metrics").text
    status = current["plan"]["solver"]["status"]
    assert f'optsched_rounds_total{{source="state",status="{status}"}} 1.0' in text
    assert f'optsched_evictions_total{{source="state"}} {float(len(current["plan"]["evictions"]))}' in text
    assert 'optsched_round_seconds_count{source="state"} 1.0' in text
    value = current["plan"]["objective"]["admitted_value"]
    assert any(line.startswith('optsched_admitted_value{source="state"}') and
               float(line.split()[-1]) == pytest.approx(value) for line in text.splitlines())


def test_the_round_loop_solves_when_the_state_changes() -> None:
    nodes, pods = objects()
    with service(loop=True, interval_s=30.0, min_gap_s=0.1) as client:
        client.put("/v1/state", json={"nodes": nodes, "pods": pods})
        first = _wait_for_round(client, 1)
        late = API.sanitize_for_serialization(pod("late", gpus=1)) | {"kind": "Pod"}
        client.post("/v1/state/events", json={"events": [{"type": "ADDED", "object": late}]})
        second = _wait_for_round(client, first + 1)
        assert second == first + 1
        out = client.post("/v1/extender/filter", json={"Pod": late, "NodeNames": names(nodes)}).json()
        assert len(out["NodeNames"]) == 1  # the pod that came is now planned


def test_state_rounds_read_again_only_what_changed() -> None:
    """The runner's snapshot cache: objects with the same resourceVersion are not read again."""
    nodes, pods = objects()
    for i, obj in enumerate([*nodes, *pods]):
        obj["metadata"]["resourceVersion"] = str(i + 1)
    with service() as client:
        client.put("/v1/state", json={"nodes": nodes, "pods": pods})
        rounds = []
        for _ in range(2):
            assert client.post("/v1/state/round").status_code == 200
            rounds.append(client.get("/v1/state").json()["round"])
        late = API.sanitize_for_serialization(pod("late", gpus=1)) | {"kind": "Pod"}
        late["metadata"]["resourceVersion"] = "9999"
        client.post("/v1/state/events", json={"events": [{"type": "ADDED", "object": late}]})
        assert client.post("/v1/state/round").status_code == 200
        rounds.append(client.get("/v1/state").json()["round"])
    assert [(r["nodes_reused"], r["pods_reused"]) for r in rounds] == [
        (False, 0), (True, len(pods)), (True, len(pods))]
    assert rounds[2]["pending"] + rounds[2]["bindings"] == rounds[1]["pending"] + rounds[1]["bindings"] + 1  # late


def _wait_for_round(client: TestClient, number: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rnd = client.get("/v1/state").json()["round"]
        if rnd is not None and rnd["number"] >= number:
            return int(rnd["number"])
        time.sleep(0.05)
    raise AssertionError(f"no round {number} within {timeout} s")


def test_concurrent_extender_calls_during_rounds_all_answer() -> None:
    """Filter calls from four threads while state rounds run: every call answers 200 with one
    plan's answer (the planned node, or not planned yet), never an error."""
    errors: list[str] = []
    with service() as client:
        nodes, pods, _ = state_round(client)
        gang = [p for p in pods if p["metadata"]["name"].startswith("notebook-")]
        stop = threading.Event()

        def call() -> None:
            while not stop.is_set():
                for p in gang:
                    r = client.post("/v1/extender/filter", json={"Pod": p, "NodeNames": names(nodes)})
                    if r.status_code != 200 or r.json()["Error"] or len(r.json()["NodeNames"]) > 1:
                        errors.append(r.text)

        threads = [threading.Thread(target=call) for _ in range(4)]
        for t in threads:
            t.start()
        for _ in range(3):
            assert client.post("/v1/state/round").status_code == 200
        stop.set()
        for t in threads:
            t.join()
    assert errors == []


def test_the_state_refuses_objects_without_names() -> None:
    state = ClusterState()
    with pytest.raises(Exception, match=r"nodes\[0\].metadata.name"):
        state.replace([{"metadata": {}}], [])
    state.replace([API.sanitize_for_serialization(gpu_node("n1"))], [])
    assert state.counts()["nodes"] == 1 and state.loaded


class _Listed:
    def __init__(self, items: list[Any]) -> None:
        self.items = items


class FakeApi:
    """The three clients' list calls, as the official client answers them (CoreV1Api and
    SchedulingV1Api: objects with `.items`; CustomObjectsApi: a dict, 404 for a version not served)."""

    def __init__(self, nodes: list[Any], pods: list[Any], custom: dict[tuple[str, str], list[Any]]) -> None:
        self.nodes, self.pods, self.custom, self.calls = nodes, pods, custom, 0

    def list_node(self) -> _Listed:
        self.calls += 1
        return _Listed(self.nodes)

    def list_pod_for_all_namespaces(self) -> _Listed:
        return _Listed(self.pods)

    def list_priority_class(self) -> _Listed:
        return _Listed([])

    def list_cluster_custom_object(self, group: str, version: str, plural: str) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        assert group in ("kueue.x-k8s.io", "scheduling.volcano.sh")
        if (version, plural) not in self.custom or group != "kueue.x-k8s.io":
            raise ApiException(status=404, reason="Not Found")
        return {"items": self.custom[(version, plural)]}


def test_the_poller_lists_the_cluster_and_kueue_where_it_is_served() -> None:
    from optsched.service.source import poller

    nodes, pods = cluster_64()
    cq = {"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {"resourceGroups": [{"flavors": [
        {"name": "all", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 512}]}]}]}}
    lqs = [{"kind": "LocalQueue", "metadata": {"namespace": ns, "name": "main"}, "spec": {"clusterQueue": "cq"}}
           for ns in ("team-a", "team-b", "team-c")]
    rf = {"kind": "ResourceFlavor", "metadata": {"name": "all"}}
    api = FakeApi(nodes, pods, {("v1beta1", "clusterqueues"): [cq], ("v1beta1", "localqueues"): lqs,
                                ("v1beta1", "resourceflavors"): [rf]})  # Kueue v1beta1 only, no Cohorts
    state = ClusterState()
    stop = threading.Event()
    thread = threading.Thread(target=poller(api, api, 0.05, api, stop), args=(state,))
    thread.start()
    deadline = time.monotonic() + 10
    while api.calls < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join()
    counts = state.counts()
    assert (counts["nodes"], counts["pods"], counts["cluster_queues"], counts["local_queues"], counts["cohorts"]) == (
        64, 86, 1, 3, 0)
    assert state.pending_generation == 1  # listed twice, changed once


def test_a_state_with_kueue_objects_is_solved_under_its_quotas() -> None:
    nodes, pods = objects()
    for p in pods:
        p["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "main"
    cqs = [{"kind": "ClusterQueue", "metadata": {"name": f"cq-{t}"}, "spec": {"resourceGroups": [{"flavors": [
        {"name": "all", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8 * 24}]}]}]}} for t in "abc"]
    lqs = [{"kind": "LocalQueue", "metadata": {"namespace": f"team-{t}", "name": "main"},
            "spec": {"clusterQueue": f"cq-{t}"}} for t in "abc"]
    listing = {"nodes": nodes, "pods": pods, "cluster_queues": cqs, "local_queues": lqs,
               "resource_flavors": [{"kind": "ResourceFlavor", "metadata": {"name": "all"}}]}
    with service() as client:
        assert client.put("/v1/state", json=listing).status_code == 200
        r = client.post("/v1/state/round")
        assert r.status_code == 200, r.text
        plan = load_plan(client.get("/v1/plan").json()["plan"])
        body = {"kubernetes": {**listing, "config": CONFIG.model_dump(mode="json"), "now": NOW}, "solver": "kueue"}
        stateless = client.post("/v1/rounds", json=body)
    assert stateless.status_code == 200, stateless.text
    snap = snapshot(nodes, pods, cluster_queues=cqs, local_queues=lqs, resource_flavors=listing["resource_flavors"],
                    config=CONFIG, now=NOW)
    assert check(snap.cluster, snap.queue, load_plan(stateless.json()["plan"])) == []
    gpus = {t: sum(8 if not p.job.startswith("team-c/notebook") else 1 for p in plan.placements
                   if p.job.startswith(f"team-{t}/")) for t in "abc"}
    running_a = sum(8 for p in pods if p["metadata"]["namespace"] == "team-a" and p["spec"].get("nodeName"))
    assert running_a > 8 * 24 and gpus["a"] == 0  # team-a runs past its nominal quota: nothing more for it
    assert "team-a/urgent" in {d.job for d in plan.deferred}
    assert 0 < gpus["b"] <= 8 * 24 and plan.evictions == []  # Kueue's default policy: never preempt


def test_volcano_objects_in_a_round_request_and_in_the_state() -> None:
    """Volcano's reclaim example (tests/test_kube_volcano.py) through `POST /v1/rounds` and through
    the state: one whole borrower gang is evicted for the owner's gang either way."""
    from tests.test_kube_volcano import cpu_nodes, job, manifests

    queues = manifests("volcano-reclaim-queues.yaml")["Queue"]
    a, pods_a = job("borrower-victim-a", "borrower", 2, 2, nodes=["n0", "n0"], preemptable=True)
    b, pods_b = job("borrower-victim-b", "borrower", 2, 2, nodes=["n1", "n1"], preemptable=True)
    owner, pods_o = job("owner-requester", "owner", 2, 2)
    listing = {"nodes": cpu_nodes(2), "pods": pods_a + pods_b + pods_o, "pod_groups": [a, b, owner],
               "queues": queues}
    with service() as client:
        r = client.post("/v1/rounds", json={"kubernetes": listing, "solver": "kueue"})
        assert r.status_code == 200, r.text
        assert len(r.json()["actions"]["evictions"]) == 2 and len(r.json()["actions"]["bindings"]) == 2
        client.put("/v1/state", json=listing)
        assert client.post("/v1/state/round").status_code == 200
        current = client.get("/v1/plan").json()
    assert {e["by"] for e in current["actions"]["evictions"]} == {"default/owner-requester"}
    assert len({e["name"].rsplit("-worker-", 1)[0] for e in current["actions"]["evictions"]}) == 1


def test_rounds_solved_in_a_worker_process_answer_the_same_and_report_input_errors() -> None:
    """`RoundSettings.process` (what `optsched serve` uses): the round runs in a spawned worker; its
    plan is the in-process plan of the same listing (kueue is deterministic), and a listing that
    breaks a rule comes back as the same field-path 422."""
    nodes, pods = objects()
    answers = []
    for process in (False, True):
        settings = RoundSettings(kube=CONFIG, time_limit=5.0, solver="kueue", process=process)
        with TestClient(create_app(ServiceSettings(rounds=settings, loop=False))) as client:
            client.put("/v1/state", json={"nodes": nodes, "pods": pods})
            assert client.post("/v1/state/round").status_code == 200
            plan = client.get("/v1/plan").json()["plan"]
            answers.append(sorted((p["job"], p["group"], p["replica"], p["node"]) for p in plan["placements"]))
            if process:
                stray = API.sanitize_for_serialization(pod("stray", gpus=1, node="no-such-node")) | {"kind": "Pod"}
                client.post("/v1/state/events", json={"events": [{"type": "ADDED", "object": stray}]})
                r = client.post("/v1/state/round")
                assert r.status_code == 422 and r.json()["detail"][0]["loc"] == "Pod/team-a/stray.spec.nodeName"
    assert answers[0] == answers[1] and answers[0]
