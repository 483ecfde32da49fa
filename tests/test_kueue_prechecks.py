"""The `kueue` baseline's trial prechecks change its speed, never its plans.

A preemption trial (`KueueEngine._fits_without`) is skipped when the quota rules the placed job
would be refused by already rule it out (`_quota_rules_out`), and the search for the shortest
prefix of candidates starts past the prefixes they refuse (`_first_quota_prefix`). Each must
refuse only trials the full placement would refuse, the legality check of a step judges
again only the evictions the step can make illegal (`evictions.EvictionBook`: the reclaims of the
tenants it reclaims from, the evictions its room clause does not serve, the reclaiming flavors
kept as they grow), and the priority diagnostic's
trial moves on the nodes only the victims that sit where the job may go (`_fits_released`), a
search whose quota prefix's last target alone makes room answers with it (`_last_alone`), and a
replica masked by its flavor's nodes alone is placed with a cursor over them
(`KueueEngine.cursor_within`), so the plan with these switched off is the same plan. A search whose shortest prefix ends with a
victim no reclaim may take and no reprieve puts back stops before the fill-back
(`_refusing`), or whose possible last targets all are, stops: the step it would give is refused
anyway. Trials run on a copy of the ledger with
cloned cursors, so a trial leaves the round's ledger and change log as they were.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from optsched.check import check_problem
from optsched.concerns.tenancy import preemption, serving
from optsched.concerns.tenancy.preemption import Preemptor
from optsched.model import Cluster, Plan, Queue
from optsched.problem import BArray, FArray, JobSpec, Problem, compile_problem
from optsched.solvers import evictions, kueue, trials
from optsched.solvers.greedy import GreedyEngine
from tests.kueue_rounds import gpu_cluster, gpu_job, gpu_running
from tests.strategies import contended_rounds


def _without_prechecks(p: Problem, monkeypatch: pytest.MonkeyPatch) -> Plan:
    with monkeypatch.context() as m:
        m.setattr(kueue.KueueEngine, "_quota_rules_out", lambda self, job, victims, allow_borrow: False)
        m.setattr(kueue.KueueEngine, "_first_quota_prefix", lambda self, job, cands, allow_borrow: 1)
        m.setattr(evictions.EvictionBook, "legal_with", _judged_whole)
        m.setattr(evictions.EvictionBook, "reclaiming_with", _reclaiming_whole)
        m.setattr(kueue.KueueEngine, "_fits_released", _released_everywhere)
        m.setattr(kueue.KueueEngine, "_refusing", _refusing_none)
        m.setattr(kueue.KueueEngine, "_last_alone", lambda self, job, cands, start, allow_borrow: False)
        m.setattr(kueue.KueueEngine, "cursor_within", GreedyEngine.cursor_within)
        return kueue.solve_kueue(p)


def _whole(book: evictions.EvictionBook, tail: list[evictions.Judged], final: FArray) -> list[evictions.Judged]:
    """Every recorded eviction with its preemptor seeing `final`, then `tail`."""
    return [(v, reason, Preemptor(b.job, b.uses, b.within_nominal, b.nodes, final))
            for v, reason, b in book.entries] + tail


def _judged_whole(book: evictions.EvictionBook, tail: list[evictions.Judged], final: FArray) -> bool:
    """`EvictionBook.legal_with` by the validator's rules on the whole list, nothing kept."""
    evs = _whole(book, tail, final)
    if preemption.evictions_problems(book.p, evs):
        return False
    reclaiming = serving.plan_reclaiming(book.p, evs)
    return not any(serving.serves_problems(book.p, v, by, reclaiming)
                   for v, reason, by in evs if by is not None and reason != "migrated")


def _reclaiming_whole(book: evictions.EvictionBook, tail: list[evictions.Judged]) -> BArray:
    """`EvictionBook.reclaiming_with` computed afresh from every eviction."""
    return serving.plan_reclaiming(book.p, _whole(book, tail, np.zeros(0)))


def _released_everywhere(self: kueue.KueueEngine, job: JobSpec, victims: list[JobSpec]) -> bool:
    """`_fits_released` with every victim out of the ledger where it sits (a full trial)."""
    fits = self._fits_without(job, victims, allow_borrow=True, keep=False)
    self._restore()
    return fits is not None


