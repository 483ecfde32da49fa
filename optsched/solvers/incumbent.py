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

from dataclasses import dataclass, field
from typing import Any

from optsched import clock
from optsched.budget import KUEUE_BY, Budget
from optsched.concerns.tenancy import preemption, quota
from optsched.metrics import evaluate_problem
from optsched.model.plan import Deferred, Plan
from optsched.model.stats import CandidateStats, ModelStats, SolverStats, StartStats, ValueBoundStats
from optsched.objective import Objective, ObjectiveSpec
from optsched.problem import JobSpec, Problem
from optsched.roundmodel.decode import NOT_ADMITTED
from optsched.solvers import guided
from optsched.solvers.bound import ValueBound, relaxed_base, value_bound
from optsched.solvers.contract import OPTIMAL_GAP
from optsched.solvers.domain import MIP_STRETCH_SHARE, DomainRun, domain_share, run_domain
from optsched.solvers.domain import fits as domain_fits
from optsched.solvers.greedy import STRATEGIES
from optsched.solvers.portfolio import GREEDY_ORDER, solve_portfolio
from optsched.view import PlanView


@dataclass
class Start:
    """The starting plan of a model solver and what it learned getting it."""

    p: Problem
    name: str
    """The solver that returns the plan (``cpsat`` or ``milp``)."""
    goal: Objective
    budget: Budget
    seed: int
    fallback: Plan
    """The best plan found without a model (the hint)."""
    cut: bool = False
    """The fallback was cut by the clock: no time is left for a model."""
    lp: ValueBound | None = None
    """The value bound of the round (None when there was no time for it)."""
    found: dict[str, Any] = field(default_factory=dict)
    """The fields of `StartStats` learned so far."""
    fallback_terms: dict[str, float] = field(default_factory=dict)
    domain: DomainRun | None = None
    """The domain model's run (`optsched.solvers.domain`), where the round was large enough for it."""
    evictable: list[JobSpec] | None = None
    """`may_go` where the start plan search computed it already."""

    @property
    def may_go(self) -> list[JobSpec]:
        """Running jobs some queued job may evict (the model decides which go), computed when a
        model first asks (0.15 s on mixed-cloud-10k: a round whose time the start plan used up
        builds no model and does not pay it)."""
        if self.evictable is None:
            self.evictable = preemption.evictable_jobs(self.p)
        return self.evictable

    @property
    def from_domain(self) -> bool:
        """The start plan is the domain model's plan (a model's plan, not a baseline's)."""
        return self.domain is not None and self.fallback is self.domain.plan

    @property
    def start(self) -> float:
        """When the call began (`clock.now()` seconds)."""
        return self.budget.start

    def guide(self, share: float) -> None:
        """Compute the value bound when it fits in the time limit, and rerun the best baselines in
        the order it guides (kept only when better) within `share` of the time limit."""
        p = self.p
        lp = value_bound(p, relaxed_base(p)) if self.budget.fits_value_bound(p) else None
        if lp is not None:
            self.found["value_bound"] = ValueBoundStats(value=lp.value, s=round(lp.seconds, 4), status=lp.status)
            base_strategy = self.fallback.solver.name.split(":")[-1]
            self.fallback, tried = guided.guided_plan(
                p, lp, [s for s in (base_strategy, "first-fit", "best-fit") if s in STRATEGIES], goal=self.goal,
                seed=self.seed, incumbent=self.fallback, deadline=self.budget.at(share))
            self.found["guided"] = tried
        self.lp = lp
        self.found["hint"] = self.fallback.solver.name
        self.fallback_terms = self.fallback.objective or evaluate_problem(p, self.fallback).objective()

    def cut_short(self) -> Plan:
        """The start plan as a `fallback`, without a bound: the start plan search used the whole
        time limit (its first baseline, or the Kueue candidate, was cut by the clock)."""
        terms = self.fallback.objective or evaluate_problem(self.p, self.fallback).objective()
        stats = SolverStats(name=self.name, status="fallback", seed=self.seed, wall_s=self.budget.elapsed(),
                            start=StartStats(**self.found, hint=self.fallback.solver.name),
                            reason="the start plan search used the whole time limit",
                            domain=None if self.domain is None else self.domain.stats())
        return self.fallback.model_copy(update={"objective": terms, "solver": stats})

    def settle(self, plan: Plan, terms: dict[str, float], *, optimal: bool, proven: bool, model_bound: float | None,
               model: ModelStats, label: str, **fields: Any) -> Plan:
        """A model back end's checked plan (with its metrics `terms`) against the start plan: the
        start plan when it is better (status `fallback`) or ties without the model winning the
        tie-breaks (`preemption.tie_break`: lower-priority victims, then fewer; on a multi-tenant
        round the Kueue plan, whose order among equals is the documented one), else the model's
        plan; `optimal`: the back end's status; `proven`: its optimum is proven for the round, so
        the rounding slack in `model_bound` is no gap."""
        if self.goal.better(self.fallback_terms, terms):
            return self.finish(self.fallback, "fallback", reason=f"{label} plan not better than the hint",
                               model_bound=model_bound, model=model.model_copy(update={"plan_terms": terms}),
                               **fields)
        status = "optimal" if optimal else "feasible"
        if proven and model_bound is not None:
            model_bound = terms["admitted_value"]
        if not self.goal.better(terms, self.fallback_terms) \
                and preemption.tie_break(self.p, plan) >= preemption.tie_break(self.p, self.fallback):
            return self.finish(self.fallback, status, model_bound=model_bound,
                               model=model.model_copy(update={"tie": "hint kept", "plan_terms": terms}), **fields)
        return self.finish(plan.model_copy(update={"objective": terms}), status, model_bound=model_bound, model=model,
                           **fields)

    def finish(self, plan: Plan, status: str, *, model_bound: float | None = None, **fields: Any) -> Plan:
        """Stamp the plan: its metrics, the solver's statistics (`fields` are `SolverStats`
        fields), bound = the tighter of the LP bound and an exact model's bound, and the gap.
        Where nodes may be provisioned, the LP bound (existing nodes only) is reported as
        `lp_bound_existing_nodes`, not as the round's bound."""
        p = self.p
        if status == "fallback" and plan is self.fallback and self.from_domain:
            # the start plan is the domain model's: a model's plan the node-level search did not beat
            status = "feasible"
            why = fields.get("reason")
            fields = {**fields, "reason": "the domain model's plan" + (f" ({why})" if why else "")}
        terms = self.fallback_terms if plan is self.fallback \
            else (plan.objective or evaluate_problem(p, plan).objective())
        lp = None if self.lp is None else self.lp.value
        if lp is not None and p.pool_max_nodes.sum() > 0:  # the LP relaxes existing nodes only
            fields = {**fields, "lp_bound_existing_nodes": lp}
            lp = None
        domain_bound = None
        if self.domain is not None:  # the domain model's LP bounds the round, provisioning included
            fields = {**fields, "domain": self.domain.stats()}
            domain_bound = self.domain.solution.bound
        bounds = [b for b in (lp, model_bound, domain_bound) if b is not None]
        bound = min(bounds) if bounds else None
        gap = None if bound is None else max(0.0, (bound - terms["admitted_value"]) / max(abs(bound), 1e-9))
        if status == "fallback" and gap is not None and gap <= OPTIMAL_GAP:
            # the start plan meets the round's bound: no model could admit more, nothing fell back
            status = "optimal"
            why = fields.get("reason")
            fields = {**fields, "reason": "the start plan meets the round's bound on admitted value"
                                          + (f" ({why})" if why else "")}
        plan = explain_deferred(p, plan)
        stats = SolverStats(name=self.name, status=status, wall_s=self.budget.elapsed(), seed=self.seed,
                            bound=bound, gap=gap, start=StartStats(**self.found), **fields)
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


