"""The `kueue` baseline's trial prechecks change its speed, never its plans.

A preemption trial (`KueueEngine._fits_without`) is skipped when the quota rules the placed job
would be refused by already rule it out (`_quota_rules_out`), and the search for the shortest
prefix of candidates starts past the prefixes they refuse (`_first_quota_prefix`). Each must
refuse only trials the full placement would refuse, the legality check of a step judges
again only the evictions the step can make illegal (`_rejudged`), and the priority diagnostic's
trial moves on the nodes only the victims that sit where the job may go (`_fits_released`), so
the plan with these switched off is the same plan. Trials run on a copy of the ledger with
cloned cursors, so a trial leaves the round's ledger and change log as they were.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from optsched.check import check_problem
from optsched.model import Cluster, Plan, Queue
from optsched.problem import JobSpec, Problem, compile_problem
from optsched.solvers import kueue, trials
from tests.strategies import contended_rounds


def _without_prechecks(p: Problem, monkeypatch: pytest.MonkeyPatch) -> Plan:
    with monkeypatch.context() as m:
        m.setattr(kueue.KueueEngine, "_quota_rules_out", lambda self, job, victims, allow_borrow: False)
        m.setattr(kueue.KueueEngine, "_first_quota_prefix", lambda self, job, cands, allow_borrow: 1)
        m.setattr(kueue.KueueEngine, "_rejudged", lambda self, evs, new: evs)
        m.setattr(kueue.KueueEngine, "_fits_released", _released_everywhere)
        return kueue.solve_kueue(p)


def _released_everywhere(self: kueue.KueueEngine, job: JobSpec, victims: list[JobSpec]) -> bool:
    """`_fits_released` with every victim out of the ledger where it sits (a full trial)."""
    fits = self._fits_without(job, victims, allow_borrow=True, keep=False)
    self._restore()
    return fits is not None


def _decisions(plan: Plan) -> dict[str, Any]:
    return {"placements": [pl.model_dump() for pl in plan.placements],
            "deferred": [d.model_dump() for d in plan.deferred],
            "evictions": [e.model_dump() for e in plan.evictions]}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=contended_rounds())
def test_prechecks_leave_contended_plans_unchanged(data: tuple[Cluster, Queue],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    c, q = data
    p = compile_problem(c, q)
    plan = kueue.solve_kueue(p)
    assert check_problem(p, plan) == []
    assert _decisions(plan) == _decisions(_without_prechecks(compile_problem(c, q), monkeypatch))


def test_quota_precheck_refuses_trials_and_leaves_the_plan_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a mixed-cloud-10k round where a tenant reclaims within nominal and may not borrow
    afterwards, the quota precheck refuses trials (it is exercised), and the plan is the one
    the full trials give (a precheck that refused every trial of such a tenant, or counted one
    GPU too many, changes this round's plan)."""
    from optsched.bundled import DATA_DIR
    from optsched.generate import generate_queue
    from optsched.model import load_cluster

    c = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    q = generate_queue(c, "mixed", jobs=100, load=2.0, seed=3)
    refused: list[str] = []
    original = kueue.KueueEngine._quota_rules_out

    def counting(self: kueue.KueueEngine, job: JobSpec, victims: list[JobSpec], allow_borrow: bool) -> bool:
        out = original(self, job, victims, allow_borrow)
        if out:
            refused.append(job.id)
        return out

    with monkeypatch.context() as m:
        m.setattr(kueue.KueueEngine, "_quota_rules_out", counting)
        p = compile_problem(c, q)
        plan = kueue.solve_kueue(p)
    assert refused
    assert check_problem(p, plan) == []
    assert _decisions(plan) == _decisions(_without_prechecks(compile_problem(c, q), monkeypatch))


def test_trials_leave_the_rounds_ledger_and_cursors_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial placements run on a copy of the ledger with cloned cursors (`TrialState`): after every
    trial that is not kept, the round's ledger is bitwise what it was and its change log has not
    grown, on a mixed-cloud-10k round with preemption searches and priority diagnostics."""
    import numpy as np

    from optsched.bundled import DATA_DIR
    from optsched.generate import generate_queue
    from optsched.model import load_cluster

    c = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    q = generate_queue(c, "mixed", jobs=150, load=2.0, seed=1)
    names = ("used", "score_pad", "dev_used", "uplink_load", "quota_used", "free_whole", "max_group_free",
             "max_share_free")
    checked: list[str] = []

    def guarded(method: Any) -> Any:
        def run(self: kueue.KueueEngine, job: JobSpec, victims: list[JobSpec], *args: Any, **kw: Any) -> Any:
            keep = kw.get("keep", args[-1] if args else False)
            before = [getattr(self.ledger, n).copy() for n in names]
            logged = len(self.changed)
            out = method(self, job, victims, *args, **kw)
            if not keep:
                assert all(np.array_equal(b, getattr(self.ledger, n)) for b, n in zip(before, names, strict=True))
                assert len(self.changed) == logged
                checked.append(method.__name__)
            return out
        return run

    with monkeypatch.context() as m:
        m.setattr(kueue.KueueEngine, "_fits_without", guarded(kueue.KueueEngine._fits_without))
        m.setattr(kueue.KueueEngine, "_fits_released", guarded(kueue.KueueEngine._fits_released))
        p = compile_problem(c, q)
        plan = kueue.solve_kueue(p)
    assert {"_fits_without", "_fits_released"} <= set(checked)
    assert check_problem(p, plan) == []


def test_a_kept_diagnostic_trial_is_the_fresh_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The priority diagnostic keeps its trial ledger per victim set and brings it up to date on the
    nodes the round changed (`Ledger.rebase_running`): each time it is used, it is bitwise the
    ledger a fresh copy with the victims moved would be, and the round's plan is the one fresh
    trials give (mixed-cloud-10k, where most diagnostics meet a kept set again)."""
    import numpy as np

    from optsched.bundled import DATA_DIR
    from optsched.generate import generate_queue
    from optsched.model import load_cluster

    c = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    q = generate_queue(c, "mixed", jobs=300, load=2.0, seed=0)
    names = ("used", "score_pad", "dev_used", "uplink_load", "quota_used", "free_whole", "max_group_free",
             "max_share_free")
    original = trials.KeptTrials.get
    reused: list[int] = []

    def compared(self: trials.KeptTrials, ledger: Any, log: Any, jobs: Any, near: Any) -> trials.KeptTrial:
        again = (jobs.tobytes(), near.tobytes()) in self
        kept = original(self, ledger, log, jobs, near)
        fresh = ledger.copy()
        fresh.add_running_weighted(jobs, -np.ones(len(jobs)), near)
        for n in names:
            assert np.array_equal(getattr(kept.trial.ledger, n), getattr(fresh, n)), n
        reused.append(int(again))
        return kept

    def always_fresh(self: trials.KeptTrials, ledger: Any, log: Any, jobs: Any, near: Any) -> trials.KeptTrial:
        self.clear()
        return original(self, ledger, log, jobs, near)

    with monkeypatch.context() as m:
        m.setattr(trials.KeptTrials, "get", compared)
        p = compile_problem(c, q)
        plan = kueue.solve_kueue(p)
    assert sum(reused) >= 10
    assert check_problem(p, plan) == []
    with monkeypatch.context() as m:
        m.setattr(trials.KeptTrials, "get", always_fresh)
        fresh_plan = kueue.solve_kueue(compile_problem(c, q))
    assert _decisions(plan) == _decisions(fresh_plan)


