"""The NSGA-II genome: random keys decoded into a plan by the greedy baselines' placement engine.

A genome is a vector of 5n + N keys in [0, 1) for a round of n queued jobs on N nodes
(docs/pareto.md):

- ``order[j]``: jobs are placed in increasing key order;
- ``rule[j]``: the node score and device choice used for job j's replicas, one of `RULES` (the
  greedy baselines' scores, `cheapest`: the node that adds the least $/h, and `fastest`: the
  fastest device model for the job, each then bin packing);
- ``admit[j]``: below `LEAVE_OUT` the job is not attempted (deferred with reason ``other``), so
  that the search can trade admitted value against cost or fragmentation;
- ``where[j]``: a preference the job's replicas try first, falling back to any node: spot nodes
  or non-spot nodes (jobs whose spot is not `forbidden`), then one of the device models the job
  accepts (jobs that accept more than one);
- ``grow[j]``: below 0.5 an elastic job grows beyond its minimum as soon as it is placed (as the
  baselines do), else only after every job has had its minimum (elastic replicas are worth half);
- ``open[v]``: below `CLOSE` node v takes no new replica (running work stays): the search can
  keep priced nodes empty, the lever of cost, which job-level choices alone reach only by chance.

Every decoded plan is feasible by construction: each replica goes through the same primitives as
the greedy baselines (`GreedyEngine`: eligibility, ledger fit, device pick, spread, fabric, quota,
gang rollback), and the tests check every plan with the validator. The decoder never evicts.
"""

from __future__ import annotations

import math

import numpy as np

from optsched.ledger import Ledger, PlacedReplica, crossed_domains
from optsched.model.plan import Plan, SolverStats
from optsched.problem import PRICING_CODES, BArray, FArray, GroupSpec, IArray, JobSpec, Problem
from optsched.solvers.greedy import (
    STRATEGIES,
    Attempt,
    GreedyEngine,
    Strategy,
    kube_order,
    score_most_allocated,
    to_plan,
)

LEAVE_OUT = 0.1
"""Admission keys below this leave the job out (a random genome attempts 90% of the jobs)."""

LEFT_OUT = "left out by this trade-off (nsga2 genome)"
"""Deferral detail of a job the genome did not attempt."""

GENES = 5
"""Keys per job: order, rule, admit, where, grow (then one key per node: open)."""

CLOSE = 0.1
"""Node keys below this close the node to new replicas (a random genome closes 10% of them)."""


def genome_length(p: Problem) -> int:
    """Keys in a genome of round `p`."""
    return GENES * len(p.jobs) + p.n_nodes


def marginal_price(p: Problem, ledger: Ledger, nodes: IArray) -> FArray:
    """$/h that placing work on each node adds: its price when it is a non-reserved priced node
    hosting nothing yet, else 0."""
    if not len(p.pool_names):
        return np.zeros(len(nodes))
    pool = p.node_pool[nodes]
    has_pool = pool >= 0
    pricing = np.where(has_pool, p.pool_pricing[np.maximum(pool, 0)], -1)
    empty = ~np.any(ledger.used[nodes] > 0, axis=1) & (ledger.free_whole[nodes] >= p.node_dev_count[nodes])
    paid = has_pool & (pricing != PRICING_CODES["reserved"])
    return np.where(paid & empty, p.node_price[nodes], 0.0)


