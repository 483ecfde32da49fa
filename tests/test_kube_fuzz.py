"""Mutated Kubernetes objects fed to the adapter: every one is read or refused with an InputError,
never another exception (bad input is refused at the door, naming the object and field).

100 examples per system (Kueue's objects and a Workload; Volcano's) by default; `OPTSCHED_FUZZ_EXAMPLES=1000` for a longer run (1,000 passed when this
was written, after it had found three crashes: a non-object in a list, a quantity that overflows a
float, and an image whose `names` is not a list)."""

from __future__ import annotations

import copy
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("kubernetes")

from kubernetes.client import ApiClient

from optsched import InputError
from optsched.adapters.kube import snapshot
from tests.strategies import mutation_paths, set_at
from tests.test_kube_adapter import CONFIG, NOW, cluster_64

API = ApiClient()
NODES, PODS = cluster_64()
BASE = {"nodes": [API.sanitize_for_serialization(n) for n in NODES[:8]],
        "pods": [API.sanitize_for_serialization(p) for p in PODS if not p.spec.node_name
                 or p.spec.node_name < "gpu-08"][:24]}
KUEUE = {"cluster_queues": [{"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
    "preemption": {"withinClusterQueue": "LowerPriority"}, "resourceGroups": [{"flavors": [
        {"name": "all", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 32}]}]}]}}],
         "local_queues": [{"kind": "LocalQueue", "metadata": {"namespace": "team-a", "name": "main"},
                           "spec": {"clusterQueue": "cq"}}],
         "resource_flavors": [{"kind": "ResourceFlavor", "metadata": {"name": "all"}}],
         "workloads": [{"kind": "Workload", "metadata": {"namespace": "team-a", "name": "wl"}, "spec": {
             "queueName": "main", "priority": 5, "podSets": [{"name": "main", "count": 2, "minCount": 1,
                                                               "topologyRequest": {"preferred": CONFIG.topology[1].label},
                                                               "template": {"spec": {"containers": [{
                                                                   "name": "c", "resources": {"requests": {
                                                                       "nvidia.com/gpu": "1", "cpu": "2"}}}]}}}]}}]}
VOLCANO = {"pod_groups": [{"kind": "PodGroup", "metadata": {"namespace": "team-b", "name": f"pretrain-{j}"},
                           "spec": {"minMember": 2, "queue": "default"}} for j in range(2)],
           "queues": [{"kind": "Queue", "metadata": {"name": "default"},
                       "spec": {"weight": 2, "capability": {"nvidia.com/gpu": "48"}, "guarantee": {
                           "resource": {"cpu": "16"}}}}]}

OBJECT = re.compile(r"^(Node|Pod|PriorityClass|ClusterQueue|LocalQueue|ResourceFlavor|Cohort|WorkloadPriorityClass"
                    r"|Workload|PodGroup|Queue|Tenant|Cluster)\b")
"""Every problem's path starts with the object (`Pod/team-a/x.spec...`, `Node[3]`) it comes from."""
VALUES = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                   st.just("-1"), st.just("1e400"), st.just("8Gi"), st.just("abc[def"),
                   st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.text(max_size=5),
                                                                        max_size=3))


@pytest.mark.parametrize("system", ["kueue", "volcano"])
@settings(max_examples=int(os.environ.get("OPTSCHED_FUZZ_EXAMPLES", "100")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_objects_are_read_or_refused_with_an_input_error(system: str, data: st.DataObject) -> None:
    objects = copy.deepcopy({**BASE, **(KUEUE if system == "kueue" else VOLCANO)})
    if system == "kueue":  # team-a's pods are in Kueue's LocalQueue `main`
        for pod in objects["pods"]:
            if pod["metadata"]["namespace"] == "team-a":
                pod["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "main"
    paths = [p for p in mutation_paths(objects) if len(p) >= 2]
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        path = data.draw(st.sampled_from(paths))
        try:
            set_at(objects, path, data.draw(VALUES))
        except (KeyError, IndexError, TypeError):  # an earlier mutation removed the way there
            continue
    try:
        snap = snapshot(**objects, config=CONFIG, now=NOW)
    except InputError as err:
        assert err.problems and all(OBJECT.match(i.path) for i in err.problems), err.problems
    else:
        assert len(snap.cluster.nodes) == len(objects["nodes"])  # read: every node is in the round
