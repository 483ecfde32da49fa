"""Rounds too large for one model: CP-SAT on neighbourhoods of the best plan so far.

When the whole round cannot be modelled within the time limit, CP-SAT improves the best plan
one neighbourhood at a time (large neighbourhood search). A neighbourhood is a few leaf domains
whose free devices are fragmented, the jobs that the plan placed entirely inside them, and the
deferred jobs that may use them. Every other job stays where the plan put it, in the base ledger
with its uplink and quota use, so a solution of the submodel merges into a plan of the whole
round exactly; the merged plan is checked by the validator and kept only when the objective
says it is better. This is the domain decomposition of DESIGN.md "Scale", run one neighbourhood
after another (on 2 cores both are CP-SAT's workers).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from optsched.check import check_problem
from optsched.concerns import eligibility
from optsched.concerns.tenancy import preemption
from optsched.ledger import Ledger, crossed_domains
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan
from optsched.objective import Objective
from optsched.problem import BArray, FArray, IArray, JobSpec, Problem, priority_weight
from optsched.solvers.cpsat.variables import BuildTimeout, CpsatRound
from optsched.view import PlanView

MAX_CANDIDATES = 24
"""Candidate nodes per group inside a neighbourhood."""

NEIGHBOURHOOD_NODES = 96
"""Nodes per neighbourhood (whole leaf domains are added until at least this many)."""

BUILD_SHARE = 0.15
"""Share of the time left that one neighbourhood's model may take to build (its solve gets up to
twice the step's build time, so a step takes about 45% of what is left and two or more fit)."""

SLOTS_PER_STEP = 16
"""Unopened provisioning slots per pool a neighbourhood may open (docs/formulation.md K3-K4)."""

FIRST_STEP_SECONDS = 0.25
"""A first step starts only with this much time left (later ones: as long as the longest step so
far). In a profile, a first step on mixed-cloud-10k with 1,000 jobs took 0.25 s to build and
complete its hint (view, ledger, model), and one started with 0.05 s left overran a 1 s round."""


