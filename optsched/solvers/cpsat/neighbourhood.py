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

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from optsched import clock
from optsched.budget import (
    FIRST_STEP_SECONDS,
    STEP_BUILD_SHARE,
    STEP_HINT_SHARE,
    STEP_SOLVE_LEAST_S,
    STEP_SOLVE_PER_BUILD,
    STEP_SOLVE_SHARE,
    STEP_VARIABLES_SHARE,
)
from optsched.concerns import eligibility
from optsched.ledger import Ledger, crossed_domains
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan
from optsched.model.stats import StepStats
from optsched.objective import Objective
from optsched.problem import BArray, FArray, IArray, JobSpec, Problem, priority_weight
from optsched.roundmodel.evictions import hold_fixed_reclaims
from optsched.roundmodel.variables import RoundModel
from optsched.solvers.cpsat.pipeline import StepTimes, SubModel, solve_submodel
from optsched.view import PlanView

MAX_CANDIDATES = 24
"""Candidate nodes per group inside a neighbourhood."""

NEIGHBOURHOOD_NODES = 96
"""Nodes per neighbourhood (whole leaf domains are added until at least this many)."""

STEP_PRESOLVE = False
"""A neighbourhood's search starts from its complete hint without CP-SAT's presolve: with it, the
first steps of 1-2 s rounds on dgx-h100-1k and ascend-910b-4k (models under 5,000 variables, about
0.2 s to search) ended UNKNOWN, without even the hint; without it, OPTIMAL or FEASIBLE (a profile,
issue 19's note)."""

SLOTS_PER_STEP = 16
"""Unopened provisioning slots per pool a neighbourhood may open (docs/formulation.md K3-K4)."""

@dataclass
class SearchLog:
    """What the neighbourhood search did: one record per neighbourhood (`SolverStats.steps`)."""

    rows: list[StepStats] = field(default_factory=list)
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


def _holding_reclaims(plan: Plan, view: PlanView) -> Callable[[RoundModel], None]:
    """The extra constraints of a neighbourhood of `plan`: the reclaims it does not decide stay legal."""
    return lambda r: hold_fixed_reclaims(r, plan, view)


def _beats(goal: Objective, terms: dict[str, float]) -> Callable[[dict[str, float]], bool]:
    return lambda other: goal.better(other, terms)


def _step_times(began: float, deadline: float) -> StepTimes:
    """The times of a neighbourhood step that `began` (`clock.now()` seconds; `optsched.budget`,
    "sub-model steps")."""
    left = deadline - clock.now()

    def solve_s(_t0: float, _phase: int, _phases: int) -> float:
        now = clock.now()  # at most twice the step so far, leaving time to merge and check
        return min(STEP_SOLVE_SHARE * (deadline - now), max(STEP_SOLVE_LEAST_S, STEP_SOLVE_PER_BUILD * (now - began)))

    return StepTimes(variables_by=clock.now() + STEP_VARIABLES_SHARE * left, encode_by=deadline,
                     hint_s=lambda: STEP_HINT_SHARE * (deadline - clock.now()), solve_s=solve_s,
                     discard_after=deadline)


def improve(p: Problem, plan: Plan, goal: Objective, *, deadline: float, seed: int, num_workers: int,
            seconds_per_group: float) -> tuple[Plan, SearchLog]:
    """Improve `plan` neighbourhood by neighbourhood until `deadline` (`clock.now()` seconds).

    Each neighbourhood's model gets as many groups as can be built in `STEP_BUILD_SHARE` of the
    time left (`seconds_per_group` is the measured build cost of one group's candidates), and goes
    through the sub-model pipeline (`optsched.solvers.cpsat.pipeline`).
    """
    log = SearchLog()
    # the model is exact-lexicographic (`objective_weights`): steps are compared the same way, so
    # that small gains within a tolerance add up instead of being thrown away one by one
    exact = goal if goal.weights is not None else Objective(order=goal.order)
    best = plan
    best_terms = plan.objective or evaluate_problem(p, plan).objective()
    step = 0
    view: PlanView | None = None
    full = Ledger.with_running(p)
    real = ~p.node_provisioned
    longest = FIRST_STEP_SECONDS  # the longest step so far: a step starts only if one as long still fits
    t0 = clock.now()
    while True:
        now = clock.now()
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
        groups_per_model = max(8, int(STEP_BUILD_SHARE * (deadline - clock.now()) / seconds_per_group))
        budget = groups_per_model - sum(len(p.jobs[p.job_index[j]].groups) for j in inside)
        movable = [p.jobs[p.job_index[j]] for j in inside]
        for job in deferred:
            if budget <= 0:
                break
            if any((eligibility.mask(p, job, g) & chosen).any() for g in job.groups):
                movable.append(job)
                budget -= len(job.groups)
        base = full.copy()  # the best plan without the movable jobs
        for job in movable:
            base.add_replicas(job, view.by_job.get(job.id, []), sign=-1.0)
        r = RoundModel(p, base, sorted(movable, key=lambda j: j.index), max_candidates=MAX_CANDIDATES,
                       hint=best, allowed=chosen, wanted=goal.terms(), provision=bool(p.pool_max_nodes.sum() > 0))
        row = {"kind": "neighbourhood", "step": step, "nodes": int(chosen.sum()), "placed": len(inside),
               "deferred": len(movable) - len(inside), "left_s": round(deadline - t0, 3)}
        sub = SubModel(r, goal, start=best, rest=best, constrain=_holding_reclaims(best, view),
                       phases_allowed=False, skip_unimproved=True, presolve=STEP_PRESOLVE, seed=seed + step,
                       num_workers=num_workers)
        out = solve_submodel(sub, _step_times(t0, deadline), better=_beats(exact, best_terms))
        row.update(build_s=None if out.build_s is None else round(out.build_s, 3),
                   hint_s=None if out.hint_s is None else round(out.hint_s, 3), cpsat=out.status_name() or None)
        if out.result == "build timeout":
            log.rows.append(StepStats(**row, result="build timeout"))
            break
        if out.result == "out of time":
            log.rows.append(StepStats(**row, result=out.result))
            break
        if not out.ok:
            log.rows.append(StepStats(**row, result=out.result,
                                      s=round(clock.now() - t0, 3) if out.plan is not None else None))
            continue
        assert out.plan is not None
        terms = out.terms
        log.rows.append(StepStats(**row, s=round(clock.now() - t0, 3),
                                  result=f"admitted_value {best_terms['admitted_value']:.1f} -> "
                                         f"{terms['admitted_value']:.1f}"))
        best, best_terms = out.plan, terms
        view = None
        log.improved += 1
    return best, log
