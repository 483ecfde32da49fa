"""The validator: accepts the example plan and catches each rule when a plan is corrupted."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from optsched.check import check
from optsched.model import Cluster, Plan, Queue

Docs = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]


def rules(c: dict[str, Any], q: dict[str, Any], p: dict[str, Any]) -> set[str]:
    return {v.rule for v in check(Cluster.model_validate(c), Queue.model_validate(q), Plan.model_validate(p))}


def placement(p: dict[str, Any], job: str, group: str, replica: int) -> dict[str, Any]:
    return next(x for x in p["placements"] if x["job"] == job and x["group"] == group and x["replica"] == replica)


def test_example_plan_is_valid(example_docs: Docs) -> None:
    assert rules(*example_docs) == set()


def test_capacity_worker_on_small_node(example_docs: Docs) -> None:
    """README corruption 1: 8 RDMA NICs do not fit in 4 on a100-0."""
    c, q, p = example_docs
    placement(p, "llm-pretrain", "worker", 1)["node"] = "a100-0"
    assert "capacity" in rules(c, q, p)


def test_interconnect_learner_across_groups(example_docs: Docs) -> None:
    c, q, p = example_docs
    placement(p, "rl-agent", "learner", 0)["devices"] = [2, 3, 4, 5]
    assert "interconnect" in rules(c, q, p)


def test_ratio_and_gang_drop_env(example_docs: Docs) -> None:
    c, q, p = example_docs
    p["placements"].remove(placement(p, "rl-agent", "env", 7))
    assert {"ratio", "gang"} <= rules(c, q, p)


def test_spread_both_chat_on_one_node(example_docs: Docs) -> None:
    c, q, p = example_docs
    placement(p, "chat-serving", "replica", 1)["node"] = "a100-0"
    assert rules(c, q, p) == {"spread"}


def test_missing_eviction_overcommits_devices(example_docs: Docs) -> None:
    c, q, p = example_docs
    p["evictions"] = []
    assert "devices" in rules(c, q, p)


def test_illegal_eviction_of_non_preemptible(example_docs: Docs) -> None:
    c, q, p = example_docs
    c["running"][0]["job"]["preemptible"] = False
    assert rules(c, q, p) == {"preemption"}


def test_vanished_job(example_docs: Docs) -> None:
    c, q, p = example_docs
    p["placements"] = [x for x in p["placements"] if x["job"] != "chat-serving"]
    assert rules(c, q, p) == {"completeness"}


def test_deferred_and_placed(example_docs: Docs) -> None:
    c, q, p = example_docs
    p["deferred"] = [{"job": "chat-serving", "reason": "capacity"}]
    assert rules(c, q, p) == {"completeness"}


def test_eviction_needs_higher_priority(example_docs: Docs) -> None:
    c, q, p = example_docs
    c["running"][0]["job"]["priority"] = 100  # equal to llm-pretrain's
    assert rules(c, q, p) == {"preemption"}


def test_eviction_policy_never(example_docs: Docs) -> None:
    c, q, p = example_docs
    c["tenants"][0]["preemption"]["within_tenant"] = "never"
    assert rules(c, q, p) == {"preemption"}


def test_eviction_above_nominal_without_borrow_within_cohort(example_docs: Docs) -> None:
    """Rule 5 (Kueue's fitsResourceQuota): llm-pretrain requests 16 H100s, research's nominal is 8,
    and 4 running + 16 > 8 + 8 borrowable: its quota needs preemption. Without
    borrow_within_cohort (as in shared/examples) research's job may not preempt for it."""
    c, q, p = example_docs
    del c["tenants"][0]["preemption"]["borrow_within_cohort"]
    violations = check(Cluster.model_validate(c), Queue.model_validate(q), Plan.model_validate(p))
    assert [(v.rule, v.job) for v in violations] == [("preemption", "eval-sweep")]
    assert "requests 16 H100-SXM, above its tenant's nominal quota 8" in violations[0].message
    c["tenants"][0]["quotas"]["H100-SXM"]["nominal"] = 16  # within nominal: legal again
    c["tenants"][0]["quotas"]["H100-SXM"]["lending_limit"] = 4
    assert rules(c, q, p) == set()


def test_eviction_accounting(example_docs: Docs) -> None:
    c, q, p = example_docs
    p["evictions"][0]["lost_gpu_hours"] = 0.5
    assert rules(c, q, p) == {"eviction_accounting"}


def test_quota_borrowing_limit(example_docs: Docs) -> None:
    c, q, p = example_docs
    c["tenants"][0]["quotas"]["H100-SXM"]["borrowing_limit"] = 4
    assert rules(c, q, p) == {"quota"}


def test_quota_lending_limit(example_docs: Docs) -> None:
    c, q, p = example_docs
    c["tenants"][1]["quotas"]["H100-SXM"]["lending_limit"] = 4  # product lends only 4 of the 8 needed
    assert rules(c, q, p) == {"quota"}


def test_quota_without_cohort(example_docs: Docs) -> None:
    c, q, p = example_docs
    c["tenants"][0]["cohort"] = None
    assert rules(c, q, p) == {"quota"}


def test_spot_forbidden(example_docs: Docs) -> None:
    c, q, p = example_docs
    q["jobs"][2]["spot"] = "forbidden"  # chat-serving has a replica on the spot node
    assert "spot" in rules(c, q, p)


def test_taint_not_tolerated(example_docs: Docs) -> None:
    c, q, p = example_docs
    q["jobs"][2]["groups"][0]["tolerations"] = []
    assert rules(c, q, p) == {"taint"}


def test_selector_mismatch(example_docs: Docs) -> None:
    c, q, p = example_docs
    q["jobs"][2]["groups"][0]["node_selector"] = {"gpu-generation": "ampere"}
    assert rules(c, q, p) == {"selector"}


def test_required_node_affinity(example_docs: Docs) -> None:
    """Terms are ORed, expressions in a term ANDed; NotIn holds on a node without the label."""
    c, q, p = example_docs
    group = q["jobs"][2]["groups"][0]
    group["node_affinity"] = [{"match_expressions": [{"key": "gpu-generation", "operator": "In",
                                                      "values": ["ampere"]}]}]
    assert rules(c, q, p) == {"selector"}
    group["node_affinity"].append({"match_expressions": [{"key": "gpu-generation", "operator": "NotIn",
                                                          "values": ["ampere"]}]})
    assert rules(c, q, p) == set()
    group["node_affinity"] = [{"match_expressions": [{"key": "gpu-generation", "operator": "DoesNotExist"},
                                                     {"key": "gpu-generation", "operator": "Exists"}]}]
    assert rules(c, q, p) == {"selector"}


def test_unhealthy_node(example_docs: Docs) -> None:
    c, q, p = example_docs
    c["nodes"][3]["healthy"] = False
    assert "health" in rules(c, q, p)


def test_unhealthy_device(example_docs: Docs) -> None:
    c, q, p = example_docs
    c["nodes"][2]["devices"]["unhealthy"] = [0]
    assert rules(c, q, p) == {"devices"}


def test_device_model_not_allowed(example_docs: Docs) -> None:
    c, q, p = example_docs
    q["jobs"][2]["groups"][0]["models"] = {"H100-SXM": 1.0}
    assert "device_model" in rules(c, q, p)


def test_wrong_device_count(example_docs: Docs) -> None:
    c, q, p = example_docs
    placement(p, "rl-agent", "learner", 0)["devices"] = [0, 1, 2]
    assert rules(c, q, p) == {"devices"}


def test_wrong_share(example_docs: Docs) -> None:
    c, q, p = example_docs
    placement(p, "chat-serving", "replica", 0)["share"] = 0.25
    assert rules(c, q, p) == {"devices"}


def test_required_topology(example_docs: Docs) -> None:
    c, q, p = example_docs
    q["jobs"][0]["topology"] = {"level": "node", "mode": "required"}
    assert rules(c, q, p) == {"topology"}


def test_colocate(example_docs: Docs) -> None:
    c, q, p = example_docs
    q["jobs"][1]["colocate"] = [{"groups": ["learner", "env"], "level": "node"}]
    placement(p, "rl-agent", "env", 0)["node"] = "a100-1"
    assert rules(c, q, p) == {"colocate"}


def test_uplink_bandwidth(example_docs: Docs) -> None:
    """llm-pretrain split over leaf-0 and leaf-1 crosses both uplinks; leaf-1's 800 Gbps is exceeded."""
    c, q, p = example_docs
    q["jobs"][0]["bandwidth_gbps"] = 1000
    q["jobs"][0]["groups"][0]["request"]["rdma_nics"] = 4
    q["jobs"][0]["groups"][0]["request"]["cpu"] = 8000
    c["nodes"][3]["devices"]["count"] = 16
    c["nodes"][3]["interconnect"] = [list(range(8)), list(range(8, 16))]
    placement(p, "llm-pretrain", "worker", 1).update(node="a100-1", devices=list(range(8, 16)))
    p["evictions"] = []
    c["running"] = []
    got = rules(c, q, p)
    assert "bandwidth" in got


def test_replica_index_and_elastic(example_docs: Docs) -> None:
    c, q, p = example_docs
    placement(p, "rl-agent", "env", 7)["elastic"] = True  # index 7 < min 8
    assert rules(c, q, p) == {"replicas"}


def test_unknown_references(example_docs: Docs) -> None:
    c, q, p = example_docs
    placement(p, "chat-serving", "replica", 0)["node"] = "nowhere"
    assert "reference" in rules(c, q, p)


def test_provisioning(example_docs: Docs) -> None:
    c, q, p = example_docs
    placement(p, "chat-serving", "replica", 1).update(node="spot-a100/new-0")
    assert rules(c, q, p) == {"provisioning"}
    p2 = copy.deepcopy(p)
    p2["provisioning"] = [{"pool": "spot-a100", "count": 1}]
    assert rules(c, q, p2) == set()
    p2["provisioning"] = [{"pool": "spot-a100", "count": 5}]
    assert rules(c, q, p2) == {"provisioning"}


@pytest.mark.parametrize("reason", ["preempted", "reclaimed"])
def test_running_job_placed_without_migration(example_docs: Docs, reason: str) -> None:
    c, q, p = example_docs
    p["evictions"][0]["reason"] = reason
    p["placements"].append({"job": "eval-sweep", "group": "eval", "replica": 0, "node": "a100-0",
                            "devices": [4, 5, 6, 7]})
    assert "completeness" in rules(c, q, p)


def test_reclaim_needs_borrowing_tenant(example_docs: Docs) -> None:
    """eval-sweep belongs to research; reclaiming it for research's own job is not a reclaim."""
    c, q, p = example_docs
    p["evictions"][0]["reason"] = "reclaimed"
    assert rules(c, q, p) == {"preemption"}


# ---------------------------------------------------------------------------- property corruptions
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from optsched.check import check_problem  # noqa: E402
from optsched.problem import compile_problem  # noqa: E402
from optsched.solvers.greedy import solve_greedy  # noqa: E402
from tests.strategies import rounds  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=rounds(max_jobs=6), choice=st.integers(0, 10**6))
def test_corrupting_a_valid_plan_is_caught(data: tuple[Cluster, Queue], choice: int) -> None:
    """Take a checked baseline plan, break it in one way, and the validator names that rule."""
    cluster, queue = data
    p = compile_problem(cluster, queue)
    plan = solve_greedy(p, "first-fit")
    assert check_problem(p, plan) == []
    doc = plan.model_dump()
    placed = doc["placements"]
    corruptions = []
    if doc["deferred"]:
        corruptions.append(("completeness", lambda d: d["deferred"].pop(choice % len(d["deferred"]))))
    if placed:
        k = choice % len(placed)
        corruptions.append(("replicas", lambda d: d["placements"].append(dict(d["placements"][k]))))
        corruptions.append(("completeness", lambda d: d.update(placements=[
            x for x in d["placements"] if x["job"] != placed[k]["job"]])))
        corruptions.append(("reference", lambda d: d["placements"][k].update(node="ghost")))
        if placed[k]["share"] is not None:
            corruptions.append(("devices", lambda d: d["placements"][k].update(share=min(0.999, d["placements"][k]["share"] + 0.001))))
        elif placed[k]["devices"]:
            corruptions.append(("devices", lambda d: d["placements"][k]["devices"].pop()))
    if not corruptions:
        return
    rule, corrupt = corruptions[choice % len(corruptions)]
    corrupt(doc)
    got = {v.rule for v in check_problem(p, Plan.model_validate(doc))}
    assert rule in got, (rule, got)
