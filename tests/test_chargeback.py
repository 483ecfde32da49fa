"""Chargeback: a plan's $/h per tenant and pool adds up to what the nodes cost."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optsched
from optsched.concerns.cost import UNATTRIBUTED
from optsched.metrics import chargeback_problem, evaluate_problem
from optsched.model import Cluster, Placement, Plan, Queue
from optsched.problem import PRICING_CODES, compile_problem
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from tests.strategies import busy_rounds, rounds


def _three_nodes() -> tuple[Cluster, Queue]:
    node = {"domain": "leaf-0", "capacity": {"cpu": 64000, "memory": 512000}, "devices": {"model": "H100", "count": 8}}
    cluster = Cluster.model_validate({
        "device_models": {"H100": {"memory_gib": 80}},
        "topology": {"levels": ["leaf"], "domains": [{"id": "leaf-0", "level": "leaf"}]},
        "pools": [{"name": "res", "pricing": "reserved", "price_per_hour": 10.0},
                  {"name": "od", "pricing": "on_demand", "price_per_hour": 4.0}],
        "tenants": [{"name": "a"}, {"name": "b"}],
        "nodes": [{"id": "r0", "pool": "res", **node}, {"id": "r1", "pool": "res", **node},
                  {"id": "o0", "pool": "od", **node}],
    })

    def job(name: str, tenant: str, gpus: int) -> dict[str, Any]:
        return {"id": name, "tenant": tenant,
                "groups": [{"name": "w", "replicas": {"min": 1, "max": 1}, "request": {"gpu": gpus, "cpu": 1000}}]}

    queue = Queue.model_validate({"jobs": [job("a-big", "a", 8), job("a-od", "a", 6), job("b-od", "b", 2)]})
    return cluster, queue


def test_nodes_are_charged_by_use_and_idle_reserved_by_reserved_spend() -> None:
    """o0 ($4/h) holds 6 GPUs of a and 2 of b: a pays 3, b pays 1. r0 ($10/h) is all a's; r1 ($10/h)
    is empty, and only a uses reserved nodes, so a pays its 10 as idle reserved."""
    c, q = _three_nodes()
    plan = Plan(placements=[
        Placement(job="a-big", group="w", replica=0, node="r0", devices=list(range(8))),
        Placement(job="a-od", group="w", replica=0, node="o0", devices=list(range(6))),
        Placement(job="b-od", group="w", replica=0, node="o0", devices=[6, 7]),
    ])
    assert optsched.check(c, q, plan) == []
    bill = optsched.chargeback(c, q, plan)
    assert bill["a"]["od"] == {"used": pytest.approx(3.0), "idle_reserved": 0.0}
    assert bill["b"]["od"] == {"used": pytest.approx(1.0), "idle_reserved": 0.0}
    assert bill["a"]["res"] == {"used": pytest.approx(10.0), "idle_reserved": pytest.approx(10.0)}
    assert "res" not in bill["b"]
    empty = optsched.chargeback(c, q, Plan())  # nobody works: the reserved nodes are nobody's yet
    assert empty == {UNATTRIBUTED: {"res": {"used": 0.0, "idle_reserved": pytest.approx(20.0)}}}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(rounds(max_nodes=6, max_jobs=6), busy_rounds(max_nodes=6, max_jobs=5)),
       strategy=st.sampled_from(sorted(STRATEGIES)))
def test_charges_add_up_to_the_cost(data: tuple[Cluster, Queue], strategy: str) -> None:
    """Non-reserved charges sum to the plan's `node_cost` (when nothing is provisioned); reserved
    charges, used and idle, sum to the $/h of every reserved node; nothing is negative."""
    c, q = data
    p = compile_problem(c, q)
    plan = solve_greedy(p, strategy)
    bill = chargeback_problem(p, plan)
    rows = [(pool, r) for pools in bill.values() for pool, r in pools.items()]
    assert all(r["used"] >= 0 and r["idle_reserved"] >= 0 for _, r in rows)
    reserved_pools = {name for i, name in enumerate(p.pool_names) if p.pool_pricing[i] == PRICING_CODES["reserved"]}
    reserved_nodes = (p.node_pool >= 0) & ~p.node_provisioned & np.isin(
        p.node_pool, [p.pool_names.index(n) for n in reserved_pools])
    charged_reserved = sum(r["used"] + r["idle_reserved"] for pool, r in rows if pool in reserved_pools)
    assert charged_reserved == pytest.approx(float(p.node_price[reserved_nodes].sum()))
    if not plan.provisioning:
        other = sum(r["used"] for pool, r in rows if pool not in reserved_pools)
        m = evaluate_problem(p, plan)
        assert other == pytest.approx(m.details["node_cost"])
        assert m.cost == pytest.approx(m.details["node_cost"] + m.details["spot_loss"])


def _repriced(c: Cluster, factor: float, pricing: dict[str, str] | None = None) -> Cluster:
    pools = [pool.model_copy(update={"price_per_hour": pool.price_per_hour * factor,
                                     "pricing": (pricing or {}).get(pool.pricing, pool.pricing)}) for pool in c.pools]
    return c.model_copy(update={"pools": pools})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=busy_rounds(), strategy=st.sampled_from(["best-fit", "spread"]), factor=st.sampled_from([1.0, 1.5, 3.0]))
def test_cost_is_monotone_in_price_and_reserved_never_costs_more(data: tuple[Cluster, Queue], strategy: str,
                                                                 factor: float) -> None:
    """For a fixed plan: raising every price never lowers its cost or any tenant's charge; the
    same nodes bought reserved never cost more than on demand or spot (reserved nodes are paid
    whatever the plan does: a plan adds nothing for using them); at the same price, spot costs
    on-demand's $/h plus its expected interruption loss."""
    c, q = data
    plan = solve_greedy(compile_problem(c, q), strategy)
    base = optsched.evaluate(c, q, plan).cost
    dearer = _repriced(c, factor)
    assert optsched.evaluate(dearer, q, plan).cost >= base - 1e-9
    bill, dear_bill = optsched.chargeback(c, q, plan), optsched.chargeback(dearer, q, plan)
    for tenant, pools in bill.items():
        for pool, row in pools.items():
            assert dear_bill[tenant][pool]["used"] >= row["used"] - 1e-9
    as_reserved = _repriced(c, 1.0, {"on_demand": "reserved", "spot": "reserved"})
    as_on_demand = _repriced(c, 1.0, {"reserved": "on_demand", "spot": "on_demand"})
    spot_loss = optsched.evaluate(c, q, plan).details["spot_loss"]
    reserved_cost = optsched.evaluate(as_reserved, q, plan).cost
    assert reserved_cost <= base + 1e-9 <= optsched.evaluate(as_on_demand, q, plan).cost + spot_loss + 2e-9
    spot_as_on_demand = optsched.evaluate(_repriced(c, 1.0, {"spot": "on_demand"}), q, plan)
    assert spot_as_on_demand.details["spot_loss"] == 0.0
    assert base == pytest.approx(spot_as_on_demand.cost + spot_loss)


