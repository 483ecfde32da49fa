"""Rounds of the service: one solve on the state's objects, and the answers it gives per pod.

A `Round` is immutable once made: the plan, the actions that carry it out (as API data), and an
index from each pod to what the plan decided for it (bind to a node with devices,
wait with a reason, be evicted for a job). The extender verbs read the current round without a
lock; a new round replaces it whole (`RoundRunner.current`), so a filter call always sees one
plan, never half of two.

`RoundRunner.run` makes a round: it reads a listing of the state, snapshots it
(`optsched.adapters.kube.snapshot`), compiles and solves it within the time limit, handing the
previous round's plan to the solver as its warm start (`initial_plan`: what of it still holds is
kept, the rest dropped, `optsched.solvers.warmstart`), and publishes it. With
`RoundSettings.process` the snapshot and the solve run in a worker process (`solve_listing`),
so that the round's Python work does not hold the GIL the extender calls need. A round that fails
(bad objects, a solver error) leaves the previous round in place; the failure is kept as
`last_error`, counted in the metrics and logged.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Literal

from optsched.adapters.kube.actions import Actions, actions
from optsched.adapters.kube.config import KubeConfig
from optsched.adapters.kube.snapshot import Snapshot, SnapshotCache, snapshot
from optsched.errors import InputError
from optsched.model.plan import Plan
from optsched.service.metrics import ServiceMetrics
from optsched.service.state import ClusterState

LOG = logging.getLogger("optsched.service")

PodKey = tuple[str, str]
"""(namespace, name) of a pod."""


@dataclass(frozen=True)
class Decision:
    """What a round decided for one pod."""

    action: Literal["bind", "wait", "evict"]
    job: str
    uid: str | None
    node: str | None = None
    """`bind`: the node the plan gives the pod; `evict`: the node it runs on."""
    devices: tuple[int, ...] = ()
    reason: str = ""
    """`wait`: the plan's deferral reason (`quota`, `capacity`, ...); `evict`: `preempted`, ..."""
    detail: str = ""
    by: str | None = None
    """`evict`: the job the eviction makes room for."""


@dataclass(frozen=True)
class RoundSettings:
    """How the service solves its rounds."""

    solver: str = "auto"
    time_limit: float = 1.0
    """Seconds for the snapshot, the compile and the solve; the actions and per-pod decisions are built
    after it (benchmarks/results/service.md: a state round at 1,280 nodes ends 0.1-0.15 s past the limit at p99)."""
    objective: Any = None
    seed: int = 0
    kube: KubeConfig = field(default_factory=KubeConfig)
    process: bool = False
    """Solve in a worker process (`optsched serve` does): the round's Python work then does not hold
    the service's GIL, so extender calls answer as fast during a round as between rounds."""


@dataclass(frozen=True)
class Round:
    """One solved round (module docstring)."""

    number: int
    generation: int
    pending_generation: int
    finished_at: float
    """Wall clock (seconds since the epoch) when the round was published."""
    seconds: float
    """Seconds the round took: snapshot, compile, solve, actions."""
    snapshot_s: float
    reused: tuple[bool, int]
    """What the snapshot did not read again (`SnapshotCache`): whether the Nodes' read, and how many pods."""
    plan: Plan
    actions: dict[str, Any]
    """The actions that carry the plan out, as `Actions.to_dict()` gives them."""
    decisions: dict[PodKey, Decision]
    victims: dict[str, dict[str, list[str]]]
    """Job id -> node -> uids of the pods the plan evicts there for it."""

    def decision(self, namespace: str, name: str, uid: str | None) -> Decision | None:
        """The round's decision for a pod, if it was decided for this pod (same uid when given)."""
        d = self.decisions.get((namespace, name))
        if d is None or (uid and d.uid and uid != d.uid):
            return None
        return d


