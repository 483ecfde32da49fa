"""The `cpsat` solver: a round as OR-Tools CP-SAT models (docs/formulation.md).

`solve_cpsat` first gets a plan without a model (`optsched.solvers.incumbent`: the best greedy
baselines, the `kueue` plan on a cluster with tenants, the LP-guided reruns); it is the fallback
and a complete hint. Then, by the round's size (`optsched.budget.estimate_build_s`):

- **whole model**: one `RoundModel` of every queued job (and the running jobs it may evict)
  through the sub-model pipeline (`optsched.solvers.cpsat.pipeline`);
- **neighbourhoods**: where one model would not be built in time, the eviction steps re-decide
  the start plan's evictions (`evictions`), then CP-SAT improves the plan one neighbourhood at a
  time (`neighbourhood`), each step through the same pipeline.

If CP-SAT finds nothing better, or its plan fails the check (a bug, reported in the statistics),
the fallback plan is returned with status `fallback`.
"""

from __future__ import annotations

import math
from typing import Any

from ortools.sat.python import cp_model

from optsched import clock
from optsched.budget import (
    BUILD_BY,
    BUILD_MARGIN,
    DOMAIN_FROM_BUILD_S,
    EVICTIONS_FIRST_SHARE,
    HINT_SHARE,
    MIN_MODEL_SHARE,
    SECONDS_PER_CANDIDATE,
    SOLVE_BY,
    WHOLE_MODEL_SHARE,
    Budget,
    candidate_cap,
    estimate_build_s,
)
from optsched.concerns import value
from optsched.latency import gc_paused
from optsched.model.plan import Plan
from optsched.model.stats import ModelStats, StepStats
from optsched.objective import EXACT, Objective, ObjectiveSpec
from optsched.problem import Problem
from optsched.roundmodel.build import MAX_EVICTABLE
from optsched.roundmodel.hint import hint_failure
from optsched.roundmodel.variables import RoundModel
from optsched.solvers.contract import RunSpec, SolverInfo
from optsched.solvers.cpsat import evictions, neighbourhood
from optsched.solvers.cpsat.pipeline import Outcome, StepTimes, SubModel, solve_submodel
from optsched.solvers.incumbent import Start, starting_plan


class _Trace(cp_model.CpSolverSolutionCallback):
    """Each solution's admitted value and the bound on it at that moment (seconds from the call's
    start): the benchmark's time to the first plan and to a gap (`benchmarks/milp.py`)."""

    def __init__(self, start: float, term: Any, weight: int, lower: float) -> None:
        super().__init__()
        self.start, self.term, self.weight, self.lower = start, term, weight, lower
        self.rows: list[tuple[float, float, float | None]] = []

    def on_solution_callback(self) -> None:
        # objective = w_v * V - (lower terms, below w_v in total), as for the model bound
        bound = math.floor((self.best_objective_bound + self.lower) / self.weight + 1e-9) / self.term.scale
        self.rows.append((round(clock.now() - self.start, 4), self.value(self.term.expr) / self.term.scale,
                          bound))


def solve_cpsat(p: Problem, *, objective: ObjectiveSpec = None, time_limit: float = 1.0, seed: int = 0,
                num_workers: int = 2, max_candidates: int | None = None, started: float | None = None,
                hint: Plan | None = None, deterministic: bool = False, neighbourhoods: bool | None = None) -> Plan:
    """Solve the round with CP-SAT within `time_limit` seconds (counted from `started`).

    One model of the whole round when it can be built in `WHOLE_MODEL_SHARE` of the time limit,
    else (or when `neighbourhoods` is True) the eviction and neighbourhood steps. `hint` (a plan
    of this round) replaces the start plan search. The garbage collector is paused meanwhile
    (`optsched.latency`).
    """
    with gc_paused():
        return _solve_cpsat(p, objective=objective, budget=Budget.from_now(time_limit, started), seed=seed,
                            num_workers=num_workers, max_candidates=max_candidates, hint=hint,
                            deterministic=deterministic, neighbourhoods=neighbourhoods)


