"""MILP back end: the CP-SAT round model solved by HiGHS (docs/formulation.md, "MILP back end").

`solve_milp` starts like `cpsat` (`optsched.solvers.incumbent`: the best greedy plan, the Kueue
plan on a multi-tenant round, the LP-guided reruns), builds the same round model through the same
concern encodings (`RoundModel`, `ENCODINGS`), and completes the start plan into a value of every
variable. `translate.from_cpsat` turns the model into sparse MILP arrays; `highs.solve_levels`
maximises the objective (a lexicographic order level by level) with a time limit and a relative
MIP gap, from the start plan. HiGHS's solution is decoded into replicas, devices and evictions by
the round model's decoder (through `translate.Assignment`), and the plan is checked by the validator; the
fallback is returned when nothing better was found. With `verify`, the solution is also pinned in
the CP-SAT model (`solve_fixed`), which must accept it (else the translation has a bug, reported in
`solver.extra`): the tests do this.

Unlike `cpsat`, there is no neighbourhood search: a round whose model cannot be built in the time
limit returns the fallback (`auto` sends such rounds to `cpsat`, `optsched.solvers.backend`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from optsched import clock
from optsched.budget import (
    DOMAIN_FROM_BUILD_S,
    HIGHS_FIRST_LEVEL_SHARE,
    HINT_SHARE,
    MILP_ENCODE_BY,
    MILP_TRANSLATE_BY,
    MILP_VARIABLES_BY,
    ROUND_BOUND_ENCODE_SHARE,
    ROUND_BOUND_VARIABLES_SHARE,
    SOLVE_BY,
    START_SHARE_WHOLE,
    TRANSLATE_SHARE,
    Budget,
    candidate_cap,
    estimate_build_s,
)
from optsched.check import check_problem
from optsched.concerns import value
from optsched.concerns.tenancy import preemption
from optsched.latency import gc_paused
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan, SolverStats
from optsched.model.stats import MilpStats, ModelStats
from optsched.objective import EXACT, TIE_BREAKS, Objective, ObjectiveSpec
from optsched.problem import Problem
from optsched.roundmodel.build import MAX_EVICTABLE, encode_all
from optsched.roundmodel.decode import decode
from optsched.roundmodel.hint import complete_hint, hint_failure, primary_values, solve_fixed
from optsched.roundmodel.variables import BuildTimeout, RoundModel
from optsched.solvers.contract import RunSpec, SolverInfo
from optsched.solvers.incumbent import Start, starting_plan
from optsched.solvers.milp.highs import PRESOLVE, Level, load, quiet_highs, run_until, set_limits, solve_levels
from optsched.solvers.milp.translate import Assignment, MilpArrays, UnsupportedConstraint, from_cpsat, linear

MIP_GAP = 1e-4
"""HiGHS's relative MIP gap at which a level counts as solved (HiGHS's default)."""


def levels(r: RoundModel, goal: Objective, n_cols: int, start: np.ndarray | None) -> tuple[list[Level], list[str]]:
    """The objective as levels to maximise: one weighted level, or one per term of a lexicographic
    order (then the tie-breaks, as in `cpsat`); returns them and the terms the model lacks. With
    a tolerance, a level keeps at least its value at `start` (the hint), when there is one."""
    names = list(goal.order if goal.weights is None else goal.weights)
    unmodelled = [n for n in names if n not in r.terms]
    if goal.weights is not None:
        coef, const = np.zeros(n_cols), 0.0
        for name, w in goal.weights.items():
            if name in r.terms:
                t = r.terms[name]
                c, k = linear(t.expr, n_cols)
                sign = (1.0 if t.maximise else -1.0) * w / t.scale
                coef, const = coef + sign * c, const + sign * k
        return [Level("weighted", coef, const)], unmodelled
    ordered = [n for n in names if n in r.terms]
    ordered += [t for t in TIE_BREAKS if t in r.terms]
    out = []
    for name in ordered:
        t = r.terms[name]
        c, k = linear(t.expr, n_cols)
        sign = 1.0 if t.maximise else -1.0
        tolerance = goal.tolerance if goal.tolerance > EXACT and name not in TIE_BREAKS else 0.0
        coef = sign * c
        out.append(Level(name, coef, sign * k, tolerance=tolerance,
                         floor=float(coef @ start) if tolerance and start is not None else None))
    return out, unmodelled


def model_bound(p: Problem, time_limit: float) -> tuple[float | None, str]:
    """An upper bound on the round's admitted value from the whole round model: HiGHS's dual bound
    of `admitted_value` after at most `time_limit` seconds (build included), widened by the model's
    fixed-point rounding. Every eligible node is a candidate and every evictable running job may go,
    so it holds for every plan on existing nodes (as the LP value bound). Returns (None, why) when
    the model cannot be whole (too many evictable jobs) or its build does not fit the time."""
    start = clock.now()
    may_go = preemption.evictable_jobs(p)
    if len(may_go) > MAX_EVICTABLE:
        return None, f"{len(may_go)} evictable running jobs (the model takes {MAX_EVICTABLE})"
    r = RoundModel.whole_round(p, may_go, max_candidates=p.n_nodes, wanted=frozenset({"admitted_value"}))
    try:
        encode_all(r, deadline=start + ROUND_BOUND_ENCODE_SHARE * time_limit,
                   variables_by=start + ROUND_BOUND_VARIABLES_SHARE * time_limit)
    except BuildTimeout as exc:
        return None, f"time limit reached while building ({exc})"
    arrays = from_cpsat(r.model)
    term = r.terms["admitted_value"]
    coef, const = linear(term.expr, arrays.n_cols)
    slack = value.rounding_slack(r)
    if arrays.n_cols == 0:
        return const / term.scale + slack, "Optimal"
    h = quiet_highs()
    load(h, arrays)
    h.setOptionValue("presolve", PRESOLVE)
    end = start + time_limit
    set_limits(h, end - clock.now())
    h.changeColsCost(arrays.n_cols, np.arange(arrays.n_cols, dtype=np.int32), coef)
    seen = [float("inf")]  # the dual bound HiGHS reported last (a run past the limit is abandoned)
    wall = not clock.deterministic()  # HiGHS calls back from its own thread, outside this context

    def watch(event: Any) -> None:
        seen[0] = min(seen[0], float(event.data_out.mip_dual_bound))
        if wall and clock.now() > end:
            event.interrupt()

    h.cbMipInterrupt.subscribe(watch)
    h.cbSimplexInterrupt.subscribe(lambda e: e.interrupt() if clock.now() > end else None)
    if run_until(h, end):
        status, dual = h.modelStatusToString(h.getModelStatus()), float(h.getInfo().mip_dual_bound)
    else:
        status, dual = "Abandoned past the time limit", seen[0]
    if not np.isfinite(dual):
        return None, status
    return (dual + const) / term.scale + slack, status


def solve_milp(p: Problem, *, objective: ObjectiveSpec = None, time_limit: float = 1.0, seed: int = 0,
               mip_gap: float = MIP_GAP, max_candidates: int | None = None, started: float | None = None,
               hint: Plan | None = None, verify: bool = False) -> Plan:
    """Solve the round's model with HiGHS within `time_limit` seconds (counted from `started`),
    stopping a level at relative gap `mip_gap`. `hint` (a plan of this round) replaces the start
    plan search. `verify` also pins HiGHS's solution in the CP-SAT model, which must accept it (a
    check of the translation, for tests). The garbage collector is paused meanwhile."""
    with gc_paused():
        return _solve_milp(p, objective=objective, budget=Budget.from_now(time_limit, started), seed=seed,
                           mip_gap=mip_gap, max_candidates=max_candidates, hint=hint, verify=verify)


def _solve_milp(p: Problem, *, objective: ObjectiveSpec, budget: Budget, seed: int, mip_gap: float,
                max_candidates: int | None, hint: Plan | None, verify: bool) -> Plan:
    goal = Objective.parse(objective)
    cap = candidate_cap(p) if max_candidates is None else max_candidates
    begin = starting_plan(p, "milp", objective=objective, budget=budget, seed=seed, hint=hint,
                          share=START_SHARE_WHOLE, domain=estimate_build_s(p, cap) >= DOMAIN_FROM_BUILD_S)
    if begin.cut:
        return begin.cut_short()
    begin.guide(START_SHARE_WHOLE)
    fallback, finish = begin.fallback, begin.finish
    evictable = begin.may_go[:MAX_EVICTABLE]
    r = RoundModel.whole_round(p, evictable, max_candidates=cap, hint=fallback, wanted=goal.terms(),
                               provision=bool(p.pool_max_nodes.sum() > 0))
    model: dict[str, Any] = {"max_candidates": cap, "evictable": len(evictable)}
    milp: dict[str, Any] = {}
    t0 = clock.now()
    try:
        encode_all(r, deadline=budget.at(MILP_ENCODE_BY), variables_by=budget.at(MILP_VARIABLES_BY))
    except BuildTimeout as exc:
        return finish(fallback, "fallback", reason=f"time limit reached while building ({exc})",
                      model=ModelStats(**model))
    milp["model_s"] = round(clock.now() - t0, 4)
    hint_status, values = complete_hint(r, HINT_SHARE * max(budget.left(SOLVE_BY), 0.0), seed)
    model["hint_status"] = hint_status
    if values is None and hint_status != "UNKNOWN":
        return finish(fallback, "fallback", reason=hint_failure(r, hint_status),
                      model=ModelStats(**model), milp=MilpStats(**milp))
    t0 = clock.now()
    if t0 + TRANSLATE_SHARE * milp["model_s"] > budget.at(MILP_TRANSLATE_BY):
        return finish(fallback, "fallback", reason="no time left to translate and solve the model",
                      model=ModelStats(**model), milp=MilpStats(**milp))
    try:
        arrays = from_cpsat(r.model)
    except UnsupportedConstraint as exc:
        return finish(fallback, "fallback", reason=f"the model does not translate ({exc}): a bug",
                      model=ModelStats(**model), milp=MilpStats(**milp))
    start_index: np.ndarray | None = None
    if values is None:  # no time to complete it: HiGHS completes the plan's admission and counts
        primary = primary_values(r)
        start_index = np.fromiter(primary, dtype=np.int64, count=len(primary))
        start_values = np.fromiter(primary.values(), dtype=np.float64, count=len(primary))
    else:
        start_values = arrays.extend(values)
    chain, unmodelled = levels(r, goal, arrays.n_cols, start_values if start_index is None else None)
    milp.update(translate_s=round(clock.now() - t0, 4), columns=arrays.n_cols, rows=arrays.n_rows,
                nonzeros=int(arrays.a.nnz))
    model.update(unmodelled_terms=unmodelled, truncated_groups=r.truncated)
    deadline = budget.solve_end(p)
    if deadline - clock.now() <= 0.01:
        return finish(fallback, "fallback", reason="time limit spent before solving",
                      model=ModelStats(**model), milp=MilpStats(**milp))
    t0 = clock.now()
    outcome = solve_levels(arrays, chain, start_values=start_values, start_index=start_index, deadline=deadline,
                           mip_gap=mip_gap, seed=seed, first_share=HIGHS_FIRST_LEVEL_SHARE)
    model["solve_s"] = round(clock.now() - t0, 4)
    milp.update(highs_status=outcome.status, levels_solved=outcome.levels_solved, levels=len(chain))
    if chain and chain[0].name == "admitted_value":  # (seconds from the call's start, value, bound)
        scale, const = r.terms["admitted_value"].scale, chain[0].constant
        model["trace"] = [(round(t0 - budget.start + s, 4), (v + const) / scale,
                           (b + const) / scale if np.isfinite(b) else None) for s, v, b in outcome.trace]
    if outcome.values is None:
        return finish(fallback, "fallback", reason=f"HiGHS found no solution ({outcome.status})",
                      model=ModelStats(**model), milp=MilpStats(**milp))
    return _finish_solution(p, r, arrays, outcome.values, chain, begin, model, MilpStats(**milp),
                            bound=outcome.bound, gap=outcome.gap, optimal=outcome.optimal, seed=seed,
                            verify=verify)


def _finish_solution(p: Problem, r: RoundModel, arrays: MilpArrays, col_values: np.ndarray, chain: list[Level],
                     begin: Start, model: dict[str, Any], milp: MilpStats, *,
                     bound: float | None, gap: float | None, optimal: bool, seed: int, verify: bool) -> Plan:
    """Decode HiGHS's solution through the round model, check it, and compare it with the fallback."""
    finish, fallback = begin.finish, begin.fallback
    solution = np.round(col_values[: arrays.n_model_vars]).astype(np.int64)
    solver: Any = Assignment(solution)
    if verify:  # CP-SAT must accept the solution (0.54 s on a 300-job dgx-h100-1k model: tests only)
        status, pinned = solve_fixed(r, dict(enumerate(solution.tolist())), 10.0, seed)
        if pinned is None:
            return finish(fallback, "fallback", reason=f"CP-SAT rejects HiGHS's solution ({status}): a translation bug",
                          model=ModelStats(**model), milp=milp)
    decoded = decode(r, solver, SolverStats(name="milp"))
    if decoded is None:
        return finish(fallback, "fallback", reason="decoding failed (a model bug)", model=ModelStats(**model),
                      milp=milp)
    violations = check_problem(p, decoded)
    if violations:
        return finish(fallback, "fallback", reason="plan failed the check (a model bug)",
                      model=ModelStats(**model, violations=[str(v) for v in violations[:10]]), milp=milp)
    model["terms"] = {name: solver.value(t.expr) / t.scale for name, t in r.terms.items()}
    model_bound: float | None = None
    head = chain[0]
    if bound is not None and head.name == "admitted_value" and not r.truncated:  # else not a bound of the round
        model_bound = (bound + head.constant) / r.terms["admitted_value"].scale + value.rounding_slack(r)
    terms = evaluate_problem(p, decoded).objective()
    return begin.settle(decoded, terms, optimal=optimal, proven=gap == 0.0, model_bound=model_bound,
                        model=ModelStats(**model), label="MILP", milp=milp)


def _run(p: Problem, run: RunSpec) -> Plan:
    return solve_milp(p, objective=run.objective, time_limit=run.time_limit, seed=run.seed, started=run.started,
                      hint=run.initial_plan)


SOLVERS = [SolverInfo("milp", "the round model translated to a MILP and solved by HiGHS, level by level", _run,
                      frozenset({"initial_plan"}))]
"""The `milp` solver (`optsched.solvers.registry`)."""


__all__ = ["MIP_GAP", "SOLVERS", "model_bound", "solve_milp"]
