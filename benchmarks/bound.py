"""The value bound (optsched/solvers/bound.py) on the reference rounds: how tight, how fast.

Run: `.venv/bin/python benchmarks/bound.py`. Writes benchmarks/results/bound.md. For each
reference cluster and load (seed 0, `mixed` queue): the LP bound and the MILP bound (integral
counts, HiGHS, 1 s limit) with their times, the best greedy baseline's admitted value, and the
gap between that value and each bound.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table, write
from benchmarks.cpsat import CLUSTERS
from optsched import load_cluster
from optsched.bundled import DATA_DIR
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.problem import compile_problem
from optsched.solvers.bound import value_bound
from optsched.solvers.greedy import STRATEGIES, solve_greedy


def main() -> None:
    rows = []
    for name, jobs in CLUSTERS.items():
        cluster = load_cluster(DATA_DIR / "clusters" / f"{name}.yaml")
        for load in (1.0, 2.0, 4.0):
            p = compile_problem(cluster, generate_queue(cluster, "mixed", jobs=jobs, load=load, seed=0))
            lp = value_bound(p)
            mip = value_bound(p, integral=True, time_limit=1.0)
            best = max(evaluate_problem(p, solve_greedy(p, s)).admitted_value for s in STRATEGIES)
            lp_v, mip_v = lp.value or 0.0, mip.value or 0.0
            rows.append([name, load, round(best, 1), round(lp_v, 1), f"{lp.seconds:.3f}",
                         f"{100 * (lp_v - best) / max(lp_v, 1e-9):.2f}%", round(mip_v, 1), f"{mip.seconds:.3f}",
                         mip.status, f"{100 * (mip_v - best) / max(mip_v, 1e-9):.2f}%",
                         f"{100 * (lp_v - mip_v) / max(lp_v, 1e-9):.3f}%"])
            print(rows[-1], flush=True)
    write("bound", f"# Value bound vs the best greedy plan\n\n{dt.date.today()}, {machine()}. Seed 0, `mixed` "
          "queues; gap = (bound - best greedy value) / bound.\n\n"
          + table(["cluster", "load", "best greedy", "LP bound", "LP s", "LP gap", "MILP bound", "MILP s",
                   "MILP status", "MILP gap", "LP - MILP"], rows) + "\n")


if __name__ == "__main__":
    main()
