"""MILP back end: the translation keeps CP-SAT's feasible set; HiGHS and CP-SAT agree on optima;
every MILP plan passes the validator."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from optsched import solve
from optsched.check import check_problem
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Plan, Queue
from optsched.objective import Objective
from optsched.problem import Problem, compile_problem
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.greedy import solve_greedy
from optsched.solvers.kueue import solve_kueue
from optsched.solvers.milp import solve_milp
from optsched.solvers.milp.translate import from_cpsat
from tests.strategies import busy_rounds, contended_rounds, rounds
from tests.test_cpsat import tiny_rounds

FEAS = 1e-7


# ---------------------------------------------------------------------------- translation
@st.composite
def small_models(draw: st.DrawFn) -> cp_model.CpModel:
    """2-4 variables (booleans and integers in 0..3) and 1-4 constraints of every kind the
    concerns use, each maybe enforced by (possibly negated) literals."""
    m = cp_model.CpModel()
    n_bool = draw(st.integers(1, 2))
    n_int = draw(st.integers(1, 2))
    bools = [m.new_bool_var(f"b{i}") for i in range(n_bool)]
    ints = [m.new_int_var(0, draw(st.integers(1, 3)), f"x{i}") for i in range(n_int)]
    every = bools + ints
    literal = st.builds(lambda b, neg: ~b if neg else b, st.sampled_from(bools), st.booleans())
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["linear", "linear", "eq", "bool_or", "bool_and", "max", "amo", "eo"]))
        enforce = draw(st.lists(literal, max_size=2))
        if kind in ("linear", "eq"):
            vs = draw(st.lists(st.sampled_from(every), min_size=1, max_size=3))
            cs = draw(st.lists(st.integers(-3, 3), min_size=len(vs), max_size=len(vs)))
            expr = cp_model.LinearExpr.weighted_sum(vs, cs)
            rhs = draw(st.integers(-3, 6))
            ct = m.add(expr == rhs if kind == "eq" else (expr <= rhs if draw(st.booleans()) else expr >= rhs))
        elif kind == "bool_or":
            ct = m.add_bool_or(draw(st.lists(literal, min_size=1, max_size=3)))
        elif kind == "bool_and":
            ct = m.add_bool_and(draw(st.lists(literal, min_size=1, max_size=2)))
        elif kind == "amo":
            ct = m.add_at_most_one(draw(st.lists(literal, min_size=1, max_size=3)))
        elif kind == "eo":
            ct = m.add_exactly_one(draw(st.lists(literal, min_size=1, max_size=3)))
        else:  # the max: never enforced (the concerns never enforce one; the translation refuses it)
            target = draw(st.sampled_from(ints))
            others = [v for v in every if v is not target]
            exprs = [draw(st.integers(-1, 2))] + [v + draw(st.integers(-2, 2)) for v in
                                                   draw(st.lists(st.sampled_from(others), min_size=1, max_size=2))]
            m.add_max_equality(target, exprs)
            continue
        if enforce:
            ct.only_enforce_if(enforce)
    return m


def _cpsat_solutions(m: cp_model.CpModel) -> set[tuple[int, ...]]:
    """Every solution of the model, by CP-SAT (the ground truth)."""
    class Collect(cp_model.CpSolverSolutionCallback):
        def __init__(self) -> None:
            super().__init__()
            self.found: set[tuple[int, ...]] = set()

        def on_solution_callback(self) -> None:
            self.found.add(tuple(self.value(m.get_int_var_from_proto_index(i))
                                 for i in range(len(m.proto.variables))))

    solver = cp_model.CpSolver()
    solver.parameters.enumerate_all_solutions = True
    solver.parameters.cp_model_presolve = False
    collect = Collect()
    solver.solve(m, collect)
    return collect.found


@settings(max_examples=150, deadline=None)
@given(m=small_models())
def test_translation_keeps_the_feasible_set(m: cp_model.CpModel) -> None:
    """An assignment of the CP-SAT variables satisfies the CP-SAT model iff it extends (some z of
    the max rows) to a point of the MILP's rows."""
    arrays = from_cpsat(m)
    truth = _cpsat_solutions(m)
    domains = [range(int(v.domain[0]), int(v.domain[len(v.domain) - 1]) + 1) for v in m.proto.variables]
    n_z = arrays.n_cols - arrays.n_model_vars
    for point in itertools.product(*domains):
        feasible = False
        for z in itertools.product((0, 1), repeat=n_z):
            x = np.array(point + z, dtype=float)
            if np.all(x <= arrays.ub) and np.all(x >= arrays.lb):
                act = arrays.a @ x
                if np.all(act <= arrays.row_hi + FEAS) and np.all(act >= arrays.row_lo - FEAS):
                    feasible = True
                    break
        assert feasible == (point in truth), (point, m.proto)
        if point in truth:  # the start completion picks a z that works
            x = arrays.extend(np.array(point, dtype=float))
            act = arrays.a @ x
            assert np.all(act <= arrays.row_hi + FEAS) and np.all(act >= arrays.row_lo - FEAS)


