"""Greedy baselines: every plan passes the validator, and each strategy behaves as its source says."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.check import check_problem
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Queue
from optsched.problem import compile_problem
from optsched.solvers.greedy import STRATEGIES, ChangeLog, GreedyEngine, solve_greedy
from tests.strategies import busy_rounds, rounds

NAMES = sorted(STRATEGIES)


@pytest.mark.parametrize("name", NAMES)
def test_example_plans_are_valid(example: Any, name: str) -> None:
    c, q, _ = example
    p = compile_problem(c, q)
    plan = solve_greedy(p, name)
    assert check_problem(p, plan) == []
    assert {x.job for x in plan.placements} | {d.job for d in plan.deferred} == {j.id for j in q.jobs}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=rounds())
def test_every_baseline_plan_passes_check(data: tuple[Cluster, Queue]) -> None:
    _assert_every_baseline_valid(*data)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=busy_rounds())
def test_every_baseline_plan_passes_check_on_busy_clusters(data: tuple[Cluster, Queue]) -> None:
    _assert_every_baseline_valid(*data)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=busy_rounds())
def test_the_node_just_used_is_taken_again_only_where_a_full_search_takes_it(data: tuple[Cluster, Queue]) -> None:
    """The engine places the next replica of a shape on the node it just used without a search
    (`GreedyEngine._repeat_node`, monotone scores only): every strategy's plan equals its plan
    with a full search for every replica."""
    p = compile_problem(*data)
    fast = {name: solve_greedy(p, name) for name in NAMES}
    with pytest.MonkeyPatch.context() as m:
        m.setattr(GreedyEngine, "_repeat_node", lambda self, cursor, group: -1)
        for name in NAMES:
            searched = solve_greedy(p, name)
            assert searched.placements == fast[name].placements, name
            assert searched.deferred == fast[name].deferred, name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=busy_rounds())
def test_a_domains_cursor_takes_the_nodes_the_masked_search_takes(data: tuple[Cluster, Queue]) -> None:
    """A replica held to one domain (a topology-bound attempt, a colocation) is searched with the
    round's cursor over the shape's nodes in that domain (`GreedyEngine.cursor_within`): every
    strategy's plan, and the Kueue baseline's, equal their plans with the shape's cursor and the
    domain's mask."""
    from optsched.solvers.kueue import solve_kueue

    p = compile_problem(*data)
    fast = {name: solve_greedy(p, name) for name in NAMES} | {"kueue": solve_kueue(p)}
    with pytest.MonkeyPatch.context() as m:
        m.setattr(GreedyEngine, "cursor_within", lambda self, job, group, restrict: (self.shape_cursor(job, group),
                                                                                     restrict))
        masked = {name: solve_greedy(p, name) for name in NAMES} | {"kueue": solve_kueue(p)}
    for name, plan in fast.items():
        assert masked[name].placements == plan.placements, name
        assert masked[name].deferred == plan.deferred, name


def test_a_domains_cursor_is_used_for_topology_bound_and_colocated_replicas() -> None:
    """The domain's cursor is what places them (not the mask): two leaves, a job bound to one
    leaf and a job whose two groups must share a leaf; each searched replica held to a domain
    gets a cursor over that leaf's nodes and no mask."""
    c = _cluster([_node(i, leaf=i % 2) for i in range(4)], leaves=2)
    q = Queue.model_validate({"jobs": [
        _job("bound", 8, replicas=2, gang=True, topology={"level": "leaf", "mode": "required"}),
        {"id": "pair", "gang": True, "colocate": [{"groups": ["a", "b"], "level": "leaf"}], "groups": [
            {"name": "a", "replicas": {"min": 1, "max": 1}, "request": {"gpu": 4, "cpu": 1000}},
            {"name": "b", "replicas": {"min": 1, "max": 1}, "request": {"gpu": 4, "cpu": 1000}}]}]})
    p = compile_problem(c, q)
    engine = GreedyEngine(p, STRATEGIES["best-fit"])
    held: list[tuple[int, bool]] = []
    within = engine.cursor_within

    def spy(job: Any, group: Any, restrict: Any) -> Any:
        cursor, mask = within(job, group, restrict)
        if restrict is not None:
            held.append((len(cursor.nodes), mask is None))
        return cursor, mask

    engine.cursor_within = spy  # type: ignore[method-assign]
    placed, deferred = engine.run()
    assert not deferred and len(placed["bound"]) == 2 and len(placed["pair"]) == 2
    assert held and all(held_nodes == 2 and unmasked for held_nodes, unmasked in held)
    leaf = p.node_domain_at(p.level_index("leaf"))
    for job in ("bound", "pair"):
        assert len({int(leaf[r.node]) for r in placed[job]}) == 1


