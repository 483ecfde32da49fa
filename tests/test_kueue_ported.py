"""Kueue's own table tests, ported: the `kueue` baseline must decide as Kueue does.

Sources (kubernetes-sigs/kueue, read at commit ff69552e79):
- pkg/scheduler/preemption/preemption_test.go, `TestPreemption` (its `defaultClusterQueues` and
  the cases named below): each case states the ClusterQueues it uses, the admitted workloads
  (ClusterQueue, priority, CPUs[, memory]; all reserved at the same time unless a case says
  otherwise) and the incoming workload, and asserts Kueue's preempted set and reasons:
  `InClusterQueue` is optsched's `preempted`, `InCohortReclamation` and
  `InCohortReclaimWhileBorrowing` are `reclaimed`. An empty set means the incoming workload is not
  admitted (Kueue's case gives it no targets).
- pkg/scheduler/scheduler_test.go, `TestSchedule`: whole scheduling cycles with several pending
  workloads (`CYCLE_CASES`). The three "capacity ... reclaim" cases' `gpu` resource is `cpu` here
  (a resource quota, no devices).
- preemption_test.go, `TestCandidatesOrdering` (`ORDERING_CASES`).
- pkg/scheduler/flavorassigner/flavorassigner_test.go, `TestAssignFlavors` (`FLAVOR_CASES`).

How the port maps Kueue's setting onto a round: ClusterQueues are tenants with `cpu` quotas in
millicores (and `memory` in MiB where the case requests it), the nodes are large enough that only
quota binds (Kueue's cases have no nodes), and the incoming workload is the round's one queued
job. Of TestPreemption, the cases on the `default` flavor are ported; the ones on flavors `alpha` /
`beta` wait for ResourceFlavors as node sets (issue 22 item 7), the hierarchical ones ("long range
preemption") for hierarchical cohorts (item 8). TestAssignFlavors' flavors are device models here
(`FlavorCase`). Each case also runs `cpsat`, which must return a
valid plan admitting at least Kueue's value with no more lost work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import InputError, load_cluster, load_queue
from optsched.check import check_problem
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Plan, Queue
from optsched.problem import Problem, compile_problem
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.greedy import solve_greedy
from optsched.solvers.kueue import solve_kueue

CPU = 1000
LOWER, ANY, NEVER, NEWER = "lower_priority", "any", "never", "lower_or_newer_equal_priority"


def cq(cohort: str | None, nominal: float, borrowing: float | None = None, lending: float | None = None,
       within: str = NEVER, reclaim: str = NEVER, bwc_threshold: int | None = None, bwc: bool = False,
       memory: tuple[float, float | None] | None = None) -> dict[str, Any]:
    """A ClusterQueue as a tenant (`bwc_threshold`: borrowWithinCohort LowerPriority with that
    MaxPriorityThreshold; `bwc`: without one; `memory`: the `default` flavor's memory quota,
    nominal and borrowing limit in MiB)."""
    quota: dict[str, Any] = {"nominal": nominal * CPU}
    if borrowing is not None:
        quota["borrowing_limit"] = borrowing * CPU
    if lending is not None:
        quota["lending_limit"] = lending * CPU
    preemption: dict[str, Any] = {"within_tenant": within, "reclaim_within_cohort": reclaim}
    if bwc_threshold is not None:
        preemption["borrow_within_cohort"] = {"policy": "lower_priority", "max_priority_threshold": bwc_threshold}
    elif bwc:
        preemption["borrow_within_cohort"] = {"policy": "lower_priority"}
    quotas: dict[str, Any] = {"cpu": quota}
    if memory is not None:
        quotas["memory"] = {"nominal": memory[0]} | ({} if memory[1] is None else {"borrowing_limit": memory[1]})
    return {"cohort": cohort, "quotas": quotas, "preemption": preemption}


GI = 1024
"""MiB per GiB (Kueue's cases write memory as "3Gi")."""


DEFAULT_CLUSTER_QUEUES = {
    "standalone": cq(None, 6, within=LOWER),
    "c1": cq("cohort", 6, 6, within=LOWER, reclaim=LOWER, memory=(3 * GI, 3 * GI)),
    "c2": cq("cohort", 6, 6, within=NEVER, reclaim=ANY, memory=(3 * GI, 3 * GI)),
    "d1": cq("cohort-no-limits", 6, within=LOWER, reclaim=LOWER, memory=(3 * GI, None)),
    "d2": cq("cohort-no-limits", 6, within=NEVER, reclaim=ANY, memory=(3 * GI, None)),
    "l1": cq("legion", 6, 12, within=LOWER, reclaim=LOWER, memory=(3 * GI, 6 * GI)),
    "preventStarvation": cq(None, 6, within=NEWER),
    "a_standard": cq("with_shared_cq", 1, 12, within=NEVER, reclaim=LOWER, bwc_threshold=0),
    "b_standard": cq("with_shared_cq", 1, 12, within=LOWER, reclaim=ANY, bwc_threshold=0),
    "a_best_effort": cq("with_shared_cq", 1, 12, within=NEVER, reclaim=LOWER, bwc_threshold=0),
    "b_best_effort": cq("with_shared_cq", 0, 13, within=NEVER, reclaim=LOWER, bwc_threshold=0),
    "shared": cq("with_shared_cq", 10),
    "lend1": cq("cohort-lend", 6, lending=4, within=LOWER, reclaim=LOWER),
    "lend2": cq("cohort-lend", 6, lending=2, within=LOWER, reclaim=LOWER),
    "a": cq("cohort-three", 2, within=LOWER, reclaim=ANY, memory=(2, None)),
    "b": cq("cohort-three", 2, memory=(2, None)),
    "c": cq("cohort-three", 2, memory=(2, None)),
}
"""`defaultClusterQueues` of TestPreemption, the `default` flavor's cpu and memory ("6", "6" is
nominal 6, borrowingLimit 6; "6", "", "4" is nominal 6, lendingLimit 4; memory "2" of
cohort-three is 2 MiB here: only the ratios matter). `standalone`'s memory flavors alpha / beta
are left out (ResourceFlavors as node sets, issue 22 item 7)."""


@dataclass(frozen=True)
class Case:
    """One ported case: admitted (name, ClusterQueue, priority, CPUs[, reserved at s, created at s
    [, memory MiB]])."""

    admitted: list[tuple[Any, ...]]
    incoming: tuple[Any, ...]
    """(ClusterQueue, priority, CPUs[, created at s[, memory MiB]])."""
    preempted: dict[str, str] = field(default_factory=dict)
    fixed: list[tuple[Any, ...]] = field(default_factory=list)
    """Non-preemptible admitted workloads (name, ClusterQueue, CPUs) the port adds where Kueue's
    case hands the preemption code a `Preempt` assignment that a round would not need: they use
    the cohort's unused quota, so that the incoming workload needs preemption here too."""


CASES: dict[str, Case] = {
    "preempt lowest priority": Case(
        [("low", "standalone", -1, 2), ("mid", "standalone", 0, 2), ("high", "standalone", 1, 2)],
        ("standalone", 1, 2), {"low": "preempted"}),
    "preempt multiple": Case(
        [("low", "standalone", -1, 2), ("mid", "standalone", 0, 2), ("high", "standalone", 1, 2)],
        ("standalone", 1, 3), {"low": "preempted", "mid": "preempted"}),
    "no preemption for low priority": Case(
        [("low", "standalone", -1, 3), ("mid", "standalone", 0, 3)], ("standalone", -1, 1)),
    "not enough low priority workloads": Case(
        [("low", "standalone", -1, 3), ("mid", "standalone", 0, 3)], ("standalone", 0, 4)),
    "some free quota, preempt low priority": Case(
        [("low", "standalone", -1, 1), ("mid", "standalone", 0, 1), ("high", "standalone", 1, 3)],
        ("standalone", 1, 2), {"low": "preempted"}),
    "minimal set excludes low priority": Case(
        [("low", "standalone", -1, 1), ("mid", "standalone", 0, 2), ("high", "standalone", 1, 3)],
        ("standalone", 1, 2), {"mid": "preempted"}),
    "reclaim quota from borrower": Case(
        [("c1-low", "c1", -1, 3), ("c2-mid", "c2", 0, 3), ("c2-high", "c2", 1, 6)],
        ("c1", 1, 3), {"c2-mid": "reclaimed"}),
    "preempting locally and borrowing same resource in cohort": Case(
        [("c1-med", "c1", 0, 4), ("c1-low", "c1", -1, 4), ("c2-low-1", "c2", -1, 4)],
        ("c1", 1, 4), {"c1-low": "preempted"}),
    "preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort": Case(
        [("d1-med", "d1", 0, 4), ("d1-low", "d1", -1, 4), ("d2-low-1", "d2", -1, 4)],
        ("d1", 1, 4), {"d1-low": "preempted"}),
    "preempting locally and not borrowing same resource in 1-queue cohort": Case(
        [("l1-med", "l1", 0, 4), ("l1-low", "l1", -1, 2)], ("l1", 1, 4), {"l1-med": "preempted"}),
    "do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority": Case(
        [("c1", "c1", 0, 2), ("c2-1", "c2", 0, 4), ("c2-2", "c2", 0, 4)], ("c1", 0, 4)),
    "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny": Case(
        [("c1-1", "c1", 0, 4), ("c1-2", "c1", 1, 4), ("c2", "c2", 0, 2)], ("c2", 0, 4), {"c1-1": "reclaimed"}),
    "preempt from all ClusterQueues in cohort": Case(
        [("c1-low", "c1", -1, 3), ("c1-mid", "c1", 0, 2), ("c2-low", "c2", -1, 3), ("c2-mid", "c2", 0, 4)],
        ("c1", 0, 4), {"c1-low": "preempted", "c2-low": "reclaimed"}),
    "preempt newer workloads with the same priority": Case(
        [("wl1", "preventStarvation", 2, 2, 0.0, 0.0), ("wl2", "preventStarvation", 1, 2, 1.0, 15.0),
         ("wl3", "preventStarvation", 1, 2, 0.0, 15.0)],
        ("preventStarvation", 1, 2, 0.0), {"wl2": "preempted"}),
    "use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue while "
    "borrowing": Case(
        [("a_best_effort_low", "a_best_effort", -1, 10), ("b_best_effort_low", "b_best_effort", -1, 1)],
        ("a_standard", 0, 10), {"a_best_effort_low": "reclaimed"}),
    "use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above "
    "MaxPriorityThreshold, if borrowing is required even after the preemption": Case(
        [("b_standard", "b_standard", 1, 10)], ("a_standard", 2, 10)),
    "use BorrowWithinCohort; allow preempting a lower-priority workload with priority above "
    "MaxPriorityThreshold, if borrowing is not required after the preemption": Case(
        [("b_standard", "b_standard", 1, 13)], ("a_standard", 2, 1), {"b_standard": "reclaimed"}),
    "use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same "
    "ClusterQueue": Case([("a_standard", "a_standard", 1, 13)], ("a_standard", 2, 1)),
    "use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already above "
    "nominal": Case(
        [("a_standard_1", "a_standard", 1, 10), ("a_standard_2", "a_standard", 1, 1),
         ("b_standard_1", "b_standard", 1, 1), ("b_standard_2", "b_standard", 2, 1)],
        ("b_standard", 3, 1), {"b_standard_1": "preempted"}),
    "use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold": Case(
        [("b_standard_high", "b_standard", 2, 10), ("b_standard_mid", "b_standard", 1, 1),
         ("a_best_effort_low", "a_best_effort", -1, 1), ("a_best_effort_lower", "a_best_effort", -2, 1)],
        ("b_standard", 2, 2), {"a_best_effort_lower": "reclaimed", "b_standard_mid": "preempted"}),
    "reclaim quota from lender": Case(
        [("lend1-low", "lend1", -1, 3), ("lend2-mid", "lend2", 0, 3), ("lend2-high", "lend2", 1, 4)],
        ("lend1", 1, 3), {"lend2-mid": "reclaimed"}),
    "preempt from all ClusterQueues in cohort-lend": Case(
        [("lend1-low", "lend1", -1, 3), ("lend1-mid", "lend1", 0, 2), ("lend2-low", "lend2", -1, 3),
         ("lend2-mid", "lend2", 0, 4)],
        ("lend1", 0, 4), {"lend1-low": "preempted", "lend2-low": "reclaimed"}),
    "cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit": Case(
        [("lend2-low", "lend2", -1, 10)], ("lend1", 0, 9)),
    "preemptions from cq when target queue is exhausted for the single requested resource": Case(
        [("a1", "a", -2, 1), ("a2", "a", -2, 1), ("a3", "a", -1, 1), ("b1", "b", 0, 1), ("b2", "b", 0, 1),
         ("b3", "b", 0, 1)],
        ("a", 0, 2), {"a1": "preempted", "a2": "preempted"}),
    "reclaim quota if workload requests 0 resources for a resource at nominal quota": Case(
        [("c1-low", "c1", -1, 3, 0.0, 0.0, 3 * GI), ("c2-mid", "c2", 0, 3), ("c2-high", "c2", 1, 6)],
        ("c1", 1, 3, 0.0, 0), {"c2-mid": "reclaimed"}),
    "no workloads borrowing": Case(
        [("c1-high", "c1", 1, 4), ("c2-low-1", "c2", -1, 4)], ("c1", 1, 4), fixed=[("c2-rest", "c2", 2)]),
    "not enough workloads borrowing": Case(
        [("c1-high", "c1", 1, 4), ("c2-low-1", "c2", -1, 4), ("c2-low-2", "c2", -1, 4)], ("c1", 1, 4)),
    "preempting locally and borrowing other resources in cohort, without cohort candidates": Case(
        [("c1-low", "c1", -1, 4), ("c2-low-1", "c2", -1, 4), ("c2-high-2", "c2", 1, 4)],
        ("c1", 1, 4, 0.0, 5 * GI), {"c1-low": "preempted"}),
    "preempting locally and borrowing other resources in cohort, with cohort candidates": Case(
        [("c1-med", "c1", 0, 4), ("c2-low-1", "c2", -1, 5), ("c2-low-2", "c2", -1, 1), ("c2-low-3", "c2", -1, 1)],
        ("c1", 1, 2, 0.0, 5 * GI), {"c1-med": "preempted"}),
    "can't preempt workloads in ClusterQueue for withinClusterQueue=Never": Case(
        [("c2-low", "c2", -1, 3)], ("c2", 1, 4), fixed=[("c1-rest", "c1", 6)]),
    "preemptions from cq when target queue is exhausted for two requested resources": Case(
        [("a1", "a", -2, 1, 0.0, 0.0, 1), ("a2", "a", -2, 1, 0.0, 0.0, 1), ("a3", "a", -1, 1, 0.0, 0.0, 1),
         ("b1", "b", 0, 1, 0.0, 0.0, 1), ("b2", "b", 0, 1, 0.0, 0.0, 1), ("b3", "b", 0, 1, 0.0, 0.0, 1)],
        ("a", 0, 2, 0.0, 2), {"a1": "preempted", "a2": "preempted"}),
    "preemptions from cq when target queue is exhausted for one requested resource, but not the other": Case(
        [("a1", "a", -2, 1), ("a2", "a", -2, 1), ("a3", "a", -1, 1), ("b1", "b", 0, 1), ("b2", "b", 0, 1),
         ("b3", "b", 0, 1)],
        ("a", 0, 2, 0.0, 2), {"a1": "preempted", "a2": "preempted"}),
    "allow preemption from other cluster queues if target cq is not exhausted for the requested resource": Case(
        [("a1", "a", -1, 1), ("b1", "b", 0, 1), ("b2", "b", 0, 1), ("b3", "b", 0, 1), ("b4", "b", 0, 1),
         ("b5", "b", -1, 1)],
        ("a", 0, 2), {"a1": "preempted", "b5": "reclaimed"}),
}


def _job(name: str, tenant: str, priority: int, cpus: float, submitted: float = 0.0,
         memory: float | None = None, preemptible: bool = True) -> dict[str, Any]:
    """A one-pod workload (memory in MiB; None: not requested, as Kueue's cases that set none)."""
    request: dict[str, Any] = {"cpu": cpus * CPU} | ({} if memory is None else {"memory": memory})
    return {"id": name, "tenant": tenant, "priority": priority, "submitted_at": submitted, "preemptible": preemptible,
            "groups": [{"name": "w", "replicas": {"min": 1, "max": 1}, "request": request}]}


def _running(job: dict[str, Any], reserved: float = 0.0) -> dict[str, Any]:
    return {"job": job, "started_at": reserved, "checkpoint_age_s": 60.0,
            "placements": [{"group": "w", "replica": 0, "node": "n0"}]}


def _cluster(cqs: dict[str, dict[str, Any]], running: list[dict[str, Any]]) -> Cluster:
    """ClusterQueues as tenants on two nodes large enough that only quota binds."""
    return Cluster.model_validate({
        "topology": {"levels": ["zone"], "domains": [{"id": "z0", "level": "zone"}]},
        "nodes": [{"id": f"n{i}", "domain": "z0", "capacity": {"cpu": 64 * CPU, "memory": 1 << 20}}
                  for i in range(2)],
        "tenants": [{"name": name, **spec} for name, spec in cqs.items()], "running": running})


def _round(case: Case) -> tuple[Cluster, Queue]:
    running = []
    for entry in case.admitted:
        name, tenant, priority, cpus = entry[:4]
        reserved, created = (entry[4], entry[5]) if len(entry) > 4 else (0.0, 0.0)
        memory = entry[6] if len(entry) > 6 else None
        running.append(_running(_job(name, tenant, priority, cpus, created, memory), reserved))
    running += [_running(_job(name, tenant, 0, cpus, preemptible=False)) for name, tenant, cpus in case.fixed]
    tenant, priority, cpus = case.incoming[:3]
    created = case.incoming[3] if len(case.incoming) > 3 else 0.0
    memory = case.incoming[4] if len(case.incoming) > 4 else None
    incoming = _job("in", tenant, priority, cpus, created, memory)
    return _cluster(DEFAULT_CLUSTER_QUEUES, running), Queue.model_validate({"now": 100.0, "jobs": [incoming]})


def cpsat_no_worse_than_kueue(p: Problem, kueue: Plan | None = None) -> None:
    """`cpsat` on the round: a valid plan, at least the `kueue` plan's admitted value, and at equal
    value no more lost work."""
    kueue = solve_kueue(p) if kueue is None else kueue
    cpsat = solve_cpsat(p, time_limit=5.0)
    assert check_problem(p, cpsat) == []
    k, c = evaluate_problem(p, kueue), evaluate_problem(p, cpsat)
    assert c.admitted_value >= k.admitted_value - 1e-9
    if c.admitted_value <= k.admitted_value + 1e-9:
        assert c.disruption <= k.disruption + 1e-9


@pytest.mark.parametrize("name", list(CASES))
def test_kueue_preemption_case(name: str) -> None:
    """preemption_test.go TestPreemption: the `kueue` baseline preempts what Kueue preempts."""
    case = CASES[name]
    cluster, queue = _round(case)
    p = compile_problem(cluster, queue)
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    assert {ev.job: ev.reason for ev in plan.evictions} == case.preempted
    assert all(ev.by == "in" for ev in plan.evictions)
    admitted = any(pl.job == "in" for pl in plan.placements)
    assert admitted == bool(case.preempted)


@pytest.mark.parametrize("name", list(CASES))
def test_cpsat_on_kueue_preemption_case(name: str) -> None:
    """The same round with `cpsat`: valid, at least Kueue's admitted value, no more lost work."""
    cluster, queue = _round(CASES[name])
    cpsat_no_worse_than_kueue(compile_problem(cluster, queue))


# ---------------------------------------------------------------------------- scheduler_test.go
@dataclass(frozen=True)
class CycleCase:
    """A case of Kueue's TestSchedule (pkg/scheduler/scheduler_test.go): ClusterQueues of one
    cohort, admitted workloads (name, ClusterQueue, priority, CPUs) and pending ones (same shape,
    in creation order). A pending workload Kueue leaves waiting for its preemptions (condition
    `WaitingForPreemptedWorkloads`) is admitted in a round, which evicts and places at once;
    one left `WaitingForQuota` (or whose preemption Kueue skips) is deferred."""

    cqs: dict[str, dict[str, Any]]
    admitted: list[tuple[str, str, int, float]]
    pending: list[tuple[str, str, int, float]]
    want_admitted: set[str]
    preempted: dict[str, str] = field(default_factory=dict)


CYCLE_CASES: dict[str, CycleCase] = {
    "A workload is only eligible to do preemptions if it fits fully within nominal quota": CycleCase(
        {"other-alpha": cq("other", 2, within=LOWER, reclaim=ANY), "other-beta": cq("other", 2)},
        [("a1", "other-alpha", -1, 1), ("b1", "other-beta", -1, 1)],
        [("incoming", "other-alpha", 1, 3)], set()),
    "minimal preemptions when target queue is exhausted": CycleCase(
        {"other-alpha": cq("other", 2, within=LOWER, reclaim=ANY), "other-beta": cq("other", 2),
         "other-gamma": cq("other", 2)},
        [("a1", "other-alpha", -2, 1), ("a2", "other-alpha", -2, 1), ("a3", "other-alpha", -1, 1),
         ("b1", "other-beta", 0, 1), ("b2", "other-beta", 0, 1), ("b3", "other-beta", 0, 1)],
        [("incoming", "other-alpha", 0, 2)], {"incoming"}, {"a1": "preempted", "a2": "preempted"}),
    "multiple preemptions without borrowing": CycleCase(
        {"other-alpha": cq("other", 2, within=LOWER), "other-beta": cq("other", 2, within=LOWER)},
        [("a1", "other-alpha", 0, 2), ("b1", "other-beta", 0, 2)],
        [("alpha-preemptor", "other-alpha", 100, 2), ("beta-preemptor", "other-beta", 100, 2)],
        {"alpha-preemptor", "beta-preemptor"}, {"a1": "preempted", "b1": "preempted"}),
    "multiple preemptions preemption possible after earlier workload fits": CycleCase(
        {"other-alpha": cq("other", 1, within=LOWER), "other-beta": cq("other", 2, within=LOWER)},
        [("b1", "other-beta", 0, 2)],
        [("fit", "other-alpha", 100, 1), ("preemptor", "other-beta", 99, 2)],
        {"fit", "preemptor"}, {"b1": "preempted"}),
    "capacity not blocked when lending clusterqueue can reclaim (ReclaimWithinCohort=Any)": CycleCase(
        {"ClusterQueueA": cq("root", 2, reclaim=ANY), "ClusterQueueB": cq("root", 0)},
        [("a1-admitted", "ClusterQueueA", 0, 1)],
        [("a2-pending", "ClusterQueueA", 0, 2), ("b1-pending", "ClusterQueueB", 0, 1)], {"b1-pending"}),
    "capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=LowerPriority)":
        CycleCase({"ClusterQueueA": cq("root", 2, reclaim=LOWER), "ClusterQueueB": cq("root", 0)},
                  [("a1-admitted", "ClusterQueueA", 0, 1)],
                  [("a2-pending", "ClusterQueueA", 0, 2), ("b1-pending", "ClusterQueueB", 0, 1)], set()),
    "capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=Never)": CycleCase(
        {"ClusterQueueA": cq("root", 2, reclaim=NEVER), "ClusterQueueB": cq("root", 0)},
        [("a1-admitted", "ClusterQueueA", 0, 1)],
        [("a2-pending", "ClusterQueueA", 0, 2), ("b1-pending", "ClusterQueueB", 0, 1)], set()),
    "multiple preemptions skip preemption when shared limited resource": CycleCase(
        {"other-alpha": cq("other", 2, within=LOWER, bwc=True), "other-beta": cq("other", 2, within=LOWER, bwc=True),
         "resource-bank": cq("other", 1)},
        [("a1", "other-alpha", 0, 2), ("b1", "other-beta", 0, 2)],
        [("preemptor", "other-alpha", 100, 3), ("pretending-preemptor", "other-beta", 99, 3)],
        {"preemptor"}, {"a1": "preempted"}),
}


def _cycle(case: CycleCase) -> tuple[Cluster, Queue]:
    running = [_running(_job(name, t, prio, cpus)) for name, t, prio, cpus in case.admitted]
    jobs = [_job(name, t, prio, cpus, submitted=float(i)) for i, (name, t, prio, cpus) in enumerate(case.pending)]
    return _cluster(case.cqs, running), Queue.model_validate({"now": 100.0, "jobs": jobs})


@pytest.mark.parametrize("name", list(CYCLE_CASES), ids=list(CYCLE_CASES))
def test_kueue_scheduling_cycle_case(name: str) -> None:
    """scheduler_test.go TestSchedule: the `kueue` baseline admits and preempts what Kueue does."""
    case = CYCLE_CASES[name]
    cluster, queue = _cycle(case)
    p = compile_problem(cluster, queue)
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    assert {pl.job for pl in plan.placements} == case.want_admitted
    assert {ev.job: ev.reason for ev in plan.evictions} == case.preempted
    assert {d.job for d in plan.deferred} == {name for name, *_ in case.pending} - case.want_admitted


@pytest.mark.parametrize("name", list(CYCLE_CASES), ids=list(CYCLE_CASES))
def test_cpsat_on_kueue_scheduling_cycle_case(name: str) -> None:
    """The same round with `cpsat`: valid, at least Kueue's admitted value, no more lost work."""
    cluster, queue = _cycle(CYCLE_CASES[name])
    cpsat_no_worse_than_kueue(compile_problem(cluster, queue))


# ---------------------------------------------------------------------------- TestCandidatesOrdering
ORDERING_CASES: dict[str, tuple[list[tuple[str, str, int, float]], list[str]]] = {
    "workloads sorted by priority": ([("high", "preemptor", 10, 0.0), ("low", "preemptor", -10, 0.0)],
                                     ["low", "high"]),
    "workload from different CQ first": ([("preemptorCq", "preemptor", 10, 0.0), ("other", "other", 10, 0.0)],
                                         ["other", "preemptorCq"]),
    "old workloads last": ([("older", "preemptor", 0, 9.0), ("younger", "preemptor", 0, 11.0),
                            ("current", "preemptor", 0, 10.0)], ["younger", "current", "older"]),
    "workloads from different CQ are sorted based on priority and timestamp": (
        [("mid_lq_usage", "preemptor", 10, 0.0), ("high_lq_usage_different_cq", "different_cq", 1, 0.0)],
        ["high_lq_usage_different_cq", "mid_lq_usage"]),
}
"""preemption_test.go TestCandidatesOrdering: candidates (name, ClusterQueue, priority, quota
reserved at s; Kueue's now - 1 s, now, now + 1 s are 9, 10, 11 here) and Kueue's order for a workload of ClusterQueue `preemptor`. The last case's
LocalQueue fair-sharing usages do not enter (Kueue compares them only within one ClusterQueue);
"evicted workload first" has no counterpart (nothing is mid-eviction at a round's start)."""


@pytest.mark.parametrize("name", list(ORDERING_CASES))
def test_kueue_candidates_ordering_case(name: str) -> None:
    """`preemption.candidate_order`, which the `kueue` baseline sorts its candidates with, orders
    Kueue's candidates as CandidatesOrdering does."""
    from optsched.concerns.tenancy.preemption import candidate_order

    candidates, want = ORDERING_CASES[name]
    cqs = {t: cq("cohort", 1) for t in sorted({t for _, t, _, _ in candidates} | {"preemptor"})}
    running = [_running(_job(n, t, prio, 0.001), reserved) for n, t, prio, reserved in candidates]
    p = compile_problem(_cluster(cqs, running), Queue.model_validate({"now": 100.0, "jobs": []}))
    tenant = p.tenant_names.index("preemptor")
    order = candidate_order(p, np.arange(len(p.running)), tenant)
    assert [p.running[k].id for k in order] == want


# ---------------------------------------------------------------------------- flavorassigner_test.go
@dataclass(frozen=True)
class FlavorCase:
    """A case of Kueue's TestAssignFlavors (pkg/scheduler/flavorassigner/flavorassigner_test.go) with
    the default FlavorFungibility: ResourceFlavors `one` and `two` are device models here (a
    ClusterQueue's cpu quota on a flavor is its GPU quota on that model, in the ClusterQueue's
    flavor order), the ClusterQueue's usage is a running job on a node of that model, and the
    workload's one pod asks for `request` devices of either model; Kueue's assignment is the model
    the pod lands on."""

    quotas: dict[str, dict[str, Any]]
    """ClusterQueue -> {flavor: quota} (in the ClusterQueue's order), all in one cohort."""
    usage: dict[str, tuple[str, int]]
    """ClusterQueue -> (flavor, devices) in use."""
    request: int
    want_model: str
    """The model Kueue assigns; empty: no flavor fits (`NoFit`: the workload waits for quota)."""
    models: tuple[str, ...] = ("one", "two")
    """The models the workload's pod accepts."""
    cohort: bool = True


FLAVOR_CASES: dict[str, FlavorCase] = {
    "resource not listed in clusterQueue": FlavorCase(
        {"test-clusterqueue": {"one": {"nominal": 4}}, "other-clusterqueue": {"two": {"nominal": 4}}},
        {}, 2, "", models=("two",), cohort=False),
}


def _flavor_round(case: FlavorCase) -> tuple[Cluster, Queue]:
    cohort = "test-cohort" if case.cohort and len(case.quotas) > 1 else None
    tenants = [{"name": name, "cohort": cohort, "quotas": q} for name, q in case.quotas.items()]
    nodes = [{"id": f"{m}-{i}", "domain": "z0", "capacity": {"cpu": 64 * CPU, "memory": 1 << 20},
              "devices": {"model": m, "count": 16}} for m in ("one", "two") for i in range(2)]
    running = []
    for t, (model, devices) in case.usage.items():
        spec = {"id": f"{t}-usage", "tenant": t, "priority": 0, "preemptible": False, "groups": [
            {"name": "w", "replicas": {"min": 1, "max": 1}, "request": {"cpu": CPU, "gpu": devices}}]}
        running.append({"job": spec, "started_at": 0.0, "placements": [
            {"group": "w", "replica": 0, "node": f"{model}-0", "devices": list(range(devices))}]})
    cluster = Cluster.model_validate({
        "topology": {"levels": ["zone"], "domains": [{"id": "z0", "level": "zone"}]},
        "device_models": {"one": {"memory_gib": 80}, "two": {"memory_gib": 80}},
        "nodes": nodes, "tenants": tenants, "running": running})
    incoming = {"id": "in", "tenant": next(iter(case.quotas)), "priority": 0, "groups": [
        {"name": "main", "replicas": {"min": 1, "max": 1}, "request": {"cpu": CPU, "gpu": case.request},
         "models": {m: 1.0 for m in case.models}}]}
    return cluster, Queue.model_validate({"now": 100.0, "jobs": [incoming]})


@pytest.mark.parametrize("name", list(FLAVOR_CASES), ids=list(FLAVOR_CASES))
def test_kueue_flavor_assignment_case(name: str) -> None:
    """flavorassigner_test.go TestAssignFlavors: the `kueue` baseline places the workload on the
    flavor Kueue assigns (flavors in the ClusterQueue's order, quota per flavor, then nodes)."""
    case = FLAVOR_CASES[name]
    cluster, queue = _flavor_round(case)
    p = compile_problem(cluster, queue)
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    assert plan.evictions == []
    assert {pl.node.split("-")[0] for pl in plan.placements} == ({case.want_model} if case.want_model else set())
    if not case.want_model:
        assert [d.reason for d in plan.deferred] == ["quota"] and "lists no quota" in plan.deferred[0].detail
    cpsat_no_worse_than_kueue(p, plan)


@dataclass(frozen=True)
class ResourceFlavorCase:
    """A TestAssignFlavors case as Kueue writes it: ResourceFlavors `one` and `two` are the nodes
    labelled ``type: one`` / ``type: two`` (Kueue's fixtures: MakeResourceFlavor("one").NodeLabel
    ("type", "one")), quotas are per (flavor, cpu) as ``one/cpu``, the ClusterQueue's usage is a
    preemptible running job of lower priority on a node of the flavor (so that preemption there is
    possible, as the case's oracle says), and the workload is one CPU pod."""

    quotas: dict[str, dict[str, Any]]
    usage: dict[str, tuple[str, int]]
    request: int
    want_flavor: str
    evicts: bool = False
    fungibility: dict[str, str] = field(default_factory=dict)
    selector: dict[str, str] = field(default_factory=dict)


RF_CASES: dict[str, ResourceFlavorCase] = {
    "preempt try next flavor": ResourceFlavorCase(
        {"test-clusterqueue": {"one/cpu": {"nominal": 10 * CPU}, "two/cpu": {"nominal": 10 * CPU}}},
        {"test-clusterqueue": ("one", 2)}, 9, "two"),
    "preempt before try next flavor": ResourceFlavorCase(
        {"test-clusterqueue": {"one/cpu": {"nominal": 10 * CPU}, "two/cpu": {"nominal": 10 * CPU}}},
        {"test-clusterqueue": ("one", 2)}, 9, "one", evicts=True,
        fungibility={"when_can_borrow": "may_stop_search", "when_can_preempt": "may_stop_search"}),
    "borrow try next flavor, found the second flavor": ResourceFlavorCase(
        {"test-clusterqueue": {"one/cpu": {"nominal": 10 * CPU, "borrowing_limit": CPU}, "two/cpu": {"nominal": 10 * CPU}},
         "test-secondary-clusterqueue": {"one/cpu": {"nominal": CPU}}},
        {"test-clusterqueue": ("one", 2)}, 9, "two",
        fungibility={"when_can_borrow": "try_next_flavor", "when_can_preempt": "try_next_flavor"}),
    "borrow before try next flavor": ResourceFlavorCase(
        {"test-clusterqueue": {"one/cpu": {"nominal": 10 * CPU, "borrowing_limit": CPU}, "two/cpu": {"nominal": 10 * CPU}},
         "test-secondary-clusterqueue": {"one/cpu": {"nominal": CPU}}},
        {"test-clusterqueue": ("one", 2)}, 9, "one"),
    "multiple flavors, fits a node selector": ResourceFlavorCase(
        {"test-clusterqueue": {"one/cpu": {"nominal": 4 * CPU}, "two/cpu": {"nominal": 4 * CPU}}},
        {}, 1, "two", selector={"type": "two"}),
}
"""TestAssignFlavors cases on ResourceFlavors (flavorassigner_test.go; `pods` quotas left out: one
pod never binds them). The node selector case's second key (`ignored1: foo`, which Kueue ignores
as no flavor uses it) is left out: optsched's selector would need nodes to carry it."""


def _rf_round(case: ResourceFlavorCase) -> tuple[Cluster, Queue]:
    cohort = "test-cohort" if len(case.quotas) > 1 else None
    first = next(iter(case.quotas))
    tenants = [{"name": name, "cohort": cohort, "quotas": q, "flavor_fungibility": case.fungibility,
                "preemption": {"within_tenant": "lower_priority"} if name == first else {}}
               for name, q in case.quotas.items()]
    nodes = [{"id": f"{f}-{i}", "domain": "z0", "labels": {"type": f},
              "capacity": {"cpu": 64 * CPU, "memory": 1 << 20}} for f in ("one", "two") for i in range(2)]
    running = [{"job": _job(f"{t}-usage", t, -1, cpus), "started_at": 0.0, "checkpoint_age_s": 60.0,
                "placements": [{"group": "w", "replica": 0, "node": f"{f}-0"}]} for t, (f, cpus) in case.usage.items()]
    cluster = Cluster.model_validate({
        "topology": {"levels": ["zone"], "domains": [{"id": "z0", "level": "zone"}]},
        "resource_flavors": [{"name": f, "node_labels": {"type": f}} for f in ("one", "two")],
        "nodes": nodes, "tenants": tenants, "running": running})
    incoming = _job("in", first, 0, case.request)
    incoming["groups"][0]["node_selector"] = case.selector
    return cluster, Queue.model_validate({"now": 100.0, "jobs": [incoming]})


@pytest.mark.parametrize("name", list(RF_CASES), ids=list(RF_CASES))
def test_kueue_resource_flavor_assignment_case(name: str) -> None:
    """flavorassigner_test.go TestAssignFlavors on ResourceFlavors: the workload lands on the
    flavor Kueue assigns (and preempts there where Kueue's assignment mode is Preempt); cpsat is
    no worse (`cpsat_no_worse_than_kueue`)."""
    case = RF_CASES[name]
    cluster, queue = _rf_round(case)
    p = compile_problem(cluster, queue)
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    assert {pl.node.split("-")[0] for pl in plan.placements} == {case.want_flavor}
    assert bool(plan.evictions) == case.evicts
    cpsat_no_worse_than_kueue(p, plan)


# ---------------------------------------------------------------------------- hierarchical cohorts
HIER_CASES: dict[str, tuple[CycleCase, list[dict[str, Any]]]] = {
    "long range preemption": (CycleCase(
        {"cq-left": cq("cohort-left", 10, reclaim=ANY), "cq-right": cq("cohort-right", 0)},
        [("to-be-preempted", "cq-right", 0, 5)], [("in", "cq-left", 0, 8)], {"in"},
        {"to-be-preempted": "reclaimed"}),
        [{"name": "root"}, {"name": "cohort-left", "parent": "root"}, {"name": "cohort-right", "parent": "root"}]),
    "hierarchical cohort respects lending limit when borrowing": (CycleCase(
        {"cq-lender": cq("child", 10, lending=3), "cq-borrower": cq("child", 5, 10)},
        [("wl-existing", "cq-borrower", 0, 5)], [("wl-pending", "cq-borrower", 0, 4)], set()),
        [{"name": "root"}, {"name": "child", "parent": "root"}]),
    "hierarchical cohort allows borrowing up to lending limit": (CycleCase(
        {"cq-lender": cq("child", 10, lending=5), "cq-borrower": cq("child", 5, 10)},
        [("wl-existing", "cq-borrower", 0, 5)], [("wl-borrowing", "cq-borrower", 0, 5)], {"wl-borrowing"}),
        [{"name": "root"}, {"name": "child", "parent": "root"}]),
}
"""Cases on Kueue's hierarchical cohorts (Cohort objects with a parent): "long range preemption"
of preemption_test.go TestPreemption (a ClusterQueue reclaims from one in a sibling cohort under
the same root), and two of scheduler_test.go TestSchedule."""


@pytest.mark.parametrize("name", list(HIER_CASES), ids=list(HIER_CASES))
def test_kueue_hierarchical_cohort_case(name: str) -> None:
    """Borrowing, lending and reclaim along a cohort tree decide as in Kueue's cases; cpsat is no worse."""
    case, cohorts = HIER_CASES[name]
    cluster, queue = _cycle(case)
    cluster = Cluster.model_validate({**cluster.model_dump(), "cohorts": cohorts})
    p = compile_problem(cluster, queue)
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    assert {pl.job for pl in plan.placements} == case.want_admitted
    assert {ev.job: ev.reason for ev in plan.evictions} == case.preempted
    cpsat_no_worse_than_kueue(p, plan)


# ---------------------------------------------------------------------------- fair sharing
FAIR_CLUSTER_QUEUES = {
    "a": cq("all", 3, within=LOWER, reclaim=ANY, bwc_threshold=-3),
    "b": cq("all", 3, within=LOWER, reclaim=ANY, bwc_threshold=-3),
    "c": cq("all", 3, within=LOWER, reclaim=ANY, bwc_threshold=-3),
    "preemptible": cq("all", 0),
}
"""`baseCQs` of preemption_fair_test.go TestFairPreemptions: three ClusterQueues of 3 CPUs in
cohort `all` (withinClusterQueue LowerPriority, reclaimWithinCohort Any, borrowWithinCohort
LowerPriority up to priority -3, which fair sharing ignores) and `preemptible` with none."""


@dataclass(frozen=True)
class FairCase:
    """A TestFairPreemptions case: admitted (name, ClusterQueue, priority, CPUs), the incoming
    workload (ClusterQueue, priority, CPUs), Kueue's preempted set (`InClusterQueue`: preempted;
    `InCohortReclamation`, `InCohortFairSharing`: reclaimed) and the strategies (None: Kueue's
    default, S2-a then S2-b)."""

    admitted: list[tuple[str, str, int, float]]
    incoming: tuple[str, int, float]
    preempted: dict[str, str] = field(default_factory=dict)
    strategies: list[str] | None = None
    queues: dict[str, dict[str, Any]] | None = None


def _units(tenant: str, n: int, priority: int = 0, start: int = 1) -> list[tuple[str, str, int, float]]:
    return [(f"{tenant}{i}", tenant, priority, 1.0) for i in range(start, start + n)]


S2A, S2B = "less_than_or_equal_to_final_share", "less_than_initial_share"
FAIR_CASES: dict[str, FairCase] = {
    "reclaim nominal from user using the most": FairCase(
        _units("a", 3) + _units("b", 5) + _units("c", 1), ("c", 0, 1), {"b1": "reclaimed"}),
    "can reclaim from queue using less, if taking the latest workload from user using the most isn't enough": FairCase(
        [("a1", "a", 0, 3), ("a2", "a", 0, 1), ("b1", "b", 0, 2), ("b2", "b", 0, 3)], ("c", 0, 3),
        {"a1": "reclaimed"}),
    "reclaim borrowable quota from user using the most": FairCase(
        _units("a", 3) + _units("b", 5) + _units("c", 1), ("a", 0, 1), {"b1": "reclaimed"}),
    "preempt one from each CQ borrowing": FairCase(
        [("a1", "a", 0, 0.5), ("a2", "a", 0, 0.5), ("a3", "a", 0, 3), ("b1", "b", 0, 0.5), ("b2", "b", 0, 0.5),
         ("b3", "b", 0, 3)], ("c", 0, 2), {"a1": "reclaimed", "b1": "reclaimed"}),
    "can't preempt when everyone under nominal": FairCase(
        _units("a", 3) + _units("b", 3) + _units("c", 3), ("c", 0, 1)),
    "can't preempt when it would switch the imbalance": FairCase(_units("a", 3) + _units("b", 5), ("a", 0, 2)),
    "can preempt lower priority workloads from same CQ": FairCase(
        [("a1_low", "a", -1, 1), ("a2_low", "a", -1, 1), ("a3", "a", 0, 1), ("a4", "a", 0, 1), *_units("b", 5)],
        ("a", 0, 2), {"a1_low": "preempted", "a2_low": "preempted"}),
    "can preempt a combination of same CQ and highest user": FairCase(
        [("a_low", "a", -1, 1), ("a2", "a", 0, 1), ("a3", "a", 0, 1), *_units("b", 6)], ("a", 0, 2),
        {"a_low": "preempted", "b1": "reclaimed"}),
    "preempt huge workload if there is no other option, as long as the target CQ gets a lower share": FairCase(
        [("b1", "b", 0, 9)], ("a", 0, 2), {"b1": "reclaimed"}),
    "can't preempt huge workload if the incoming is also huge": FairCase(
        [("a1", "a", 0, 2), ("b1", "b", 0, 7)], ("a", 0, 5)),
    "can't preempt 2 smaller workloads if the incoming is huge": FairCase(
        [("b1", "b", 0, 2), ("b2", "b", 0, 2), ("b3", "b", 0, 3)], ("a", 0, 6)),
    "preempt from target and others even if over nominal": FairCase(
        [("a1_low", "a", -1, 2), ("a2_low", "a", -1, 1), ("b1", "b", 0, 3), ("b2", "b", 0, 3)], ("a", 0, 4),
        {"a1_low": "preempted", "b1": "reclaimed"}),
    "prefer to preempt workloads that don't make the target CQ have the biggest share": FairCase(
        [("b1", "b", 0, 2), ("b2", "b", 0, 1), ("b3", "b", 0, 2), ("c1", "c", 0, 1)], ("a", 0, 3.5),
        {"b2": "reclaimed"}),
    "preempt from different cluster queues if the end result has a smaller max share": FairCase(
        [("b1", "b", 0, 2), ("b2", "b", 0, 2.5), ("c1", "c", 0, 2), ("c2", "c", 0, 2.5)], ("a", 0, 3.5),
        {"b1": "reclaimed", "c1": "reclaimed"}),
    "scenario above does not flap": FairCase(
        [("a1", "a", 0, 3.5), ("b2", "b", 0, 2.5), ("c2", "c", 0, 2.5)], ("b", 0, 2)),
    "cannot preempt if it would make the candidate CQ go under nominal after preempting one element": FairCase(
        [("b1", "b", 0, 3), ("b2", "b", 0, 3), ("c1", "c", 0, 3)], ("a", 0, 4)),
    "workloads under priority threshold not capriciously preempted": FairCase(
        _units("a", 3) + _units("b", 3) + [(f"preemptible{i}", "preemptible", -3, 1.0) for i in range(1, 4)],
        ("a", 0, 2)),
    "preempt lower priority first, even if big": FairCase(
        [("a1", "a", 0, 3), ("b_low", "b", 0, 5), ("b_high", "b", 1, 1)], ("a", 0, 1), {"b_low": "reclaimed"},
        strategies=[S2B]),
    "preempt workload that doesn't transfer the imbalance, even if high priority": FairCase(
        [("a1", "a", 0, 3), ("b_low", "b", 0, 5), ("b_high", "b", 1, 1)], ("a", 0, 1), {"b_high": "reclaimed"},
        strategies=[S2A]),
    "CQ with higher weight can preempt more": FairCase(
        _units("a", 3) + _units("b", 6), ("a", 0, 2), {"b1": "reclaimed", "b2": "reclaimed"},
        queues={"a": cq("all", 3, within=LOWER, reclaim=ANY) | {"weight": 2.0},
                "b": cq("all", 3, within=LOWER, reclaim=ANY), "c": cq("all", 3, within=LOWER, reclaim=ANY)}),
}
"""Cases of preemption_fair_test.go TestFairPreemptions on one cohort and the `default` flavor
(its CPUs as millicores of `cpu` quota). Left out: the ones with a fair-sharing weight of 0
(optsched's weights are positive) and the hierarchical ones."""


def _fair_round(case: FairCase) -> tuple[Cluster, Queue]:
    running = [_running(_job(name, tenant, priority, cpus)) for name, tenant, priority, cpus in case.admitted]
    cluster = _cluster(case.queues or FAIR_CLUSTER_QUEUES, running)
    fair = {} if case.strategies is None else {"preemption_strategies": case.strategies}
    cluster = Cluster.model_validate({**cluster.model_dump(), "fair_sharing": fair})
    tenant, priority, cpus = case.incoming
    return cluster, Queue.model_validate({"now": 100.0, "jobs": [_job("in", tenant, priority, cpus)]})


@pytest.mark.parametrize("name", list(FAIR_CASES))
def test_kueue_fair_preemption_case(name: str) -> None:
    """preemption_fair_test.go TestFairPreemptions: with fair sharing, the `kueue` baseline takes
    Kueue's targets (and admits the incoming workload exactly when Kueue finds targets)."""
    case = FAIR_CASES[name]
    cluster, queue = _fair_round(case)
    p = compile_problem(cluster, queue)
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    assert {ev.job: ev.reason for ev in plan.evictions} == case.preempted
    assert any(pl.job == "in" for pl in plan.placements) == bool(case.preempted)


@pytest.mark.parametrize("name", list(FAIR_CASES))
def test_cpsat_on_kueue_fair_preemption_case(name: str) -> None:
    """The same rounds with `cpsat`: valid, at least Kueue's admitted value, no more lost work."""
    cluster, queue = _fair_round(FAIR_CASES[name])
    cpsat_no_worse_than_kueue(compile_problem(cluster, queue))


@st.composite
def fair_rounds(draw: st.DrawFn) -> tuple[Cluster, Queue]:
    """Random rounds in the shape of TestFairPreemptions: 2-4 ClusterQueues of one cohort with
    weights, running workloads of random size and priority that fill the cohort's quota unevenly,
    and 1-3 incoming workloads; random strategies."""
    n = draw(st.integers(2, 4))
    names = "abcd"[:n]
    queues = {t: cq("all", draw(st.integers(0, 4)), within=draw(st.sampled_from([NEVER, LOWER])),
                    reclaim=draw(st.sampled_from([LOWER, ANY])), bwc=draw(st.booleans()))
              | {"weight": draw(st.sampled_from([0.5, 1.0, 2.0]))} for t in names}
    capacity = sum(spec["quotas"]["cpu"]["nominal"] for spec in queues.values()) / CPU
    running, used = [], 0.0
    for i in range(draw(st.integers(1, 8))):
        cpus = draw(st.sampled_from([0.5, 1.0, 2.0, 3.0]))
        if used + cpus > capacity:
            break
        used += cpus
        running.append(_running(_job(f"r{i}", draw(st.sampled_from(names)), draw(st.integers(-1, 1)), cpus),
                                 reserved=float(draw(st.integers(0, 5)))))
    cluster = _cluster(queues, running)
    fair = {"preemption_strategies": draw(st.sampled_from([[S2A, S2B], [S2A], [S2B]]))}
    cluster = Cluster.model_validate({**cluster.model_dump(), "fair_sharing": fair})
    jobs = [_job(f"in{i}", draw(st.sampled_from(names)), draw(st.integers(-1, 2)),
                 draw(st.sampled_from([0.5, 1.0, 2.0, 4.0])), float(i)) for i in range(draw(st.integers(1, 3)))]
    return cluster, Queue.model_validate({"now": 100.0, "jobs": jobs})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=fair_rounds())
