"""ResourceFlavors as node sets (issue 22 item 7): quotas per (flavor, resource), in the validator,
at the door, in the `kueue` baseline's flavor order and in the round model (cpsat, milp).

The cluster: eight H100 nodes of 8 GPUs, four labelled ``capacity: reserved`` and four
``capacity: spot``; ResourceFlavors `reserved` and `spot` select them, so the same GPU model has two
quotas, as Kueue users write them (one ClusterQueue with flavors reserved-h100 and spot-h100).
"""

from __future__ import annotations

from typing import Any

import pytest

from optsched import InputError
from optsched.check import check_problem
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Plan, Queue
from optsched.problem import compile_problem
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.kueue import solve_kueue
from optsched.solvers.milp import solve_milp

CPU = 1000


def cluster(quotas: dict[str, Any], extra_flavors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    nodes = [{"id": f"{kind}-{i}", "domain": "z0", "labels": {"capacity": kind},
              "capacity": {"cpu": 96 * CPU, "memory": 1 << 20}, "devices": {"model": "H100", "count": 8}}
             for kind in ("reserved", "spot") for i in range(4)]
    return {"topology": {"levels": ["zone"], "domains": [{"id": "z0", "level": "zone"}]},
            "device_models": {"H100": {"memory_gib": 80}}, "nodes": nodes,
            "resource_flavors": [{"name": "reserved", "node_labels": {"capacity": "reserved"}},
                                 {"name": "spot", "node_labels": {"capacity": "spot"}}, *(extra_flavors or [])],
            "tenants": [{"name": "team", "quotas": quotas}]}


def job(i: int, gpus: int = 8) -> dict[str, Any]:
    return {"id": f"j{i}", "tenant": "team", "submitted_at": float(i),
            "groups": [{"name": "w", "request": {"cpu": 8 * CPU, "gpu": gpus}}]}


def place(job_id: str, node: str) -> dict[str, Any]:
    return {"job": job_id, "group": "w", "replica": 0, "node": node, "devices": list(range(8))}


SPLIT = {"spot/gpu": {"nominal": 16}, "reserved/gpu": {"nominal": 24}}
"""The tenant's flavors in its order: spot first (Kueue tries them in the ClusterQueue's order)."""


def test_each_flavor_counts_its_own_nodes() -> None:
    """Two jobs on spot nodes use 16 of spot/gpu's 16; a third there is over spot's quota even
    though reserved/gpu has 24 left, and the violation names the flavor."""
    c = Cluster.model_validate(cluster(SPLIT))
    q = Queue.model_validate({"jobs": [job(i) for i in range(3)]})
    p = compile_problem(c, q)
    ok = Plan.model_validate({"placements": [place("j0", "spot-0"), place("j1", "spot-1"), place("j2", "reserved-0")]})
    assert check_problem(p, ok) == []
    over = Plan.model_validate({"placements": [place("j0", "spot-0"), place("j1", "spot-1"), place("j2", "spot-2")]})
    problems = check_problem(p, over)
    assert [v.rule for v in problems] == ["quota"] and "24 spot/gpu > nominal 16" in problems[0].message


@pytest.mark.parametrize(("quotas", "flavors", "rule", "where"), [
    ({"preemptible/gpu": {"nominal": 8}}, None, "unknown_reference", "tenants[0].quotas.preemptible/gpu"),
    ({"spot/gpus": {"nominal": 8}}, None, "unknown_reference", "tenants[0].quotas.spot/gpus"),
    ({"H100": {"nominal": 8}, "spot/gpu": {"nominal": 8}}, None, "overlapping_flavors", "tenants.quotas.spot/gpu"),
    ({"spot/gpu": {"nominal": 8}, "all/gpu": {"nominal": 8}}, [{"name": "all"}], "overlapping_flavors",
     "tenants.quotas.all/gpu"),
    ({"a/b/gpu": {"nominal": 8}}, [{"name": "a/b"}], "reserved_name", "resource_flavors[2].name"),
])
def test_flavor_quota_keys_are_checked_at_the_door(quotas: dict[str, Any], flavors: list[dict[str, Any]] | None,
                                                   rule: str, where: str) -> None:
    """A quota key names a device model, a resource, or <resource flavor>/<gpu or resource>; two
    keys may not count the same thing on one node (a replica would use two quotas)."""
    with pytest.raises(InputError) as exc:
        compile_problem(Cluster.model_validate(cluster(quotas, flavors)), Queue())
    assert (where, rule) in {(i.path, i.rule) for i in exc.value.problems}


def test_kueue_fills_the_first_flavor_then_the_next() -> None:
    """Kueue's flavor order: spot/gpu first (16 GPUs: two jobs), then reserved/gpu (24: three);
    the sixth job fits neither quota and is deferred for quota, with free reserved nodes left."""
    c = Cluster.model_validate(cluster(SPLIT))
    p = compile_problem(c, Queue.model_validate({"jobs": [job(i) for i in range(6)]}))
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    on = {pl.job: pl.node.split("-")[0] for pl in plan.placements}
    assert on == {"j0": "spot", "j1": "spot", "j2": "reserved", "j3": "reserved", "j4": "reserved"}
    assert [(d.job, d.reason) for d in plan.deferred] == [("j5", "quota")]


@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_round_models_keep_per_flavor_quotas(solver: str) -> None:
    """The round model counts each flavor on its nodes: the best plan admits 5 of 6 jobs (16 + 24
    GPUs of quota), valid, and no solver admits more."""
    c = Cluster.model_validate(cluster(SPLIT))
    p = compile_problem(c, Queue.model_validate({"jobs": [job(i) for i in range(6)]}))
    plan = solve_cpsat(p, time_limit=5.0) if solver == "cpsat" else solve_milp(p, time_limit=5.0)
    assert check_problem(p, plan) == []
    assert len(plan.placements) == 5
    assert evaluate_problem(p, plan).admitted_value >= evaluate_problem(p, solve_kueue(p)).admitted_value - 1e-9


def test_cpu_quota_per_flavor_counts_where_the_replica_runs() -> None:
    """`spot/cpu` counts the cpu of replicas on spot nodes only: 8 x 8 cores there is 64 of 64,
    one more is over; on reserved nodes (no cpu quota there) cpu is not quota-managed."""
    quotas = {"spot/gpu": {"nominal": 64}, "spot/cpu": {"nominal": 64 * CPU}, "reserved/gpu": {"nominal": 64}}
    c = Cluster.model_validate(cluster(quotas))
    jobs = [job(i, gpus=1) for i in range(9)]
    p = compile_problem(c, Queue.model_validate({"jobs": jobs}))
    nine_on_spot = Plan.model_validate({"placements": [
        {"job": f"j{i}", "group": "w", "replica": 0, "node": f"spot-{i % 4}", "devices": [i // 4]} for i in range(9)]})
    problems = check_problem(p, nine_on_spot)
    assert [v.rule for v in problems] == ["quota"] and "spot/cpu" in problems[0].message
    eight_and_one = Plan.model_validate({"placements": [
        {"job": f"j{i}", "group": "w", "replica": 0, "node": f"spot-{i % 4}" if i < 8 else "reserved-0",
         "devices": [i // 4 if i < 8 else 0]} for i in range(9)]})
    assert check_problem(p, eight_and_one) == []
