"""Is the time limit kept? Wall time of whole `solve` calls against their limit.

Run: `.venv/bin/python benchmarks/timelimit.py [--seeds 2] [--limits 0.2,1,5]`. Writes
timelimit.md into $OPTSCHED_RESULTS (`make bench`: benchmarks/results), else ./optsched-results/.

Per reference cluster at its benchmark size (`mixed`, load 2: dgx-h100-1k 300 jobs, ascend-910b-4k
500, mixed-cloud-10k 1,000), per limit and solver (`milp`, `cpsat`, `auto`): the whole call is
timed, compiling the documents included, as a user's `optsched.solve(cluster, queue,
time_limit=...)` is. The rule (issue 20): wall <= 1.1 x limit. Every plan is checked.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table, write
from optsched import check, reference_cluster, solve
from optsched.generate import generate_queue

REFERENCE = {"dgx-h100-1k": 300, "ascend-910b-4k": 500, "mixed-cloud-10k": 1000}
SOLVERS = ("milp", "cpsat", "auto")
RULE = 1.1
"""A call may end at most 10% past its time limit."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--limits", default="0.2,1,5")
    ap.add_argument("--clusters", default=",".join(REFERENCE))
    args = ap.parse_args()
    limits = [float(x) for x in args.limits.split(",")]
    rows: list[list[Any]] = []
    worst: dict[tuple[str, float], float] = {}
    over: dict[str, int] = dict.fromkeys(SOLVERS, 0)
    runs: dict[str, int] = dict.fromkeys(SOLVERS, 0)
    solve(reference_cluster("dgx-h100-1k"), generate_queue(reference_cluster("dgx-h100-1k"), "mixed", jobs=20),
          time_limit=0.5)  # imports and first-call costs outside the table
    for name in args.clusters.split(","):
        cluster = reference_cluster(name)
        for seed in range(args.seeds):
            queue = generate_queue(cluster, "mixed", jobs=REFERENCE[name], load=2.0, seed=seed)
            for limit in limits:
                for solver in SOLVERS:
                    start = time.perf_counter()
                    plan = solve(cluster, queue, solver=solver, time_limit=limit, seed=seed)
                    wall = time.perf_counter() - start
                    assert check(cluster, queue, plan) == [], f"{solver} returned an invalid plan"
                    ratio = wall / limit
                    runs[solver] += 1
                    over[solver] += ratio > RULE
                    worst[(solver, limit)] = max(worst.get((solver, limit), 0.0), ratio)
                    rows.append([name, seed, limit, solver, plan.solver.name, plan.solver.status, round(wall, 3),
                                 f"{ratio:.3f}", "over" if ratio > RULE else ""])
                    print(rows[-1], flush=True)
    summary = [[s, lim, f"{worst[(s, lim)]:.3f}"] for s in SOLVERS for lim in limits if (s, lim) in worst]
    text = (f"# Time limits kept\n\n{dt.date.today()}, {machine()}. Whole `optsched.solve` calls (compilation "
            f"included) on the reference clusters at their benchmark sizes (`mixed`, load 2), seeds 0-{args.seeds - 1};"
            f" rule: wall <= {RULE} x limit (issue 20). benchmarks/timelimit.py.\n\n"
            + "Calls over the rule: " + ", ".join(f"{s} {over[s]}/{runs[s]}" for s in SOLVERS) + ".\n\n"
            + "## Worst wall / limit per solver and limit\n\n" + table(["solver", "limit s", "worst ratio"], summary)
            + "\n\n## Every call\n\n"
            + table(["cluster", "seed", "limit s", "solver", "ran", "status", "wall s", "wall / limit", ""], rows)
            + "\n")
    write("timelimit", text)


if __name__ == "__main__":
    main()
