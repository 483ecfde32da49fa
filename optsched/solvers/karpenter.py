"""The `karpenter` baseline: kube-scheduler placement, then Karpenter-style provisioning.

What a Kubernetes cluster with Karpenter does with a round (docs/baselines.md):
1. the scheduler places what fits on the existing nodes (`best-fit`, kube-scheduler's
   MostAllocated scoring, in priority-then-age order);
2. for each job still pending (priority, then age), Karpenter picks the cheapest provisionable
   pool whose node template can run the job: the fewest new nodes its minimum replicas need
   there (each group packed alone onto empty template nodes) x the pool's $/h, among pools with
   that many slots left under `max_nodes`; ties go to the pool listed first;
3. the job is placed by the same scheduler on the existing nodes, the nodes already created this
   round (of any pool: Karpenter's bin packing of pending pods onto new capacity, what its
   consolidation would otherwise reach) and the chosen pool's new nodes, which are opened in order
   (``<pool>/new-0``, ``new-1``, ...), so the plan provisions per pool the count of the highest
   one used.
Jobs that fit on existing nodes never cause provisioning: they are placed in step 1. Jobs
deferred for quota, ratios or the time limit are not provisioned for.

Karpenter's own consolidation (replacing nodes by cheaper ones, deleting empty ones later) acts
between rounds and is not part of one round's plan.
"""

from __future__ import annotations

import math

import numpy as np

from optsched import clock
from optsched.concerns import eligibility
from optsched.latency import gc_paused
from optsched.model.plan import Plan, SolverStats
from optsched.problem import BArray, IArray, JobSpec, Problem
from optsched.solvers.contract import RunSpec, SolverInfo, stamped
from optsched.solvers.greedy import STRATEGIES, GreedyEngine, kube_order, to_plan

NOT_PROVISIONED_FOR = frozenset({"quota", "ratio", "time_limit"})
"""Deferral reasons new nodes cannot fix."""


def _nodes_needed(p: Problem, engine: GreedyEngine, job: JobSpec, empty: IArray) -> int | None:
    """New nodes of a pool the job's minimum replicas need, each group packed alone onto empty
    template nodes like `empty` (one unopened slot of the pool); None when a group cannot run there."""
    total = 0
    for g in job.groups:
        if g.rmin == 0:
            continue
        if not eligibility.mask(p, job, g)[empty[0]]:
            return None
        per_node = int(engine.ledger.replicas_fit(g, empty)[0])
        if per_node <= 0:
            return None
        total += math.ceil(g.rmin / per_node)
    return total


def solve_karpenter(p: Problem, *, time_limit: float = math.inf, seed: int = 0) -> Plan:
    """The karpenter baseline's plan (module docstring)."""
    with gc_paused():  # as in every solve (optsched.latency)
        return _karpenter_plan(p, time_limit, seed)


def _karpenter_plan(p: Problem, time_limit: float, seed: int) -> Plan:
    start = clock.now()
    deadline = start + time_limit
    engine = GreedyEngine(p, STRATEGIES["best-fit"])
    placed, deferred = engine.run(deadline=deadline)
    real = ~p.node_provisioned
    slots_of = {q: np.flatnonzero(p.node_provisioned & (p.node_pool == q)) for q in range(len(p.pool_names))
                if p.pool_max_nodes[q] > 0}
    opened = dict.fromkeys(slots_of, 0)
    for job in kube_order(p):
        if job.id not in deferred or deferred[job.id][0] in NOT_PROVISIONED_FOR:
            continue
        if clock.now() > deadline:
            break
        choices = []
        for q, slots in slots_of.items():
            if opened[q] >= len(slots):
                continue
            need = _nodes_needed(p, engine, job, slots[opened[q]:opened[q] + 1])
            if need is not None and need <= len(slots) - opened[q]:
                choices.append((need * float(p.pool_price[q]), q))
        if not choices:
            continue
        _, pool = min(choices)
        allowed: BArray = real.copy()
        for q, slots in slots_of.items():
            allowed[slots[: opened[q]]] = True
        allowed[slots_of[pool]] = True
        engine.use_nodes(allowed)
        att = engine.admit(job)
        if att.failure is not None:
            continue
        placed[job.id] = att.replicas
        del deferred[job.id]
        engine.record(job, att.replicas)
        for r in att.replicas:
            if p.node_provisioned[r.node]:
                q = int(p.node_pool[r.node])
                opened[q] = max(opened[q], eligibility.slot_number(p, r.node) + 1)
    engine.use_nodes(real)
    stats = SolverStats(name="karpenter", status="heuristic", wall_s=clock.now() - start, seed=seed)
    plan = to_plan(p, placed, deferred, stats)
    used = [r.node for reps in placed.values() for r in reps]
    return plan.model_copy(update={"provisioning": eligibility.provisioning_of(p, used)})


def _run_karpenter(p: Problem, run: RunSpec) -> Plan:
    left = max(0.0, run.started + run.time_limit - clock.now())
    return stamped(p, solve_karpenter(p, time_limit=left, seed=run.seed), run)


SOLVERS = [SolverInfo("karpenter", "best-fit, then the cheapest provisionable nodes for what is left",
                      _run_karpenter)]
"""The `karpenter` baseline (`optsched.solvers.registry`)."""
