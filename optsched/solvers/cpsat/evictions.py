"""Rounds too large for one model: CP-SAT re-decides the evictions of the best plan.

The `kueue` plan evicts by Kueue's order (other tenants' borrowing jobs first, lowest priority,
most recently started) and never asks how much work a victim loses. This step takes the jobs
that preempted (most lost work first), every running job they may evict on the nodes they may
use (their current victims included), and the nodes of both, and solves that neighbourhood with
every other job fixed where the plan put it: the preemptors may move, other victims may be chosen,
victims may be kept. The objective is the round's (admitted value first, then lost work), so
the result admits at least as much and, at equal value, loses less work. The merged plan is
checked by the validator and kept only when the objective says it is better.
"""

from __future__ import annotations

import numpy as np

from optsched import clock
from optsched.budget import (
    EVICTION_STEP_SECONDS,
    EVICTION_VARIABLES_SHARE,
    FIRST_STEP_SECONDS,
    LAST_STEP_FACTOR,
    STEP_HINT_SHARE,
)
from optsched.concerns import eligibility
from optsched.concerns.tenancy import preemption
from optsched.ledger import EPS, Ledger
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan
from optsched.model.stats import StepStats
from optsched.objective import EXACT, MAXIMISED, Objective
from optsched.problem import Problem
from optsched.roundmodel.evictions import hold_fixed_reclaims
from optsched.roundmodel.variables import RoundModel
from optsched.solvers.cpsat.neighbourhood import MAX_CANDIDATES, plan_ledger
from optsched.solvers.cpsat.pipeline import StepTimes, SubModel, solve_submodel
from optsched.view import PlanView

MAX_PREEMPTORS = 16
"""Preemptors re-solved in one step (most lost work first; later steps take the next ones). On
mixed-cloud-10k seed 0, steps of 16 preemptors in 2 s each cut the Kueue plan's lost work from
820.9 to 786.7 GPU-h at equal value; three steps of 48 in 10 s each cut it to 801.0 (profiles,
least-lost objective; the benchmark is benchmarks/results/tenancy.md)."""

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
                   num_workers: int) -> tuple[Plan, list[StepStats], int]:
    """Steps of `reconsider` over the preemptors, most lost work first, until each was re-decided
    once or `deadline` (`clock.now()` seconds); returns the best plan, the step records and how
    many steps improved it."""
    done: set[str] = set()
    rows: list[StepStats] = []
    improved = 0
    step = 0
    while clock.now() + FIRST_STEP_SECONDS < deadline:
        now = clock.now()
        left = deadline - now
        # a step of EVICTION_STEP_SECONDS, unless what would be left after it is too short for another
        step_deadline = deadline if left < LAST_STEP_FACTOR * EVICTION_STEP_SECONDS else now + EVICTION_STEP_SECONDS
        better, row = reconsider(p, plan, goal, deadline=step_deadline, seed=seed + step, num_workers=num_workers,
                                 done=done)
        step += 1
        rows.append(row)
        if better is not plan:
            plan, improved = better, improved + 1
        if row.result in ("no evictions", "every preemptor re-decided"):
            break
    return plan, rows, improved


def reconsider(p: Problem, plan: Plan, goal: Objective, *, deadline: float, seed: int, num_workers: int,
               done: set[str] | None = None, max_preemptors: int = MAX_PREEMPTORS) -> tuple[Plan, StepStats]:
    """One step (see module docstring); returns the better plan and its record. Preemptors in
    `done` (re-decided by earlier steps) are left out, and this step's are added to it."""
    if not plan.evictions:
        return plan, StepStats(kind="evictions", result="no evictions")
    lost: dict[str, float] = {}
    for ev in plan.evictions:
        if ev.by is not None and ev.reason != "migrated":
            lost[ev.by] = lost.get(ev.by, 0.0) + ev.lost_gpu_hours
    done = set() if done is None else done
    ids = sorted((j for j in lost if j not in done), key=lambda j: -lost[j])[:max_preemptors]
    done.update(ids)
    if not ids:
        return plan, StepStats(kind="evictions", result="every preemptor re-decided")
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
    r = RoundModel(p, base, movable, max_candidates=MAX_CANDIDATES, hint=plan, allowed=allowed, evictable=victims,
                   touched_fixed=others.quota_used > EPS, wanted=goal.terms())
    row = {"kind": "evictions", "preemptors": len(movable), "victims": len(victims), "nodes": int(allowed.sum())}
    t0 = clock.now()
    sub = SubModel(r, goal, start=plan, rest=plan, constrain=lambda r: hold_fixed_reclaims(r, plan, view),
                   seed=seed, num_workers=num_workers)
    times = StepTimes(variables_by=t0 + EVICTION_VARIABLES_SHARE * (deadline - t0), encode_by=deadline,
                      hint_s=lambda: STEP_HINT_SHARE * (deadline - clock.now()),
                      solve_s=lambda _t0, phase, phases: (deadline - clock.now()) / (phases - phase + 1))
    before = plan.objective or evaluate_problem(p, plan).objective()
    # (the terms are the model's once it is built)
    out = solve_submodel(sub, times, better=lambda terms: _better_step(goal, _two_phase_order(goal, r), terms, before))
    row.update(cpsat=out.status_name() or None, phases=out.phases)
    if not out.ok:
        return plan, StepStats(**row, result=out.result)
    assert out.plan is not None
    terms = out.terms
    return out.plan, StepStats(**row, result=(
        f"admitted_value {before['admitted_value']:.1f} -> {terms['admitted_value']:.1f}, "
        f"lost GPU-eq h {before['disruption']:.1f} -> {terms['disruption']:.1f}"))


def _two_phase_order(goal: Objective, r: RoundModel) -> list[str]:
    """The modelled terms of a lexicographic order with a tolerance, when the step solves it in two
    phases (else [])."""
    ordered = [n for n in goal.order if n in r.terms] if goal.weights is None else []
    return ordered if goal.tolerance > EXACT and len(ordered) > 1 else []
