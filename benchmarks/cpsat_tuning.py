"""The measurements behind two CP-SAT settings: presolve on large models, and the candidate cap.

Run: `.venv/bin/python benchmarks/cpsat_tuning.py`. Writes benchmarks/results/cpsat-tuning.md.
One mixed-cloud-10k round (1,000 jobs, 2x load, seed 0), hinted with the best-fit plan.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ortools.sat.python import cp_model

from benchmarks.common import machine, table, write
from optsched import load_cluster
from optsched.budget import candidate_cap
from optsched.bundled import DATA_DIR
from optsched.generate import generate_queue
from optsched.ledger import Ledger
from optsched.metrics import evaluate_problem
from optsched.objective import Objective
from optsched.problem import compile_problem
from optsched.roundmodel.build import ENCODINGS
from optsched.roundmodel.hint import apply_hint, complete_hint
from optsched.roundmodel.variables import RoundModel
from optsched.roundmodel.weights import objective_expression, objective_weights
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.greedy import solve_greedy


def main() -> None:
    cluster = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    queue = generate_queue(cluster, "mixed", jobs=1000, load=2.0, seed=0)
    p = compile_problem(cluster, queue)
    hint = solve_greedy(p, "best-fit")
    hint = hint.model_copy(update={"objective": evaluate_problem(p, hint).objective()})
    greedy_value = hint.objective["admitted_value"]

    cap = candidate_cap(p)
    start = time.perf_counter()
    r = RoundModel(p, Ledger.with_running(p), list(p.jobs), max_candidates=cap, hint=hint)
    r.build_variables()
    for _, encode in ENCODINGS:
        encode(r)
    weights, _ = objective_weights(r, Objective.parse(None))
    r.model.maximize(objective_expression(r, weights))
    built = time.perf_counter() - start
    apply_hint(r, complete_hint(r, 10.0, 0)[1] or [])
    completed = time.perf_counter() - start - built
    pairs = cap * sum(len(j.groups) for j in p.jobs)
    build_rows = [[cap, pairs, len(r.model.proto.variables), round(built, 3), round(completed, 3),
                   f"{(built + completed) / pairs:.2e}"]]
    presolve_rows = []
    for presolve in (True, False):
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = 5.0
        solver.parameters.num_workers = 2
        solver.parameters.cp_model_presolve = presolve
        start = time.perf_counter()
        status = solver.solve(r.model)
        found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        value = solver.value(r.terms["admitted_value"].expr) / r.terms["admitted_value"].scale if found else None
        presolve_rows.append([presolve, len(r.model.proto.variables), solver.status_name(status),
                              round(time.perf_counter() - start, 2), "-" if value is None else round(value, 1),
                              round(greedy_value, 1)])
        print(presolve_rows[-1], flush=True)

    cap_rows = []
    for cap in (8, 16, 32):
        start = time.perf_counter()
        plan = solve_cpsat(p, time_limit=10.0, max_candidates=cap, hint=hint)
        cap_rows.append([cap, (plan.solver.model.variables if plan.solver.model else None) or "-", plan.solver.status,
                         round(time.perf_counter() - start, 2), round(plan.objective["admitted_value"], 1),
                         round(greedy_value, 1)])
        print(cap_rows[-1], flush=True)

    write("cpsat-tuning", f"# CP-SAT settings, measured\n\n{dt.date.today()}, {machine()}. mixed-cloud-10k, "
          "1,000 jobs, 2x load, seed 0, hint = best-fit.\n\n## Presolve (default candidate cap, 5 s, 2 workers)\n\n"
          + table(["presolve", "variables", "status", "wall s", "value", "best-fit value"], presolve_rows)
          + "\n\n## Build cost (default cap, the basis of `SECONDS_PER_CANDIDATE`)\n\n"
          + table(["candidates", "group x candidate pairs", "variables", "build s", "hint completion s",
                   "s per pair"], build_rows)
          + "\n\n## Candidate nodes per group (`solve_cpsat`, 10 s)\n\n"
          + table(["candidates", "variables", "status", "wall s", "value", "best-fit value"], cap_rows) + "\n")


if __name__ == "__main__":
    main()
