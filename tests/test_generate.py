"""Generated inputs: reference clusters load; generated queues are valid and sized as asked."""

from __future__ import annotations

import pytest

from optsched import check, load_cluster
from optsched.bundled import DATA_DIR
from optsched.generate import free_gpus, generate_queue, load_mix
from optsched.problem import compile_problem
from optsched.solve import solve_problem

REFERENCE = ["dgx-h100-1k", "ascend-910b-4k", "mixed-cloud-10k"]


@pytest.fixture(scope="module", params=REFERENCE)
def reference(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    return request.param, load_cluster(DATA_DIR / "clusters" / f"{request.param}.yaml")


def test_reference_cluster_shapes(reference) -> None:  # type: ignore[no-untyped-def]
    name, c = reference
    gpus = sum(n.devices.count for n in c.nodes if n.devices)
    assert gpus == {"dgx-h100-1k": 1024, "ascend-910b-4k": 4096, "mixed-cloud-10k": 10240}[name]
    if name == "mixed-cloud-10k":
        assert len(c.tenants) == 3 and 0.5 <= 1 - free_gpus(c) / gpus <= 0.65
        assert {p.pricing for p in c.pools} == {"reserved", "on_demand", "spot"}
    if name == "ascend-910b-4k":
        assert c.nodes[0].interconnect == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_generated_queue_round_is_checked(reference) -> None:  # type: ignore[no-untyped-def]
    _, c = reference
    q = generate_queue(c, "mixed", jobs=60, load=1.0, seed=4)
    assert len(q.jobs) == 60
    demand = sum(j.min_gpus for j in q.jobs)
    assert 0.7 * free_gpus(c) <= demand <= 1.3 * free_gpus(c)
    p = compile_problem(c, q)
    plan = solve_problem(p, solver="volcano")
    assert check(c, q, plan) == []


def test_generation_is_deterministic(reference) -> None:  # type: ignore[no-untyped-def]
    _, c = reference
    assert generate_queue(c, "rl", jobs=5, seed=1) == generate_queue(c, "rl", jobs=5, seed=1)
    assert generate_queue(c, "rl", jobs=5, seed=1) != generate_queue(c, "rl", jobs=5, seed=2)


def test_mixes_are_normalised() -> None:
    for name in ("llm-training", "inference", "rl", "mixed"):
        assert sum(w for _, w in load_mix(name)) == pytest.approx(1.0)


def test_generated_jobs_are_satisfiable_on_a_cluster_of_small_nodes() -> None:
    """On A100 nodes of 96 cores and 4 NICs alone, llm-training's 8-GPU workers (112 cores, 8 NICs)
    cannot run anywhere: the generator draws again instead of emitting jobs the loader rejects as
    `unsatisfiable` (issue 20), and running load is drawn the same way."""
    from optsched.generate import NodeGroup, fat_tree_cluster, populate_running
    from optsched.model import load_queue
    from optsched.model.references import validate_cluster

    a100 = NodeGroup(32, "A100-SXM", 8, [list(range(8))], {"cpu": 96_000, "memory": 1_048_576, "rdma_nics": 4},
                     "a100")
    c = fat_tree_cluster([a100], nodes_per_leaf=8, leaves_per_spine=2,
                         pools=[{"name": "a100", "pricing": "on_demand", "price_per_hour": 32.0}],
                         device_models={"A100-SXM": {"memory_gib": 80}})
    q = generate_queue(c, "llm-training", jobs=40, seed=0)
    assert len(q.jobs) == 40
    load_queue(q.model_dump(mode="json"), c)  # raises InputError on an unsatisfiable job
    busy = populate_running(c, "llm-training", 0.5, seed=0)
    validate_cluster(busy)
    assert busy.running
