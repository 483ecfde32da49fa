"""Hierarchical cohorts (issue 22 item 8, the tree part): Kueue's Cohort objects with a parent and
quotas of their own (pkg/cache/scheduler/resource_node.go), in the validator and at the door.
The solvers' side is in tests/test_kueue_ported.py (Kueue's cases) and the hypothesis rounds of
tests/test_tenancy.py (a third of the rounds with a cohort make it a tree)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from optsched import InputError
from optsched.check import check_problem
from optsched.concerns.tenancy import quota
from optsched.model import Cluster, Queue
from optsched.problem import compile_problem

CPU = 1000


def _cluster(tenants: list[dict[str, Any]], cohorts: list[dict[str, Any]] | None = None) -> Cluster:
    return Cluster.model_validate({
        "topology": {"levels": ["zone"], "domains": [{"id": "z0", "level": "zone"}]},
        "nodes": [{"id": "n0", "domain": "z0", "capacity": {"cpu": 64 * CPU, "memory": 1 << 20}}],
        "tenants": tenants, "cohorts": cohorts or []})


LIMIT = st.one_of(st.none(), st.integers(0, 8))


@settings(max_examples=300, deadline=None)
@given(spec=st.lists(st.tuples(st.integers(0, 8), LIMIT, LIMIT, st.integers(0, 16)), min_size=2, max_size=4))
def test_a_one_level_tree_is_the_flat_cohort(spec: list[tuple[int, int | None, int | None, int]]) -> None:
    """The tree rule (Kueue's subtree quotas) on a cohort without parent or quota of its own is
    the flat rule (borrowed <= lent, within borrowing limits): for any nominal, borrowing and
    lending limits and usage, the two problems agree on whether quota breaks."""
    tenants = [{"name": f"t{i}", "cohort": "org", "quotas": {"cpu": {
        "nominal": n, **({} if b is None else {"borrowing_limit": b}), **({} if lend is None else {"lending_limit": lend})}}}
        for i, (n, b, lend, _) in enumerate(spec)]
    flat = compile_problem(_cluster(tenants), Queue())
    tree = compile_problem(_cluster(tenants, [{"name": "org"}]), Queue())
    assert not flat.hierarchical and tree.hierarchical
    used = np.array([[float(u)] for *_, u in spec])
    assert bool(quota.problems(flat, used)) == bool(quota.problems(tree, used))


@settings(max_examples=300, deadline=None)
@given(spec=st.lists(st.tuples(st.integers(0, 8), LIMIT, LIMIT, st.integers(0, 16), st.sampled_from([None, "org", "child"])),
                     min_size=1, max_size=4),
       tree=st.booleans(), org_quota=LIMIT, child_quota=LIMIT, child_borrow=LIMIT)
def test_one_tenants_quota_rules_agree_with_the_problems_it_is_touched_in(
        spec: list[tuple[int, int | None, int | None, int, str | None]], tree: bool, org_quota: int | None,
        child_quota: int | None, child_borrow: int | None) -> None:
    """`ledger.quota_broken` (one tenant's rules: nominal, borrowing limit, its cohort or the cohorts
    on its path to the root) says a rule breaks exactly when `quota.problems` with that tenant
    touched reports one: the greedy engines' quota check (`quota.job_problem`) asks the first and
    builds the second's message only then. Solo tenants, flat cohorts and two-level trees."""
    from optsched.ledger import quota_broken

    def limits(n: int, b: int | None, lend: int | None) -> dict[str, Any]:
        return {"nominal": n, **({} if b is None else {"borrowing_limit": b}),
                **({} if lend is None else {"lending_limit": lend})}

    tenants = [{"name": f"t{i}", "quotas": {"cpu": limits(n, b, lend)},
                **({} if group is None else {"cohort": group if tree else "org"})}
               for i, (n, b, lend, _, group) in enumerate(spec)]
    cohorts: list[dict[str, Any]] = []
    if tree:
        cohorts = [{"name": "org", **({} if org_quota is None else {"quotas": {"cpu": {"nominal": org_quota}}})},
                   {"name": "child", "parent": "org", **({} if child_quota is None else {
                       "quotas": {"cpu": limits(child_quota, child_borrow, None)}})}]
    p = compile_problem(_cluster(tenants, cohorts), Queue())
    used = np.array([[float(u)] for *_, u, _ in spec])
    for t in range(len(spec)):
        touched = np.zeros_like(used, dtype=bool)
        touched[t] = True
        assert bool(quota_broken(p, used, t).any()) == bool(quota.problems(p, used, touched))


@settings(max_examples=200, deadline=None)
@example(spec=[(2, 1, None, True), (3, None, None, True)], usage=[3 + 1e-10] + [0.0] * 9)  # borrowing limit + 1e-10
@given(spec=st.lists(st.tuples(st.integers(0, 8), LIMIT, LIMIT, st.booleans()), min_size=1, max_size=5),
       usage=st.lists(st.one_of(st.floats(0, 20, allow_nan=False),  # and right at a limit, within its tolerance
                                st.builds(lambda k, d: k + d, st.integers(0, 20), st.sampled_from([1e-10, -1e-10]))),
                      min_size=10, max_size=10))
def test_quota_rules_of_a_flat_cohort_in_plain_python_equal_the_array_form(
        spec: list[tuple[int, int | None, int | None, bool]], usage: list[float]) -> None:
    """`ledger.quota_broken` judges a flat cohort on a few flavors in plain Python (numpy's
    per-call cost dominated there), as does `quota_broken_rows` one flavor at a time for any
    tenant `plain_quota` admits (in a cohort or alone): flavor by flavor the same answer as the
    array form, on fractional usage where rounding could differ (the same operations in the
    same order)."""
    from optsched import ledger

    def limits(n: int, b: int | None, lend: int | None) -> dict[str, Any]:
        return {"nominal": n, **({} if b is None else {"borrowing_limit": b}),
                **({} if lend is None else {"lending_limit": lend})}

    tenants = [{"name": f"t{i}", "quotas": {"cpu": limits(n, b, lend), "memory": limits(2 * n, lend, b)},
                **({"cohort": "org"} if member else {})} for i, (n, b, lend, member) in enumerate(spec)]
    p = compile_problem(_cluster(tenants, []), Queue())
    assert len(p.flavors) == 2
    used = np.array(usage[:2 * len(spec)]).reshape(len(spec), 2)
    for t in range(len(spec)):
        python = ledger.quota_broken(p, used, t)
        saved = ledger.SMALL_QUOTA
        try:
            ledger.SMALL_QUOTA = -1  # the array form
            arrays = ledger.quota_broken(p, used, t)
        finally:
            ledger.SMALL_QUOTA = saved
        assert python.tolist() == arrays.tolist()
        if ledger.plain_quota(p, t):  # the rows form a caller converts once, judged flavor by flavor
            assert [ledger.quota_broken_rows(p, used.tolist(), t, [f])[0] for f in range(2)] == arrays.tolist()


def test_a_preemptor_above_nominal_that_its_root_quota_holds_may_evict_in_the_models() -> None:
    """Found by tests/test_milp.py's contended rounds: t1 (nominal 2 GPUs, in cohort org-b under
    org, whose own quota adds 4) runs a 4-GPU job; a higher-priority 4-GPU job of t1 preempts it.
    Rule 5 lets it (4 above nominal, but 4 on top of the round's starting 4 is within the tree's 8),
    so Kueue's plan is valid; the models' P2b used to cap the preemptor at its nominal 2 whenever
    its largest usage (6) would break the rule, so they could not represent Kueue's plan (hint
    completion INFEASIBLE, "a model bug"). The cap is now the largest usage the rule allows."""
    from optsched.solvers.cpsat import solve_cpsat
    from optsched.solvers.kueue import solve_kueue
    from optsched.solvers.milp import solve_milp

    job = {"tenant": "t1", "submitted_at": 0, "topology": {"level": "zone", "mode": "required"}, "preemptible": True,
           "groups": [{"name": "g0", "replicas": {"min": 1, "max": 3}, "request": {"gpu": 2}}]}
    cluster = Cluster.model_validate({
        "topology": {"levels": ["zone"], "domains": [{"id": "z0", "level": "zone"}]},
        "device_models": {"GPU-A": {"memory_gib": 80}},
        "nodes": [{"id": "n1", "domain": "z0", "capacity": {"cpu": 64 * CPU, "memory": 1 << 20},
                   "devices": {"model": "GPU-A", "count": 4}, "interconnect": [[0, 1, 2, 3]]}],
        "tenants": [{"name": "t0", "cohort": "org-a", "quotas": {"GPU-A": {"nominal": 0}}},
                    {"name": "t1", "cohort": "org-b", "quotas": {"GPU-A": {"nominal": 2}},
                     "preemption": {"within_tenant": "lower_priority", "reclaim_within_cohort": "never"}}],
        "cohorts": [{"name": "org", "quotas": {"GPU-A": {"nominal": 4}}},
                    {"name": "org-a", "parent": "org", "quotas": {"GPU-A": {"nominal": 2}}},
                    {"name": "org-b", "parent": "org"}],
        "running": [{"job": {"id": "old", "priority": 0, **job}, "started_at": 0, "placements": [
            {"group": "g0", "replica": 0, "node": "n1", "devices": [0, 1]},
            {"group": "g0", "replica": 1, "node": "n1", "devices": [2, 3]}]}]})
    queue = Queue.model_validate({"now": 2000, "jobs": [{"id": "new", "priority": 1, **job}]})
    p = compile_problem(cluster, queue)
    kueue = solve_kueue(p)
    assert [(e.job, e.reason, e.by) for e in kueue.evictions] == [("old", "preempted", "new")]
    assert sum(pl.job == "new" for pl in kueue.placements) == 2
    for plan in (solve_milp(p, time_limit=5.0, verify=True), solve_cpsat(p, time_limit=5.0)):
        assert check_problem(p, plan) == []
        assert "bug" not in str(plan.solver.reason or ""), plan.solver
        assert sum(pl.job == "new" for pl in plan.placements) == 2


def test_a_child_cohort_borrows_within_its_limit() -> None:
    """`child` (team-a, nominal 4) may borrow 2 from the root's own quota of 6: team-a at 6 is
    legal, at 7 the child cohort is over its subtree quota plus its borrowing limit (4 + 2)."""
    tenants = [{"name": "team-a", "cohort": "child", "quotas": {"cpu": {"nominal": 4}}}]
    cohorts = [{"name": "root", "quotas": {"cpu": {"nominal": 6}}},
               {"name": "child", "parent": "root", "quotas": {"cpu": {"nominal": 0, "borrowing_limit": 2}}}]
    p = compile_problem(_cluster(tenants, cohorts), Queue())
    assert quota.problems(p, np.array([[6.0]])) == []
    broken = quota.problems(p, np.array([[7.0]]))
    assert [m for _, m, _ in broken] == ["cohort child uses 7 cpu > its subtree's quota plus its borrowing limit 6"]
    root_only = compile_problem(_cluster(tenants, [cohorts[0], {"name": "child", "parent": "root"}]), Queue())
    assert quota.problems(root_only, np.array([[10.0]])) == []  # no limit on the child: the root's 4 + 6
    assert [m for _, m, _ in quota.problems(root_only, np.array([[11.0]]))] == [
        "cohort root uses 11 cpu > its subtree's quota 10"]


@pytest.mark.parametrize(("cohorts", "path", "rule"), [
    ([{"name": "child", "parent": "nowhere"}], "cohorts[0].parent", "unknown_reference"),
    ([{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}], "cohorts[0].parent", "cycle"),
    ([{"name": "a"}, {"name": "a"}], "cohorts", "duplicate_id"),
    ([{"name": "a", "quotas": {"gpus": {"nominal": 1}}}], "cohorts[0].quotas.gpus", "unknown_reference"),
])
def test_cohort_objects_are_checked_at_the_door(cohorts: list[dict[str, Any]], path: str, rule: str) -> None:
    tenants = [{"name": "t", "cohort": "a", "quotas": {"cpu": {"nominal": 1}}}]
    with pytest.raises(InputError) as exc:
        compile_problem(_cluster(tenants, cohorts), Queue())
    assert (path, rule) in {(i.path, i.rule) for i in exc.value.problems}


FLAVOR_NAMES = st.sampled_from(["a", "b", "spot", "x/y", "", "root"])
KEYS = st.sampled_from(["cpu", "memory", "H100", "spot/gpu", "a/cpu", "b/gpu", "spot/", "/gpu", "gpu", "a/H100"])
QUOTA = st.fixed_dictionaries({"nominal": st.sampled_from([0, 1, 4, 8, 1000])}, optional={
    "borrowing_limit": st.sampled_from([0, 2, 8]), "lending_limit": st.sampled_from([0, 1, 4])})


@settings(max_examples=60, deadline=None)
@given(flavors=st.lists(st.fixed_dictionaries({"name": FLAVOR_NAMES}, optional={"node_labels": st.dictionaries(
           st.sampled_from(["k", "half"]), st.sampled_from(["a", "b"]), max_size=2)}), max_size=3),
       cohorts=st.lists(st.fixed_dictionaries({"name": FLAVOR_NAMES}, optional={
           "parent": FLAVOR_NAMES, "quotas": st.dictionaries(KEYS, QUOTA, max_size=2)}), max_size=3),
       tenants=st.lists(st.fixed_dictionaries({"name": st.sampled_from(["t0", "t1", "t2"])}, optional={
           "cohort": FLAVOR_NAMES, "quotas": st.dictionaries(KEYS, QUOTA, max_size=3)}), min_size=1, max_size=3),
       gpus=st.sampled_from([0, 1, 8]))
def test_random_flavors_and_cohorts_are_refused_cleanly_or_scheduled_validly(
        flavors: list[dict[str, Any]], cohorts: list[dict[str, Any]], tenants: list[dict[str, Any]], gpus: int) -> None:
    """Resource flavors, cohort trees and quota keys drawn at random (unknown names, `/` in names,
    overlaps, cycles): an InputError at the door, or a round whose `kueue` plan passes the check
    (cpsat's side: the hypothesis rounds of tests/test_tenancy.py)."""
    from optsched.check import check_problem
    from optsched.solvers.kueue import solve_kueue

    doc = {"topology": {"levels": ["zone"], "domains": [{"id": "z0", "level": "zone"}]},
           "device_models": {"H100": {}},
           "nodes": [{"id": f"n{i}", "domain": "z0", "labels": {"half": "a" if i % 2 else "b"},
                      "capacity": {"cpu": 16 * CPU, "memory": 65536}, "devices": {"model": "H100", "count": 8}}
                     for i in range(3)],
           "resource_flavors": flavors, "cohorts": cohorts, "tenants": tenants}
    names = [t["name"] for t in tenants]
    jobs = [{"id": f"j{i}", "tenant": names[i % len(names)],
             "groups": [{"name": "w", "request": {"cpu": 2 * CPU, "gpu": gpus}}]} for i in range(5)]
    try:
        p = compile_problem(Cluster.model_validate(doc), Queue.model_validate({"jobs": jobs}))
    except (InputError, ValidationError):
        return
    assert check_problem(p, solve_kueue(p)) == []
