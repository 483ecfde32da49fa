"""The `kueue` baseline's priority diagnostic beside the round (`optsched.solvers.diagnosis`).

The deferred jobs' diagnostic runs in a forked copy of the engine, brought to the round's state
at each job by the rows of the nodes changed since (`Ledger.rows`, `Ledger.load_rows`): the plan,
deferral reasons included, is the one the diagnostic inline gives.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np
import pytest

from optsched import clock
from optsched.bundled import DATA_DIR
from optsched.check import check_problem
from optsched.generate import generate_queue
from optsched.ledger import Ledger
from optsched.model import Plan, load_cluster
from optsched.problem import Problem, compile_problem
from optsched.solvers import diagnosis, kueue

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the diagnostic forks on Linux only")


@pytest.fixture
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """`diagnosis.usable` as in a process with one Python thread: the test session holds an idle
    event-loop thread of the service tests' client (loaded at collection), which the copy never
    touches."""
    monkeypatch.setattr(diagnosis.threading, "active_count", lambda: 1)


def _round(jobs: int = 250, seed: int = 1, load: float = 2.0) -> Problem:
    """mixed-cloud-10k: preemption fails for dozens of jobs, most of them `priority`."""
    c = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    return compile_problem(c, generate_queue(c, "mixed", jobs=jobs, load=load, seed=seed))


def _decisions(plan: Plan) -> dict[str, Any]:
    return {"placements": [pl.model_dump() for pl in plan.placements],
            "deferred": [d.model_dump() for d in plan.deferred],
            "evictions": [e.model_dump() for e in plan.evictions]}


@linux_only
@pytest.mark.usefixtures("one_thread")
def test_the_diagnostic_beside_the_round_gives_the_inline_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every deferred job whose preemption failed is sent to the copy (it answers for each), some
    end `priority` and some keep their own reason, and the plan is the inline one (a copy that
    missed a node's change, an eviction, or the change log its cursors re-score from answers
    otherwise for some)."""
    asked: list[int] = []
    original = diagnosis.Beside.answers

    def answers(self: diagnosis.Beside) -> dict[int, tuple[str, str]]:
        got = original(self)
        asked.append(self.asked)
        assert len(got) == self.asked
        return got

    monkeypatch.setattr(diagnosis.Beside, "answers", answers)
    p = _round(jobs=1000, seed=0, load=4.0)  # a round where a copy that misses changes answers otherwise
    assert diagnosis.usable(p)
    beside = kueue.solve_kueue(p, diagnose_beside=True)
    assert asked and asked[0] > 100
    inline = kueue.solve_kueue(_round(jobs=1000, seed=0, load=4.0), diagnose_beside=False)
    assert check_problem(p, beside) == []
    reasons = {d.reason for d in beside.deferred}
    assert "priority" in reasons and reasons - {"priority"}
    assert _decisions(beside) == _decisions(inline)


@linux_only
@pytest.mark.usefixtures("one_thread")
def test_a_failure_in_the_copy_is_raised_by_the_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """A diagnostic that fails in the copy fails the round with the copy's error, not a plan with
    reasons left unsettled."""
    def broken(self: kueue.KueueEngine, request: diagnosis.Request) -> tuple[str, str]:
        raise ValueError("no diagnosis here")

    monkeypatch.setattr(kueue.KueueEngine, "diagnose_request", broken)
    with pytest.raises(RuntimeError, match="no diagnosis here"):
        kueue.solve_kueue(_round(), diagnose_beside=True)


def test_the_diagnostic_stays_inline_where_a_fork_is_unsafe_or_does_not_pay() -> None:
    """Small rounds, deterministic mode and a process with other Python threads keep it inline."""
    assert not diagnosis.usable(_round(jobs=50))
    p = _round()
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not diagnosis.usable(p)
    finally:
        stop.set()
        other.join()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(diagnosis.threading, "active_count", lambda: 1)
        with clock.work_clock(0.0):
            assert not diagnosis.usable(p)
        assert diagnosis.usable(p) == sys.platform.startswith("linux")


def test_rows_of_the_changed_nodes_make_a_copy_equal() -> None:
    """A ledger that differs from another only on some nodes (running jobs released there, a
    replica placed) becomes equal to it, bit for bit, with those nodes' rows."""
    p = _round(jobs=50)
    base = Ledger.with_running(p)
    copy = base.copy()
    released = np.arange(0, len(p.running), 7, dtype=np.int64)
    changed = base.add_running_weighted(released, -np.ones(len(released)))
    job = p.jobs[0]
    node = int(np.flatnonzero(base.fits_at(job.groups[0], np.arange(p.n_nodes)))[0])
    base.add(job, job.groups[0], node, [], None)
    nodes = np.unique(np.concatenate([changed, [node]]))
    copy.load_rows(base.rows(nodes))
    for name in ("used", "score_pad", "dev_used", "uplink_load", "quota_used", "free_whole", "max_group_free",
                 "max_share_free"):
        assert getattr(copy, name).tobytes() == getattr(base, name).tobytes(), name