# ---------------------------------------------------------------------------- the round
def test_example_is_optimal_and_valid(example: Any) -> None:
    c, q, _ = example
    plan = solve(c, q, solver="milp", time_limit=10.0)
    p = compile_problem(c, q)
    assert check_problem(p, plan) == []
    assert plan.solver.name == "milp" and plan.solver.status == "optimal", plan.solver
    assert plan.solver.milp is not None and plan.solver.milp.levels_solved == plan.solver.milp.levels
    cpsat = solve_cpsat(p, time_limit=5.0)
    assert plan.objective["admitted_value"] == pytest.approx(cpsat.objective["admitted_value"], abs=1e-6)


VALUE_TOL = 1e-3  # the model values replicas in 1/VALUE_SCALE units; ties may differ by that much


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(tiny_rounds(), rounds(max_nodes=4, max_jobs=4)))
def test_backends_agree_on_optimal_values(data: tuple[Cluster, Queue]) -> None:
    """Where both prove optimality of the same model, the lexicographic levels' values agree."""
    c, q = data
    p = compile_problem(c, q)
    a = solve_cpsat(p, time_limit=10.0)
    b = solve_milp(p, time_limit=10.0, mip_gap=0.0, verify=True)
    assert check_problem(p, a) == [] and check_problem(p, b) == []
    assert "bug" not in str(b.solver.reason or ""), b.solver
    if a.solver.status != "optimal" or b.solver.status != "optimal":
        return  # (both found the hint optimal, or a level was cut: nothing to compare)
    assert a.solver.model is not None and b.solver.model is not None
    ma, mb = a.solver.model.terms, b.solver.model.terms
    assert ma["admitted_value"] == pytest.approx(mb["admitted_value"], abs=VALUE_TOL)
    for name in ("disruption", "topology", "evictions"):
        assert ma.get(name, 0.0) == pytest.approx(mb.get(name, 0.0), abs=1e-6), (name, ma, mb)


def _checked_milp(c: Cluster, q: Queue) -> tuple[Problem, Plan]:
    """milp's plan (with the CP-SAT pin check), which the validator accepts and no bug produced."""
    p = compile_problem(c, q)
    plan = solve_milp(p, time_limit=5.0, verify=True)
    assert check_problem(p, plan) == [], plan.solver
    assert "bug" not in str(plan.solver.reason or ""), plan.solver
    return p, plan


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(rounds(max_nodes=6, max_jobs=6), busy_rounds(max_nodes=6, max_jobs=5)))
def test_plans_are_valid_and_no_worse_than_the_hint(data: tuple[Cluster, Queue]) -> None:
    p, plan = _checked_milp(*data)
    hint = evaluate_problem(p, solve_greedy(p, "best-fit")).objective()
    assert not Objective.parse(None).better(hint, plan.objective)
    if plan.solver.bound is not None:
        assert plan.solver.bound >= plan.objective["admitted_value"] - 1e-6


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=contended_rounds())
def test_contended_rounds_are_valid_and_no_worse_than_kueue(data: tuple[Cluster, Queue]) -> None:
    """Evictions, quota and cohorts go through the translation too (enforced rows, maxima)."""
    p, plan = _checked_milp(*data)
    kueue = evaluate_problem(p, solve_kueue(p)).objective()
    assert not Objective.parse(None).better(kueue, plan.objective)


def test_a_partial_start_is_completed_by_highs(example: Any) -> None:
    """When there is no time to complete the hint in CP-SAT, HiGHS gets the plan's admission and
    count variables only; it completes them, and its solution is at least the hint's value."""
    from optsched.ledger import Ledger
    from optsched.roundmodel.build import encode_all
    from optsched.roundmodel.hint import complete_hint, primary_values
    from optsched.roundmodel.variables import RoundModel
    from optsched.solvers.milp.highs import solve_levels
    from optsched.solvers.milp.solver import levels

    c, q, _ = example
    p = compile_problem(c, q)
    hint = solve_greedy(p, "first-fit")
    r = RoundModel(p, Ledger.with_running(p), list(p.jobs), hint=hint)
    encode_all(r, float("inf"), float("inf"))
    _, full = complete_hint(r, 10.0, 0)
    assert full is not None
    arrays = from_cpsat(r.model)
    chain, _ = levels(r, Objective.parse(None), arrays.n_cols, None)
    primary = primary_values(r)
    index = np.array(sorted(primary), dtype=np.int64)
    import time

    out = solve_levels(arrays, chain, start_values=np.array([primary[i] for i in index], dtype=float),
                       start_index=index, deadline=time.perf_counter() + 10.0, mip_gap=0.0, seed=0)
    assert out.values is not None, out.status
    act = arrays.a @ np.round(out.values)
    assert np.all(act <= arrays.row_hi + FEAS) and np.all(act >= arrays.row_lo - FEAS)
    assert chain[0].coef @ out.values >= chain[0].coef @ arrays.extend(full) - 1e-6
