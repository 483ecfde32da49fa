"""The plan a model solver starts from, and how it stamps the plan it returns.

Both model back ends (`cpsat`, `milp`) first get a plan without a model: the best greedy
baselines, the `karpenter` plan where nodes may be provisioned, the `kueue` plan on a cluster
with tenants (first, when running jobs may be evicted), and the best baseline rerun in the order
guided by the value bound (`optsched.solvers.guided`).
The best of them is the fallback (returned when the model finds nothing better) and the hint (a
complete start for the model). `Start.finish` stamps any returned plan the same way: its metrics,
the tighter of the LP value bound and the model's proven bound, the gap, and the deferral reasons.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from optsched.concerns.tenancy import preemption, quota
from optsched.metrics import evaluate_problem
from optsched.model.plan import Deferred, Plan
from optsched.objective import Objective, ObjectiveSpec
from optsched.problem import JobSpec, Problem
from optsched.solvers import guided
from optsched.solvers.bound import ValueBound, relaxed_base, value_bound
from optsched.solvers.greedy import STRATEGIES
from optsched.view import PlanView

GREEDY_SECONDS_PER_JOB = 3.5e-4
"""A greedy pass over the queue takes about this long per job (best-fit: 0.23-0.25 s for 1,000
jobs on mixed-cloud-10k at 2x load, benchmarks/results/tenancy.md), rounded up. The Kueue plan goes
first only when the time limit holds two such passes (it preempts during the first `KUEUE_PREEMPTS` of it)."""


KUEUE_PREEMPTS = (0.5, 0.7)
"""Share of the time limit in which the Kueue candidate may preempt (then it only admits what
fits): the first below `KUEUE_LONG` greedy passes of time, the second above. On mixed-cloud-10k
(1,000 jobs; Kueue alone 5.8-7.6 s on this machine), 0.5 vs 0.7 gave 0.87 / 0.65 / 0.76 vs 0.83 /
0.62 / 0.67 of Kueue's value at 1 s (load 2), and 0.98 / 0.9993 / 0.98 vs 1.0 / 1.0 / 1.0 at 10 s
(load 4), seeds 0-2 (a profile run beside benchmarks/results/cpsat.md)."""

KUEUE_LONG = 10
"""Greedy passes (`GREEDY_SECONDS_PER_JOB` x jobs) of time limit above which the Kueue candidate
preempts for the longer share: a Kueue plan takes about 4-10 passes on mixed-cloud-10k."""


LP_SECONDS_PER_JOB = 1e-4
"""Time the value bound is expected to take per queued job (0.039-0.061 s for 1,000 jobs on
mixed-cloud-10k, benchmarks/results/bound.md; 0.12 s for 10,000 jobs, results/huge.md), rounded
up: it is computed only when it should end within the time limit."""


NOT_ADMITTED = "not admitted by the model"
"""Deferral detail of a job a model left out (`explain_deferred` turns it into a reason)."""


@dataclass
class Start:
    """The starting plan of a model solver and what it learned getting it."""

    p: Problem
    name: str
    """The solver that returns the plan (``cpsat`` or ``milp``)."""
    goal: Objective
    start: float
    """When the call began (perf_counter seconds)."""
    seed: int
    fallback: Plan
    """The best plan found without a model (the hint)."""
    may_go: list[JobSpec]
    """Running jobs some queued job may evict (the model decides which go)."""
    cut: bool = False
    """The fallback was cut by the clock: no time is left for a model."""
    lp: ValueBound | None = None
    """The value bound of the round (None when there was no time for it)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What the solver reports in `SolverStats.extra`."""
    fallback_terms: dict[str, float] = field(default_factory=dict)

    def guide(self, time_limit: float, share: float) -> None:
        """Compute the value bound when it fits in the time limit, and rerun the best baselines in
        the order it guides (kept only when better) within `share` of the time limit."""
        p, start = self.p, self.start
        lp_s = LP_SECONDS_PER_JOB * len(p.jobs)
        lp = value_bound(p, relaxed_base(p)) if time.perf_counter() + lp_s < start + time_limit else None
        if lp is not None:
            self.extra["value_bound"] = {"value": lp.value, "s": round(lp.seconds, 4), "status": lp.status}
            base_strategy = self.fallback.solver.name.split(":")[-1]
            self.fallback, self.extra["guided"] = guided.guided_plan(
                p, lp, [s for s in (base_strategy, "first-fit", "best-fit") if s in STRATEGIES], goal=self.goal,
                seed=self.seed, incumbent=self.fallback, deadline=start + share * time_limit)
        self.lp = lp
        self.extra["hint"] = self.fallback.solver.name
        self.fallback_terms = self.fallback.objective or evaluate_problem(p, self.fallback).objective()

    def finish(self, plan: Plan, status: str, *, model_bound: float | None = None, **more: Any) -> Plan:
        """Stamp the plan; bound = the tighter of the LP bound and an exact model's bound. Where
        nodes may be provisioned, the LP bound (existing nodes only) is reported in `extra`, not
        as the round's bound."""
        p = self.p
        terms = self.fallback_terms if plan is self.fallback \
            else (plan.objective or evaluate_problem(p, plan).objective())
        lp = None if self.lp is None else self.lp.value
        if lp is not None and p.pool_max_nodes.sum() > 0:  # the LP relaxes existing nodes only
            more = {**more, "lp_bound_existing_nodes": lp}
            lp = None
        bounds = [b for b in (lp, model_bound) if b is not None]
        bound = min(bounds) if bounds else None
        gap = None if bound is None else max(0.0, (bound - terms["admitted_value"]) / max(abs(bound), 1e-9))
        plan = explain_deferred(p, plan)
        stats = plan.solver.model_copy(update={
            "name": self.name, "status": status, "wall_s": time.perf_counter() - self.start, "seed": self.seed,
            "extra": {**self.extra, **more}, "bound": bound, "gap": gap})
        return plan.model_copy(update={"objective": terms, "solver": stats})


