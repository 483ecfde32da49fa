"""Deterministic mode: the same plan every time, and how often within the wall limit.

Run: `.venv/bin/python benchmarks/deterministic.py [--limits 0.2,1,5]`. Writes deterministic.md into
$OPTSCHED_RESULTS (`make bench`: benchmarks/results), else ./optsched-results/.

Per reference cluster at its benchmark size (`mixed`, load 2, seed 0: dgx-h100-1k 300 jobs,
ascend-910b-4k 500, mixed-cloud-10k 1,000), per limit and solver (`cpsat`, `milp`, `auto`): two
calls with `deterministic=True` in this process and one in another process with another hash seed
(are the three plans the same?), their wall time against the limit (the whole call, compiling
included), and for comparison two calls without it (same plan? value). Every plan is checked.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table, write
from optsched import check, reference_cluster, solve
from optsched.generate import generate_queue
from optsched.model import Plan

REFERENCE = {"dgx-h100-1k": 300, "ascend-910b-4k": 500, "mixed-cloud-10k": 1000}
SOLVERS = ("cpsat", "milp", "auto")
RULE = 1.1
"""The time-limit rule of the other calls (benchmarks/results/timelimit.md): wall <= 1.1 x limit."""


def fingerprint(plan: Plan) -> str:
    """The plan document without its solver statistics, hashed (10 hex digits)."""
    doc = plan.model_dump(mode="json")
    doc["solver"] = None
    return hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:10]


def one(name: str, jobs: int, solver: str, limit: float, deterministic: bool) -> tuple[str, float, float, str]:
    """(fingerprint, wall s, admitted value, status) of one call."""
    cluster = reference_cluster(name)
    queue = generate_queue(cluster, "mixed", jobs=jobs, load=2.0, seed=0)
    start = time.perf_counter()
    plan = solve(cluster, queue, solver=solver, time_limit=limit, seed=0, deterministic=deterministic)
    wall = time.perf_counter() - start
    if check(cluster, queue, plan):
        raise SystemExit(f"{solver} on {name} at {limit} s produced an invalid plan")
    return fingerprint(plan), wall, float(plan.objective.get("admitted_value", 0.0)), plan.solver.status


def elsewhere(name: str, jobs: int, solver: str, limit: float) -> str:
    """The fingerprint of the deterministic call in another interpreter (PYTHONHASHSEED=7)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from benchmarks.deterministic import one; "
            f"print(one({name!r}, {jobs}, {solver!r}, {limit}, True)[0])")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parents[1])], check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "7"})
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limits", default="0.2,1,5")
    ap.add_argument("--clusters", default=",".join(REFERENCE))
    args = ap.parse_args()
    limits = [float(x) for x in args.limits.split(",")]
    rows: list[list[Any]] = []
    same = within = total = wall_same = 0
    for name in args.clusters.split(","):
        jobs = REFERENCE[name]
        for limit in limits:
            for solver in SOLVERS:
                a, b = one(name, jobs, solver, limit, True), one(name, jobs, solver, limit, True)
                c = elsewhere(name, jobs, solver, limit)
                w1, w2 = one(name, jobs, solver, limit, False), one(name, jobs, solver, limit, False)
                identical = a[0] == b[0] == c
                ok = max(a[1], b[1]) <= RULE * limit
                total += 1
                same += identical
                within += ok
                wall_same += w1[0] == w2[0]
                rows.append([name, limit, solver, "yes" if identical else f"no ({a[0]}, {b[0]}, {c})",
                             f"{a[1]:.2f} / {b[1]:.2f}", f"{max(a[1], b[1]) / limit:.2f}", f"{a[2]:,.1f}", a[3],
                             "yes" if w1[0] == w2[0] else "no", f"{w1[1]:.2f} / {w2[1]:.2f}",
                             f"{w1[2]:,.1f} / {w2[2]:,.1f}"])
                print(rows[-1], flush=True)
    write("deterministic", f"# Deterministic mode\n\n{dt.date.today()}, {machine()}. `solve(cluster, queue, "
          "solver, time_limit, seed=0, deterministic=True)` on the reference clusters at their benchmark size "
          "(`mixed` queues at 2x load, seed 0), twice in one process and once in another with another hash "
          "seed; then twice without it. Wall = the whole call, compiling included. Decisions read a work clock "
          "(optsched/clock.py) charged with the work done; CP-SAT is limited by deterministic time, HiGHS by "
          "iterations and nodes. Every plan passed the validator.\n\n"
          f"Same plan in all three deterministic calls: {same} of {total}. Within {RULE} x the limit (both "
          f"calls in this process): {within} of {total}. Without it, the two calls gave the same plan in "
          f"{wall_same} of {total}.\n\n"
          + table(["cluster", "limit s", "solver", "same plan x3", "wall s", "max wall / limit", "value",
                   "status", "same plan, wall clock", "wall s, wall clock", "value, wall clock"], rows) + "\n")


if __name__ == "__main__":
    main()
