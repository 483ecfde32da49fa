"""The 102,400-GPU round: 12,800 nodes, 10,000 queued jobs (the CP-SAT issue's scale target).

Run: `.venv/bin/python benchmarks/huge.py`. Writes benchmarks/results/huge.md. Measures one
baseline run to completion and `cpsat` with a 10 s limit, both checked by the validator.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table, write
from benchmarks.compile import big_cluster
from optsched.check import check_problem
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.problem import compile_problem
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.greedy import solve_greedy


def main() -> None:
    cluster = big_cluster(12_800)
    queue = generate_queue(cluster, "mixed", jobs=10_000, load=1.0, seed=0)
    p = compile_problem(cluster, queue)
    rows = []
    start = time.perf_counter()
    plan = solve_greedy(p, "best-fit")
    wall = time.perf_counter() - start
    rows.append(["best-fit (no limit)", round(wall, 2), "heuristic", len(check_problem(p, plan)),
                 round(evaluate_problem(p, plan).admitted_value, 1), ""])
    print(rows[-1], flush=True)
    start = time.perf_counter()
    plan = solve_cpsat(p, time_limit=10.0)
    wall = time.perf_counter() - start
    rows.append(["cpsat, 10 s", round(wall, 2), plan.solver.status, len(check_problem(p, plan)),
                 round(evaluate_problem(p, plan).admitted_value, 1), plan.solver.extra.get("reason", "")])
    print(rows[-1], flush=True)
    write("huge", f"# 102,400 GPUs, 10,000 queued jobs\n\n{dt.date.today()}, {machine()}. 12,800 nodes (H100, "
          "A100, L40S thirds; 400 leaves, 40 spines), `mixed` queue at 1x the free GPUs.\n\n"
          + table(["solver", "wall s", "status", "violations", "value", "note"], rows) + "\n")


if __name__ == "__main__":
    main()
