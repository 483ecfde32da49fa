"""One sub-model, solved: build -> objective -> hint -> solve -> decode -> merge -> check.

The whole round, a neighbourhood of the best plan and an eviction step are each a `SubModel`:
a `RoundModel` over some of the round's jobs (and running jobs it may evict) on some nodes, the
plan it starts from (its hint), and, for a part of the round, the plan its solution merges into.
Every one goes through `solve_submodel`, stage by stage:

1. **build**: the shared variables, then every concern's encoding (`optsched.roundmodel.build`),
   then the caller's extra constraints (a neighbourhood holds the reclaims it does not decide);
2. **objective**: the goal's weights (`optsched.roundmodel.weights`), or, for a lexicographic
   order with a tolerance, its first term alone;
3. **hint**: the start plan completed into a value of every variable (an exact model must accept
   it: an infeasible completion is a model bug);
4. **solve**: CP-SAT from the hint; with a tolerance, a second phase optimises the other terms
   with the first kept within the tolerance of its best (and never below the start plan), started
   from whichever of the start plan and the first phase's solution is the better start;
5. **decode and merge**: replicas, devices and evictions; the part replaces its jobs in `rest`;
6. **evaluate, compare, check**: the metrics of the merged plan, the caller's `better` test,
   then the validator; a plan that fails it is a bug, reported, never returned.

What differs between the three is the time each stage gets (`StepTimes`, from
`optsched.budget`), whether the search has two phases, and the comparison: parameters, not copies.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from optsched import clock
from optsched.check import check_problem
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan, SolverStats
from optsched.objective import EXACT, Objective
from optsched.roundmodel.build import encode_all, encode_timed
from optsched.roundmodel.decode import decode
from optsched.roundmodel.hint import apply_hint, complete_hint
from optsched.roundmodel.variables import BuildTimeout, RoundModel
from optsched.roundmodel.weights import objective_at, objective_expression, objective_weights
from optsched.solvers.cpsat.params import solver_parameters


@dataclass
class StepTimes:
    """How long each stage of one sub-model may take (perf_counter deadlines, or seconds computed
    when the stage begins, from the step's start `t0`)."""

    variables_by: float
    encode_by: float
    hint_s: Callable[[], float | None]
    """Seconds for completing the hint, or None when there is no time left for a model."""
    solve_s: Callable[[float, int, int], float]
    """(step start, phase 1 or 2, phases) -> seconds the phase's search may take (<= 0: none)."""
    timed_encodings: bool = False
    """Time every part of the build, and stop before an encoding that may not end by `encode_by`
    (the whole round); else `encode_all`'s checks."""
    discard_after: float | None = None
    """A search that ends after this is discarded (a neighbourhood must not overrun the round)."""


@dataclass
class SubModel:
    """A part of the round (or the whole round) to solve: see the module docstring."""

    r: RoundModel
    goal: Objective
    start: Plan
    """The plan the model starts from (its hint); the model's hint plan (`r.hint`) is this."""
    rest: Plan | None = None
    """The plan the solution merges into (a part of the round); None: the model is the whole round."""
    constrain: Callable[[RoundModel], None] | None = None
    """Extra constraints added after the encodings."""
    phases_allowed: bool = True
    """A lexicographic order with a tolerance is solved in two phases; else as exact weights."""
    skip_unimproved: bool = False
    """Skip decoding when the search found nothing better than the hint in the model."""
    presolve: bool | None = None
    """CP-SAT's presolve: None decides by the model's size (`optsched.solvers.cpsat.params`)."""
    seed: int = 0
    num_workers: int = 2
    deterministic: bool = False
    trace: Callable[[RoundModel, dict[str, int]], cp_model.CpSolverSolutionCallback | None] | None = None
    """Makes a callback for every solution of a one-phase search from the built model and its
    objective weights (the whole round's trace of value and bound)."""


@dataclass
class Outcome:
    """What one sub-model gave: `result` says how far it got ("ok" when `plan` is better and valid)."""

    result: str
    plan: Plan | None = None
    """The merged, evaluated plan (also when not better, for the caller's statistics)."""
    terms: dict[str, float] = field(default_factory=dict)
    solver: cp_model.CpSolver | None = None
    status: Any = None
    """CP-SAT's status of the (last) search."""
    weights: dict[str, int] = field(default_factory=dict)
    unmodelled: list[str] = field(default_factory=list)
    ordered: list[str] = field(default_factory=list)
    """The modelled terms of a lexicographic order (first: the first phase's term when two phases)."""
    phases: int = 1
    first_bound: float | None = None
    """CP-SAT's bound on the first term after the first of two phases."""
    build: dict[str, float] = field(default_factory=dict)
    build_s: float | None = None
    hint_status: str | None = None
    hint_s: float | None = None
    hinted_vars: int | None = None
    values: list[int] | None = None
    violations: list[str] = field(default_factory=list)
    build_error: str | None = None
    """The part of the build that did not fit the time (`BuildTimeout`)."""
    ready_at: float | None = None
    """When the model was built and hinted (`clock.now()` seconds)."""
    solved_at: float | None = None
    """When the search ended."""

    @property
    def ok(self) -> bool:
        return self.result == "ok"

    def status_name(self) -> str:
        """CP-SAT's status of the (last) search, or '' when none ran."""
        return "" if self.solver is None or self.status is None else self.solver.status_name(self.status)


def _search(sub: SubModel, seconds: float,
            callback: cp_model.CpSolverSolutionCallback | None = None) -> tuple[cp_model.CpSolver, Any]:
    s = cp_model.CpSolver()
    solver_parameters(s, time_limit=seconds, seed=sub.seed, num_workers=sub.num_workers,
                      deterministic=sub.deterministic, n_variables=len(sub.r.model.proto.variables))
    if sub.presolve is not None:
        s.parameters.cp_model_presolve = sub.presolve
    status = s.solve(sub.r.model, callback)
    clock.charge_cpsat(s.response_proto.deterministic_time)
    return s, status


FOUND = (cp_model.OPTIMAL, cp_model.FEASIBLE)


def solve_submodel(sub: SubModel, times: StepTimes, better: Callable[[dict[str, float]], bool]) -> Outcome:
    """Run the stages of the module docstring; `better(terms)` says whether the merged plan's
    metrics beat what the caller has."""
    r, goal = sub.r, sub.goal
    t0 = clock.now()
    out = Outcome("started")
    # 1. build
    try:
        if times.timed_encodings:
            out.build = encode_timed(r, variables_by=times.variables_by, deadline=times.encode_by)
        else:
            encode_all(r, times.encode_by, variables_by=times.variables_by)
    except BuildTimeout as exc:
        out.result, out.build_error = "build timeout", str(exc)
        return out
    if sub.constrain is not None:
        sub.constrain(r)
    # 2. objective
    out.ordered = [n for n in goal.order if n in r.terms] if goal.weights is None else []
    two_phases = sub.phases_allowed and goal.tolerance > EXACT and len(out.ordered) > 1
    out.weights, out.unmodelled = objective_weights(r, goal)
    if two_phases:
        head = r.terms[out.ordered[0]]
        r.model.maximize(head.expr if head.maximise else -head.expr)
    else:
        r.model.maximize(objective_expression(r, out.weights))
    out.build_s = clock.now() - t0
    # 3. hint
    hint_s = times.hint_s()
    if hint_s is None:
        out.result = "no time left to complete the hint and solve"
        return out
    t_hint = clock.now()
    out.hint_status, values = complete_hint(r, hint_s, sub.seed)
    out.hint_s = clock.now() - t_hint
    if values is None:
        out.result = f"hint {out.hint_status}"
        return out
    out.values = values
    out.hinted_vars = apply_hint(r, values)
    out.ready_at = clock.now()
    # 4. solve
    phases = 2 if two_phases else 1
    seconds = times.solve_s(t0, 1, phases)
    if seconds <= 0:
        out.result = "time limit spent before solving"
        return out
    callback = sub.trace(r, out.weights) if sub.trace is not None and not two_phases else None
    solver, status = _search(sub, seconds, callback)
    out.solver, out.status = solver, status
    if two_phases:
        if status not in FOUND:
            out.result = "no solution (phase 1)"
            return out
        _second_phase(sub, out, times, t0, values)
    out.solved_at = clock.now()
    if times.discard_after is not None and out.solved_at > times.discard_after:
        out.result = "out of time"
        return out
    if out.status not in FOUND:
        out.result = "no solution"
        return out
    assert out.solver is not None
    if sub.skip_unimproved and not two_phases and out.solver.objective_value <= objective_at(r, values) + 0.5:
        out.result = "no better in the model"
        return out
    # 5. decode and merge
    plan = decode(r, out.solver, sub.start.solver if sub.rest is not None else SolverStats(name="cpsat"),
                  rest=sub.rest)
    if plan is None:
        out.result = "decode failed (a model bug)"
        return out
    # 6. evaluate, compare, check
    out.terms = evaluate_problem(r.p, plan).objective()
    out.plan = plan.model_copy(update={"objective": out.terms})
    if not better(out.terms):
        out.result = "no better"
        return out
    violations = check_problem(r.p, plan)
    if violations:
        out.violations = [str(v) for v in violations[:10]]
        out.result = f"plan failed the check (a model bug): {violations[0]}"
        return out
    out.result = "ok"
    return out


def _second_phase(sub: SubModel, out: Outcome, times: StepTimes, t0: float, values: list[int]) -> None:
    """The other terms, with the first held within the tolerance of its best (relative to the
    whole round's value of it: the jobs outside a part add to the term) and never below the start
    plan's value; started from the better of the start plan (when it keeps within the tolerance)
    and the first phase's solution."""
    r, goal = sub.r, sub.goal
    assert out.solver is not None
    head = r.terms[out.ordered[0]]
    sign = 1 if head.maximise else -1
    at_hint = round(objective_at(r, values)) * sign  # the start plan's value of the first term
    best = out.solver.value(head.expr)
    out.first_bound = abs(out.solver.best_objective_bound)
    outside = 0.0
    if sub.rest is not None:
        before = sub.start.objective or evaluate_problem(r.p, sub.start).objective()
        outside = before[out.ordered[0]] * head.scale - at_hint
    slack = goal.tolerance * abs(best + outside)
    if head.maximise:
        limit = math.ceil(best - slack)
        r.model.add(head.expr >= max(limit, at_hint))
        start_fits = limit <= at_hint
    else:
        limit = math.floor(best + slack)
        r.model.add(head.expr <= min(limit, at_hint))
        start_fits = limit >= at_hint
    r.model.maximize(objective_expression(r, objective_weights(r, Objective(order=tuple(out.ordered[1:])))[0]))
    first = list(out.solver.response_proto.solution)
    start = first
    if start_fits and objective_at(r, values) > objective_at(r, first):
        start = values
    apply_hint(r, start)
    second, status2 = _search(sub, times.solve_s(t0, 2, 2))
    out.phases = 2
    if status2 in FOUND:
        out.solver, out.status = second, (cp_model.FEASIBLE if status2 == cp_model.OPTIMAL else status2)


__all__ = ["Outcome", "StepTimes", "SubModel", "solve_submodel"]

