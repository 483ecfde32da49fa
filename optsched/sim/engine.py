"""A discrete-event simulator: a trace of jobs through scheduling rounds on a cluster.

Events, in time order (ties: completions and failures before arrivals, then by sequence number):
job arrivals and completions from the trace; spot interruptions (each node of a spot pool is
reclaimed at its pool's `interruption_rate_per_hour`, exponential gaps, and back after
`SimConfig.spot_return_s`); node failures (optional `node_failure_rate_per_hour`, back after
`repair_s`); and scheduling rounds (`Rounds`: after every event, every N seconds, or every K
arrivals). A round builds the current `Cluster` (health, running jobs with their checkpoint
ages) and `Queue` (jobs waiting, with their arrival times), asks the policy for a plan (any
`solve()` solver name, or a callable), checks it with the validator before applying it, starts
the placed jobs and removes the evicted ones. Running jobs hold their resources until they
finish or are evicted; an evicted or interrupted job goes back to the queue and loses the work
since its last checkpoint (plus its restart time), which it must run again.

Everything random comes from one numpy generator seeded by `SimConfig.seed`, so a run is
deterministic when its policy is (the greedy baselines are; a time-limited CP-SAT is not).
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from optsched.check import check_problem
from optsched.errors import InputError, InputIssue
from optsched.model.cluster import Cluster, Node, Pool, ReplicaPlacement, RunningJob
from optsched.model.plan import Plan
from optsched.model.queue import Job, Queue
from optsched.model.references import validate_cluster, validate_queue
from optsched.objective import ObjectiveSpec
from optsched.problem import compile_problem
from optsched.sim.trace import TraceJob
from optsched.solve import solve_problem

Policy = Callable[[Cluster, Queue], Plan]
"""A policy as a function: the round's cluster and queue in, a plan out."""

EPS = 1e-9

# event kinds, in the order they are handled at equal times
FINISH, DOWN, UP, ARRIVE, ROUND, RELEASE = range(6)


class PlanRejected(RuntimeError):
    """The policy returned a plan the validator refuses (a bug in the policy, never repaired)."""

    def __init__(self, time_s: float, violations: list[str]) -> None:
        self.violations = violations
        super().__init__(f"plan at t={time_s:.1f}s breaks {len(violations)} rule(s): " + "; ".join(violations[:5]))


class SimulationError(RuntimeError):
    """A simulator invariant broke (`Simulator.invariants`): a bug in the simulator."""


@dataclass(frozen=True)
class Rounds:
    """When rounds run: after every batch of simultaneous events (`event`), every `value`
    seconds (`seconds`), or after every `value` arrivals (`arrivals`; once the trace has no more
    arrivals, after every event, so that the queue drains)."""

    every: Literal["event", "seconds", "arrivals"] = "event"
    value: float = 0.0

    def __post_init__(self) -> None:
        if self.every != "event" and self.value <= 0:
            raise InputError([InputIssue("rounds.value", "positive", f"{self.every} rounds need a value > 0")])


@dataclass(frozen=True)
class SimConfig:
    """How a simulation runs (times in seconds, rates per hour)."""

    policy: str | Policy = "best-fit"
    rounds: Rounds = field(default_factory=Rounds)
    time_limit: float = 1.0
    """Seconds per round for the policy (a `solve()` time limit)."""
    objective: ObjectiveSpec = None
    seed: int = 0
    node_failure_rate_per_hour: float = 0.0
    repair_s: float = 3600.0
    spot_return_s: float = 600.0
    """How long a reclaimed spot node stays away."""
    restart_s: float = 0.0
    """Added to an evicted job's remaining run time (its restart and checkpoint reload)."""
    max_wait_s: float | None = None
    """A job waiting longer than this (checked at rounds) gives up: `failed`."""
    horizon_s: float | None = None
    """Stop here; jobs still queued or running stay so in the result."""
    release_empty_s: float = 0.0
    """A provisioned node left without work is released after this long (Karpenter's
    `consolidateAfter` for empty nodes); it is paid from its creation until its release."""
    check_plans: bool = True
    check_invariants: bool = False
    """After every event time, assert the simulator's own invariants (`Simulator.invariants`),
    and validate every round's cluster and queue documents (for tests: it costs a pass over
    every running replica)."""