def test_fair_sharing_rounds_are_valid_and_cpsat_no_worse(data: tuple[Cluster, Queue]) -> None:
    """Under fair sharing, the `kueue` baseline's plans pass the validator (its fair-sharing
    reclaims included), and `cpsat` returns a valid plan no worse than it."""
    cluster, queue = data
    p = compile_problem(cluster, queue)
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    cpsat_no_worse_than_kueue(p, plan)


def test_validator_refuses_a_reclaim_no_fair_sharing_strategy_allows() -> None:
    """Rule 6 under fair sharing, on "can't preempt when it would switch the imbalance" (a uses its
    3 CPUs, b 5 of its 3: b borrows 2; a asks 2 more): a plan that reclaims b1 (1 CPU) for a's job
    breaks it (a's share with its job, 2 of the cohort's 9 CPUs borrowed, is above b's after the
    eviction, 1, and not below b's before, 2). With b1 of 2 CPUs and b at 6, b's share goes from 3
    to 1: S2-b allows the reclaim (2 < 3), S2-a alone does not (2 > 1)."""
    def verdict(b_jobs: list[tuple[str, str, int, float]], strategies: list[str] | None) -> list[str]:
        case = FairCase(_units("a", 3) + b_jobs, ("a", 0, 2), strategies=strategies)
        cluster, queue = _fair_round(case)
        p = compile_problem(cluster, queue)
        plan = Plan.model_validate({
            "placements": [{"job": "in", "group": "w", "replica": 0, "node": "n1"}],
            "evictions": [{"job": "b1", "reason": "reclaimed", "by": "in", "lost_gpu_hours": 0.0}]})
        return [v.message for v in check_problem(p, plan) if v.rule == "preemption"]

    broken = verdict(_units("b", 5), None)
    assert len(broken) == 1 and broken[0].startswith("fair sharing:")
    big_b1 = [("b1", "b", 0, 2.0), *_units("b", 4, start=2)]
    assert verdict(big_b1, None) == []
    assert verdict(big_b1, [S2B]) == []
    assert verdict(big_b1, [S2A])[0].startswith("fair sharing:")