def index(plan: Plan, snap: Snapshot, acts: Actions, node_of: dict[PodKey, str]) -> tuple[
        dict[PodKey, Decision], dict[str, dict[str, list[str]]]]:
    """Per pod, what the plan decided; per preempting job, its victims' uids by node."""
    decisions: dict[PodKey, Decision] = {}
    for pl in plan.placements:
        ref = snap.replica_pod.get((pl.job, pl.group, pl.replica))
        if ref is not None:
            decisions[(ref.namespace, ref.name)] = Decision("bind", pl.job, ref.uid, node=pl.node,
                                                            devices=tuple(pl.devices))
    for d in plan.deferred:
        for ref in snap.job_pods.get(d.job, []):
            decisions[(ref.namespace, ref.name)] = Decision("wait", d.job, ref.uid, reason=d.reason, detail=d.detail)
    for h in snap.held:
        for ref in h.pods:
            decisions[(ref.namespace, ref.name)] = Decision("wait", "", ref.uid, reason=h.reason, detail=h.detail)
    victims: dict[str, dict[str, list[str]]] = {}
    for ev in acts.evictions:
        node = node_of.get((ev.pod.namespace, ev.pod.name))
        decisions[(ev.pod.namespace, ev.pod.name)] = Decision("evict", "", ev.pod.uid, node=node, reason=ev.reason,
                                                              by=ev.by)
        if ev.by is not None and node is not None and ev.pod.uid:
            victims.setdefault(ev.by, {}).setdefault(node, []).append(ev.pod.uid)
    return decisions, victims


def _warm_worker() -> None:
    """Load the solver libraries when the worker starts, not in its first round."""
    import optsched.solve  # noqa: F401


@dataclass(frozen=True)
class Solved:
    """What solving a listing gives, in plain data (it crosses from the worker process whole)."""

    plan: Plan
    actions: dict[str, Any]
    decisions: dict[PodKey, Decision]
    victims: dict[str, dict[str, list[str]]]
    snapshot_s: float
    reused: tuple[bool, int]
    """(the Nodes' read reused, pods not read again: `SnapshotCache`)."""
    counts: tuple[int, int, int]
    """Bindings, evictions, pods told why they wait."""


_WORKER_CACHE = SnapshotCache()
"""The snapshot cache of a worker process (`solve_in_worker`): each runner has a worker of its own."""


def solve_in_worker(objects: dict[str, list[dict[str, Any]]], settings: RoundSettings, previous: Plan | None,
                    spent: float) -> Solved:
    """`solve_listing` in a worker process, with the worker's snapshot cache (it lives there)."""
    return solve_listing(objects, settings, previous, spent, _WORKER_CACHE)


def solve_listing(objects: dict[str, list[dict[str, Any]]], settings: RoundSettings, previous: Plan | None,
                  spent: float, cache: SnapshotCache | None = None) -> Solved:
    """Snapshot, compile and solve one listing, then derive its actions and per-pod decisions (in
    the service's process or its worker). `spent` is what the round already used (it counts against
    the time limit); `cache` is the previous round's snapshot cache (objects the API server has not
    changed are not read again). Only plain data comes back: the snapshot's documents stay where
    they were made."""
    from optsched.problem import compile_problem
    from optsched.solve import solve_problem

    start = time.perf_counter() - spent
    given: dict[str, Any] = objects  # the listing's fields are snapshot's argument names
    snap = snapshot(**given, config=settings.kube, cache=cache)
    snapshot_s = time.perf_counter() - start
    p = compile_problem(snap.cluster, snap.queue, validate=False)
    plan = solve_problem(p, solver=settings.solver, objective=settings.objective, time_limit=settings.time_limit,
                         seed=settings.seed, started=start, initial_plan=previous)
    acts = actions(plan, snap)
    node_of: dict[PodKey, str] = {}
    for pod in objects["pods"]:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if spec.get("nodeName"):
            node_of[(meta.get("namespace") or "default", str(meta.get("name")))] = str(spec["nodeName"])
    decisions, victims = index(plan, snap, acts, node_of)
    return Solved(plan=plan, actions=acts.to_dict(), decisions=decisions, victims=victims, snapshot_s=snapshot_s,
                  reused=(cache.nodes_reused, cache.pods_reused) if cache is not None else (False, 0),
                  counts=(len(acts.bindings), len(acts.evictions), len(acts.pending)))


