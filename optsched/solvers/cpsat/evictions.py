"""Rounds too large for one model: CP-SAT re-decides the evictions of the best plan.

The `kueue` plan evicts by Kueue's order (other tenants' borrowing jobs first, lowest priority,
most recently started) and never asks how much work a victim loses. This step takes the jobs
that preempted (most lost work first), every running job they may evict on the nodes they may
use (their current victims included), and the nodes of both, and solves that neighbourhood with
every other job fixed where the plan put it: the preemptors may move, other victims may be chosen,
victims may be kept. The objective is the round's (admitted value first, then lost GPU-hours), so
the result admits at least as much and, at equal value, loses less work. The merged plan is
checked by the validator and kept only when the objective says it is better.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from optsched.check import check_problem
from optsched.concerns import eligibility
from optsched.concerns.tenancy import preemption
from optsched.ledger import EPS, Ledger
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan
from optsched.objective import EXACT, MAXIMISED, Objective
from optsched.problem import Problem
from optsched.solvers.cpsat.neighbourhood import FIRST_STEP_SECONDS, MAX_CANDIDATES, plan_ledger
from optsched.solvers.cpsat.variables import BuildTimeout, CpsatRound
from optsched.view import PlanView

MAX_PREEMPTORS = 16
"""Preemptors re-solved in one step (most lost work first; later steps take the next ones). On
mixed-cloud-10k seed 0, steps of 16 preemptors in 2 s each cut the Kueue plan's lost work from
820.9 to 786.7 GPU-h at equal value; three steps of 48 in 10 s each cut it to 801.0 (profiles,
least-lost objective; the benchmark is benchmarks/results/tenancy.md)."""

STEP_SECONDS = 2.0
"""Time one step may take (build, hint, two phases); the last one takes what is left."""

MAX_VICTIMS = 256
"""Running jobs the step may evict."""


ROUNDING = 1e-5
"""Relative slack for the first term of a two-phase step: the model holds it at or above the
plan's value in fixed point (0.5 / VALUE_SCALE per replica), the metric may differ by that much."""


def _better_step(goal: Objective, ordered: list[str], terms: dict[str, float], before: dict[str, float]) -> bool:
    """Whether a step's plan beats the plan it started from. After two phases the first term is
    at least the plan's (up to rounding) and the others are compared exactly: comparing them within
    the tolerance would throw away every step that cuts lost work by less than it, while many such
    steps add up (on mixed-cloud-10k seed 1, six steps each found less lost work and none was kept)."""
    if not ordered:
        return goal.better(terms, before)
    head = ordered[0]
    sign = 1.0 if head in MAXIMISED else -1.0
    if sign * (terms[head] - before[head]) < -ROUNDING * max(1.0, abs(before[head])):
        return False
    if sign * (terms[head] - before[head]) > goal.tolerance * max(1.0, abs(before[head])):
        return True  # more of the first term than the tolerance: better whatever the rest
    return Objective(order=tuple(ordered[1:])).better(terms, before)


def reconsider_all(p: Problem, plan: Plan, goal: Objective, *, deadline: float, seed: int,
                   num_workers: int) -> tuple[Plan, list[dict[str, Any]], int]:
    """Steps of `reconsider` over the preemptors, most lost work first, until each was re-decided
    once or `deadline` (perf_counter seconds); returns the best plan, the log rows and how many
    steps improved it."""
    done: set[str] = set()
    rows: list[dict[str, Any]] = []
    improved = 0
    step = 0
    while time.perf_counter() + FIRST_STEP_SECONDS < deadline:
        now = time.perf_counter()
        left = deadline - now
        # a step of STEP_SECONDS, unless what would be left after it is too short for another
        step_deadline = deadline if left < 1.5 * STEP_SECONDS else now + STEP_SECONDS
        better, row = reconsider(p, plan, goal, deadline=step_deadline, seed=seed + step, num_workers=num_workers,
                                 done=done)
        step += 1
        rows.append(row)
        if better is not plan:
            plan, improved = better, improved + 1
        if row.get("result") in ("no evictions", "every preemptor re-decided"):
            break
    return plan, rows, improved


