"""The `domain` solver: the hierarchical round of `optsched.domain` (DESIGN.md "Scale").

The round is decided per cell by one MILP (`optsched.domain.model`: admissions, replicas per
cell or class, evictions under the preemption rules, quota and cohort lending, required
topology), solved by HiGHS as a MIP where the time allows it, else as its LP relaxation rounded;
its replicas are then placed on nodes and devices and its evictions given preemptors
(`optsched.domain.assign`), and the plan is checked by the validator. The model's LP value bounds
every valid plan on the existing nodes, so the plan's `gap` is a gap to the round.

Where a pool may add nodes, the plan provisions them when the objective does not count `cost`
(the default order does not), opening, per pool, the slots the model put replicas on.

With a lexicographic order of admitted value, then disruption, and a tolerance (``{"lexicographic":
["admitted_value", "disruption", ...], "tolerance": 0.05}``), a second LP finds the least lost
work among solutions within the tolerance of the first's value (`least_lost_within`), warm-started
from the first's basis, and that is the plan placed.

How lost work is priced against admitted value comes from the objective: a weighted objective's
``disruption`` weight over its ``admitted_value`` weight; the default order (value first) prices it
at `LOST_WEIGHT` (an eviction must buy value); an order that puts ``disruption`` first at
`NO_EVICTION_PRICE`.

At scale this is also the start plan of `cpsat` (`optsched.solvers.incumbent`), which then
improves it neighbourhood by neighbourhood.
"""

from __future__ import annotations

from dataclasses import dataclass

from optsched import clock
from optsched.budget import Budget
from optsched.domain.assign import Assigned, assign
from optsched.domain.model import LOST_WEIGHT, DomainModel, DomainSolution, build_model, solve_model, value_bound
from optsched.latency import gc_paused
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan
from optsched.model.stats import DomainStats, SolverStats
from optsched.objective import EXACT, Objective, ObjectiveSpec
from optsched.problem import Problem
from optsched.solvers.contract import OPTIMAL_GAP, RunSpec, SolverInfo
from optsched.solvers.greedy import solve_greedy

NO_EVICTION_PRICE = 1e4
"""Price of lost work when the objective puts `disruption` before admitted value."""

MIP_SECONDS_PER_COLUMN = 1e-4
"""HiGHS's time for the MIP per column, rounded up (optimal in 1.0-1.2 s for 10.6-11.1k columns on
mixed-cloud-10k with 1,000 jobs, 0.008-0.022 s for 300-740 columns on dgx-h100-1k and ascend-910b-4k
before the colocation bindings; the LP takes 0.004-0.12 s there). The LP relaxation is solved
first (its rounded solution is the plan where nothing better comes); the MIP then runs when twice
this estimate fits its share of the time left, abandoned at that share's end (on the 102,400-GPU
round it did not finish in 7.6 s)."""

MIP_SHARE = 0.5
"""Share of the time left that the MIP may take (the rest places, checks and evaluates)."""

TIGHT_MIP = 0.5
"""Where twice the MIP's estimate does not fit its share of the time left (nor by the stretch), the
MIP still runs when this share of that (the estimate itself) fits: HiGHS's best plan at its limit,
or the LP's rounding where that places better (both are placed). On ascend-910b-4k with 500 jobs at
1 s (2,258-2,980 columns, the MIP optimal in 0.1-0.37 s) the LP's rounding admitted 19-replica
gangs bound to one domain that their domain could not hold (4% below the bound on seed 2 at 2x
load, one-off): the round fell back to a greedy plan on 3 of 15 rounds, with the tight MIP on 1
(benchmarks/results/scale.md: 14 of 15 not fallback)."""

FINISH_SHARE = 0.97
"""The plan is placed and checked by this share of the limit (the rest evaluates and stamps it: the
whole call ends within about 1.05 x its limit on mixed-cloud-10k)."""

BOUND_FINISH_S = 0.05
"""Seconds kept for evaluating the plan when deciding whether the separate value LP still fits."""

ASSIGN_SECONDS_PER_JOB = 3.5e-4
"""Time to place, name preemptors and check, per queued job (0.29-0.35 s for 1,000 jobs on
mixed-cloud-10k): kept back from the solve."""

LP_SECONDS_PER_COLUMN = 1.5e-5
"""HiGHS's time for the LP per column (0.11-0.12 s for 10.6-11.1k columns on mixed-cloud-10k with
1,000 jobs), rounded up: the LP gets at least three times that, whatever the estimates left it."""


START_SHARE = 0.3
"""As the start plan of `cpsat`, the domain model's plan is ready by this share of a long limit
(the neighbourhood steps improve it in the rest) ..."""

MIP_STRETCH_SHARE = 0.6
"""As a start plan, the domain model's plan may be ready as late as this share of the limit when
its MIP fits by then and not by `START_SHARE`: on mixed-cloud-10k with 1,000 jobs at 10 s the MIP's
plan (solved in 1.2 s) is 0.7% better than the LP's rounding, and the neighbourhood steps in the
rest of the limit did not close that (gap 1.03% with the LP start, 0.32% from the MIP:
benchmarks/results/scale.md, seed 3)."""

