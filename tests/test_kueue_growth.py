"""The `kueue` baseline grows an elastic job only while its own quota rules would still admit it.

Kueue's partial admission admits the largest count of a podset, down to its minimum, that fits
(`PodSetReducer`). The greedy engine grows elastic replicas one by one while the job-level rules
hold; the `kueue` engine judges an admission by two rules more (`KueueEngine._quota_ok`: within
nominal in a trial that may not borrow; no borrowing of a flavor its tenant reclaimed within
nominal this round), so growth stops before either would refuse the job
(`KueueEngine.growth_allowed`) instead of growing past them and refusing a job whose smaller
counts fit.
"""

from __future__ import annotations

from optsched.check import check_problem
from optsched.model import Queue
from optsched.problem import JobSpec, Problem, compile_problem
from optsched.solvers import kueue
from tests.kueue_rounds import gpu_cluster, gpu_job, gpu_running


def test_growth_stops_before_borrowing_a_flavor_reclaimed_within_nominal() -> None:
    """a (nominal 2 GPUs) runs ya1 (1) and ya2 (4): it borrows 3; b (nominal 14) runs 11, and the
    cohort's 16 are in use. b1 (1 GPU) reclaims ya2 within nominal, so b may not borrow G again
    this round. b4 (1 to 6 replicas of 1 GPU) fits b's nominal with 2 (b at 14): it is admitted
    with 2, not grown to 4 (b at 16, borrowing) and then refused."""
    c = gpu_cluster({"a": 2, "b": 14}, [gpu_running("ya1", "a", 1, 1, 0, 0), gpu_running("ya2", "a", 4, 1, 4, 1),
                                        gpu_running("xb", "b", 4, 2, 0, 0), gpu_running("xc", "b", 4, 2, 4, 1),
                                        gpu_running("xd", "b", 3, 3, 0, 1)], nodes=4)
    q = Queue.model_validate({"now": 100, "jobs": [gpu_job("b1", "b", 100, 1, 1),
                                                   gpu_job("b4", "b", 5, 1, 4, most=6)]})
    p = compile_problem(c, q)
    plan = kueue.solve_kueue(p)
    assert check_problem(p, plan) == []
    assert [(e.job, e.by) for e in plan.evictions] == [("ya2", "b1")]
    assert sorted((x.job, x.replica) for x in plan.placements) == [("b1", 0), ("b4", 0), ("b4", 1)]
    assert plan.deferred == []


def _a_el_round() -> tuple[Problem, list[JobSpec]]:
    """a (nominal 8 GPUs) runs a-low (4, preemptible) and a-base (2); b (nominal 8) runs 10 and
    borrows 2: the cohort's 16 are in use. The round's job a-el asks for 1 to 3 replicas of 4
    GPUs; the victims b-x (b's 4-GPU job) and a-low leave room for 2 of them."""
    c = gpu_cluster({"a": 8, "b": 8}, [gpu_running("a-low", "a", 4, 1, 0, 0),
                                      gpu_running("a-base", "a", 2, 1, 4, 0, preemptible=False),
                                      gpu_running("b-x", "b", 4, 2, 0, 1), gpu_running("b-y", "b", 6, 3, 0, 0)],
                    nodes=4)
    q = Queue.model_validate({"now": 100, "jobs": [gpu_job("a-el", "a", 20, 4, 1, most=3)]})
    p = compile_problem(c, q)
    return p, [p.running[p.running_index[v]] for v in ("b-x", "a-low")]


def test_a_trial_that_may_not_borrow_grows_within_nominal() -> None:
    """Kept without borrowing, a-el has 1 replica (a at 6): its second would take a to 10, above
    nominal, so growth stops there and the trial fits, where growing to 2 and judging after
    refused it. Kept with borrowing, it grows to 2."""
    p, victims = _a_el_round()
    job = p.jobs[p.job_index["a-el"]]
    for allow_borrow, replicas in ((False, 1), (True, 2)):
        engine = kueue.KueueEngine(p)
        engine.flavors.fix(job)
        got = engine._fits_without(job, victims, allow_borrow=allow_borrow, keep=True)
        assert got is not None and len(got.replicas) == replicas


def test_trials_place_the_minimum_and_the_kept_one_grows_as_an_admission() -> None:
    """A search trial needs only its verdict (a grown placement is refused exactly when its minimum
    is), so it places a-el's minimum (1 replica, whether it may borrow or not); the kept attempt
    then grows on the round's ledger to what placing a-el there with the victims out gives (2
    replicas, on the same nodes and devices)."""
    p, victims = _a_el_round()
    job = p.jobs[p.job_index["a-el"]]
    engine = kueue.KueueEngine(p)
    engine.flavors.fix(job)
    for allow_borrow in (False, True):
        trial = engine._fits_without(job, victims, allow_borrow=allow_borrow, keep=False)
        assert trial is not None and len(trial.replicas) == 1
    kept = engine._fits_without(job, victims, allow_borrow=True, keep=True)
    reference = kueue.KueueEngine(p)
    reference.flavors.fix(job)
    reference._release(victims)
    placed = reference.place_job(job)
    assert kept is not None and placed.failure is None and len(placed.replicas) == 2
    assert [(r.group, r.replica, r.node, r.devices) for r in kept.replicas] == \
        [(r.group, r.replica, r.node, r.devices) for r in placed.replicas]
    assert engine.ledger.used.tolist() == reference.ledger.used.tolist()