@pytest.mark.parametrize("strategies", [[S2B, S2A], [S2A, S2A], [], ["less_than_share"]])
def test_fair_sharing_strategies_are_checked_at_the_door(strategies: list[str]) -> None:
    """Kueue's validation of `preemptionStrategies`: one strategy, or S2-a then S2-b; anything
    else is an InputError naming the field."""
    cluster, _ = _fair_round(FairCase([], ("a", 0, 1)))
    doc = cluster.model_dump(mode="json") | {"fair_sharing": {"preemption_strategies": strategies}}
    with pytest.raises(InputError) as exc:
        load_cluster(json.dumps(doc))
    assert any(i.path.startswith("fair_sharing") for i in exc.value.problems)


# ---------------------------------------------------------------------------- admission fair sharing
@dataclass(frozen=True)
class AfsCase:
    """A case of scheduler_afs_test.go TestScheduleForAFS: ClusterQueue `cq1` (8 CPUs, no cohort,
    `UsageBasedAdmissionFairSharing`), LocalQueues lq-a, lq-b, lq-c (weight 1) and lq-zero (weight
    0) with their initial usage (CPUs), pending workloads (name, LocalQueue, CPUs, created at s),
    and the ones Kueue admits (QuotaReserved true); `afs`: the feature on."""

    usage: dict[str, float]
    pending: list[tuple[str, str, float, float]]
    admitted: set[str]
    afs: bool = True