START_LEAST_S = 1.0
"""... but not before this many seconds from the start (a whole call at mixed-cloud-10k with 1,000
jobs, LP route: 0.9-1.05 s)."""


SECONDS_PER_JOB = 4.5e-4
"""The domain path per queued job once the round's preemption tables exist, its typical time
(build 0.1-0.2 s, LP 0.1 s, placement and check 0.4-0.45 s for 1,000 jobs on mixed-cloud-10k; 5.5 s
for 10,000 on the 102,400-GPU round): as a start plan it runs only when this fits before its share
of the limit. At 0.5 s on mixed-cloud-10k it does not (its placement, cut by the clock, placed
nothing); with 6e-4 the gate also turned it away at 1 s on 2 of 5 rounds of a slow moment, and the
round fell back to a cut Kueue plan (0.78 x Kueue's value)."""


def fits(budget: Budget, p: Problem) -> bool:
    """Whether the domain path should end before its share of the limit (`SECONDS_PER_JOB`)."""
    return budget.left(domain_share(budget, p)) >= SECONDS_PER_JOB * len(p.jobs)


def domain_share(budget: Budget, p: Problem) -> float:
    """Share of the limit by which the domain plan is ready as a start plan: `START_SHARE`, but
    at least `START_LEAST_S` plus 1.25 x the path's estimate (`SECONDS_PER_JOB`), so that it fits
    where the limit allows (on the 102,400-GPU round at 10 s: 8.5 s; the path took 5.5 s)."""
    need = START_LEAST_S + 1.25 * SECONDS_PER_JOB * len(p.jobs)
    return max(START_SHARE, min(FINISH_SHARE, need / budget.limit))


def lost_price(goal: Objective) -> float:
    """The objective weight of lost work (GPU-equivalent hours) against admitted value (module docstring)."""
    if goal.weights is not None:
        value = float(goal.weights.get("admitted_value", 0.0))
        lost = float(goal.weights.get("disruption", 0.0))
        return max(lost / value, LOST_WEIGHT) if value > 0 else NO_EVICTION_PRICE
    order = [t for t in goal.order if t in ("admitted_value", "disruption")]
    return NO_EVICTION_PRICE if order and order[0] == "disruption" else LOST_WEIGHT


def least_lost_within(goal: Objective, m: DomainModel) -> float | None:
    """The tolerance of a lexicographic order of admitted value, then disruption (None for any
    other objective, or when the model may evict nothing)."""
    order = [t for t in goal.order if t in ("admitted_value", "disruption")]
    if goal.weights is not None or goal.tolerance <= EXACT or order[:2] != ["admitted_value", "disruption"]:
        return None
    return goal.tolerance if len(m.victims) else None


@dataclass
class DomainRun:
    """One run of the domain path: the model, its solution, the plan with its objective terms (or
    why there is none) and timings."""

    model: DomainModel
    solution: DomainSolution
    result: Assigned | str
    integral: bool
    assign_s: float
    price: float

    @property
    def plan(self) -> Plan | None:
        return self.result.plan if isinstance(self.result, Assigned) else None

    def stats(self) -> DomainStats:
        m, sol = self.model, self.solution
        return DomainStats(
            cells=m.cells.n, classes=m.cells.n_classes, columns=len(m.cost), rows=int(m.a.shape[0]),
            nonzeros=int(m.a.nnz), victims=len(m.victims), integral=self.integral, highs_status=sol.status,
            lost_price=self.price, model_value=sol.value, bound=sol.bound, build_s=round(m.build_s, 4),
            solve_s=round(sol.seconds, 4), assign_s=round(self.assign_s, 4), admitted=len(sol.admitted),
            evictions=len(sol.preempted) + len(sol.reclaimed),
            kept_back=self.result.kept_back if isinstance(self.result, Assigned) else 0)


