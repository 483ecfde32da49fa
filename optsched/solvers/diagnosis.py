"""The `kueue` baseline's `priority` diagnostic beside the round, in a forked process.

A job the `kueue` engine defers after preemption failed is told apart: `priority` when evicting
the running jobs its tenant's policies protect would make room, else its own failure
(`KueueEngine.diagnose_request`: one trial placement with those jobs out). The verdict changes
the job's deferral reason and nothing the round reads afterwards, so it need not hold up the
round: it was 0.15-0.2 s of the 1.0-1.3 s Kueue rounds of mixed-cloud-10k / 1,000 jobs (wrappers,
one-off; beside against inline: benchmarks/results/kueue-speed.md).

`Beside` forks a copy of the engine as the round starts (`fork`: the copy shares the
problem and its derived tables, nothing is pickled but the requests) and sends it, per deferred
job (a few to a message, `BATCH`), what of the round's state the diagnostic reads and the copy
lacks: the ledger's rows of the nodes changed since the last request (`ledger.NodeRows`, the
values themselves, bit for bit), the evictions so far (`alive`), the flavors a tenant may no
longer borrow, and the job's flavor assignment. The copy, brought to the round's state at that
job, diagnoses it as the engine would have; the round takes the answers at its end. The plan is
the one the engine gives with the diagnostic inline (tests/test_kueue_diagnosis.py).

It runs only where forking is safe and pays (`usable`): Linux (macOS's system libraries do not
survive a fork), one Python thread (a fork copies only the calling thread: a lock another thread
held stays held in the copy), not in deterministic mode (the work clock charges the diagnostic's
work to the round), and a round with enough queued and running jobs to have diagnostics worth the
fork. Where the fork itself fails (a process limit), the diagnostic runs inline.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Protocol

import numpy as np

from optsched import clock
from optsched.ledger import NodeRows
from optsched.problem import BArray, IArray, Problem
from optsched.solvers.flavors import FlavorAssignment
from optsched.solvers.greedy import ChangeLog

MIN_JOBS = 200
"""Queued jobs below which the diagnostic stays inline (the fork took 4 ms on mixed-cloud-10k, and
each request about 0.15 ms to send, wrappers, one-off: a round of few deferrals gains nothing)."""

BATCH = 4
"""Requests sent to the copy in one message: each message costs the round a pipe write and the
copy a wake-up, and the copy lags by at most this many diagnostics as the round ends. On
mixed-cloud-10k (1,000 jobs, seeds 0-4), the round's time in sending and in waiting for the
answers: 0.031-0.040 s a round at 4 and 0.037-0.038 s at 8, against 0.049-0.065 s one by one
(wrappers, mean of 10 rounds, one-off)."""

ANSWER_TIMEOUT_S = 600.0
"""Seconds the round waits for the copy's answers before it reports the copy lost."""


@dataclass(frozen=True)
class Request:
    """One deferred job to diagnose, with the round's state the diagnostic reads at that job."""

    job: int
    """The job's index in `Problem.jobs`."""
    failure: str
    detail: str
    """Its deferral reason and detail before the diagnostic."""
    rows: NodeRows
    """The round ledger's rows of the nodes changed since the previous request, and its quota and
    uplink usage."""
    alive: BArray
    """Running jobs not evicted so far (`KueueEngine.alive`)."""
    no_borrow: BArray
    """Tenant/flavor pairs that may not borrow (`KueueEngine.no_borrow`)."""
    assignment: FlavorAssignment
    """The job's flavor assignment, as fixed for its admission."""


class Engine(Protocol):
    """What `Beside` needs of the engine (`KueueEngine`): its round's change log, and the requests
    it makes and, in the copy, answers."""

    p: Problem
    changed: ChangeLog

    def diagnosis_request(self, job: int, failure: str, detail: str, nodes: IArray) -> Request:
        """The request for `job` (index), the round's ledger differing from the copy's on `nodes`."""
        ...

    def diagnose_request(self, request: Request) -> tuple[str, str]:
        """In the copy: the request's state taken as the round's, the job's reason and detail."""
        ...


def usable(p: Problem) -> bool:
    """Whether the diagnostic may run beside this round (module docstring)."""
    return (sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
            and threading.active_count() == 1 and not clock.deterministic() and len(p.jobs) >= MIN_JOBS
            and len(p.running) > 0)


class Beside:
    """The engine's copy in a forked process, and the requests sent to it."""

    def __init__(self, engine: Engine) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, theirs = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(engine, theirs), daemon=True)
        self._process.start()
        theirs.close()
        self._seen = len(engine.changed)
        self._all = np.arange(engine.p.n_nodes, dtype=np.int64)
        self.asked = 0
        """Requests made so far."""
        self._batch: list[Request] = []
        """Requests not sent yet (`BATCH`)."""
        self._stopped = False
        """Whether the copy stopped taking requests (it failed)."""

    def ask(self, engine: Engine, job: int, failure: str, detail: str) -> None:
        """Send the diagnostic of `job` (index), deferred for `failure`, at the engine's state now."""
        nodes = self._all[engine.changed.changed_since(self._seen, self._all)]
        self._seen = len(engine.changed)
        self.asked += 1
        if not self._stopped:
            self._batch.append(engine.diagnosis_request(job, failure, detail, nodes))
            if len(self._batch) >= BATCH:
                self._flush()

    def _flush(self) -> None:
        if self._batch and not self._stopped:
            self._send(self._batch)
        self._batch = []

    def _send(self, message: list[Request] | None) -> None:
        try:
            self._conn.send(message)
        except OSError:  # the copy stopped (it failed): its error waits in the pipe for `answers`
            self._stopped = True

    def answers(self) -> dict[int, tuple[str, str]]:
        """Every request's verdict (deferral reason, detail) by job index, once the copy is done;
        RuntimeError with the copy's own error if it failed."""
        self._flush()
        if not self._stopped:
            self._send(None)
        try:
            if not self._conn.poll(ANSWER_TIMEOUT_S):
                raise RuntimeError("the kueue baseline's diagnostic process gave no answer")
            kind, got = self._conn.recv()
        except EOFError:
            raise RuntimeError("the kueue baseline's diagnostic process ended without answers") from None
        if kind != "ok":
            raise RuntimeError(f"the kueue baseline's diagnostic process failed: {got}")
        if len(got) != self.asked:
            raise RuntimeError(f"the kueue baseline's diagnostic process answered {len(got)} of {self.asked}")
        return dict(got)

    def close(self) -> None:
        """End the copy (it exits once its end of the pipe closes)."""
        self._conn.close()
        self._process.join(timeout=5.0)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


def _serve(engine: Engine, conn: Connection) -> None:
    """The copy's loop: bring the engine to each request's state, diagnose, answer at the end."""
    answers: dict[int, tuple[str, str]] = {}
    try:
        while True:
            batch = conn.recv()
            if batch is None:
                break
            for request in batch:
                answers[request.job] = engine.diagnose_request(request)
        conn.send(("ok", answers))
    except EOFError:  # the round ended without asking for the answers
        pass
    except BaseException as e:  # reported to the round, which raises it
        conn.send(("error", repr(e)))
    finally:
        conn.close()  # multiprocessing ends the copy with `os._exit` (no atexit handlers of the round's process)