AFS_CASES: dict[str, AfsCase] = {
    "admits workload from less active localqueue": AfsCase(
        {"lq-a": 8, "lq-b": 2}, [("wl-a1", "lq-a", 8, 0), ("wl-b1", "lq-b", 8, 1)], {"wl-b1"}),
    "does not prioritize a zero-weight localqueue": AfsCase(
        {"lq-a": 0, "lq-zero": 0}, [("wl-z1", "lq-zero", 8, 0), ("wl-a1", "lq-a", 8, 1)], {"wl-a1"}),
    "without AFS: classic admission decision ignores queue usage": AfsCase(
        {"lq-a": 8, "lq-b": 2}, [("wl-a1", "lq-a", 8, 0), ("wl-b1", "lq-b", 8, 1)], {"wl-a1"}, afs=False),
    "admits one workload from each localqueue when quota is limited": AfsCase(
        {"lq-a": 4, "lq-b": 4},
        [("wl-a1", "lq-a", 4, 0), ("wl-a2", "lq-a", 4, 1), ("wl-b1", "lq-b", 4, 2), ("wl-b2", "lq-b", 4, 3)],
        {"wl-a1", "wl-b1"}),
    "schedules normally when queues have equal usage": AfsCase(
        {"lq-a": 2, "lq-b": 2, "lq-c": 2}, [("wl-a1", "lq-a", 4, 0), ("wl-b1", "lq-b", 3, 0), ("wl-c1", "lq-c", 1, 0)],
        {"wl-a1", "wl-b1", "wl-c1"}),
}
"""TestScheduleForAFS's cases on one scheduling cycle (usage half-life 10 s, sampling 1 s: an
admitted workload adds 6.7% of its requests to its LocalQueue's usage). Left out: deleted
LocalQueues and the uninitialised usage cache (API-server events, no counterpart in a round)."""