def run_domain(p: Problem, goal: Objective, budget: Budget, *, until: float, stretch: float | None = None) -> DomainRun:
    """Build, solve (the LP, then the MIP where it fits) and assign the domain model, the plan
    ready by `until` (`clock.now()` seconds) when the estimates hold; by `stretch` (later) when the
    MIP fits by then and not by `until`. Where the MIP ran and time is left, the LP's rounding is
    placed too and the better plan kept (`BOTH_PLACED_MARGIN`). The bound is the model's value
    LP: computed apart when lost work is priced (a priced objective's dual bounds value only
    loosely) and where the plan's solve leaves the provisioning slots out."""
    price = lost_price(goal)
    m = build_model(p, price)
    reserve = ASSIGN_SECONDS_PER_JOB * len(p.jobs)
    left = until - clock.now() - reserve
    integral = False
    lp_least = 3 * LP_SECONDS_PER_COLUMN * len(m.cost)
    provision = "cost" not in goal.terms()  # new nodes cost nothing the objective counts
    within = least_lost_within(goal, m)
    # the LP first (with a tolerance: then the least lost work from its basis): a plan to keep
    sol = solve_model(m, max(lp_least, left), integral=False, provision=provision, least_lost_within=within)
    left = until - clock.now() - reserve
    need = 2 * MIP_SECONDS_PER_COLUMN * len(m.cost)
    if stretch is not None and left * MIP_SHARE < need <= (stretch - clock.now() - reserve) * MIP_SHARE:
        until = stretch
        left = until - clock.now() - reserve
    if left * MIP_SHARE < need and left * MIP_SHARE >= TIGHT_MIP * need:
        need = TIGHT_MIP * need  # a tight MIP: its plan at the limit, or the LP's rounding if that places better
    rounded = None  # the LP's solution, kept to be placed too when the MIP's is and time allows
    if within is None and sol.value is not None and left * MIP_SHARE >= need:
        mip = solve_model(m, left * MIP_SHARE, integral=True, provision=provision)
        if mip.value is not None:
            bounds = [b for b in (mip.bound, sol.bound) if b is not None]
            mip.bound = min(bounds) if bounds else None
            mip.seconds += sol.seconds
            rounded, sol, integral = sol, mip, True
        else:
            sol.status = f"LP (the MIP: {mip.status})"
    t = clock.now()
    result: Assigned | str
    if sol.value is None:
        result = f"HiGHS found no solution of the domain model ({sol.status})"
    else:
        result = assign(p, m.cells, sol, deadline=until)
        if rounded is not None and isinstance(result, Assigned) \
                and until - clock.now() >= BOTH_PLACED_MARGIN * (clock.now() - t):
            # the LP's rounding placed too: placing loses more of one solution than of the other
            # (benchmarks/results/domain-placement.md), and neither is better on every round
            other = assign(p, m.cells, rounded, deadline=until)
            if isinstance(other, Assigned) and _better(goal, other, result):
                result, integral = other, False
                rounded.bound = sol.bound
                rounded.seconds = sol.seconds
                rounded.status = f"LP, placed better than the MIP's solution ({sol.status})"
                sol = rounded
    assign_s = clock.now() - t
    if (price > LOST_WEIGHT or not provision) and sol.value is not None:
        # the bound after the plan (it only reports): where time is left, the value LP
        left = budget.end - clock.now() - BOUND_FINISH_S
        sol.bound = value_bound(m, left) if left >= lp_least else None
    return DomainRun(m, sol, result, integral, assign_s, price)


BOTH_PLACED_MARGIN = 1.5
"""The LP's rounding is placed besides the MIP's solution only when this many times the first
placement's time is left before the plan is due."""


def _better(goal: Objective, a: Assigned, b: Assigned) -> bool:
    """Whether plan `a` beats `b` under the objective (by its terms; ties keep `b`)."""
    assert a.plan.objective is not None and b.plan.objective is not None
    return goal.better(a.plan.objective, b.plan.objective)


def solve_domain(p: Problem, *, objective: ObjectiveSpec = None, time_limit: float = 1.0, seed: int = 0,
                 started: float | None = None) -> Plan:
    """The `domain` solver on a compiled problem (module docstring). Where the domain path gives no
    plan (HiGHS found none in time, or a bug the validator caught), the best-fit plan is returned
    with status `fallback` and the reason."""
    with gc_paused():
        budget = Budget.from_now(time_limit, started)
        goal = Objective.parse(objective)
        run = run_domain(p, goal, budget, until=budget.at(FINISH_SHARE))
        plan = run.plan
        stats = run.stats()
        bound = run.solution.bound
        if plan is None:
            plan = solve_greedy(p, "best-fit", time_limit=max(0.0, budget.end - clock.now()), seed=seed)
            status, reason = "fallback", str(run.result)
        else:
            status, reason = "feasible", None
        terms = plan.objective or evaluate_problem(p, plan).objective()
        gap = None if bound is None else max(0.0, (bound - terms["admitted_value"]) / max(bound, 1e-9))
        if status == "feasible" and gap is not None and gap <= OPTIMAL_GAP:
            status = "optimal"
        solver = SolverStats(name="domain", status=status, bound=bound, gap=gap, wall_s=budget.elapsed(), seed=seed,
                             reason=reason, route="domain model", domain=stats)
        return plan.model_copy(update={"objective": terms, "solver": solver})


def _run(p: Problem, run: RunSpec) -> Plan:
    return solve_domain(p, objective=run.objective, time_limit=run.time_limit, seed=run.seed, started=run.started)


SOLVERS = [SolverInfo("domain", "the round decided per leaf domain by a MILP (HiGHS), then placed on nodes", _run)]
"""The `domain` solver (`optsched.solvers.registry`)."""


__all__ = ["SOLVERS", "DomainRun", "domain_share", "fits", "least_lost_within", "lost_price", "run_domain",
           "solve_domain"]
