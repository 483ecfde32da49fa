"""The 102,400-GPU round: 12,800 nodes, 10,000 queued jobs (the CP-SAT issue's scale target).

Run: `.venv/bin/python benchmarks/huge.py`. Writes benchmarks/results/huge.md. Measures every
baseline run to completion, the value bound, and `cpsat` with 10 s and 30 s limits, all plans
checked by the validator.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table, write
from benchmarks.compile import big_cluster
from optsched.check import check_problem
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Plan, Queue
from optsched.problem import Problem, compile_problem
from optsched.solvers.bound import value_bound
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.greedy import STRATEGIES, solve_greedy


def huge_round() -> tuple[Cluster, Queue]:
    """12,800 nodes (102,400 GPUs) and a `mixed` queue of 10,000 jobs at 1x load, seed 0."""
    cluster = big_cluster(12_800)
    return cluster, generate_queue(cluster, "mixed", jobs=10_000, load=1.0, seed=0)


def baselines(p: Problem) -> Iterator[tuple[str, float, Plan, float]]:
    """Every greedy baseline run to completion: (name, wall seconds of the baseline alone, plan,
    admitted value)."""
    for name in STRATEGIES:
        start = time.perf_counter()
        plan = solve_greedy(p, name)
        wall = time.perf_counter() - start
        yield name, wall, plan, evaluate_problem(p, plan).admitted_value


def main() -> None:
    cluster, queue = huge_round()
    p = compile_problem(cluster, queue)
    rows = []
    best = 0.0
    for name, wall, plan, value in baselines(p):
        best = max(best, value)
        rows.append([f"{name} (no limit)", round(wall, 2), "heuristic", len(check_problem(p, plan)), round(value, 1),
                     "-", ""])
        print(rows[-1], flush=True)
    start = time.perf_counter()
    bound = value_bound(p)
    rows.append(["value bound (LP)", round(time.perf_counter() - start, 2), bound.status, "-",
                 round(bound.value or 0.0, 1), "-", "upper bound on any plan's admitted value"])
    for limit in (10.0, 30.0):
        start = time.perf_counter()
        plan = solve_cpsat(p, time_limit=limit)
        wall = time.perf_counter() - start
        value = evaluate_problem(p, plan).admitted_value
        st = plan.solver
        note = f"{len(st.steps)} neighbourhoods, {st.improved} improved; " + (st.reason or "")
        rows.append([f"cpsat, {limit:g} s", round(wall, 2), st.status, len(check_problem(p, plan)), round(value, 1),
                     "-" if st.gap is None else f"{100 * st.gap:.2f}%", note])
        print(rows[-1], flush=True)
    write("huge", f"# 102,400 GPUs, 10,000 queued jobs\n\n{dt.date.today()}, {machine()}. 12,800 nodes (H100, "
          "A100, L40S thirds; 400 leaves, 40 spines), `mixed` queue at 1x the free GPUs. Best greedy value: "
          f"{best:,.1f}.\n\n"
          + table(["solver", "wall s", "status", "violations", "value", "gap to bound", "note"], rows) + "\n")


if __name__ == "__main__":
    main()