def _afs_round(case: AfsCase) -> tuple[Cluster, Queue]:
    cluster = _cluster({"cq1": cq(None, 8) | {"admission_fair_sharing": True}}, [])
    weights = {"lq-a": 1.0, "lq-b": 1.0, "lq-c": 1.0, "lq-zero": 0.0}
    doc = cluster.model_dump() | {
        "local_queues": [{"name": name, "tenant": "cq1", "weight": weight,
                          "consumed": {"cpu": case.usage[name] * CPU} if name in case.usage else {}}
                         for name, weight in weights.items()]}
    if case.afs:
        doc["admission_fair_sharing"] = {"usage_half_life_s": 10.0, "usage_sampling_interval_s": 1.0}
    jobs = [_job(name, "cq1", 0, cpus, created) | {"local_queue": lq} for name, lq, cpus, created in case.pending]
    return Cluster.model_validate(doc), Queue.model_validate({"now": 100.0, "jobs": jobs})


@pytest.mark.parametrize("name", list(AFS_CASES))
def test_kueue_admission_fair_sharing_case(name: str) -> None:
    """scheduler_afs_test.go TestScheduleForAFS: the `kueue` baseline admits what Kueue admits."""
    case = AFS_CASES[name]
    cluster, queue = _afs_round(case)
    p = compile_problem(cluster, queue)
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    assert {pl.job for pl in plan.placements} == case.admitted