def _assert_every_baseline_valid(cluster: Cluster, queue: Queue) -> None:
    p = compile_problem(cluster, queue)
    for name in NAMES:
        violations = check_problem(p, solve_greedy(p, name))
        assert violations == [], (name, [str(v) for v in violations])


def _cluster(nodes: list[dict[str, Any]], leaves: int = 1, uplink: float = 1e6,
             tenants: list[dict[str, Any]] | None = None) -> Cluster:
    domains: list[dict[str, Any]] = [{"id": "s", "level": "spine"}]
    domains += [{"id": f"l{i}", "level": "leaf", "parent": "s", "uplink_gbps": uplink} for i in range(leaves)]
    doc: dict[str, Any] = {"topology": {"levels": ["spine", "leaf"], "domains": domains},
                           "device_models": {"G": {}}, "nodes": nodes}
    if tenants:
        doc["tenants"] = tenants
    return Cluster.model_validate(doc)


def _node(i: int, leaf: int = 0, gpus: int = 8, inter: list[list[int]] | None = None) -> dict[str, Any]:
    return {"id": f"n{i}", "domain": f"l{leaf}", "capacity": {"cpu": 64000, "memory": 262144},
            "devices": {"model": "G", "count": gpus}, "interconnect": inter}


def _job(jid: str, gpu: float, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    group = {"name": "w", "replicas": {"min": replicas, "max": replicas}, "request": {"gpu": gpu, "cpu": 1000}}
    group.update(extra.pop("group", {}))
    return {"id": jid, "groups": [group], **extra}


def _nodes_of(plan: Any, job: str) -> list[str]:
    return [x.node for x in plan.placements if x.job == job]


def test_best_fit_packs_and_spread_spreads() -> None:
    c = _cluster([_node(0), _node(1)])
    q = Queue.model_validate({"jobs": [_job("a", 2), _job("b", 2, submitted_at=1)]})
    p = compile_problem(c, q)
    packed = solve_greedy(p, "best-fit")
    spread = solve_greedy(p, "spread")
    assert _nodes_of(packed, "a") == _nodes_of(packed, "b")
    assert _nodes_of(spread, "a") != _nodes_of(spread, "b")


def test_priority_order_wins_contention() -> None:
    c = _cluster([_node(0)])
    q = Queue.model_validate({"jobs": [_job("low", 8, priority=1), _job("high", 8, priority=9, submitted_at=5)]})
    for name in NAMES:
        plan = solve_greedy(compile_problem(c, q), name)
        assert _nodes_of(plan, "high") == ["n0"] and plan.deferred[0].job == "low", name


def test_gang_is_all_or_nothing() -> None:
    c = _cluster([_node(0), _node(1, gpus=4)])
    q = Queue.model_validate({"jobs": [_job("g", 8, replicas=2)]})
    for name in NAMES:
        plan = solve_greedy(compile_problem(c, q), name)
        assert plan.placements == [] and plan.deferred[0].reason == "capacity", name


def test_topo_best_fit_keeps_gang_in_one_leaf() -> None:
    """Two leaves; leaf 0 has one free node, leaf 1 two: a 2-node gang goes to leaf 1 whole."""
    c = _cluster([_node(0, 0), _node(1, 1), _node(2, 1)], leaves=2)
    q = Queue.model_validate({"jobs": [_job("g", 8, replicas=2, topology={"level": "leaf"})]})
    p = compile_problem(c, q)
    tree = solve_greedy(p, "topo-best-fit")
    first = solve_greedy(p, "first-fit")
    assert sorted(_nodes_of(tree, "g")) == ["n1", "n2"]
    assert sorted(_nodes_of(first, "g")) == ["n0", "n1"]  # first fit straddles the leaves
    assert evaluate_problem(p, tree).topology == 0 and evaluate_problem(p, first).topology == 1


def test_interconnect_group_best_fit() -> None:
    """A 2-GPU request with affinity goes into the tighter free group (best) or the first group (first)."""
    c = _cluster([_node(0, inter=[[0, 1, 2, 3], [4, 5, 6, 7]])])
    q = Queue.model_validate({"jobs": [
        _job("a", 1, priority=9, group={"device_affinity": "required"}),
        _job("b", 4, priority=5, group={"device_affinity": "required"}),
        _job("c", 2, priority=1, group={"device_affinity": "required"}),
    ]})
    p = compile_problem(c, q)
    plan = solve_greedy(p, "topo-best-fit")
    devs = {x.job: x.devices for x in plan.placements}
    assert devs["a"] == [0] and devs["b"] == [4, 5, 6, 7] and devs["c"] == [1, 2]
    assert check_problem(p, plan) == []


def test_volcano_drf_order_alternates_tenants() -> None:
    """At equal priority, Volcano's DRF order gives the next slot to the tenant with the lower share."""
    tenants = [{"name": "a"}, {"name": "b"}]
    c = _cluster([_node(0), _node(1)], tenants=tenants)
    jobs = [_job(f"a{i}", 4, tenant="a", submitted_at=i) for i in range(3)]
    jobs += [_job(f"b{i}", 4, tenant="b", submitted_at=10 + i) for i in range(3)]
    plan = solve_greedy(compile_problem(c, Queue.model_validate({"jobs": jobs})), "volcano")
    admitted = sorted({x.job for x in plan.placements})
    assert admitted == ["a0", "a1", "b0", "b1"]
    fifo = solve_greedy(compile_problem(c, Queue.model_validate({"jobs": jobs})), "first-fit")
    assert sorted({x.job for x in fifo.placements}) == ["a0", "a1", "a2", "b0"]


def test_quota_defers_with_reason() -> None:
    tenants = [{"name": "a", "quotas": {"G": {"nominal": 4}}}]
    c = _cluster([_node(0)], tenants=tenants)
    q = Queue.model_validate({"jobs": [_job("x", 4, tenant="a"), _job("y", 4, tenant="a", submitted_at=1)]})
    plan = solve_greedy(compile_problem(c, q), "volcano")
    assert [d.reason for d in plan.deferred] == ["quota"]


def test_bandwidth_defers_crossing_gang() -> None:
    c = _cluster([_node(0, 0), _node(1, 1)], leaves=2, uplink=100)
    q = Queue.model_validate({"jobs": [_job("g", 8, replicas=2, bandwidth_gbps=200)]})
    plan = solve_greedy(compile_problem(c, q), "first-fit")
    assert plan.deferred[0].reason == "bandwidth"


def test_elastic_replicas_fill_up_to_max() -> None:
    c = _cluster([_node(0)])
    q = Queue.model_validate({"jobs": [{"id": "e", "groups": [
        {"name": "w", "replicas": {"min": 1, "max": 5}, "request": {"gpu": 2}}]}]})
    plan = solve_greedy(compile_problem(c, q), "best-fit")
    assert len(plan.placements) == 4 and [x.elastic for x in plan.placements] == [False, True, True, True]


def test_fractional_shares_pack_on_one_device_with_best_fit() -> None:
    c = _cluster([_node(0, gpus=2)])
    q = Queue.model_validate({"jobs": [_job(f"f{i}", 0.25, submitted_at=i) for i in range(4)]})
    p = compile_problem(c, q)
    plan = solve_greedy(p, "best-fit")
    assert {tuple(x.devices) for x in plan.placements} == {(0,)}
    assert check_problem(p, plan) == []


def test_a_non_gang_job_keeps_the_groups_that_fit_when_its_first_group_fits_nowhere() -> None:
    """Regression (found by test_scores' hypothesis run): the first group's selector matches no
    node, the second fits; the job is admitted with the second group's replica, and what the engine
    holds in its ledger is exactly what the plan places (a second job gets the rest of the node)."""
    c = _cluster([_node(0, gpus=8)])
    job = {"id": "a", "gang": False, "groups": [
        {"name": "picky", "replicas": {"min": 0, "max": 1}, "request": {"gpu": 1}, "node_selector": {"zone": "x"}},
        {"name": "easy", "replicas": {"min": 0, "max": 1}, "request": {"gpu": 4}}]}
    q = Queue.model_validate({"jobs": [job, _job("b", 4, submitted_at=1)]})
    for name in NAMES:
        p = compile_problem(c, q)
        plan = solve_greedy(p, name)
        assert check_problem(p, plan) == []
        assert [(x.job, x.group) for x in plan.placements] == [("a", "easy"), ("b", "w")], name


@settings(max_examples=200, deadline=None)
@given(changes=st.lists(st.one_of(st.integers(0, 19), st.lists(st.integers(0, 19), max_size=6)), max_size=40),
       asks=st.lists(st.integers(0, 40), max_size=8), data=st.data())
def test_change_log_names_every_node_changed_since(changes: list[Any], asks: list[int], data: st.DataObject) -> None:
    """`ChangeLog.changed_since` names exactly the nodes changed after the first `seen` entries,
    single or bulk, asked at any point and any number of times (the stamps catch up in bulk)."""
    log = ChangeLog(20)
    history: list[list[int]] = []  # the nodes of each entry
    for change in changes:
        if isinstance(change, int):
            log.append(change)
            history.append([change])
        else:
            log.extend(np.array(change, dtype=np.int64))
            if change:
                history.append(change)
        assert len(log) == len(history)
        for seen in asks:
            seen = min(seen, len(history))
            nodes = np.array(sorted(data.draw(st.sets(st.integers(0, 19)))), dtype=np.int64)
            expected = sorted({n for entry in history[seen:] for n in entry})
            assert nodes[log.changed_since(seen, nodes)].tolist() == [n for n in nodes.tolist() if n in expected]