def explain_deferred(p: Problem, plan: Plan) -> Plan:
    """Give the jobs a model left out their binding reason: `quota` (the rule, flavor and amount
    their minimum replicas would break after the plan) where quota binds, else `capacity`."""
    if not any(d.detail.startswith(NOT_ADMITTED) for d in plan.deferred) or not len(p.flavors):
        return plan
    used = PlanView(p, plan).ledger.quota_used
    out = []
    for d in plan.deferred:
        why = quota.deferral(p, used, p.jobs[p.job_index[d.job]]) if d.detail.startswith(NOT_ADMITTED) else None
        out.append(d if why is None else Deferred(job=d.job, reason="quota", detail=why))
    return plan.model_copy(update={"deferred": out})


def finish_early(p: Problem, name: str, plan: Plan, start: float, seed: int, reason: str) -> Plan:
    """Return the greedy plan as a `fallback` without building a model."""
    stats = plan.solver.model_copy(update={"name": name, "status": "fallback", "seed": seed,
                                           "wall_s": time.perf_counter() - start,
                                           "extra": {"hint": plan.solver.name, "reason": reason}})
    terms = plan.objective or evaluate_problem(p, plan).objective()
    return plan.model_copy(update={"objective": terms, "solver": stats})


def _kueue_candidate(p: Problem, time_limit: float, seed: int, *, preempt_until: float | None,
                     until: float) -> Plan | None:
    """The `kueue` plan by `until` (perf_counter seconds), evaluated; it may be cut by the clock
    (jobs deferred for `time_limit`: it is still valid, and its queue order put the most important
    jobs first, so it competes with the other candidates as it is)."""
    from optsched.solvers.kueue import solve_kueue

    now = time.perf_counter()
    if now >= until:
        return None
    plan = solve_kueue(p, time_limit=until - now, seed=seed,
                       preempt_within=None if preempt_until is None else max(0.0, preempt_until - now))
    return plan.model_copy(update={"objective": evaluate_problem(p, plan).objective()})


def starting_plan(p: Problem, name: str, *, objective: ObjectiveSpec, time_limit: float, seed: int, start: float,
                  hint: Plan | None, share: float) -> Start:
    """The best plan without a model (module docstring), before `Start.guide`. The greedy
    baselines after the first and the Kueue plan on a multi-tenant round run only within `share`
    of the time limit (the rest is the model's)."""
    goal = Objective.parse(objective)
    # running jobs some queued job may evict: the bound treats them as gone, the model decides
    may_go = preemption.evictable_jobs(p, len(p.running)) if p.running and p.jobs else []
    extra: dict[str, Any] = {}
    kueue: Plan | None = None
    if hint is None and may_go and time_limit >= 2 * GREEDY_SECONDS_PER_JOB * len(p.jobs):
        # preemption can pay (on mixed-cloud-10k it doubled the admitted value, results/tenancy.md):
        # the Kueue plan first, preempting in the first part of the time only (`KUEUE_PREEMPTS`)
        part = KUEUE_PREEMPTS[time_limit >= KUEUE_LONG * GREEDY_SECONDS_PER_JOB * len(p.jobs)]
        kueue = _kueue_candidate(p, time_limit, seed, preempt_until=start + part * time_limit,
                                 until=start + 0.85 * time_limit)
    grown: Plan | None = None
    if hint is None and p.pool_max_nodes.sum() > 0 \
            and time.perf_counter() + 2 * GREEDY_SECONDS_PER_JOB * len(p.jobs) < start + share * time_limit:
        # nodes may be provisioned: the karpenter plan (best-fit, then the cheapest pool per
        # pending job) is a candidate, so that a model that cannot be built whole starts from it
        from optsched.solvers.karpenter import solve_karpenter

        grown = solve_karpenter(p, time_limit=max(0.0, start + share * time_limit - time.perf_counter()), seed=seed)
        grown = grown.model_copy(update={"objective": evaluate_problem(p, grown).objective()})
    if hint is None:
        from optsched.solve import solve_problem

        # the first baseline may use the whole budget, more of them only within `share` of it
        hint = solve_problem(p, solver="greedy", objective=objective, time_limit=time_limit, seed=seed,
                             started=start, more_within=share * time_limit)
    fallback = hint
    cut = any(d.reason == "time_limit" for d in fallback.deferred)
    if kueue is None and p.cluster.tenants and not cut and time.perf_counter() < start + share * time_limit:
        # a multi-tenant round: the Kueue plan (admission order, borrowing) is a candidate
        kueue = _kueue_candidate(p, time_limit, seed, preempt_until=None, until=start + share * time_limit)
    if grown is not None:
        grown_terms = grown.objective or {}
        extra["karpenter"] = {"admitted_value": grown_terms["admitted_value"], "cost": grown_terms["cost"]}
        if goal.better(grown_terms, fallback.objective or evaluate_problem(p, fallback).objective()):
            fallback, cut = grown, any(d.reason == "time_limit" for d in grown.deferred)
    if kueue is not None:
        terms = kueue.objective or {}
        kueue_cut = any(d.reason == "time_limit" for d in kueue.deferred)
        extra["kueue"] = {"admitted_value": terms["admitted_value"], "disruption": terms["disruption"],
                          "cut": kueue_cut}
        if not goal.better(fallback.objective or evaluate_problem(p, fallback).objective(), terms):
            fallback, cut = kueue, kueue_cut  # Kueue's order wins ties
    return Start(p, name, goal, start, seed, fallback, may_go, cut=cut, extra=extra)
