"""The exact Pareto front of a small round with CP-SAT (docs/pareto.md, "Exact fronts").

The round model is the shared one (`RoundModel` and every encoding of `ENCODINGS`) with every
eligible node a candidate and, by default, no evictions (as the NSGA-II decoder). Every point is
an optimum CP-SAT proves; a point not proven within the time ends the loop, the set is then a
subset of the front, and `stats["complete"]` says so.

- Two objectives (a, b): epsilon-constraint. Optimise a, then b at a's optimum (one solve: a's
  weight exceeds b's whole range), subject to b strictly better than at the last point; stop when
  that is infeasible. Each optimum is non-dominated, and the next bound skips no front point.
- Three or more: maximise a positive weighted sum of the objectives over the plans that no point
  found so far weakly dominates (for every found z, one objective strictly better: one `bool_or`
  per point). An optimum of a positive weighted sum over that region is non-dominated in the
  whole model (a plan dominating it would be in the region with a larger sum), and every
  non-dominated vector not yet found stays in the region, so the loop enumerates the front and
  stops when the region is empty.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ortools.sat.python import cp_model

from optsched.check import check_problem
from optsched.errors import InputError, InputIssue
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan, SolverStats
from optsched.pareto.front import ParetoSet, check_objectives
from optsched.problem import Problem
from optsched.roundmodel.build import ENCODINGS
from optsched.roundmodel.decode import decode
from optsched.roundmodel.hint import apply_hint
from optsched.roundmodel.variables import RoundModel
from optsched.solvers.cpsat.params import solver_parameters

MAX_NODES = 64
"""Rounds with more nodes are refused: the exact front is a yardstick for small instances."""


def exact_front(p: Problem, objectives: Sequence[str], *, time_limit: float = 60.0, seed: int = 0,
                max_points: int = 500, evictions: bool = False, num_workers: int = 2,
                provision: bool | None = None) -> ParetoSet:
    """Every non-dominated objective vector of the round model over `objectives` (see module
    docstring), one plan each, checked by the validator; within `time_limit` seconds. `provision`:
    whether plans may create nodes of provisionable pools (None: where the cluster has any)."""
    names = check_objectives(objectives)
    if p.n_nodes > MAX_NODES:
        raise InputError([InputIssue("cluster.nodes", "too_large",
                                     f"{p.n_nodes} nodes; exact fronts are for rounds of <= {MAX_NODES} nodes")])
    start = time.perf_counter()
    from optsched.concerns.tenancy import preemption

    evictable = preemption.evictable_jobs(p) if evictions else []
    if provision is None:
        provision = bool(p.pool_max_nodes.sum() > 0)
    r = RoundModel.whole_round(p, evictable, max_candidates=p.n_nodes, wanted=frozenset(names), provision=provision)
    r.build_variables()
    for _name, encode in ENCODINGS:
        encode(r)
    missing = [n for n in names if n not in r.terms]
    if missing:
        raise InputError([InputIssue("objectives", "not_modelled",
                                     f"{missing} are not CP-SAT terms; exact fronts cover {sorted(r.terms)}")])
    terms = [r.terms[n] for n in names]
    ubs = [max(int(r.term_ub.get(n, 1)), 1) for n in names]

    def signed(i: int) -> Any:
        return terms[i].expr if terms[i].maximise else -terms[i].expr

    if len(names) == 2:
        r.model.maximize((ubs[1] + 1) * signed(0) + signed(1))
    else:
        top = max(ubs)
        r.model.maximize(r.sum(max(1, round(top / ub)) * signed(i) for i, ub in enumerate(ubs)))
    plans: list[Plan] = []
    complete = False
    status_name = ""
    while len(plans) < max_points:
        left = start + time_limit - time.perf_counter()
        if left <= 0:
            status_name = "time limit"
            break
        solver = cp_model.CpSolver()
        solver_parameters(solver, time_limit=left, seed=seed, num_workers=num_workers, deterministic=True,
                          n_variables=len(r.model.proto.variables))
        status = solver.solve(r.model)
        status_name = solver.status_name(status)
        if status == cp_model.INFEASIBLE:
            complete = True
            break
        if status != cp_model.OPTIMAL:
            break
        base = r.base  # decoding with evictions replaces it by the kept jobs' ledger
        plan = decode(r, solver, SolverStats(name="exact", status="optimal", seed=seed))
        r.base = base
        if plan is None or check_problem(p, plan):
            raise RuntimeError("exact front: a model plan failed to decode or to pass the check (a model bug)")
        plans.append(plan.model_copy(update={"objective": evaluate_problem(p, plan).objective()}))
        z = [int(solver.value(t.expr)) for t in terms]
        apply_hint(r, list(solver.response_proto.solution))  # the next point is often a small change
        if len(names) == 2:  # epsilon: the second objective strictly better than here
            r.model.add(terms[1].expr >= z[1] + 1 if terms[1].maximise else terms[1].expr <= z[1] - 1)
            continue
        better = []
        for t, zi in zip(terms, z, strict=True):
            b = r.model.new_bool_var("")
            r.model.add(t.expr >= zi + 1 if t.maximise else t.expr <= zi - 1).only_enforce_if(b)
            better.append(b)
        r.model.add_bool_or(better)
    return ParetoSet.of(names, plans, stats={"method": "exact", "complete": complete, "points_found": len(plans),
                                             "last_status": status_name,
                                             "seconds": round(time.perf_counter() - start, 3)})