def test_the_optimiser_prefers_reserved_capacity_then_the_cheaper_pool() -> None:
    """Reserved r0, r1 (paid anyway) and on-demand o0 ($4/h): one 8-GPU job goes to a reserved
    node when cost is in the objective; with the reserved nodes down it takes o0 (valid plans)."""
    from optsched.solvers.cpsat import solve_cpsat

    c, _ = _three_nodes()
    q = Queue.model_validate({"jobs": [{"id": "j", "tenant": "a", "groups": [
        {"name": "w", "request": {"gpu": 8, "cpu": 1000}}]}]})
    plan = solve_cpsat(compile_problem(c, q), objective=["admitted_value", "cost"], time_limit=5.0)
    assert optsched.check(c, q, plan) == [] and plan.placements[0].node in {"r0", "r1"}
    assert plan.objective["cost"] == 0.0
    full = c.model_copy(update={"nodes": [n.model_copy(update={"healthy": n.id == "o0"}) for n in c.nodes]})
    plan = solve_cpsat(compile_problem(full, q), objective=["admitted_value", "cost"], time_limit=5.0)
    assert optsched.check(full, q, plan) == [] and plan.placements[0].node == "o0"
    assert plan.objective["cost"] == pytest.approx(4.0)


def _spot_or_on_demand(checkpoint_s: float, spot: str) -> tuple[Cluster, Queue]:
    """Spot s0 ($10/h, 1 interruption per hour) and on-demand o0 ($12/h), 8 GPUs each; one
    8-GPU job. On s0 it loses 1/h x 8 GPUs x (checkpoint_s / 2) / 3600 GPU-hours per hour, priced
    at s0's $10 / 8 GPUs: $5/h with hourly checkpoints, $0.83/h with 10-minute ones."""
    node = {"domain": "leaf-0", "capacity": {"cpu": 64000, "memory": 512000}, "devices": {"model": "H100", "count": 8}}
    cluster = Cluster.model_validate({
        "device_models": {"H100": {"memory_gib": 80}},
        "topology": {"levels": ["leaf"], "domains": [{"id": "leaf-0", "level": "leaf"}]},
        "pools": [{"name": "spot", "pricing": "spot", "price_per_hour": 10.0, "interruption_rate_per_hour": 1.0},
                  {"name": "od", "pricing": "on_demand", "price_per_hour": 12.0}],
        "nodes": [{"id": "s0", "pool": "spot", **node}, {"id": "o0", "pool": "od", **node}],
    })
    queue = Queue.model_validate({"jobs": [{"id": "j", "spot": spot, "checkpoint_interval_s": checkpoint_s,
                                            "groups": [{"name": "w", "request": {"gpu": 8, "cpu": 1000}}]}]})
    return cluster, queue


