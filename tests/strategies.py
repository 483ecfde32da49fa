"""Hypothesis strategies for valid clusters and queues (small to medium), in one place."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from optsched.model import Cluster, Job, Queue
from optsched.model.references import job_problems

MODELS = {"GPU-A": {"memory_gib": 80, "speed": 1.0}, "GPU-B": {"memory_gib": 48, "speed": 0.5}}
INTERCONNECTS = {8: [[list(range(8))], [[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 1], [2, 3], [4, 5], [6, 7]]],
                 4: [[[0, 1, 2, 3]], [[0, 1], [2, 3]]], 2: [[[0, 1]]], 1: [[[0]]], 0: [None]}


@st.composite
def clusters(draw: st.DrawFn, max_nodes: int = 8, with_tenants: bool | None = None) -> Cluster:
    """A valid cluster: 1-2 spines, 1-3 leaves each, up to `max_nodes` nodes, optional tenants."""
    n_spines = draw(st.integers(1, 2))
    domains: list[dict[str, Any]] = [{"id": f"s{s}", "level": "spine"} for s in range(n_spines)]
    leaves = []
    for s in range(n_spines):
        for leaf in range(draw(st.integers(1, 3))):
            lid = f"s{s}l{leaf}"
            leaves.append(lid)
            domains.append({"id": lid, "level": "leaf", "parent": f"s{s}",
                            "uplink_gbps": draw(st.sampled_from([100, 400, 1600]))})
    pools = [{"name": "res", "pricing": "reserved", "price_per_hour": 10.0},
             {"name": "spot", "pricing": "spot", "price_per_hour": 3.0, "interruption_rate_per_hour": 0.1}]
    nodes = []
    for i in range(draw(st.integers(1, max_nodes))):
        count = draw(st.sampled_from([0, 1, 2, 4, 8, 8]))
        spot = draw(st.booleans()) and draw(st.booleans())
        node: dict[str, Any] = {
            "id": f"n{i}", "domain": draw(st.sampled_from(leaves)), "pool": "spot" if spot else "res",
            "capacity": {"cpu": draw(st.sampled_from([16000, 64000, 128000])),
                         "memory": draw(st.sampled_from([65536, 262144, 1048576])),
                         "rdma_nics": draw(st.sampled_from([0, 1, 4, 8]))},
            "healthy": draw(st.booleans()) or draw(st.booleans()) or draw(st.booleans()),
        }
        if count:
            unhealthy = draw(st.lists(st.integers(0, count - 1), max_size=1, unique=True))
            node["devices"] = {"model": draw(st.sampled_from(list(MODELS))), "count": count,
                               "unhealthy": unhealthy}
            node["interconnect"] = draw(st.sampled_from(INTERCONNECTS[count]))
        if spot:
            node["taints"] = [{"key": "spot", "effect": "NoSchedule"}]
        if draw(st.booleans()):
            node["labels"] = {"zone": draw(st.sampled_from(["a", "b"]))}
        nodes.append(node)
    doc: dict[str, Any] = {"topology": {"levels": ["spine", "leaf"], "domains": domains},
                           "device_models": MODELS, "pools": pools, "nodes": nodes}
    if with_tenants is None:
        with_tenants = draw(st.booleans())
    if with_tenants:
        cohort = draw(st.sampled_from([None, "org"]))
        tenants = []
        for name in ("t0", "t1", "t2")[: draw(st.integers(1, 3))]:
            quotas = {}
            for m in MODELS:
                q: dict[str, Any] = {"nominal": draw(st.sampled_from([0, 2, 4, 8, 16]))}
                if draw(st.booleans()):
                    q["borrowing_limit"] = draw(st.sampled_from([0, 2, 8]))
                if draw(st.booleans()):
                    q["lending_limit"] = draw(st.sampled_from([0, 2, 8]))
                quotas[m] = q
            policy: dict[str, Any] = {
                "within_tenant": draw(st.sampled_from(["never", "lower_priority", "lower_or_newer_equal_priority"])),
                "reclaim_within_cohort": draw(st.sampled_from(["never", "lower_priority", "any"]))}
            if draw(st.booleans()):
                policy["borrow_within_cohort"] = {"policy": draw(st.sampled_from(["never", "lower_priority"])),
                                                  "max_priority_threshold": draw(st.sampled_from([None, 50, 150]))}
            tenants.append({"name": name, "cohort": cohort, "weight": draw(st.sampled_from([1, 2])),
                            "quotas": quotas, "preemption": policy})
        doc["tenants"] = tenants
    return Cluster.model_validate(doc)


@st.composite
def jobs(draw: st.DrawFn, cluster: Cluster, index: int) -> dict[str, Any]:
    """One job document (may be invalid for the cluster; `queues` filters those out)."""
    tenants = [t.name for t in cluster.tenants] or ["default"]
    n_groups = draw(st.integers(1, 3))
    groups = []
    for g in range(n_groups):
        gpu = draw(st.sampled_from([0, 0, 0.25, 0.5, 1, 2, 4, 8]))
        rmin = draw(st.integers(0 if n_groups > 1 else 1, 3))
        group: dict[str, Any] = {
            "name": f"g{g}",
            "replicas": {"min": rmin, "max": max(1, rmin + draw(st.integers(0, 2)))},
            "request": {"cpu": draw(st.sampled_from([0, 1000, 8000, 32000])),
                        "memory": draw(st.sampled_from([0, 4096, 65536])),
                        "gpu": gpu, "rdma_nics": draw(st.sampled_from([0, 0, 1, 4]))},
        }
        if gpu:
            if draw(st.booleans()):
                allowed = draw(st.lists(st.sampled_from(list(MODELS)), min_size=1, max_size=2, unique=True))
                group["models"] = {m: draw(st.sampled_from([0.5, 1.0, 1.5])) for m in allowed}
            if gpu >= 1:
                group["device_affinity"] = draw(st.sampled_from(["none", "preferred", "required"]))
        if draw(st.booleans()):
            group["tolerations"] = [{"key": "spot"}]
        if draw(st.integers(0, 5)) == 0:
            group["node_selector"] = {"zone": draw(st.sampled_from(["a", "b"]))}
        if draw(st.integers(0, 5)) == 0:
            op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
            values = [draw(st.sampled_from(["a", "b"]))] if op in ("In", "NotIn") else []
            terms = [{"match_expressions": [{"key": "zone", "operator": op, "values": values}]}]
            if draw(st.booleans()):  # a second term, ORed with the first
                terms.append({"match_expressions": [{"key": "zone", "operator": "In", "values": ["b"]}]})
            group["node_affinity"] = terms
        if draw(st.integers(0, 4)) == 0:
            group["spread"] = {"level": draw(st.sampled_from(["node", "leaf"])), "max_skew": draw(st.integers(1, 2))}
        groups.append(group)
    job: dict[str, Any] = {
        "id": f"j{index}", "tenant": draw(st.sampled_from(tenants)), "priority": draw(st.integers(0, 200)),
        "submitted_at": draw(st.integers(0, 1000)), "groups": groups,
        "spot": draw(st.sampled_from(["forbidden", "allowed", "preferred"])),
        "bandwidth_gbps": draw(st.sampled_from([0, 0, 100, 400])),
    }
    if draw(st.booleans()):
        job["gang"] = draw(st.booleans())
    if draw(st.integers(0, 2)) == 0:
        job["topology"] = {"level": draw(st.sampled_from(["spine", "leaf", "node"])),
                           "mode": draw(st.sampled_from(["required", "preferred"]))}
    if n_groups >= 2 and draw(st.integers(0, 2)) == 0:
        job["ratios"] = [{"group": "g1", "per": "g0", "min": draw(st.sampled_from([0, 1, 2])),
                          "max": draw(st.sampled_from([None, 2, 4]))}]
    if n_groups >= 2 and draw(st.integers(0, 3)) == 0:
        job["colocate"] = [{"groups": ["g0", "g1"], "level": draw(st.sampled_from(["leaf", "node"]))}]
    return job


@st.composite
def queues(draw: st.DrawFn, cluster: Cluster, max_jobs: int = 8) -> Queue:
    """A valid queue for `cluster`: jobs whose references do not resolve are dropped."""
    out = []
    for i in range(draw(st.integers(0, max_jobs))):
        doc = draw(jobs(cluster, i))
        try:
            job = Job.model_validate(doc)
        except ValueError:
            continue
        if not job_problems(job, "job", cluster):
            out.append(job)
    return Queue(now=2000, jobs=out)


@st.composite
def rounds(draw: st.DrawFn, max_nodes: int = 8, max_jobs: int = 8) -> tuple[Cluster, Queue]:
    """A cluster and a queue for it."""
    cluster = draw(clusters(max_nodes=max_nodes))
    return cluster, draw(queues(cluster, max_jobs=max_jobs))


@st.composite
def busy_rounds(draw: st.DrawFn, max_nodes: int = 8, max_jobs: int = 6,
                with_tenants: bool | None = None) -> tuple[Cluster, Queue]:
    """A cluster whose running jobs were placed by a baseline, and a fresh queue for it."""
    from optsched.model import ReplicaPlacement, RunningJob
    from optsched.problem import compile_problem
    from optsched.solvers.greedy import solve_greedy

    cluster = draw(clusters(max_nodes=max_nodes, with_tenants=with_tenants))
    first = draw(queues(cluster, max_jobs=max_jobs))
    plan = solve_greedy(compile_problem(cluster, first), draw(st.sampled_from(["first-fit", "spread"])))
    running = []
    for job in first.jobs:
        places = [ReplicaPlacement(group=x.group, replica=x.replica, node=x.node, devices=x.devices, share=x.share)
                  for x in plan.placements if x.job == job.id]
        if places:
            spec = job.model_copy(update={"id": f"run-{job.id}", "preemptible": draw(st.booleans())})
            running.append(RunningJob(job=spec, checkpoint_age_s=draw(st.sampled_from([0, 600, 3600])),
                                      placements=places))
    cluster = cluster.model_copy(update={"running": running})
    return cluster, draw(queues(cluster, max_jobs=max_jobs))


@st.composite
def contended_rounds(draw: st.DrawFn, max_nodes: int = 4, max_jobs: int = 10) -> tuple[Cluster, Queue]:
    """Tenants (mostly in one cohort) whose running jobs, mostly preemptible and of low priority,
    fill what a first queue got; the new queue asks again for the same shapes, often at higher
    priority and for other tenants: preemption and reclaim have something to decide. Half of the
    rounds split the nodes into two ResourceFlavors with GPU (and cpu) quotas per flavor; a third of
    those with a cohort run Kueue's fair sharing (one of its strategy lists, weights 0.5 to 2,
    tenants that reclaim)."""
    from optsched.model import (
        Cohort,
        FairSharing,
        PreemptionPolicy,
        Quota,
        ReplicaPlacement,
        ResourceFlavor,
        RunningJob,
    )
    from optsched.model.cluster import DEFAULT_FAIR_SHARE_STRATEGIES
    from optsched.problem import compile_problem
    from optsched.solvers.greedy import solve_greedy

    cluster = draw(clusters(max_nodes=max_nodes, with_tenants=True))
    cohort = "org" if draw(st.integers(0, 3)) else None
    split = draw(st.booleans())  # ResourceFlavors: the nodes in two halves by a label, quotas per half
    if split:
        nodes = [n.model_copy(update={"labels": {**n.labels, "half": "a" if i % 2 == 0 else "b"}})
                 for i, n in enumerate(cluster.nodes)]
        cluster = cluster.model_copy(update={"nodes": nodes, "resource_flavors": [
            ResourceFlavor(name="fa", node_labels={"half": "a"}), ResourceFlavor(name="fb", node_labels={"half": "b"})]})
    keys = (["fb/gpu", "fa/gpu"] + (["fa/cpu"] if draw(st.booleans()) else [])) if split else list(MODELS)
    tree = cohort is not None and draw(st.integers(0, 2)) == 0  # hierarchical: org-a, org-b under org
    tenants = []
    for i, t in enumerate(cluster.tenants):  # quotas that admit some work, so that there is something to evict
        quotas = {k: Quota(nominal=draw(st.sampled_from([0, 1, 2, 4, 8])) * (1000 if k.endswith("/cpu") else 1),
                           borrowing_limit=draw(st.sampled_from([None, 4, 8])),
                           lending_limit=draw(st.sampled_from([None, None, 1, 4]))) for k in keys}
        leaf = ("org-a" if i % 2 == 0 else "org-b") if tree else cohort
        tenants.append(t.model_copy(update={"cohort": leaf, "quotas": quotas}))
    cluster = cluster.model_copy(update={"tenants": tenants})
    if cohort is not None and draw(st.integers(0, 2)) == 0:  # Kueue's fair sharing, weights from {0.5, 1, 2}
        strategies = draw(st.sampled_from([list(DEFAULT_FAIR_SHARE_STRATEGIES), ["less_than_or_equal_to_final_share"],
                                           ["less_than_initial_share"]]))
        cluster = cluster.model_copy(update={
            "fair_sharing": FairSharing(preemption_strategies=strategies),
            "tenants": [t.model_copy(update={
                "weight": draw(st.sampled_from([0.5, 1.0, 2.0])),
                "preemption": PreemptionPolicy(within_tenant=draw(st.sampled_from(["never", "lower_priority"])),
                                               reclaim_within_cohort=draw(st.sampled_from(["lower_priority", "any"])))})
                for t in tenants]})
    if tree:
        gpu_key = keys[0]
        cluster = cluster.model_copy(update={"cohorts": [
            Cohort(name="org", quotas={gpu_key: Quota(nominal=draw(st.sampled_from([0, 2, 4])))}),
            Cohort(name="org-a", parent="org", quotas={gpu_key: Quota(
                nominal=draw(st.sampled_from([0, 2])), borrowing_limit=draw(st.sampled_from([None, 2])),
                lending_limit=draw(st.sampled_from([None, 1])))}),
            Cohort(name="org-b", parent="org")]})
    names = [t.name for t in cluster.tenants]
    drawn = draw(queues(cluster, max_jobs=max_jobs))
    first = Queue(now=drawn.now, jobs=[j.model_copy(update={"id": f"{j.id}c{k}"})  # three of each: a full cluster
                                       for j in drawn.jobs for k in range(3)])
    plan = solve_greedy(compile_problem(cluster, first), "first-fit")
    running = []
    for job in first.jobs:
        places = [ReplicaPlacement(group=x.group, replica=x.replica, node=x.node, devices=x.devices, share=x.share)
                  for x in plan.placements if x.job == job.id]
        if places:
            spec = job.model_copy(update={"id": f"run-{job.id}", "priority": draw(st.integers(0, 100)),
                                          "preemptible": draw(st.integers(0, 4)) > 0})
            running.append(RunningJob(job=spec, started_at=draw(st.integers(0, 1000)),
                                      checkpoint_age_s=draw(st.sampled_from([0, 600, 3600])),
                                      restart_s=draw(st.sampled_from([0, 120])), placements=places))
    cluster = cluster.model_copy(update={"running": running})
    again = [r.job.model_copy(update={"id": f"new-{r.job.id}", "tenant": draw(st.sampled_from(names)),
                                      "priority": draw(st.integers(0, 250)),
                                      "submitted_at": draw(st.integers(0, 1000))})
             for r in running if draw(st.integers(0, 3))]
    more = draw(queues(cluster, max_jobs=max(1, max_jobs // 3)))
    return cluster, Queue(now=2000, jobs=[*again, *more.jobs])


def mutation_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and indices) into a JSON document, for fuzzers that mutate one place."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += mutation_paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += mutation_paths(v, (*prefix, i))
    return out


def set_at(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    """`doc` with the value at `path` replaced (in place)."""
    if not path:
        return value
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc
