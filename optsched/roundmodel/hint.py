"""Hints: a plan as a value of every model variable (the complete start CP-SAT and HiGHS get).

`primary_values` reads the plan's admission, replica counts and kept running jobs; CP-SAT
propagates them into every other variable (`complete_hint`), which also proves the plan
feasible in the model: an exact model must accept a plan that passed the validator.
"""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model

from optsched import clock
from optsched.concerns.tenancy.preemption import preemptor
from optsched.concerns.tenancy.serving import victim_nodes
from optsched.roundmodel.variables import RoundModel
from optsched.view import PlanView


def primary_values(r: RoundModel) -> dict[int, int]:
    """Values of the admission and count variables (by proto index) in the hint plan."""
    values = r.hint_values()
    admitted = {r.p.job_index[pl.job] for pl in (r.hint.placements if r.hint else [])}
    out = {var.index: int(j in admitted) for j, var in r.a.items()}
    for key, var in r.y.items():
        lo, hi = values.get(key, (0, 0))
        out[var.index] = lo + hi
        if key in r.ye:
            out[r.ym[key].index] = lo
            out[r.ye[key].index] = hi
    evicted = {r.p.running_index[ev.job] for ev in (r.hint.evictions if r.hint else [])}
    for k, var in r.keep.items():
        out[var.index] = int(k not in evicted)
    return out


def hint_failure(r: RoundModel, status: str) -> str:
    """The fallback reason of a start plan the model could not complete (status `status`):
    INFEASIBLE is a model bug, except where the model is a known restriction of the rules that
    the start plan may use (docs/formulation.md): fair-sharing reclaims above nominal (P2f: on a
    cohort tree the model makes none, so a start plan that makes one is outside it for certain;
    in a flat cohort the model states them with bounds rounded against the reclaim, and which
    side of a bound the start plan falls on is not told here), and evictions served by a
    lending-limit or cohort-tree quota break, which S1-S3 leave out."""
    evictions = r.hint.evictions if r.hint is not None else []
    if not evictions:
        return f"hint completion {status} (a model bug if INFEASIBLE)"
    assert r.hint is not None
    p = r.p
    view = PlanView(p, r.hint)
    by = [(p.running[p.running_index[ev.job]], ev.reason, preemptor(view, ev.by)) for ev in evictions]
    fair = p.cluster.fair_sharing is not None
    fair_reclaims = [(v, b) for v, reason, b in by if reason == "reclaimed"] if fair else []
    if p.hierarchical and any(b is not None and not b.within_nominal for _, b in fair_reclaims):
        return (f"hint completion {status} (the start plan reclaims under fair sharing on a cohort tree "
                "with its preemptor above nominal, which the model does not state: P2f)")
    if (p.hierarchical or bool(np.isfinite(p.lend_limit).any())) \
            and any(b is None or not b.nodes & victim_nodes(v) for v, _, b in by):
        return (f"hint completion {status} (an eviction of the start plan is served by a quota rule the "
                "model leaves out: S1-S3 state no lending-limit or cohort-tree break)")
    if fair_reclaims:
        return (f"hint completion {status} (the start plan reclaims under fair sharing, which the model "
                "restricts: P2f; else a model bug if INFEASIBLE)")
    return f"hint completion {status} (a model bug if INFEASIBLE)"


def complete_hint(r: RoundModel, time_limit: float, seed: int) -> tuple[str, list[int] | None]:
    """Complete the hint plan into a value for every model variable.

    The admission and count variables are fixed to the hint plan's values in a copy of the
    model, and CP-SAT propagates the rest (spans, crossings, device and quota variables). The
    hint plan passed the validator, so an exact model must accept it: an infeasible completion is
    a model bug. Returns (status name, values by variable index).
    """
    status, solver = solve_fixed(r, primary_values(r), time_limit, seed)
    return status, None if solver is None else list(solver.response_proto.solution)


def solve_fixed(r: RoundModel, fixed: dict[int, int], time_limit: float,
                seed: int) -> tuple[str, cp_model.CpSolver | None]:
    """CP-SAT on a copy of the model with the variables of `fixed` (proto index -> value) pinned
    and no objective, stopping at the first solution: it completes a partial assignment, or
    checks a complete one (another back end's solution, decoded through the returned solver).
    Returns (status name, the solver when a solution was found)."""
    pinned = r.model.clone()
    for index, val in fixed.items():
        domain = pinned.proto.variables[index].domain  # [lo, hi]: pin it to the value
        if len(domain) != 2 or not domain[0] <= val <= domain[1]:
            return "INFEASIBLE", None
        domain[0] = val
        domain[1] = val
    pinned.clear_objective()
    pinned.clear_hints()
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = clock.wall_limit(max(time_limit, 0.01))
    if clock.deterministic():
        solver.parameters.max_deterministic_time = max(time_limit, 0.01) / clock.CPSAT_SECONDS_PER_DET
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = 1
    solver.parameters.cp_model_presolve = False  # every choice is fixed: propagation completes it
    solver.parameters.stop_after_first_solution = True
    status = solver.solve(pinned)
    clock.charge_cpsat(solver.response_proto.deterministic_time)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return solver.status_name(status), None
    return solver.status_name(status), solver


def apply_hint(r: RoundModel, values: list[int]) -> int:
    """Give CP-SAT a complete hint; returns how many variables were hinted."""
    r.model.clear_hints()
    for index, val in enumerate(values):
        r.model.add_hint(r.model.get_int_var_from_proto_index(index), val)
    return len(values)