def _solve_cpsat(p: Problem, *, objective: ObjectiveSpec, budget: Budget, seed: int, num_workers: int,
                 max_candidates: int | None, hint: Plan | None, deterministic: bool,
                 neighbourhoods: bool | None) -> Plan:
    goal = Objective.parse(objective)
    cap = candidate_cap(p) if max_candidates is None else max_candidates
    model_s = estimate_build_s(p, cap)
    whole = model_s <= WHOLE_MODEL_SHARE * budget.limit if neighbourhoods is None else not neighbourhoods
    begin = starting_plan(p, "cpsat", objective=objective, budget=budget, seed=seed, hint=hint,
                          share=budget.start_share(whole), domain=model_s >= DOMAIN_FROM_BUILD_S)
    if begin.cut:  # no time left for a model
        return begin.cut_short()
    route = "whole model" if whole else "neighbourhoods"
    if whole and neighbourhoods is None and begin.fallback.evictions and goal.tolerance > EXACT:
        # "as much value, then the least lost work": the eviction steps, not one model (on
        # mixed-cloud-10k the whole model found no plan better than Kueue's in 60 s; the steps cut
        # its lost work at equal value: benchmarks/results/tenancy.md)
        whole, route = False, "eviction steps: the hint evicts and the objective has a tolerance"
    begin.guide(budget.start_share(whole))
    if whole and neighbourhoods is None and budget.left(BUILD_BY) < BUILD_MARGIN * model_s:
        # the baselines left too little time to build the whole model: neighbourhoods
        whole = False
        route = f"neighbourhoods: the baselines left less than {BUILD_MARGIN:g} x the model's {model_s:.1f} s"
    if not whole:
        return _steps(p, begin, goal, budget, model_s, route, seed=seed, num_workers=num_workers)
    return _whole_model(p, begin, goal, budget, cap, seed=seed, num_workers=num_workers, deterministic=deterministic)


def _steps(p: Problem, begin: Start, goal: Objective, budget: Budget, model_s: float, route: str, *, seed: int,
           num_workers: int) -> Plan:
    """The eviction steps (where the start plan evicts), then the placement neighbourhoods."""
    finish, fallback = begin.finish, begin.fallback
    if begin.from_domain:
        route = f"domain model, then {route}"
    if budget.left(SOLVE_BY) < MIN_MODEL_SHARE * budget.limit:
        why = "no time was left to improve it" if begin.from_domain else \
            f"a model would take about {model_s:.1f} s to build and the baselines used the time"
        return finish(fallback, "fallback", route=route, reason=why)
    current, improved = fallback, 0
    rows: list[StepStats] = []
    if fallback.evictions:  # first re-decide the evictions, with a share of the time left
        now = clock.now()
        until = now + EVICTIONS_FIRST_SHARE * (budget.at(SOLVE_BY) - now)
        current, rows, improved = evictions.reconsider_all(p, fallback, goal, deadline=until, seed=seed,
                                                           num_workers=num_workers)
    better, log = neighbourhood.improve(p, current, goal, deadline=budget.at(SOLVE_BY), seed=seed,
                                        num_workers=num_workers,
                                        seconds_per_group=SECONDS_PER_CANDIDATE * neighbourhood.MAX_CANDIDATES)
    steps = rows + log.rows
    reason = f"a whole model would take about {model_s:.1f} s to build: neighbourhood search"
    if improved + log.improved == 0:
        return finish(fallback, "fallback", route=route, steps=steps, reason=reason)
    return finish(better, "feasible", route=route, steps=steps, reason=reason, improved=improved + log.improved)


def _whole_model(p: Problem, begin: Start, goal: Objective, budget: Budget, cap: int, *, seed: int,
                 num_workers: int, deterministic: bool) -> Plan:
    """One model of the whole round through the pipeline; its plan if better than the fallback."""
    finish, fallback = begin.finish, begin.fallback
    evictable = begin.may_go[:MAX_EVICTABLE]
    stats: dict[str, Any] = {"max_candidates": cap, "evictable": len(evictable)}
    r = RoundModel.whole_round(p, evictable, max_candidates=cap, hint=fallback, wanted=goal.terms(),
                               provision=bool(p.pool_max_nodes.sum() > 0))
    trace_rows: list[_Trace] = []

    def trace(r: RoundModel, weights: dict[str, int]) -> _Trace | None:
        if goal.weights is not None or not goal.order or goal.order[0] != "admitted_value":
            return None
        lower = sum(r.term_ub.get(n, 0) * w for n, w in weights.items() if n != "admitted_value")
        trace_rows.append(_Trace(budget.start, r.terms["admitted_value"], weights["admitted_value"], lower))
        return trace_rows[-1]

    def hint_s() -> float | None:
        left = budget.left(SOLVE_BY)
        return None if left < MIN_MODEL_SHARE * budget.limit else HINT_SHARE * left

    times = StepTimes(variables_by=budget.at(BUILD_BY), encode_by=budget.at(SOLVE_BY), timed_encodings=True,
                      hint_s=hint_s,
                      solve_s=lambda _t0, phase, phases: (budget.solve_end(p) - clock.now())
                      / (phases - phase + 1))
    sub = SubModel(r, goal, start=fallback, seed=seed, num_workers=num_workers, deterministic=deterministic,
                   trace=trace)
    out = solve_submodel(sub, times, better=lambda terms: True)  # compared with the fallback below
    model = _model_stats(r, out, stats, budget, trace_rows)
    if not out.ok:
        return finish(fallback, "fallback", route="whole model", reason=_why_not(r, out), model=model)
    return _settle(p, begin, r, out, goal, model)


