"""Metrics: each objective term on small cases computed by hand."""

from __future__ import annotations

from typing import Any

import pytest

from optsched.metrics import evaluate
from optsched.model import Cluster, Plan, Queue
from optsched.problem import priority_weight


def test_example_terms(example: tuple[Cluster, Queue, Plan]) -> None:
    c, q, p = example
    m = evaluate(c, q, p)
    # disruption: eval-sweep loses 900 s x 4 GPUs = 1 GPU-hour
    assert m.disruption == pytest.approx(1.0)
    # admitted value: llm-pretrain 16 H100 x 1.0 at priority 100 (weight 2);
    # rl-agent learner 4 A100 x 1.0 + 8 env x 16 cores/32 at priority 50; chat 2 x 0.5 x 1.0 at priority 80
    w = priority_weight
    expected = w(100) * 16 + w(50) * (4 + 8 * 4000 / 32000) + w(80) * (0.5 + 0.5)
    assert m.admitted_value == pytest.approx(expected)
    # nodes: on-demand a100-0 ($32/h) and spot a100-1 ($11/h) host work; reserved H100s are sunk
    assert m.details["node_cost"] == pytest.approx(43.0)
    assert m.details["reserved_idle_cost"] == 0.0
    # every on-demand and spot node hosts work: nothing to release
    assert m.details["releasable_nodes"] == 0.0 and m.details["releasable_cost"] == 0.0
    # spot risk: chat replica on spot, 0.05/h x 0.5 GPU x (3600/2 s) / 3600
    assert m.details["spot_risk"] == pytest.approx(0.05 * 0.5 * 0.5)
    # its priced loss: those GPU-hours at a100-1's $11/h over its 8 GPUs (chat's spot is `allowed`)
    assert m.details["spot_loss"] == pytest.approx(0.05 * 0.5 * 0.5 * 11.0 / 8)
    assert m.cost == pytest.approx(43.0 + 0.05 * 0.5 * 0.5 * 11.0 / 8)
    # locality: llm-pretrain worker 1 on h100-1 lacks torch-2.5 (3 GB), h100-0 in the same leaf has it: P2P
    assert m.details["pull_bytes"] == 3e9
    assert m.locality == pytest.approx(2 * 0 + 3e9 * 8 / 100e9)
    assert m.topology == 0 and m.queue_delay == 0


def _tiny(nodes: list[dict[str, Any]]) -> Cluster:
    return Cluster.model_validate({
        "topology": {"levels": ["spine", "leaf"], "domains": [
            {"id": "s", "level": "spine"}, {"id": "l0", "level": "leaf", "parent": "s", "uplink_gbps": 100},
            {"id": "l1", "level": "leaf", "parent": "s", "uplink_gbps": 100}]},
        "device_models": {"G": {}}, "nodes": nodes})


def test_fragmentation_fgd() -> None:
    """One node with 2 GPUs, one of them half used; the workload is one task type of 0.75 GPU.

    The 0.75 task fits on the free GPU, so the fragment is the half-free GPU's 0.5 (FGD: free
    share below the request). A whole-GPU task type would see the same 0.5 as fragment.
    """
    c = _tiny([{"id": "n", "domain": "l0", "capacity": {"cpu": 8000}, "devices": {"model": "G", "count": 2}}])
    q = Queue.model_validate({"jobs": [
        {"id": "a", "groups": [{"name": "g", "request": {"gpu": 0.5}}]},
        {"id": "b", "groups": [{"name": "g", "request": {"gpu": 0.75}}]}]})
    plan = Plan.model_validate({"placements": [{"job": "a", "group": "g", "replica": 0, "node": "n",
                                                "devices": [0], "share": 0.5}],
                                "deferred": [{"job": "b", "reason": "other"}]})
    m = evaluate(c, q, plan)
    # mix: a (0.5) and b (0.75), popularity 1/2 each. For a: free shares 0.5 and 1.0, none < 0.5 -> 0.
    # For b: 0.5 < 0.75 -> 0.5. Expected: 0.5 x 0 + 0.5 x 0.5 = 0.25.
    assert m.fragmentation == pytest.approx(0.25)


def test_topology_and_uplink_terms() -> None:
    nodes = [{"id": f"n{i}", "domain": f"l{i}", "capacity": {"cpu": 8000}, "devices": {"model": "G", "count": 8}}
             for i in range(2)]
    c = _tiny(nodes)
    q = Queue.model_validate({"now": 7200, "jobs": [
        {"id": "g", "topology": {"level": "leaf"}, "bandwidth_gbps": 50,
         "groups": [{"name": "w", "replicas": {"min": 2, "max": 2}, "request": {"gpu": 4}}]},
        {"id": "late", "priority": 100, "submitted_at": 3600, "groups": [{"name": "w", "request": {"gpu": 8}}]}]})
    plan = Plan.model_validate({"placements": [
        {"job": "g", "group": "w", "replica": 0, "node": "n0", "devices": [0, 1, 2, 3]},
        {"job": "g", "group": "w", "replica": 1, "node": "n1", "devices": [0, 1, 2, 3]}],
        "deferred": [{"job": "late", "reason": "capacity"}]})
    m = evaluate(c, q, plan)
    assert m.topology == 1  # 8 GPUs fit in one leaf; the plan spans two
    assert m.details["uplink_gbps"] == 100  # 50 Gbps on each of the two leaf uplinks
    assert m.queue_delay == pytest.approx(priority_weight(100) * 1.0)  # waited one hour


def test_fairness_zero_when_split_by_weight() -> None:
    c = Cluster.model_validate({
        "topology": {"levels": ["leaf"], "domains": [{"id": "l", "level": "leaf"}]},
        "device_models": {"G": {}},
        "tenants": [{"name": "a", "weight": 1}, {"name": "b", "weight": 3}],
        "nodes": [{"id": "n", "domain": "l", "capacity": {"cpu": 1000}, "devices": {"model": "G", "count": 8}}]})
    q = Queue.model_validate({"jobs": [
        {"id": "x", "tenant": "a", "groups": [{"name": "g", "request": {"gpu": 2}}]},
        {"id": "y", "tenant": "b", "groups": [{"name": "g", "request": {"gpu": 6}}]}]})
    plan = Plan.model_validate({"placements": [
        {"job": "x", "group": "g", "replica": 0, "node": "n", "devices": [0, 1]},
        {"job": "y", "group": "g", "replica": 0, "node": "n", "devices": [2, 3, 4, 5, 6, 7]}]})
    assert evaluate(c, q, plan).fairness == pytest.approx(0.0)
    swapped = Plan.model_validate({"placements": [
        {"job": "x", "group": "g", "replica": 0, "node": "n", "devices": [0, 1]}],
        "deferred": [{"job": "y", "reason": "capacity"}]})
    # a holds 2/8 = 0.25, b 0: fair shares 0.0625 and 0.1875 -> |0.25-0.0625| + |0-0.1875| = 0.375
    assert evaluate(c, q, swapped).fairness == pytest.approx(0.375)