def test_local_queues_are_checked_at_the_door() -> None:
    """A job's LocalQueue must exist and feed its tenant; a LocalQueue's tenant must exist."""
    cluster, queue = _afs_round(AFS_CASES["admits workload from less active localqueue"])
    doc = cluster.model_dump(mode="json")
    doc["local_queues"].append({"name": "lq-x", "tenant": "nobody"})
    with pytest.raises(InputError) as exc:
        load_cluster(json.dumps(doc))
    assert ("local_queues[4].tenant", "unknown_reference") in {(i.path, i.rule) for i in exc.value.problems}
    jobs = [j.model_dump(mode="json") for j in queue.jobs]
    jobs[0]["local_queue"] = "lq-nowhere"
    with pytest.raises(InputError) as exc:
        load_queue(json.dumps({"now": 100.0, "jobs": jobs}), cluster)
    assert ("jobs[0].local_queue", "unknown_reference") in {(i.path, i.rule) for i in exc.value.problems}


FAIR_TREE_CASES: dict[str, tuple[dict[str, dict[str, Any]], list[dict[str, Any]], FairCase]] = {
    "hierarchical preemption": (
        {"a": cq("LEFT", 1, reclaim=ANY) | {"weight": 2.0}, "b": cq("LEFT", 1), "c": cq("ROOT", 1), "d": cq("RIGHT", 1),
         "e": cq("RIGHT", 1) | {"weight": 0.99}},
        [{"name": "ROOT", "quotas": {"cpu": {"nominal": 5 * CPU}}},
         {"name": "LEFT", "parent": "ROOT", "weight": 2.0, "quotas": {"cpu": {"nominal": 5 * CPU}}},
         {"name": "RIGHT", "parent": "ROOT", "quotas": {"cpu": {"nominal": 5 * CPU}}}],
        FairCase([(f"{t}{i}", t, i, 1.0) for t in "bcde" for i in range(1, 6)], ("a", 0, 5),
                 {"b1": "reclaimed", "b2": "reclaimed", "c1": "reclaimed", "c2": "reclaimed", "e1": "reclaimed"})),
    "borrowing cq in non-borrowing cohort is protected": (
        {"a": cq("ROOT", 5, within=LOWER, reclaim=ANY) | {"weight": 10.0}, "b": cq("RIGHT", 0) | {"weight": 0.1}},
        [{"name": "ROOT"}, {"name": "RIGHT", "parent": "ROOT", "weight": 0.1, "quotas": {"cpu": {"nominal": 1 * CPU}}}],
        FairCase([("a1", "a", -1, 1), ("a2", "a", -1, 1), ("a3", "a", -1, 1), ("b1", "b", -1, 1)], ("a", 0, 5),
                 {"a1": "preempted", "a2": "preempted", "a3": "preempted"})),
    "forced to preempt within clusterqueue because borrowing workload too important": (
        {"a": cq("ROOT", 5, within=LOWER, reclaim=LOWER) | {"weight": 10.0}, "b": cq("RIGHT", 0) | {"weight": 0.1}},
        [{"name": "ROOT"}, {"name": "RIGHT", "parent": "ROOT", "weight": 0.1, "quotas": {"cpu": {"nominal": 3 * CPU}}}],
        FairCase([("a1", "a", -1, 1), ("a2", "a", -1, 1), ("a3", "a", -1, 1), ("b1", "b", 100, 4)], ("a", 0, 4),
                 {"a1": "preempted", "a2": "preempted", "a3": "preempted"})),
    "deep preemption": (
        {"a": cq("AAA", 0, reclaim=ANY), "b": cq("BBB", 0)},
        [{"name": "ROOT"}, {"name": "A", "parent": "ROOT", "weight": 1.01}, {"name": "AA", "parent": "A"},
         {"name": "AAA", "parent": "AA"}, {"name": "B", "parent": "ROOT", "weight": 0.99}, {"name": "BB", "parent": "B"},
         {"name": "BBB", "parent": "BB"}, {"name": "C", "parent": "ROOT"}, {"name": "CC", "parent": "C"},
         {"name": "CCC", "parent": "CC"}, {"name": "CCCC", "parent": "CCC", "quotas": {"cpu": {"nominal": 1 * CPU}}}],
        FairCase([("b1", "b", 0, 1)], ("a", 0, 1), {"b1": "reclaimed"})),
}
"""TestFairPreemptions' cases on cohort trees (Cohort objects with weights): the target ordering
walks the tree by share and compares the two tenants' almost least common ancestors."""