def reconsider(p: Problem, plan: Plan, goal: Objective, *, deadline: float, seed: int, num_workers: int,
               done: set[str] | None = None, max_preemptors: int = MAX_PREEMPTORS) -> tuple[Plan, dict[str, Any]]:
    """One step (see module docstring); returns the better plan and a log row. Preemptors in
    `done` (re-decided by earlier steps) are left out, and this step's are added to it."""
    from optsched.solvers.cpsat import (
        _decode,
        _hint,
        _objective,
        _weights,
        complete_hint,
        encode_all,
        objective_at,
        solver_parameters,
    )

    row: dict[str, Any] = {"step": "evictions"}
    if not plan.evictions:
        row["result"] = "no evictions"
        return plan, row
    lost: dict[str, float] = {}
    for ev in plan.evictions:
        if ev.by is not None and ev.reason != "migrated":
            lost[ev.by] = lost.get(ev.by, 0.0) + ev.lost_gpu_hours
    done = set() if done is None else done
    ids = sorted((j for j in lost if j not in done), key=lambda j: -lost[j])[:max_preemptors]
    done.update(ids)
    if not ids:
        row["result"] = "every preemptor re-decided"
        return plan, row
    movable = sorted((p.jobs[p.job_index[j]] for j in ids if j in p.job_index), key=lambda j: j.index)
    usable = np.zeros(p.n_nodes, dtype=bool)
    for job in movable:
        for g in job.groups:
            usable |= eligibility.mask(p, job, g)
    evicted = {ev.job for ev in plan.evictions}
    mine = {ev.job for ev in plan.evictions if ev.by in set(ids)}
    victims = [k for k in p.running if k.id in mine or (
        k.id not in evicted and any(usable[pl.node] for pl in k.placements) and preemption.preemptors(p, k, movable))]
    victims = sorted(victims, key=lambda k: (k.id not in mine, k.priority, k.id))[:MAX_VICTIMS]
    victims = [k for k in victims if k.id in mine] + [k for k in victims if k.id not in mine]
    view = PlanView(p, plan)
    allowed = np.zeros(p.n_nodes, dtype=bool)
    for k in victims:
        allowed[[pl.node for pl in k.placements]] = True
    for job in movable:
        allowed[view.job_nodes(job.id)] = True
    base = plan_ledger(p, view)  # the plan: kept running jobs and placements, uplinks included
    for job in movable:
        base.add_replicas(job, view.by_job.get(job.id, []), sign=-1.0)
    base.add_running_many([k for k in victims if k.id not in evicted], sign=-1.0)
    ids_set = {j.id for j in movable}
    others = Ledger(p)  # the placements that stay: their quota rules bind the model (validator: touched)
    others.add_many([(rep.job, rep.job.groups[rep.group], rep.node, rep.devices, rep.share)
                     for rep in view.replicas if rep.job.id not in ids_set])
    r = CpsatRound(p, base, movable, max_candidates=MAX_CANDIDATES, hint=plan, allowed=allowed, evictable=victims,
                   touched_fixed=others.quota_used > EPS, wanted=goal.terms())
    row.update({"preemptors": len(movable), "victims": len(victims), "nodes": int(allowed.sum())})
    t0 = time.perf_counter()
    try:
        encode_all(r, deadline, variables_by=t0 + 0.4 * (deadline - t0))
    except BuildTimeout:
        row["result"] = "build timeout"
        return plan, row
    preemption.hold_fixed_reclaims(r, plan, view)
    ordered = [n for n in goal.order if n in r.terms] if goal.weights is None else []
    two_phases = goal.tolerance > EXACT and len(ordered) > 1
    if two_phases:  # first term alone, then the rest with the first held within the tolerance
        head = r.terms[ordered[0]]
        r.model.maximize(head.expr if head.maximise else -head.expr)
    else:
        r.model.maximize(_objective(r, _weights(r, goal)[0]))
    status, values = complete_hint(r, 0.25 * (deadline - time.perf_counter()), seed)
    if values is None:
        row["result"] = f"hint {status}"
        return plan, row
    _hint(r, values)

    def run(seconds: float) -> tuple[cp_model.CpSolver, Any]:
        s = cp_model.CpSolver()
        solver_parameters(s, time_limit=seconds, seed=seed, num_workers=num_workers, deterministic=False,
                          n_variables=len(r.model.proto.variables))
        return s, s.solve(r.model)

    solver, got = run((deadline - time.perf_counter()) / (2 if two_phases else 1))
    if two_phases and got in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # the first term may give up the tolerance of its best, never what the plan had
        at_hint = round(objective_at(r, values)) * (1 if head.maximise else -1)  # the hint's head
        best = solver.value(head.expr)
        # the tolerance is the round's: the jobs outside the neighbourhood add to the term
        rest = (plan.objective or evaluate_problem(p, plan).objective())[ordered[0]] * head.scale - at_hint
        slack = goal.tolerance * abs(best + rest)
        if head.maximise:
            floor_ = math.ceil(best - slack)
            r.model.add(head.expr >= max(floor_, at_hint))
            plan_fits = floor_ <= at_hint
        else:
            ceiling = math.floor(best + slack)
            r.model.add(head.expr <= min(ceiling, at_hint))
            plan_fits = ceiling >= at_hint
        # start from the plan when it keeps within the tolerance (it is what the rest must beat)
        _hint(r, values if plan_fits else list(solver.response_proto.solution))
        r.model.maximize(_objective(r, _weights(r, Objective(order=tuple(ordered[1:])))[0]))
        second, got2 = run(deadline - time.perf_counter())
        if got2 in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            solver, got = second, got2
        row["phases"] = 2
    row["cpsat"] = solver.status_name(got)
    if got not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        row["result"] = "no solution"
        return plan, row
    merged = _decode(r, solver, plan.solver, rest=plan)
    if merged is None:
        row["result"] = "decode failed (a model bug)"
        return plan, row
    terms = evaluate_problem(p, merged).objective()
    before = plan.objective or evaluate_problem(p, plan).objective()
    if not _better_step(goal, ordered if two_phases else [], terms, before):
        row["result"] = "no better"
        return plan, row
    violations = check_problem(p, merged)
    if violations:
        row["result"] = f"merged plan failed the check (a model bug): {violations[0]}"
        return plan, row
    row["result"] = (f"admitted_value {before['admitted_value']:.1f} -> {terms['admitted_value']:.1f}, "
                     f"lost GPU-h {before['disruption']:.1f} -> {terms['disruption']:.1f}")
    return merged.model_copy(update={"objective": terms}), row