JobState = Literal["future", "queued", "running", "finished", "failed"]
"""`future`: not arrived yet (only when the run stopped at its horizon)."""


@dataclass
class JobRecord:
    """What happened to one job (times in seconds from the trace's start)."""

    id: str
    tenant: str
    gpus: float
    arrival_s: float
    duration_s: float
    state: JobState = "future"
    first_start_s: float | None = None
    finish_s: float | None = None
    waited_s: float = 0.0
    """Time spent queued, every wait after an eviction included."""
    evictions: int = 0
    lost_gpu_hours: float = 0.0
    remaining_s: float = 0.0
    why_failed: str = ""

    @property
    def jct_s(self) -> float | None:
        """Job completion time: finish - arrival (None until it finishes)."""
        return None if self.finish_s is None else self.finish_s - self.arrival_s

    @property
    def queue_delay_s(self) -> float | None:
        """Arrival to first start (None if it never started)."""
        return None if self.first_start_s is None else self.first_start_s - self.arrival_s


@dataclass(frozen=True)
class RoundRecord:
    """One scheduling round: when, how many waited, were placed and evicted, the policy's wall
    time (s) and status, and the plan's fragmentation and fairness terms."""

    time_s: float
    queued: int
    started: int
    evicted: int
    wall_s: float
    status: str
    fragmentation: float
    fairness: float


@dataclass
class Samples:
    """The cluster over time, one row per event time after its events and round."""

    time_s: list[float] = field(default_factory=list)
    allocated_gpus: list[float] = field(default_factory=list)
    healthy_gpus: list[float] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    cost_per_hour: list[float] = field(default_factory=list)
    """$/h paid: every reserved node, the non-reserved nodes hosting work, the provisioned nodes."""
    provisioned_nodes: list[int] = field(default_factory=list)
    """Provisioned nodes alive (created by plans and not released yet)."""


@dataclass
class _Running:
    trace: TraceJob
    placements: list[ReplicaPlacement]
    started_s: float
    epoch: int