def score_cheapest(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """Cost-aware bin packing: the node that adds the least $/h, ties by MostAllocated."""
    return -marginal_price(p, ledger, nodes) + 1e-3 * score_most_allocated(p, ledger, group, nodes)


def score_fastest(p: Problem, ledger: Ledger, group: GroupSpec, nodes: IArray) -> FArray:
    """Value-aware bin packing: the node whose device model runs the group fastest (the speed the
    admitted value counts), ties by MostAllocated."""
    model = p.node_model[nodes]
    speed = np.where(model >= 0, group.model_speed[np.maximum(model, 0)], 0.0) if group.uses_devices \
        else np.zeros(len(nodes))
    return speed + 1e-3 * score_most_allocated(p, ledger, group, nodes)


FASTEST = Strategy("fastest", score_fastest, "best",
                   source="Value-aware bin packing: fastest device model, then MostAllocated (NSGA-II rule).")

CHEAPEST = Strategy("cheapest", score_cheapest, "best",
                    source="Cost-aware bin packing: least added $/h, then MostAllocated (NSGA-II rule).")

RULES: tuple[Strategy, ...] = (*STRATEGIES.values(), CHEAPEST, FASTEST)
"""The per-job node scores a genome chooses from (the baselines' and `cheapest`)."""


def _bin(key: float, n: int) -> int:
    return min(int(key * n), n - 1)


class GenomeEngine(GreedyEngine):
    """The greedy engine with per-job rule, admission and placement preference from a genome."""

    def __init__(self, problem: Problem, keys: FArray) -> None:
        n = len(problem.jobs)
        order = [problem.jobs[i] for i in np.argsort(keys[:n], kind="stable")]
        super().__init__(problem, RULES[0], order)
        self.rule = keys[n:2 * n]
        self.attempt = keys[2 * n:3 * n] >= LEAVE_OUT
        self.where = keys[3 * n:4 * n]
        self.grow_late = keys[4 * n:5 * n] >= 0.5
        self.later: list[tuple[JobSpec, list[PlacedReplica], BArray | None]] = []
        """Admitted jobs whose elastic growth waits for the second pass, with their restriction."""
        self.real = self.real & (keys[GENES * n:] >= CLOSE)  # closed nodes are invisible to placement
        self.prefer: BArray | None = None

    def admit(self, job: JobSpec) -> Attempt:
        j = job.index
        if not self.attempt[j]:
            return Attempt(failure="other", detail=LEFT_OUT)
        self.s = RULES[_bin(float(self.rule[j]), len(RULES))]
        self.prefer = preference(self.p, job, float(self.where[j]))
        try:
            return self.place_job(job)
        finally:
            self.prefer = None

    def place_in(self, job: JobSpec, counts: list[int], restrict: BArray | None) -> Attempt:
        if self.prefer is not None:
            att = super().place_in(job, counts, self.prefer if restrict is None else restrict & self.prefer)
            if att.failure is None or att.failure == "time_limit":
                return att
        return super().place_in(job, counts, restrict)

    def grow(self, job: JobSpec, placed: list[PlacedReplica], restrict: BArray | None) -> None:
        if self.grow_late[job.index] and any(g.rmax > g.rmin for g in job.groups):
            self.later.append((job, placed, restrict))
            return
        super().grow(job, placed, restrict)

    def run(self, deadline: float = math.inf) -> tuple[dict[str, list[PlacedReplica]], dict[str, tuple[str, str]]]:
        placed, deferred = super().run(deadline)
        for job, replicas, restrict in self.later:  # second pass: elastic growth in job order
            if job.id not in placed:
                continue
            nodes = np.array([r.node for r in replicas], dtype=np.int64)
            self.ledger.add_uplink(crossed_domains(self.p, nodes), job.bandwidth, sign=-1.0)
            super().grow(job, replicas, restrict)
            nodes = np.array([r.node for r in replicas], dtype=np.int64)
            self.ledger.add_uplink(crossed_domains(self.p, nodes), job.bandwidth)
        return placed, deferred


def job_models(p: Problem, job: JobSpec) -> list[int]:
    """Device models every device-using group of `job` accepts (empty for CPU-only jobs)."""
    speeds = [g.model_speed for g in job.groups if g.uses_devices]
    if not speeds:
        return []
    ok = np.all(np.stack(speeds) > 0, axis=0)
    return [int(m) for m in np.flatnonzero(ok)]


def preference(p: Problem, job: JobSpec, key: float) -> BArray | None:
    """The nodes `job` tries first for the `where` key (None: no preference), see module doc.

    The key's range is cut in equal bins: [no preference, spot, non-spot, model 1, model 2, ...],
    spot bins only where the cluster has spot nodes and the job may use them, model bins only for
    jobs that accept two or more models.
    """
    options: list[BArray] = []
    if job.spot != "forbidden" and bool(p.node_spot.any()):
        options += [np.asarray(p.node_spot), np.asarray(~p.node_spot)]
    models = job_models(p, job)
    if len(models) > 1:
        options += [np.asarray(p.node_model == m) for m in models]
    k = _bin(key, len(options) + 1)
    return None if k == 0 else options[k - 1]


def decode(p: Problem, keys: FArray, *, seed: int = 0) -> Plan:
    """The plan of one genome (every job placed or deferred with its reason)."""
    engine = GenomeEngine(p, np.asarray(keys, dtype=float))
    placed, deferred = engine.run()
    return to_plan(p, placed, deferred, SolverStats(name="nsga2", status="heuristic", seed=seed))


def baseline_genome(p: Problem, name: str) -> FArray:
    """The genome that decodes to baseline `name`'s plan (kube order, its rule everywhere, every
    job attempted, no preference); Volcano's dynamic DRF order becomes kube order."""
    n = len(p.jobs)
    keys = np.zeros(genome_length(p))
    rank = np.empty(n)
    rank[[j.index for j in kube_order(p)]] = np.arange(n)
    keys[:n] = (rank + 0.5) / max(n, 1)
    names = [r.name for r in RULES]
    keys[n:2 * n] = (names.index(name) + 0.5) / len(RULES)
    keys[2 * n:3 * n] = 1.0 - 1e-9
    keys[3 * n:5 * n] = 0.0
    keys[GENES * n:] = 1.0 - 1e-9
    return keys


def plan_genome(p: Problem, plan: Plan, rule: str = "best-fit") -> FArray:
    """A genome close to `plan` (for seeding with model plans): its admitted jobs first, in job
    order, the others left out, only the nodes it places on open; `rule` everywhere. It decodes
    to a plan of its own."""
    n = len(p.jobs)
    keys = baseline_genome(p, rule)
    admitted = {p.job_index[pl.job] for pl in plan.placements}
    first = [j for j in range(n) if j in admitted]
    rest = [j for j in range(n) if j not in admitted]
    keys[np.array(first + rest, dtype=np.int64)] = (np.arange(n) + 0.5) / max(n, 1)
    keys[2 * n + np.array(rest, dtype=np.int64)] = 0.0
    used = np.zeros(p.n_nodes, dtype=bool)
    used[[p.node_index[pl.node] for pl in plan.placements]] = True
    keys[GENES * n:] = np.where(used, 1.0 - 1e-9, 0.0)
    return keys


def random_genomes(p: Problem, count: int, rng: np.random.Generator) -> FArray:
    """`count` uniform random genomes (rows)."""
    return rng.random((count, genome_length(p)))