def _kueue_candidate(p: Problem, time_limit: float, seed: int, *, preempt_until: float | None,
                     until: float) -> Plan | None:
    """The `kueue` plan by `until` (`clock.now()` seconds), evaluated; it may be cut by the clock
    (jobs deferred for `time_limit`: it is still valid, and its queue order put the most important
    jobs first, so it competes with the other candidates as it is)."""
    from optsched.solvers.kueue import solve_kueue

    now = clock.now()
    if now >= until:
        return None
    plan = solve_kueue(p, time_limit=until - now, seed=seed,  # within the round's budget: no fork to wait on
                       preempt_within=None if preempt_until is None else max(0.0, preempt_until - now),
                       diagnose_beside=False)
    return plan.model_copy(update={"objective": evaluate_problem(p, plan).objective()})


def starting_plan(p: Problem, name: str, *, objective: ObjectiveSpec, budget: Budget, seed: int,
                  hint: Plan | None, share: float, domain: bool = False) -> Start:
    """The best plan without a node-level model (module docstring), before `Start.guide`. With
    `domain` (a round too large for one node-level model), the domain model's plan comes first
    (`optsched.solvers.domain`), and the baselines only run in the time it leaves. The greedy
    baselines after the first and the Kueue plan on a multi-tenant round run only within `share`
    of the time limit (the rest is the model's). A `hint` (an initial plan) replaces them."""
    goal = Objective.parse(objective)
    may_go: list[JobSpec] | None = None  # running jobs some queued job may evict (`Start.may_go`)
    found: dict[str, Any] = {}
    kueue: Plan | None = None
    time_limit, start = budget.limit, budget.start
    given = hint is not None  # a hint (an initial plan) replaces every candidate below
    ran: DomainRun | None = None
    if not given and domain and p.jobs and domain_fits(budget, p):
        may_go = preemption.evictable_jobs(p)  # the domain path's estimates assume the preemption tables exist
    if may_go is not None and domain_fits(budget, p):
        ready = domain_share(budget, p)
        ran = run_domain(p, goal, budget, until=budget.at(ready), stretch=budget.at(max(ready, MIP_STRETCH_SHARE)))
        if ran.plan is not None and not budget.fits_greedy_passes(p, 1, budget.at(share)):
            hint = ran.plan  # no time for the baselines: the domain plan (with its terms) is the start plan
    if not given and ran is None and budget.greedy_passes(p) >= 2 and (may_go := preemption.evictable_jobs(p)):
        # preemption can pay (on mixed-cloud-10k it doubled the admitted value, results/tenancy.md):
        # the Kueue plan first, preempting in the first part of the time only (`KUEUE_PREEMPTS`)
        kueue = _kueue_candidate(p, time_limit, seed, preempt_until=budget.at(budget.kueue_preempts_share(p)),
                                 until=budget.at(KUEUE_BY))
    grown: Plan | None = None
    if not given and p.pool_max_nodes.sum() > 0 and budget.fits_greedy_passes(p, 2, budget.at(share)):
        # nodes may be provisioned: the karpenter plan (best-fit, then the cheapest pool per
        # pending job) is a candidate, so that a model that cannot be built whole starts from it
        from optsched.solvers.karpenter import solve_karpenter

        grown = solve_karpenter(p, time_limit=max(0.0, budget.left(share)), seed=seed)
        grown = grown.model_copy(update={"objective": evaluate_problem(p, grown).objective()})
    if hint is None:
        # the first baseline may use the whole budget, more of them only within `share` of it
        hint = solve_portfolio(p, GREEDY_ORDER, objective=objective, time_limit=time_limit, seed=seed,
                               started=start, more_within=share * time_limit)
        if ran is not None and ran.plan is not None and not goal.better(
                hint.objective or evaluate_problem(p, hint).objective(), ran.plan.objective or {}):
            hint = ran.plan  # the domain plan wins ties
    fallback = hint
    cut = any(d.reason == "time_limit" for d in fallback.deferred) and not (ran is not None and fallback is ran.plan)
    if not given and kueue is None and p.cluster.tenants and not cut and clock.now() < budget.at(share):
        # a multi-tenant round: the Kueue plan (admission order, borrowing) is a candidate
        kueue = _kueue_candidate(p, time_limit, seed, preempt_until=None, until=budget.at(share))
    if grown is not None:
        grown_terms = grown.objective or {}
        found["karpenter"] = CandidateStats(admitted_value=grown_terms["admitted_value"], cost=grown_terms["cost"])
        if goal.better(grown_terms, fallback.objective or evaluate_problem(p, fallback).objective()):
            fallback, cut = grown, any(d.reason == "time_limit" for d in grown.deferred)
    if kueue is not None:
        terms = kueue.objective or {}
        kueue_cut = any(d.reason == "time_limit" for d in kueue.deferred)
        found["kueue"] = CandidateStats(admitted_value=terms["admitted_value"], disruption=terms["disruption"],
                                        cut=kueue_cut)
        if not goal.better(fallback.objective or evaluate_problem(p, fallback).objective(), terms):
            fallback, cut = kueue, kueue_cut  # Kueue's order wins ties
    return Start(p, name, goal, budget, seed, fallback, cut=cut, found=found, domain=ran, evictable=may_go)