@dataclass
class SimResult:
    """Per job, per round, and over time; `summary()` condenses them."""

    jobs: dict[str, JobRecord]
    rounds: list[RoundRecord]
    samples: Samples
    end_s: float
    total_gpus: float
    background_stopped: int = 0
    """Jobs of the initial cluster evicted or stopped by their node going down."""

    def states(self) -> dict[str, int]:
        """Jobs per state."""
        out = {"future": 0, "queued": 0, "running": 0, "finished": 0, "failed": 0}
        for r in self.jobs.values():
            out[r.state] += 1
        return out

    def utilisation(self, start_s: float = 0.0, end_s: float | None = None) -> float:
        """Allocated GPU-seconds / healthy GPU-seconds over [start_s, end_s] (default: the run)."""
        healthy = self._integral(self.samples.healthy_gpus, start_s, end_s)
        return self._integral(self.samples.allocated_gpus, start_s, end_s) / healthy if healthy > 0 else 0.0

    def _integral(self, values: list[float] | list[int], start_s: float, end_s: float | None) -> float:
        """The step function `values` (held from each sample to the next) integrated over
        [start_s, end_s] (default: to the end of the run), in value-seconds."""
        end = self.end_s if end_s is None else min(end_s, self.end_s)
        t = np.clip(np.array([*self.samples.time_s, self.end_s]), start_s, end)
        return float(np.dot(np.diff(t), values)) if len(t) > 1 else 0.0

    def cost(self, start_s: float = 0.0, end_s: float | None = None) -> float:
        """$ paid over [start_s, end_s] (default: the run): the $/h samples integrated."""
        return self._integral(self.samples.cost_per_hour, start_s, end_s) / 3600

    def provisioned_node_hours(self, start_s: float = 0.0, end_s: float | None = None) -> float:
        """Node-hours of provisioned nodes over [start_s, end_s] (default: the run)."""
        return self._integral(self.samples.provisioned_nodes, start_s, end_s) / 3600

    def summary(self) -> dict[str, float]:
        """Headline numbers: job counts, JCT and queue delay percentiles (s), utilisation (over the
        run, and until the last arrival: `utilisation_arrivals`),
        evictions, lost GPU-hours, cost ($, over the run and until the last arrival:
        `cost_arrivals_usd`), provisioned node-hours, rounds and their mean and max wall time (s)."""
        done = [r for r in self.jobs.values() if r.jct_s is not None]
        jct = np.array([r.jct_s for r in done], dtype=float)
        delay = np.array([r.queue_delay_s for r in self.jobs.values() if r.queue_delay_s is not None], dtype=float)
        walls = np.array([r.wall_s for r in self.rounds], dtype=float)
        out: dict[str, float] = {f"jobs_{k}": float(v) for k, v in self.states().items()}
        for name, xs in (("jct", jct), ("queue_delay", delay)):
            for q in (50, 95, 99):
                out[f"{name}_p{q}_s"] = float(np.percentile(xs, q)) if len(xs) else math.nan
            out[f"{name}_mean_s"] = float(xs.mean()) if len(xs) else math.nan
        out["utilisation"] = self.utilisation()
        last_arrival = max((r.arrival_s for r in self.jobs.values()), default=0.0)
        out["utilisation_arrivals"] = self.utilisation(0.0, last_arrival)
        out["evictions"] = float(sum(r.evictions for r in self.jobs.values()))
        out["lost_gpu_hours"] = float(sum(r.lost_gpu_hours for r in self.jobs.values()))
        out["background_stopped"] = float(self.background_stopped)
        out["cost_usd"] = self.cost()
        out["cost_arrivals_usd"] = self.cost(0.0, last_arrival)
        out["provisioned_node_hours"] = self.provisioned_node_hours()
        out["rounds"] = float(len(self.rounds))
        out["round_wall_mean_s"] = float(walls.mean()) if len(walls) else 0.0
        out["round_wall_max_s"] = float(walls.max()) if len(walls) else 0.0
        out["makespan_s"] = self.end_s
        return out