@dataclass
class SearchLog:
    """What the neighbourhood search did: one row per neighbourhood, for `solver.extra`."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    improved: int = 0


def plan_ledger(p: Problem, view: PlanView) -> Ledger:
    """The plan's usage (the view's ledger) plus the uplink traffic of its placed jobs."""
    ledger = view.ledger.copy()
    for job_id, reps in view.by_job.items():
        ledger.add_uplink(crossed_domains(p, view.job_nodes(job_id)), reps[0].job.bandwidth)
    return ledger


def _leaves(p: Problem) -> IArray:
    """Leaf domain of every node (one domain for all when the cluster has no topology)."""
    if p.n_levels:
        return p.node_domain_at(p.n_levels - 1)
    return np.zeros(p.n_nodes, dtype=np.int64)


def _leaf_scores(p: Problem, per_node: FArray) -> IArray:
    """Leaf domains (or the whole cluster when there is no topology) ordered by the summed score."""
    real = ~p.node_provisioned
    doms, inv = np.unique(_leaves(p), return_inverse=True)
    by_dom = np.bincount(inv, weights=np.where(real, per_node, 0.0), minlength=len(doms))
    order = np.argsort(-by_dom, kind="stable")
    order = order[by_dom[order] > 0]
    out: IArray = doms[order]
    return out


def neighbourhood(p: Problem, view: PlanView, ledger: Ledger, want: BArray, step: int) -> BArray:
    """Nodes of one neighbourhood: a source leaf and a sink leaf, rotating with `step`.

    The source leaf holds the most devices, on nodes that deferred jobs need (`want`: eligible for
    a group of theirs that fits nowhere now), of placed replicas that could run elsewhere (with
    the nodes of the other replicas of its jobs, so that they can move whole); sink leaves, the
    most free devices first, fill the rest. Moving such jobs from source to sink frees the devices
    that the deferred jobs need (a fast device model taken by a job that also runs on a slower
    one), and consolidating a leaf's fragments lets a gang in.
    """
    real = ~p.node_provisioned
    at = _leaves(p)
    flexible = np.zeros(p.n_nodes)  # devices of replicas that fit elsewhere, on another leaf
    room: dict[int, BArray] = {}
    for reps in view.by_job.values():
        job = reps[0].job
        for r in reps:
            if not r.devices or not want[r.node]:
                continue
            g = job.groups[r.group]
            free = room.get(id(g))
            if free is None:
                free = room[id(g)] = eligibility.mask(p, job, g) & real & ledger.fits_mask(g)
            if (free & (at != at[r.node])).any():
                flexible[r.node] += len(r.devices) * r.share
    sources = _leaf_scores(p, np.where(want, flexible, 0.0))
    sinks = _leaf_scores(p, ledger.free_whole.astype(float) + 0.01)
    chosen = np.zeros(p.n_nodes, dtype=bool)
    if len(sources):
        chosen |= at == sources[step % min(len(sources), 8)]
        for reps in view.by_job.values():  # the source's jobs move whole: add the nodes of their other replicas
            if any(chosen[r.node] for r in reps):
                chosen[[r.node for r in reps]] = True
    for k in range(len(sinks)):
        if chosen.sum() >= NEIGHBOURHOOD_NODES:
            break
        chosen |= at == sinks[(step + k) % len(sinks)]
    return chosen & real


def open_slots(p: Problem, plan: Plan) -> BArray:
    """Provisioning slots a neighbourhood may use: per provisionable pool, the ones `plan`
    provisions and the next `SLOTS_PER_STEP` (created in order, K4, so later ones cannot be
    reached in one step)."""
    out = np.zeros(p.n_nodes, dtype=bool)
    if not p.pool_max_nodes.sum():
        return out
    made = {p.pool_names.index(x.pool): x.count for x in plan.provisioning}
    for q in np.flatnonzero(p.pool_max_nodes > 0).tolist():
        slots = np.flatnonzero(p.node_provisioned & (p.node_pool == q))
        out[slots[: made.get(q, 0) + SLOTS_PER_STEP]] = True
    return out


def _job_worth(job: JobSpec) -> float:
    return priority_weight(job.priority) * sum(max(g.gpu, 1e-3) * max(g.rmin, 1) for g in job.groups)


def improve(p: Problem, plan: Plan, goal: Objective, *, deadline: float, seed: int, num_workers: int,
            seconds_per_group: float) -> tuple[Plan, SearchLog]:
    """Improve `plan` neighbourhood by neighbourhood until `deadline` (perf_counter seconds).

    Each neighbourhood's model gets as many groups as can be built in `BUILD_SHARE` of the time left
    (`seconds_per_group` is the measured build cost of one group's candidates).
    """
    from optsched.solvers.cpsat import (
        _decode,
        _hint,
        _objective,
        _weights,
        complete_hint,
        encode_all,
        solver_parameters,
    )

    log = SearchLog()
    # the model is exact-lexicographic (`_weights`): steps are compared the same way, so that small
    # gains within a tolerance add up instead of being thrown away one by one
    exact = goal if goal.weights is not None else Objective(order=goal.order)
    best = plan
    best_terms = plan.objective or evaluate_problem(p, plan).objective()
    step = 0
    view: PlanView | None = None
    full = Ledger.with_running(p)
    real = ~p.node_provisioned
    longest = FIRST_STEP_SECONDS  # the longest step so far: a step starts only if one as long still fits
    t0 = time.perf_counter()
    while True:
        now = time.perf_counter()
        if step:
            longest = max(longest, now - t0)
        if now + longest >= deadline:
            break
        step += 1
        t0 = now
        if view is None:  # the view and the ledger of the best plan change only when it improves
            view = PlanView(p, best)
            full = plan_ledger(p, view)
        deferred_ids = {d.job for d in best.deferred}
        deferred = sorted((p.jobs[p.job_index[j]] for j in deferred_ids), key=_job_worth, reverse=True)
        if not deferred:
            break
        want = np.zeros(p.n_nodes, dtype=bool)  # where the deferred jobs' binding groups could go
        for job in deferred[:64]:
            for g in job.groups:
                ok = eligibility.mask(p, job, g) & real
                if not (ok & full.fits_mask(g)).any():
                    want |= ok
        chosen = neighbourhood(p, view, full, want, step - 1)
        if not chosen.any():
            break
        chosen |= open_slots(p, best)
        # preemptors stay where they are: their evictions' legality reads their placements
        # (the eviction steps, `evictions.reconsider`, move them)
        preemptors = {ev.by for ev in best.evictions}
        inside = [job_id for job_id, reps in view.by_job.items()
                  if job_id not in preemptors and all(chosen[r.node] for r in reps)]
        groups_per_model = max(8, int(BUILD_SHARE * (deadline - time.perf_counter()) / seconds_per_group))
        budget = groups_per_model - sum(len(p.jobs[p.job_index[j]].groups) for j in inside)
        movable = [p.jobs[p.job_index[j]] for j in inside]
        for job in deferred:
            if budget <= 0:
                break
            if any((eligibility.mask(p, job, g) & chosen).any() for g in job.groups):
                movable.append(job)
                budget -= len(job.groups)
        ids = {j.id for j in movable}
        base = full.copy()  # the best plan without the movable jobs
        for job in movable:
            base.add_replicas(job, view.by_job.get(job.id, []), sign=-1.0)
        r = CpsatRound(p, base, sorted(movable, key=lambda j: j.index), max_candidates=MAX_CANDIDATES,
                       hint=best, allowed=chosen, wanted=goal.terms(), provision=bool(p.pool_max_nodes.sum() > 0))
        row: dict[str, Any] = {"step": step, "nodes": int(chosen.sum()), "placed": len(inside),
                               "deferred": len(movable) - len(inside), "left_s": round(deadline - t0, 3)}
        log.rows.append(row)
        left = deadline - time.perf_counter()
        try:
            encode_all(r, deadline, variables_by=time.perf_counter() + 0.5 * left)
        except BuildTimeout:
            row["result"] = "build timeout"
            break
        preemption.hold_fixed_reclaims(r, best, view)
        weights, _ = _weights(r, goal)
        r.model.maximize(_objective(r, weights))
        row["build_s"] = round(time.perf_counter() - t0, 3)
        status, values = complete_hint(r, 0.25 * (deadline - time.perf_counter()), seed)
        row["hint_s"] = round(time.perf_counter() - t0 - row["build_s"], 3)
        if values is None:
            row["result"] = f"hint {status}"
            continue
        _hint(r, values)
        solver = cp_model.CpSolver()
        now = time.perf_counter()  # solve for at most twice the step's build time, leaving time to merge
        solver_parameters(solver, time_limit=min(0.8 * (deadline - now), max(0.1, 2 * (now - t0))), seed=seed + step,
                          num_workers=num_workers, deterministic=False, n_variables=len(r.model.proto.variables))
        got = solver.solve(r.model)
        row["cpsat"] = solver.status_name(got)
        if time.perf_counter() > deadline:
            row["result"] = "out of time"
            break
        if got not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            continue
        objective = r.model.proto.objective  # maximised: stored negated, with scaling_factor -1
        raw = sum(c * values[v] for v, c in zip(objective.vars, objective.coeffs, strict=True)) + objective.offset
        hinted = (objective.scaling_factor or 1.0) * raw
        if solver.objective_value <= hinted + 0.5:
            row["result"] = "no better in the model"
            continue
        sub = _decode(r, solver, best.solver)
        if sub is None:
            row["result"] = "decode failed (a model bug)"
            continue
        placements = [pl for pl in best.placements if pl.job not in ids] + sub.placements
        merged = Plan(placements=placements, deferred=[d for d in best.deferred if d.job not in ids] + sub.deferred,
                      evictions=best.evictions, solver=best.solver,
                      provisioning=eligibility.provisioning_of(p, (p.node_index[pl.node] for pl in placements)))
        terms = evaluate_problem(p, merged).objective()
        row["s"] = round(time.perf_counter() - t0, 3)
        if not exact.better(terms, best_terms):
            row["result"] = "no better"
            continue
        violations = check_problem(p, merged)
        if violations:
            row["result"] = f"merged plan failed the check (a model bug): {violations[0]}"
            continue
        row["result"] = f"admitted_value {best_terms['admitted_value']:.1f} -> {terms['admitted_value']:.1f}"
        best, best_terms = merged.model_copy(update={"objective": terms}), terms
        view = None
        log.improved += 1
    return best, log