@pytest.mark.parametrize(("checkpoint_s", "spot", "node", "cost"), [
    (3600.0, "allowed", "o0", 12.0),  # spot: 10 + 5 > 12
    (600.0, "allowed", "s0", 10.0 + 8 * 300 / 3600 * 10 / 8),  # spot: 10 + 0.83 < 12
    (3600.0, "preferred", "s0", 10.0),  # the owner takes the risk: spot's price alone
])
def test_the_optimiser_takes_spot_only_where_price_plus_expected_loss_is_cheaper(
        checkpoint_s: float, spot: str, node: str, cost: float) -> None:
    """Per job, the cheaper of spot (price + expected interruption loss) and on-demand; a job
    that prefers spot is not charged its loss. The model's cost equals the metric's."""
    from optsched.solvers.cpsat import solve_cpsat

    c, q = _spot_or_on_demand(checkpoint_s, spot)
    plan = solve_cpsat(compile_problem(c, q), objective=["admitted_value", "cost"], time_limit=5.0)
    assert optsched.check(c, q, plan) == [] and plan.solver.status == "optimal"
    assert [pl.node for pl in plan.placements] == [node]
    assert plan.objective["cost"] == pytest.approx(cost)
    assert plan.solver.model is not None and plan.solver.model.terms["cost"] == pytest.approx(cost, abs=1e-3)
    risk = optsched.evaluate(c, q, plan).details["spot_risk"]
    assert risk == pytest.approx(8 * checkpoint_s / 2 / 3600 if node == "s0" else 0.0)


def test_empty_on_demand_and_spot_nodes_are_reported_as_releasable() -> None:
    """With only a-big on r0, on-demand o0 ($4/h) hosts nothing: 1 node, $4/h to release; the
    empty reserved r1 is paid anyway (idle reserved $10/h), not releasable."""
    c, q = _three_nodes()
    plan = Plan(placements=[Placement(job="a-big", group="w", replica=0, node="r0", devices=list(range(8)))],
                deferred=[{"job": "a-od", "reason": "capacity"}, {"job": "b-od", "reason": "capacity"}])
    assert optsched.check(c, q, plan) == []
    m = optsched.evaluate(c, q, plan)
    assert (m.details["releasable_nodes"], m.details["releasable_cost"]) == (1.0, 4.0)
    assert m.details["reserved_idle_cost"] == 10.0 and m.cost == 0.0