def _why_not(r: RoundModel, out: Outcome) -> str:
    """Why the whole model gave no plan, for the fallback's `reason`."""
    if out.result == "build timeout":
        return f"time limit reached while building ({out.build_error})"
    if out.result.startswith("hint "):
        return hint_failure(r, str(out.hint_status))
    if out.result.startswith("no solution"):
        phase = " (phase 1)" if out.result.endswith("(phase 1)") else ""
        invalid = r.model.validate() if out.status == cp_model.MODEL_INVALID else ""  # a model bug: say why
        return f"CP-SAT status {out.status_name()}{phase} {invalid}".strip()
    if out.result.startswith("plan failed the check"):
        return "plan failed the check (a model bug)"
    return out.result


def _model_stats(r: RoundModel, out: Outcome, stats: dict[str, Any], budget: Budget,
                 traces: list[_Trace]) -> ModelStats:
    """What the whole model was (the statistics of `ModelStats`)."""
    stats.update(build={k: round(v, 4) for k, v in out.build.items()}, hint_status=out.hint_status,
                 hint_s=out.hint_s, unmodelled_terms=out.unmodelled, phases=out.phases,
                 truncated_groups=r.truncated, violations=out.violations)
    if out.values is not None:
        stats.update(hinted_vars=out.hinted_vars, variables=len(r.model.proto.variables),
                     constraints=len(r.model.proto.constraints))
    if out.ready_at is not None:
        stats["build_s"] = out.ready_at - budget.start
        if out.solved_at is not None:
            stats["solve_s"] = out.solved_at - out.ready_at
    if out.plan is not None and out.solver is not None:  # the model's value of its own plan's terms
        stats["terms"] = {name: out.solver.value(t.expr) / t.scale for name, t in r.terms.items()}
    if traces:
        stats["trace"] = traces[-1].rows
    return ModelStats(**stats)


def _settle(p: Problem, begin: Start, r: RoundModel, out: Outcome, goal: Objective, model: ModelStats) -> Plan:
    """The model's plan against the fallback (`Start.settle`), with the model's bound on value."""
    assert out.plan is not None and out.solver is not None
    value_term = r.terms["admitted_value"]
    model_bound: float | None = None  # a bound of the model is one of the round only without truncation
    if out.first_bound is not None and out.ordered[0] == "admitted_value":
        model_bound = out.first_bound / value_term.scale
    elif goal.weights is None and goal.order and goal.order[0] == "admitted_value":
        # objective = w_v * V - (lower terms, each below w_v in total): V* <= (bound + their ub) / w_v
        lower = sum(r.term_ub.get(n, 0) * w for n, w in out.weights.items() if n != "admitted_value")
        model_bound = math.floor((out.solver.best_objective_bound + lower) / out.weights["admitted_value"] + 1e-9) \
            / value_term.scale
    if model_bound is not None:
        model_bound += value.rounding_slack(r)
    if r.truncated and model_bound is not None:
        model = model.model_copy(update={"candidate_bound": model_bound})
        model_bound = None
    optimal = out.status == cp_model.OPTIMAL
    return begin.settle(out.plan, out.terms, optimal=optimal, proven=optimal and not r.truncated,
                        model_bound=model_bound, model=model, label="CP-SAT", route="whole model")


def _run(p: Problem, run: RunSpec) -> Plan:
    return solve_cpsat(p, objective=run.objective, time_limit=run.time_limit, seed=run.seed,
                       num_workers=run.num_workers, started=run.started, hint=run.initial_plan,
                       deterministic=run.deterministic)


SOLVERS = [SolverInfo("cpsat", "the round as CP-SAT models: one whole model, or eviction and neighbourhood steps",
                      _run, frozenset({"num_workers", "initial_plan", "deterministic"}))]
"""The `cpsat` solver (`optsched.solvers.registry`)."""


__all__ = ["SOLVERS", "solve_cpsat"]