def _refusing_none(self: kueue.KueueEngine, job: JobSpec, cands: list[JobSpec]) -> BArray:
    """`_refusing` that never stops a search."""
    return np.zeros(len(cands), dtype=bool)


def _crosses_uplink(p: Problem, victim: JobSpec) -> bool:
    """The reprieve's rule, from the victim's nodes: its traffic crosses an uplink."""
    from optsched.ledger import crossed_domains

    nodes = np.array(sorted(serving.victim_nodes(victim)), dtype=np.int64)
    return victim.bandwidth > 0 and bool(len(crossed_domains(p, nodes)))


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
    engine = kueue.KueueEngine(p)  # the search's stop, per candidate, is the rules' verdict one by one
    for job in p.jobs:
        refusing = engine._refusing(job, list(p.running)).tolist()
        assert refusing == [v.tenant != job.tenant and _crosses_uplink(p, v) and not preemption.reclaimable(p, v)
                            for v in p.running]


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


@pytest.mark.parametrize(("jobs", "load", "seed", "taken"), [(200, 2.0, 2, True), (400, 4.0, 0, False),
                                                          (400, 2.0, 1, False)])
def test_last_target_alone_and_flavor_cursors_leave_the_plan_unchanged(
        jobs: int, load: float, seed: int, taken: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """On mixed-cloud-10k rounds where jobs must free their own tenant's quota behind the cohort's
    other candidates, replicas go through flavor cursors, the first round's searches answer with
    the quota prefix's last target alone (`_last_alone`), and each plan is the one without either.
    The two others catch the cases `_last_alone` leaves out: taking the shortcut for a non-gang
    job placed in part changes the plan of 400 jobs at 4x load, seed 0, and for a job with uplink
    traffic that of 400 jobs at 2x load, seed 1."""
    from optsched.bundled import DATA_DIR
    from optsched.generate import generate_queue
    from optsched.model import load_cluster

    c = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    q = generate_queue(c, "mixed", jobs=jobs, load=load, seed=seed)
    alone: list[str] = []
    masked: list[bool] = []
    original_alone, original_within = kueue.KueueEngine._last_alone, kueue.KueueEngine.cursor_within

    def counting(self: kueue.KueueEngine, job: JobSpec, cands: list[JobSpec], start: int, allow_borrow: bool) -> bool:
        out = original_alone(self, job, cands, start, allow_borrow)
        if out:
            alone.append(job.id)
        return out

    def within(self: kueue.KueueEngine, job: JobSpec, group: Any, restrict: BArray | None) -> Any:
        cursor, mask = original_within(self, job, group, restrict)
        masked.append(mask is not None)
        return cursor, mask

    with monkeypatch.context() as m:
        m.setattr(kueue.KueueEngine, "_last_alone", counting)
        m.setattr(kueue.KueueEngine, "cursor_within", within)
        p = compile_problem(c, q)
        plan = kueue.solve_kueue(p, diagnose_beside=False)
    assert alone or not taken
    assert masked.count(False) > masked.count(True) > 0  # most replicas on flavor cursors, some masked
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

    with monkeypatch.context() as m:  # the diagnostic inline: in this process, where `compared` looks
        m.setattr(trials.KeptTrials, "get", compared)
        p = compile_problem(c, q)
        plan = kueue.solve_kueue(p, diagnose_beside=False)
    assert sum(reused) >= 10
    assert check_problem(p, plan) == []
    with monkeypatch.context() as m:
        m.setattr(trials.KeptTrials, "get", always_fresh)
        fresh_plan = kueue.solve_kueue(compile_problem(c, q), diagnose_beside=False)
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
    """`EvictionBook.rejudged` names the earlier reclaims of the tenant a step reclaims from again: here the
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
        m.setattr(evictions.EvictionBook, "rejudged", lambda self, tail: [])
        blind = kueue.solve_kueue(compile_problem(c, q))
    assert [(e.job, e.by) for e in blind.evictions] == [("x1", "a1"), ("x2", "d1")]
    assert any("does not borrow" in str(v) for v in check_problem(p, blind))


def _unserving_round() -> tuple[Cluster, Queue]:
    """Tenants a and b (nominal 8 GPUs each) share a cohort of 16. b runs x1 and x2 (4 GPUs each)
    on n2 and x3 (1 GPU) on n3: it borrows 1. a runs y (6 GPUs) on n1. a1 (a, 2 GPUs, within
    nominal) needs the cohort's last GPU back: it reclaims x3 and best-fit puts it on n1, so x3's
    eviction serves it by quota alone (x3 back would take the cohort to 17). a2 (a, 1 GPU) would
    take a above nominal: it preempts y, after which x3 back breaks nothing (cohort usage 11), so
    x3's eviction would serve no preemptor: a2's step must be refused."""
    cluster = gpu_cluster({"a": 8, "b": 8}, [gpu_running("y", "a", 6, 1, 0, 0), gpu_running("x1", "b", 4, 2, 0, 0),
                                             gpu_running("x2", "b", 4, 2, 4, 1), gpu_running("x3", "b", 1, 3, 0, 2)],
                          nodes=3)
    queue = Queue.model_validate({"now": 100, "jobs": [gpu_job("a1", "a", 100, 2, 1), gpu_job("a2", "a", 100, 1, 2)]})
    return cluster, queue


def test_a_step_that_leaves_an_earlier_eviction_unserved_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """`EvictionBook.quota_served` judges again the earlier evictions that only the quota clause
    serves: a2's preemption of y would leave x3's reclaim serving nothing, so it is refused and
    the plan is valid; with those evictions never judged again a2 preempts y and the plan fails
    the serving rule."""
    c, q = _unserving_round()
    p = compile_problem(c, q)
    plan = kueue.solve_kueue(p)
    assert check_problem(p, plan) == []
    assert [(e.job, e.by) for e in plan.evictions] == [("x3", "a1")]
    assert [(x.job, x.node) for x in plan.placements] == [("a1", "n1")]
    assert [d.job for d in plan.deferred] == ["a2"]
    with monkeypatch.context() as m:
        m.setattr(evictions.EvictionBook, "_at", lambda self, positions, final: [])
        blind = kueue.solve_kueue(compile_problem(c, q))
    assert [(e.job, e.by) for e in blind.evictions] == [("x3", "a1"), ("y", "a2")]
    assert any(v.rule == "serving" for v in check_problem(p, blind))


def _reclaiming_round() -> tuple[Cluster, Queue]:
    """Tenants a (nominal 4 GPUs) and b (nominal 12) share a cohort of 16. a runs ya1 (4 GPUs) and
    ya2 (2) on n1: it borrows 2; b runs xb and xc (4 each) on n2. b1 (b, 4 GPUs) fits b's nominal
    but not the cohort: it reclaims ya2, within nominal. a2 (a, 1 GPU) preempts ya1. b2 (b, 1 GPU)
    may not borrow what b reclaimed within nominal: it preempts xc and lands on n1. Putting xc
    back then breaks no limit (cohort usage 10 + 4) but lifts b above the nominal it reclaims
    within, so xc's eviction serves b2 through b1's reclaim alone (`serving.reclaiming_flavors`)."""
    cluster = gpu_cluster({"a": 4, "b": 12}, [gpu_running("ya1", "a", 4, 1, 0, 0), gpu_running("ya2", "a", 2, 1, 4, 1),
                                              gpu_running("xb", "b", 4, 2, 0, 0), gpu_running("xc", "b", 4, 2, 4, 1)],
                          nodes=4)
    queue = Queue.model_validate({"now": 100, "jobs": [gpu_job("b1", "b", 100, 4, 1), gpu_job("a2", "a", 100, 1, 2),
                                                       gpu_job("b2", "b", 100, 1, 3)]})
    return cluster, queue


def test_the_reclaiming_flavors_kept_serve_a_later_eviction(monkeypatch: pytest.MonkeyPatch) -> None:
    """`EvictionBook.reclaiming` keeps the flavors each tenant reclaims within nominal as the round
    goes: b2's preemption of xc serves it only through b1's earlier reclaim. Without what is kept,
    xc's eviction serves nothing and the plan changes."""
    c, q = _reclaiming_round()
    p = compile_problem(c, q)
    plan = kueue.solve_kueue(p)
    assert check_problem(p, plan) == []
    assert [(e.job, e.by) for e in plan.evictions] == [("ya2", "b1"), ("ya1", "a2"), ("xc", "b2")]
    assert [(x.job, x.node) for x in plan.placements] == [("b1", "n1"), ("a2", "n1"), ("b2", "n1")]
    with monkeypatch.context() as m:
        m.setattr(evictions.EvictionBook, "add", _add_without_reclaiming)
        blind = kueue.solve_kueue(compile_problem(c, q))
    assert [(e.job, e.by) for e in blind.evictions] != [(e.job, e.by) for e in plan.evictions]


def _add_without_reclaiming(self: evictions.EvictionBook, victim: JobSpec, reason: str, by: Preemptor) -> None:
    """`EvictionBook.add` that forgets the reclaiming flavors (the mutation the test above catches)."""
    self.entries.append((victim, reason, by))
    if reason != "migrated" and not by.nodes & serving.victim_nodes(victim):
        self.quota_served.append(len(self.entries) - 1)


def _unreclaimable_round(b_nominal: int = 12, xb_bandwidth: int = 100) -> tuple[Cluster, Queue]:
    """Tenants a (nominal 4 GPUs), b (12) and c (8, idle) share a cohort of 24 GPUs on n1 (rack
    r1), n2 (r2) and n3 (r1). a runs ya (4 GPUs on n3); b runs xb (4 GPUs on n1 and 4 on n2,
    100 Gbps between them: it crosses both racks' uplinks), within its nominal. b2 (2 x 4 GPUs)
    borrows 4 and goes first (the lower share: b's weight is 4); then a1 (2 x 4 GPUs, borrowing: its tenant's
    `borrow_within_cohort` lets it reclaim lower priorities) finds only n3's 4 GPUs free and xb
    its one candidate (b borrows now). xb's tenant did not borrow at the round's start, so
    no reclaim of it is legal (rule 6), and a reprieve never puts it back (its traffic crosses an
    uplink): the search stops at its shortest prefix [xb]. With `b_nominal` below 8, b borrows
    at the start and xb may be reclaimed; with `xb_bandwidth` 0 a reprieve may put xb back.
    c's nominal keeps the cohort's quota at 24."""
    def job(jid: str, tenant: str, priority: int, replicas: int, submitted: int, bandwidth: int = 0
            ) -> dict[str, Any]:
        return {"id": jid, "tenant": tenant, "priority": priority, "submitted_at": submitted, "gang": True,
                "bandwidth_gbps": bandwidth, "groups": [{"name": "w", "replicas": {"min": replicas, "max": replicas},
                                                         "request": {"gpu": 4, "cpu": 1000}}]}

    def node(i: int, rack: str) -> dict[str, Any]:
        return {"id": f"n{i}", "domain": rack, "capacity": {"cpu": 64000, "memory": 262144},
                "devices": {"model": "G", "count": 8}}

    policy = {"within_tenant": "lower_priority", "reclaim_within_cohort": "any",
              "borrow_within_cohort": {"policy": "lower_priority"}}
    running = [{"job": {**job("ya", "a", 10, 1, 0), "preemptible": False}, "started_at": 0,
                "placements": [{"group": "w", "replica": 0, "node": "n3", "devices": [0, 1, 2, 3]}]},
               {"job": {**job("xb", "b", 10, 2, 0, bandwidth=xb_bandwidth), "preemptible": True}, "started_at": 0,
                "placements": [{"group": "w", "replica": 0, "node": "n1", "devices": [0, 1, 2, 3]},
                               {"group": "w", "replica": 1, "node": "n2", "devices": [0, 1, 2, 3]}]}]
    cluster = Cluster.model_validate({
        "topology": {"levels": ["spine", "rack"],
                     "domains": [{"id": "s", "level": "spine"},
                                 {"id": "r1", "level": "rack", "parent": "s", "uplink_gbps": 400},
                                 {"id": "r2", "level": "rack", "parent": "s", "uplink_gbps": 400}]},
        "device_models": {"G": {}},
        "nodes": [node(1, "r1"), node(2, "r2"), node(3, "r1")],
        "tenants": [{"name": t, "cohort": "org", "quotas": {"G": {"nominal": n}}, "preemption": policy,
                     "weight": 4.0 if t == "b" else 1.0}
                    for t, n in (("a", 4), ("b", b_nominal), ("c", 20 - b_nominal))],
        "running": running})
    queue = Queue.model_validate({"now": 100, "jobs": [job("b2", "b", 200, 2, 1), job("a1", "a", 100, 2, 2)]})
    return cluster, queue


def test_a_search_ending_with_an_unreclaimable_victim_stops_before_the_fill_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On `_unreclaimable_round`, a1's search stops before its trials (`_refusing`), so
    no step is kept and judged; the plan (b2 admitted, a1 deferred, nothing evicted) is the one
    the fill-back, the kept trial and the legality check give with the stop switched off, where
    the check refuses xb's reclaim by the rule the stop reads."""
    c, q = _unreclaimable_round()
    p = compile_problem(c, q)
    xb = p.running[p.running_index["xb"]]
    assert not preemption.reclaimable(p, xb)
    kept: list[str] = []
    refused: list[tuple[str, str]] = []
    original_evict, original_legal = kueue.KueueEngine._evict_for, kueue.KueueEngine._legal

    def evicting(self: kueue.KueueEngine, job: JobSpec, targets: list[JobSpec], reason_of: dict[str, str],
                 allow_borrow: bool) -> Any:
        kept.append(job.id)
        return original_evict(self, job, targets, reason_of, allow_borrow)

    def judging(self: kueue.KueueEngine, job: JobSpec, att: Any, chosen: list[tuple[JobSpec, str]]) -> bool:
        out = original_legal(self, job, att, chosen)
        if not out:
            refused.extend((v.id, job.id) for v, _ in chosen)
        return out

    with monkeypatch.context() as m:
        m.setattr(kueue.KueueEngine, "_evict_for", evicting)
        m.setattr(kueue.KueueEngine, "_legal", judging)
        plan = kueue.solve_kueue(p)
        assert kept == [] and refused == []
        m.setattr(kueue.KueueEngine, "_refusing", _refusing_none)
        blind = kueue.solve_kueue(compile_problem(c, q))
    assert kept == ["a1"] and refused == [("xb", "a1")]
    assert check_problem(p, plan) == []
    assert {x.job for x in plan.placements} == {"b2"} and plan.evictions == []
    assert [d.job for d in plan.deferred] == ["a1"]
    assert _decisions(plan) == _decisions(blind)


@pytest.mark.parametrize(("b_nominal", "xb_bandwidth"), [(4, 100), (12, 0)])
def test_a_victim_that_may_be_reclaimed_or_put_back_does_not_stop_the_search(
        b_nominal: int, xb_bandwidth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`_refusing` reads both of its conditions: where b borrowed at the round's start, xb's
    reclaim is legal and a1 is admitted with xb evicted; where xb's traffic crosses no uplink, a
    reprieve could put it back, so the step is kept and judged (and refused)."""
    c, q = _unreclaimable_round(b_nominal, xb_bandwidth)
    p = compile_problem(c, q)
    kept: list[str] = []
    original_evict = kueue.KueueEngine._evict_for

    def evicting(self: kueue.KueueEngine, job: JobSpec, targets: list[JobSpec], reason_of: dict[str, str],
                 allow_borrow: bool) -> Any:
        kept.append(job.id)
        return original_evict(self, job, targets, reason_of, allow_borrow)

    with monkeypatch.context() as m:
        m.setattr(kueue.KueueEngine, "_evict_for", evicting)
        plan = kueue.solve_kueue(p)
    assert kept == ["a1"]
    assert check_problem(p, plan) == []
    if b_nominal < 8:
        assert [(e.job, e.by) for e in plan.evictions] == [("xb", "a1")]
        assert {x.job for x in plan.placements} == {"a1", "b2"}
    else:
        assert plan.evictions == [] and [d.job for d in plan.deferred] == ["a1"]