class RoundRunner:
    """Makes rounds on a `ClusterState` and keeps the latest (module docstring). Rounds run one
    at a time (`run` holds a lock); reading `current` never waits."""

    def __init__(self, state: ClusterState, settings: RoundSettings, metrics: ServiceMetrics) -> None:
        self.state = state
        self.settings = settings
        self.metrics = metrics
        self.current: Round | None = None
        self.last_error: str | None = None
        self.last_input_error: InputError | None = None
        """The problems of the state's objects, when the latest round failed for them."""
        self.last_attempt: tuple[int, float] = (-1, 0.0)
        """(pending generation, wall clock) of the latest round begun, published or failed."""
        self._lock = threading.Lock()
        self._number = 0
        self._executor: ProcessPoolExecutor | None = None
        self.cache = SnapshotCache()
        """The snapshot cache of rounds solved in this process (a worker keeps its own)."""

    def _pool(self) -> ProcessPoolExecutor:
        """The worker process rounds are solved in (`RoundSettings.process`), started on first use
        (spawned: the service's threads are not forked) and kept warm."""
        if self._executor is None:
            self._executor = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=_warm_worker)
        return self._executor

    def close(self) -> None:
        """Stop the worker process, if any."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)  # waits out a round in flight
            self._executor = None

    def run(self) -> Round | None:
        """Solve one round on the state as it is now; publish and return it, or None when it failed."""
        with self._lock:
            start = time.perf_counter()
            listing = self.state.listing()
            self.last_attempt = (listing.pending_generation, time.time())
            previous = self.current.plan if self.current is not None else None
            try:
                if self.settings.process:
                    solved = self._pool().submit(solve_in_worker, listing.objects, self.settings, previous,
                                                 time.perf_counter() - start).result()
                else:
                    solved = solve_listing(listing.objects, self.settings, previous, 0.0, self.cache)
            except InputError as exc:
                self._failed("input", str(exc), start)
                self.last_input_error = exc
                return None
            except Exception as exc:  # a solver bug (or a lost worker) must not end the service
                LOG.exception("round failed")
                self._failed("error", f"{type(exc).__name__}: {exc}", start)
                if isinstance(exc, BrokenProcessPool):
                    self._executor = None  # the next round starts a new worker
                return None
            self._number += 1
            seconds = time.perf_counter() - start
            plan = solved.plan
            rnd = Round(number=self._number, generation=listing.generation,
                        pending_generation=listing.pending_generation, finished_at=time.time(), seconds=seconds,
                        snapshot_s=solved.snapshot_s, reused=solved.reused, plan=plan, actions=solved.actions,
                        decisions=solved.decisions, victims=solved.victims)
            self.current = rnd
            self.last_error = self.last_input_error = None
            self.metrics.observe_round(plan, seconds, source="state")
            LOG.info("round %d: %s %s in %.3f s (snapshot %.3f s, nodes reused: %s, pods reused: %d): %d bindings, "
                     "%d evictions, %d pods wait", rnd.number, plan.solver.name, plan.solver.status, seconds,
                     solved.snapshot_s, *solved.reused, *solved.counts)
            return rnd

    def _failed(self, status: str, message: str, start: float) -> None:
        self.last_error = message
        self.last_input_error = None
        self.metrics.observe_failure(status, time.perf_counter() - start, source="state")
        LOG.warning("round failed (%s); the previous plan still answers: %s", status, message.replace("\n", " "))
        return None


class RoundLoop:
    """Runs rounds in a background thread: every `interval` seconds, and as soon as the pending
    pods or the nodes change (`ClusterState.pending_generation`) or `wake` is called, but never two
    rounds closer than `min_gap` seconds apart."""

    def __init__(self, runner: RoundRunner, interval: float = 10.0, min_gap: float = 0.5) -> None:
        self.runner = runner
        self.interval = interval
        self.min_gap = min_gap
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="optsched-rounds", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread after its current round."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    def wake(self) -> None:
        """Ask for a round now (after `min_gap`)."""
        self._wake.set()

    def _due(self) -> bool:
        runner = self.runner
        if not runner.state.loaded:
            return False
        tried_generation, tried_at = runner.last_attempt
        if time.time() - tried_at >= self.interval:
            return True
        return runner.state.pending_generation != tried_generation  # a failed round is retried on a change

    def _loop(self) -> None:
        last = 0.0
        while not self._stop.is_set():
            self._wake.wait(timeout=min(self.interval, 1.0))
            self._wake.clear()
            if self._stop.is_set():
                break
            gap = time.perf_counter() - last
            if gap < self.min_gap:
                time.sleep(self.min_gap - gap)
            if self._due():
                last = time.perf_counter()
                self.runner.run()