@pytest.mark.parametrize("name", list(FAIR_TREE_CASES))
def test_kueue_fair_preemption_tree_case(name: str) -> None:
    """Kueue's targets on a cohort tree with fair sharing; cpsat is valid and no worse."""
    queues, cohorts, case = FAIR_TREE_CASES[name]
    cluster, queue = _fair_round(FairCase(case.admitted, case.incoming, queues=queues))
    cluster = Cluster.model_validate({**cluster.model_dump(), "cohorts": cohorts})
    p = compile_problem(cluster, queue)
    plan = solve_kueue(p)
    assert check_problem(p, plan) == []
    assert {ev.job: ev.reason for ev in plan.evictions} == case.preempted
    assert any(pl.job == "in" for pl in plan.placements) == bool(case.preempted)
    cpsat_no_worse_than_kueue(p, plan)


@pytest.mark.parametrize(("name", "reclaims"), [
    ("reclaim borrowable quota from user using the most", 1),
    ("can preempt a combination of same CQ and highest user", 1),
    ("preempt from different cluster queues if the end result has a smaller max share", 2),
    ("can't preempt when it would switch the imbalance", 0),
])
def test_cpsat_reclaims_under_fair_sharing_on_its_own(name: str, reclaims: int) -> None:
    """The model's fair-sharing reclaims (P2f), from a start plan without evictions (best-fit as
    `hint`): cpsat reclaims as many jobs as Kueue does where a strategy allows it (its victims may
    differ at equal cost), none where no strategy does, and the validator accepts the plan."""
    cluster, queue = _fair_round(FAIR_CASES[name])
    p = compile_problem(cluster, queue)
    plan = solve_cpsat(p, time_limit=5.0, hint=solve_greedy(p, "best-fit"))
    assert check_problem(p, plan) == []
    assert sum(ev.reason == "reclaimed" for ev in plan.evictions) == reclaims
    assert any(pl.job == "in" for pl in plan.placements) == bool(reclaims)