class Simulator:
    """One simulation of `trace` on `cluster` under `config` (`run()` once)."""

    def __init__(self, cluster: Cluster, trace: list[TraceJob], config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        validate_cluster(cluster)
        validate_queue(Queue(jobs=[t.job for t in trace]), cluster)
        self.base = cluster
        self.trace = {t.job.id: t for t in trace}
        self.rng = np.random.default_rng(self.config.seed)
        self.nodes = {n.id: n for n in cluster.nodes}
        self.up = {n.id: n.healthy for n in cluster.nodes}
        self.pools = {p.name: p for p in cluster.pools}
        self.background = list(cluster.running)
        """Running jobs of the initial cluster: they hold their resources until their node goes down."""
        self.background_stopped = 0
        self.jobs = {t.job.id: JobRecord(t.job.id, t.job.tenant, t.gpus, t.arrival_s, t.duration_s,
                                         remaining_s=t.duration_s) for t in trace}
        self.queued: dict[str, float] = {}
        """Queued job id -> when it (re-)entered the queue (s)."""
        self.running: dict[str, _Running] = {}
        self.rounds: list[RoundRecord] = []
        self.samples = Samples()
        self.now = 0.0
        self._heap: list[tuple[float, int, int, str]] = []
        self._seq = 0
        self._epoch: dict[str, int] = {}
        self._arrivals_left = len(trace)
        self._since_round = 0
        self._dirty = False
        self._round_pending = False
        self._ups = 0
        """UP events pending (a node coming back can make room)."""
        self._gpus_of = {n.id: (n.devices.count - len(n.devices.unhealthy)) if n.devices else 0 for n in cluster.nodes}
        self._healthy = float(sum(g for n, g in self._gpus_of.items() if self.up[n]))
        self._alloc = 0.0
        self._jobs_on: dict[str, int] = {}
        self._price_if_busy: dict[str, float] = {}
        """$/h a node adds while it hosts work (non-reserved pools); reserved nodes are always paid."""
        self._cost = 0.0
        self.provisioned: dict[str, Node] = {}
        """Nodes the plans created (`<pool>-node-<k>`), until released."""
        self._created = 0
        """Provisioned nodes ever created: k of the next one (ids are never reused, so an event
        pending for a released node finds nothing)."""
        self._ready_at: dict[str, float] = {}
        """Provisioned node -> when it is up (created + its pool's `startup_s`)."""
        for n in cluster.nodes:
            pool = self.pools.get(n.pool) if n.pool else None
            if pool is not None and pool.pricing == "reserved":
                self._cost += pool.price_per_hour
            elif pool is not None:
                self._price_if_busy[n.id] = pool.price_per_hour
        for r in self.background:
            self._occupy(r.placements, +1)

    # -- events ---------------------------------------------------------------------------------
    def _push(self, t: float, kind: int, key: str) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, key))

    def _schedule_down(self, node_id: str, after: float) -> None:
        """The node's next reclaim (spot) or failure, whichever comes first, `after` seconds on."""
        node = self.nodes[node_id]
        pool = self.pools.get(node.pool) if node.pool else None
        rates = []
        if pool is not None and pool.pricing == "spot" and pool.interruption_rate_per_hour > 0:
            rates.append(("spot", pool.interruption_rate_per_hour))
        if self.config.node_failure_rate_per_hour > 0:
            rates.append(("fail", self.config.node_failure_rate_per_hour))
        best: tuple[float, str] | None = None
        for why, rate in rates:
            gap = float(self.rng.exponential(3600.0 / rate))
            if best is None or gap < best[0]:
                best = (gap, why)
        if best is not None:
            self._push(self.now + after + best[0], DOWN, f"{best[1]}:{node_id}")

    def run(self) -> SimResult:
        """Play every event until none are left (or the horizon) and return the record."""
        for tj in self.trace.values():
            self._push(tj.arrival_s, ARRIVE, tj.job.id)
        for node_id, healthy in self.up.items():
            if healthy:
                self._schedule_down(node_id, 0.0)
        if self.config.rounds.every == "seconds":
            self._push(0.0, ROUND, "")
        horizon = self.config.horizon_s
        while self._heap:
            t = self._heap[0][0]
            if horizon is not None and t > horizon:
                self.now = horizon
                break
            self.now = t
            while self._heap and self._heap[0][0] == t:
                _, kind, _, key = heapq.heappop(self._heap)
                self._handle(kind, key)
            if self._wants_round():
                self._round()
            self._sample()
            if self.config.check_invariants:
                broken = self.invariants()
                if broken:
                    raise SimulationError(f"t={self.now}: " + "; ".join(broken[:5]))
            if self._settled() and not self._dirty:
                break
        self._give_up_stuck()
        return SimResult(self.jobs, self.rounds, self.samples, self.now, float(sum(self._gpus_of.values())),
                         self.background_stopped)

    def _handle(self, kind: int, key: str) -> None:
        if kind == ARRIVE:
            self.queued[key] = self.now
            self.jobs[key].state = "queued"
            self._arrivals_left -= 1
            self._since_round += 1
            self._dirty = True
        elif kind == FINISH:
            job_id, epoch = key.rsplit("@", 1)
            if job_id in self.running and self.running[job_id].epoch == int(epoch):
                self._occupy(self.running.pop(job_id).placements, -1)
                rec = self.jobs[job_id]
                rec.state, rec.finish_s, rec.remaining_s = "finished", self.now, 0.0
                self._dirty = True
        elif kind == RELEASE:
            if key in self.provisioned and not self._jobs_on.get(key, 0):  # (a down one is gone already)
                self._release(key)
        elif kind == DOWN:
            why, node_id = key.split(":", 1)
            if node_id not in self.nodes:  # a provisioned node released before its reclaim
                return
            self.up[node_id] = False
            self._healthy -= self._gpus_of[node_id]
            for job_id in [j for j, r in self.running.items() if any(p.node == node_id for p in r.placements)]:
                self._evict(job_id)
                self._dirty = True  # the evicted job waits again (less capacity alone places nothing new)
            self._stop_background([r for r in self.background if any(p.node == node_id for p in r.placements)])
            if node_id in self.provisioned:  # a provisioned node that is reclaimed or fails is gone
                self._release(node_id)
                return
            self._push(self.now + (self.config.spot_return_s if why == "spot" else self.config.repair_s), UP, node_id)
            self._ups += 1
        elif kind == UP:
            self._ups -= 1
            self.up[key] = True
            self._healthy += self._gpus_of[key]
            self._schedule_down(key, 0.0)
            self._dirty = True
        else:  # ROUND (periodic)
            self._round_pending = True
            if self.queued or not self._settled():
                self._push(self.now + self.config.rounds.value, ROUND, "")

    def _stop_background(self, jobs: list[RunningJob]) -> None:
        """Jobs of the initial cluster stop (evicted, or their node went down); they are not in the
        trace, so they are counted (`background_stopped`) and not followed further."""
        for r in jobs:
            self.background.remove(r)
            self._occupy(r.placements, -1)
            self.background_stopped += 1

    def _wants_round(self) -> bool:
        if not self.queued:
            self._round_pending = self._dirty = False
            return False
        every = self.config.rounds.every
        if every == "event":
            return self._dirty
        if every == "seconds":
            due = self._round_pending and self._dirty
            self._round_pending = False
            return due
        return self._dirty and (self._since_round >= self.config.rounds.value or self._arrivals_left == 0)

    def _settled(self) -> bool:
        """No arrival, completion or node coming back ahead: no later round can place more (the
        events left are rounds and further interruptions)."""
        return self._arrivals_left == 0 and not self.running and self._ups == 0

    def _give_up_stuck(self) -> None:
        """Jobs still queued once the run has settled can never start: failed (`unschedulable`)."""
        if not self._settled():  # stopped at the horizon
            return
        for job_id, since in list(self.queued.items()):
            rec = self.jobs[job_id]
            rec.waited_s += self.now - since
            rec.state, rec.why_failed = "failed", "unschedulable: no event left that could make room"
            del self.queued[job_id]

    # -- rounds ---------------------------------------------------------------------------------
    def _evict(self, job_id: str) -> None:
        """Stop a running job: back to the queue with the work since its last checkpoint lost."""
        run = self.running.pop(job_id)
        self._occupy(run.placements, -1)
        rec = self.jobs[job_id]
        ran = max(0.0, self.now - run.started_s)  # 0 while its new nodes were still starting
        interval = run.trace.job.checkpoint_interval_s
        saved = math.floor(ran / interval) * interval if interval > 0 else ran
        rec.remaining_s = max(rec.remaining_s - saved, 0.0) + self.config.restart_s
        rec.lost_gpu_hours += rec.gpus * (ran - saved) / 3600
        rec.evictions += 1
        rec.state = "queued"
        self.queued[job_id] = self.now

    def current_cluster(self) -> Cluster:
        """The cluster as a round sees it now: health and running jobs (checkpoint ages)."""
        nodes: list[Node] = [n if n.healthy == self.up[n.id] else n.model_copy(update={"healthy": self.up[n.id]})
                             for n in [*self.base.nodes, *self.provisioned.values()]]
        running = list(self.background)
        for run in self.running.values():
            interval = run.trace.job.checkpoint_interval_s
            ran = max(0.0, self.now - run.started_s)
            running.append(RunningJob(job=run.trace.job, started_at=run.started_s,
                                      checkpoint_age_s=ran % interval if interval > 0 else 0.0,
                                      placements=run.placements))
        return self.base.model_copy(update={"nodes": nodes, "running": running, "pools": self._pools_left()})

    def _live_per_pool(self) -> Counter[str]:
        """Provisioned nodes alive, per pool."""
        return Counter(n.pool or "" for n in self.provisioned.values())

    def _pools_left(self) -> list[Pool]:
        """The pools with `max_nodes` lowered by the nodes already provisioned and not released."""
        live = self._live_per_pool()
        out = []
        for pool in self.base.pools:
            prov = pool.provisionable
            if prov is not None and live.get(pool.name):
                left = max(0, prov.max_nodes - live[pool.name])
                pool = pool.model_copy(update={"provisionable": prov.model_copy(update={"max_nodes": left})})
            out.append(pool)
        return out

    def _provision(self, plan: Plan) -> dict[str, str]:
        """Create the plan's new nodes (its slots ``<pool>/new-<i>`` become ``<pool>-node-<k>``,
        up after the pool's `startup_s`, paid from now); returns slot id -> node id."""
        renamed: dict[str, str] = {}
        for prov in plan.provisioning:
            pool = self.pools[prov.pool]
            spec = pool.provisionable
            assert spec is not None  # the validator refuses provisioning of pools without a template
            shape = self.base.node_templates[spec.template]
            for i in range(prov.count):
                node_id = f"{prov.pool}-node-{self._created}"  # '/' is reserved for slots
                while node_id in self.nodes:  # a node of the initial cluster with that name
                    self._created += 1
                    node_id = f"{prov.pool}-node-{self._created}"
                self._created += 1
                node = Node(**shape.model_dump(), id=node_id, domain=spec.domain, pool=prov.pool)
                renamed[f"{prov.pool}/new-{i}"] = node_id
                self.provisioned[node_id] = self.nodes[node_id] = node
                self.up[node_id] = True
                self._gpus_of[node_id] = node.devices.count if node.devices else 0
                self._healthy += self._gpus_of[node_id]
                self._cost += pool.price_per_hour
                self._ready_at[node_id] = self.now + spec.startup_s
                self._schedule_down(node_id, spec.startup_s)
                self._push(self.now + self.config.release_empty_s, RELEASE, node_id)  # kept if work lands on it
        return renamed

    def _release(self, node_id: str) -> None:
        """A provisioned node goes away: its $/h stops, its GPUs leave the cluster."""
        node = self.provisioned.pop(node_id)
        if self.up[node_id]:
            self._healthy -= self._gpus_of[node_id]
        self._cost -= self.pools[node.pool or ""].price_per_hour
        for table in (self.nodes, self.up, self._gpus_of, self._ready_at, self._jobs_on):
            table.pop(node_id, None)

    def current_queue(self) -> Queue:
        """The jobs waiting now, in arrival order."""
        jobs: list[Job] = [self.trace[j].job for j in sorted(self.queued, key=lambda j: (self.jobs[j].arrival_s, j))]
        return Queue(now=self.now, jobs=jobs)

    def _round(self) -> None:
        self._dirty = False
        self._since_round = 0
        if self.config.max_wait_s is not None:
            for job_id in [j for j in self.queued if self.now - self.jobs[j].arrival_s > self.config.max_wait_s]:
                rec = self.jobs[job_id]
                rec.waited_s += self.now - self.queued.pop(job_id)
                rec.state, rec.why_failed = "failed", f"waited more than {self.config.max_wait_s} s"
            if not self.queued:
                return
        cluster, queue = self.current_cluster(), self.current_queue()
        t0 = time.perf_counter()
        plan = self._plan(cluster, queue)
        wall = time.perf_counter() - t0
        for ev in plan.evictions:
            if ev.job in self.running:
                self._evict(ev.job)
            else:  # a job of the initial cluster (the plan's check knows it is running)
                self._stop_background([r for r in self.background if r.job.id == ev.job])
        renamed = self._provision(plan)
        by_job: dict[str, list[ReplicaPlacement]] = {}
        for pl in plan.placements:
            node = renamed.get(pl.node, pl.node)
            by_job.setdefault(pl.job, []).append(ReplicaPlacement(group=pl.group, replica=pl.replica, node=node,
                                                                  devices=pl.devices, share=pl.share))
        for job_id, places in by_job.items():
            rec = self.jobs[job_id]
            rec.waited_s += self.now - self.queued.pop(job_id)
            rec.state = "running"
            # replicas on new nodes wait for them to start: the job's work begins when all are up
            begins = max([self.now, *(self._ready_at.get(pl.node, self.now) for pl in places)])
            if rec.first_start_s is None:
                rec.first_start_s = begins
            epoch = self._epoch[job_id] = self._epoch.get(job_id, 0) + 1
            self.running[job_id] = _Running(self.trace[job_id], places, begins, epoch)
            self._occupy(places, +1)
            self._push(begins + rec.remaining_s, FINISH, f"{job_id}@{epoch}")
        self.rounds.append(RoundRecord(self.now, len(queue.jobs), len(by_job), len(plan.evictions), wall,
                                       plan.solver.status, plan.objective.get("fragmentation", math.nan),
                                       plan.objective.get("fairness", math.nan)))

    def _plan(self, cluster: Cluster, queue: Queue) -> Plan:
        """The policy's plan, refused (`PlanRejected`) if the validator finds a broken rule."""
        policy = self.config.policy
        # the round's documents are valid by construction; tests (check_invariants) re-validate them
        p = compile_problem(cluster, queue, validate=self.config.check_invariants)
        if callable(policy):
            plan = policy(cluster, queue)
        else:
            plan = solve_problem(p, solver=policy, objective=self.config.objective,
                                 time_limit=self.config.time_limit, seed=self.config.seed)
        if self.config.check_plans:
            bad = check_problem(p, plan)
            if bad:
                raise PlanRejected(self.now, [f"{v.rule}: {v.message}" for v in bad])
        placed = {pl.job for pl in plan.placements}
        unknown = placed - set(self.queued)
        if unknown:
            raise PlanRejected(self.now, [f"placement of a job that is not queued: {sorted(unknown)[:3]}"])
        return plan

    # -- records --------------------------------------------------------------------------------
    def node_usage(self) -> dict[str, dict[str, float]]:
        """Per node: resources held by running jobs (cpu, memory, rdma_nics, named) and the GPU
        share held on each device (`gpu:<index>`, 1.0 = a whole device)."""
        use: dict[str, dict[str, float]] = {}
        running = [(r.trace.job, r.placements) for r in self.running.values()]
        running += [(r.job, r.placements) for r in self.background]
        for job, places in running:
            groups = {g.name: g for g in job.groups}
            for pl in places:
                req = groups[pl.group].request
                u = use.setdefault(pl.node, {})
                for name, amount in (("cpu", req.cpu), ("memory", req.memory), ("rdma_nics", req.rdma_nics),
                                     *req.resources.items()):
                    u[name] = u.get(name, 0.0) + amount
                for d in pl.devices:
                    u[f"gpu:{d}"] = u.get(f"gpu:{d}", 0.0) + (pl.share if pl.share is not None else 1.0)
        return use

    def invariants(self) -> list[str]:
        """What is wrong with the state now (empty: nothing), checked without the validator:
        every arrived job is in exactly one of queued, running, finished, failed, and the state
        counts agree; no replica sits on a node that is down, on a device the node lacks or that
        is unhealthy; per node the requests stay within capacity; per device the shares stay
        within one GPU and a whole-GPU replica has its device alone; no pool has more provisioned
        nodes alive than its `max_nodes`; the incremental counters (allocated GPUs, healthy GPUs,
        $/h: reserved nodes, other nodes while they host work, provisioned nodes while they live)
        equal a recount."""
        out: list[str] = []
        for job_id, rec in self.jobs.items():
            where = [name for name, held in (("queued", job_id in self.queued), ("running", job_id in self.running))
                     if held]
            expected = [rec.state] if rec.state in ("queued", "running") else []
            if where != expected:
                out.append(f"{job_id}: state {rec.state} but held in {where}")
            if rec.state == "future" and self.now > rec.arrival_s:
                out.append(f"{job_id}: arrived at {rec.arrival_s} but not seen")
        for run in self.running.values():
            for pl in run.placements:
                if not self.up[pl.node]:
                    out.append(f"{run.trace.job.id}: on node {pl.node}, which is down")
                dev = self.nodes[pl.node].devices
                for d in pl.devices:
                    if dev is None or d >= dev.count or d in dev.unhealthy:
                        out.append(f"{run.trace.job.id}: device {d} of {pl.node} is absent or unhealthy")
        for node_id, used in self.node_usage().items():
            cap = self.nodes[node_id].capacity
            for name, amount in used.items():
                if name.startswith("gpu:"):
                    if amount > 1 + EPS:  # whole-GPU replicas count 1: a device shared with one is over
                        out.append(f"{node_id} device {name[4:]}: {amount:.3f} GPUs held")
                elif amount > cap.get(name, 0.0) + EPS:
                    out.append(f"{node_id}: {name} {amount:g} held > capacity {cap.get(name, 0.0):g}")
        alloc = sum(len(p.devices) * (p.share or 1.0) for r in self.running.values() for p in r.placements)
        alloc += sum(len(p.devices) * (p.share or 1.0) for r in self.background for p in r.placements)
        if abs(alloc - self._alloc) > 1e-6:
            out.append(f"allocated GPUs counter {self._alloc} != recount {alloc}")
        for name, live in self._live_per_pool().items():
            limit = self.pools[name].provisionable
            if limit is None or live > limit.max_nodes:
                out.append(f"pool {name}: {live} provisioned nodes > max_nodes")
        cost = 0.0
        for n in self.base.nodes:
            of = self.pools.get(n.pool or "")
            if of is not None and (of.pricing == "reserved" or self._jobs_on.get(n.id, 0) > 0):
                cost += of.price_per_hour
        cost += sum(self.pools[n.pool or ""].price_per_hour for n in self.provisioned.values())
        if abs(cost - self._cost) > 1e-6 * max(1.0, cost):
            out.append(f"$/h counter {self._cost} != recount {cost}")
        healthy = sum(g for n, g in self._gpus_of.items() if self.up[n])
        if abs(healthy - self._healthy) > 1e-6:
            out.append(f"healthy GPUs counter {self._healthy} != recount {healthy}")
        return out

    def _sample(self) -> None:
        """Record the state when it differs from the last record (the values hold until the next)."""
        s = self.samples
        row = (self._alloc, self._healthy, len(self.queued), len(self.running), self._cost, len(self.provisioned))
        if s.time_s and row == (s.allocated_gpus[-1], s.healthy_gpus[-1], s.queued[-1], s.running[-1],
                                s.cost_per_hour[-1], s.provisioned_nodes[-1]):
            return
        s.time_s.append(self.now)
        s.allocated_gpus.append(row[0])
        s.healthy_gpus.append(row[1])
        s.queued.append(row[2])
        s.running.append(row[3])
        s.cost_per_hour.append(row[4])
        s.provisioned_nodes.append(row[5])

    def _occupy(self, placements: list[ReplicaPlacement], sign: int) -> None:
        """Count a job's placements in (+1) or out (-1) of the allocated GPUs and the paid nodes."""
        for pl in placements:
            self._alloc += sign * len(pl.devices) * (pl.share or 1.0)
            before = self._jobs_on.get(pl.node, 0)
            after = self._jobs_on[pl.node] = before + sign
            if (before == 0) != (after == 0):
                self._cost += sign * self._price_if_busy.get(pl.node, 0.0)
            if after == 0 and pl.node in self.provisioned:
                self._push(self.now + self.config.release_empty_s, RELEASE, pl.node)


def simulate(cluster: Cluster, trace: list[TraceJob], config: SimConfig | None = None) -> SimResult:
    """Run `trace` through rounds on `cluster` (module docstring); `SimConfig` says how."""
    return Simulator(cluster, trace, config).run()