def _reclaim_round() -> tuple[Cluster, Queue]:
    """Tenant b (nominal 16 GPUs) runs x1, x2, x3 (8 GPUs each, preemptible) on the three z1 nodes:
    it borrows 8. a1 (tenant a, within its nominal 8) reclaims x1 for its node; b1 (b's own) is
    admitted on a z2 node, so b borrows again in the engine's usage; d1 (tenant d, nominal 0,
    borrow_within_cohort lower_priority) then finds x2 a valid candidate. Together the two reclaims
    break the validator's reclaim order (b's usage before the round, 24, less 8 reclaimed, is not
    above its nominal 16 for the other): only judging x1's reclaim again refuses x2's."""
    def node(i: int, zone: str) -> dict[str, Any]:
        return {"id": f"n{i}", "domain": "s", "labels": {"zone": zone}, "capacity": {"cpu": 64000, "memory": 262144},
                "devices": {"model": "G", "count": 8}}

    def job(jid: str, tenant: str, priority: int, zone: str, submitted: int = 0) -> dict[str, Any]:
        return {"id": jid, "tenant": tenant, "priority": priority, "submitted_at": submitted,
                "groups": [{"name": "w", "replicas": {"min": 1, "max": 1}, "request": {"gpu": 8, "cpu": 1000},
                            "node_selector": {"zone": zone}}]}

    policy = {"within_tenant": "lower_priority", "reclaim_within_cohort": "lower_priority",
              "borrow_within_cohort": {"policy": "lower_priority"}}
    running = [{"job": {**job(f"x{k}", "b", 10, "z1"), "preemptible": True}, "started_at": 0,
                "placements": [{"group": "w", "replica": 0, "node": f"n{k}", "devices": list(range(8))}]}
               for k in (1, 2, 3)]
    cluster = Cluster.model_validate({
        "topology": {"levels": ["spine"], "domains": [{"id": "s", "level": "spine"}]},
        "device_models": {"G": {}},
        "nodes": [node(1, "z1"), node(2, "z1"), node(3, "z1"), node(4, "z2"), node(5, "z2")],
        "tenants": [{"name": "a", "cohort": "org", "quotas": {"G": {"nominal": 8}}, "preemption": policy},
                    {"name": "b", "cohort": "org", "quotas": {"G": {"nominal": 16}}, "preemption": policy},
                    {"name": "c", "cohort": "org", "quotas": {"G": {"nominal": 16}}},
                    {"name": "d", "cohort": "org", "quotas": {"G": {"nominal": 0}}, "preemption": policy}],
        "running": running})
    queue = Queue.model_validate({"now": 100, "jobs": [job("a1", "a", 100, "z1", 1), job("d1", "d", 150, "z1", 2),
                                                       job("b1", "b", 200, "z2", 3)]})
    return cluster, queue


def test_a_reclaim_that_makes_an_earlier_one_illegal_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_rejudged` judges the earlier reclaims of the tenant a step reclaims from again: here the
    second reclaim is refused and the plan is valid; judging the step's own eviction alone admits
    d1 and the plan breaks the reclaim order (the case the precheck exists for)."""
    c, q = _reclaim_round()
    p = compile_problem(c, q)
    plan = kueue.solve_kueue(p)
    assert check_problem(p, plan) == []
    assert [(e.job, e.by) for e in plan.evictions] == [("x1", "a1")]
    assert {x.job for x in plan.placements} == {"a1", "b1"}
    assert [d.job for d in plan.deferred] == ["d1"]
    with monkeypatch.context() as m:
        m.setattr(kueue.KueueEngine, "_rejudged", lambda self, evs, new: evs[len(evs) - new:])
        blind = kueue.solve_kueue(compile_problem(c, q))
    assert [(e.job, e.by) for e in blind.evictions] == [("x1", "a1"), ("x2", "d1")]
    assert any("does not borrow" in str(v) for v in check_problem(p, blind))
