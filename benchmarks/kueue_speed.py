"""The `kueue` baseline's priority diagnostic beside the round against inline, and its work.

Run: `.venv/bin/python benchmarks/kueue_speed.py`. Writes kueue-speed.md into $OPTSCHED_RESULTS
(`make bench`: benchmarks/results), else ./optsched-results/. On mixed-cloud-10k with 1,000
`mixed` jobs at 2x load (the round of issue 19's 1 s Kueue target), seeds 0-4: the wall seconds
of `solve_kueue` with the diagnostic in a forked copy (`diagnose_beside=True`,
`optsched.solvers.diagnosis`) and inline, run alternately in one process, each on a freshly
compiled round (`RUNS` of each: least and median); whether the two plans are the same (they must
be); and the round's work in deterministic mode (`clock.work_clock`: trials and replica
placements charged at fixed costs, the same on every machine), the measure that moves only
with the code.
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table, write
from optsched import clock, load_cluster
from optsched.bundled import DATA_DIR
from optsched.check import check_problem
from optsched.generate import generate_queue
from optsched.model import Plan
from optsched.problem import compile_problem
from optsched.solvers import diagnosis
from optsched.solvers.kueue import solve_kueue

RUNS = 5
"""Runs of each mode per seed (single runs on this 2-core shared machine differ by 10-15%)."""


def _decisions(plan: Plan) -> str:
    return plan.model_dump_json(exclude={"solver"})


def main() -> None:
    cluster = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    rows = []
    for seed in range(5):
        queue = generate_queue(cluster, "mixed", jobs=1000, load=2.0, seed=seed)
        walls: dict[bool, list[float]] = {True: [], False: []}
        plans: dict[bool, str] = {}
        for _ in range(RUNS):
            for beside in (True, False):
                p = compile_problem(cluster, queue)
                start = time.perf_counter()
                plan = solve_kueue(p, diagnose_beside=beside)
                walls[beside].append(time.perf_counter() - start)
                assert not check_problem(p, plan), "an invalid plan"
                plans[beside] = _decisions(plan)
        p = compile_problem(cluster, queue)
        with clock.work_clock(0.0) as work:
            solve_kueue(p)
        rows.append([seed, round(min(walls[True]), 3), round(statistics.median(walls[True]), 3),
                     round(min(walls[False]), 3), round(statistics.median(walls[False]), 3),
                     f"{min(walls[True]) / min(walls[False]):.2f}", "yes" if plans[True] == plans[False] else "NO",
                     round(work.t, 3), diagnosis.usable(p)])
        print(rows[-1], flush=True)
    text = "\n".join([
        "# The kueue baseline: diagnostic beside the round against inline\n",
        f"{dt.date.today().isoformat()}, {machine()}. mixed-cloud-10k, 1,000 `mixed` jobs at 2x load; "
        f"{RUNS} runs of each mode per seed, alternating in one process, each on a freshly compiled round "
        "(benchmarks/kueue_speed.py). Work: the deterministic work clock's seconds for the round (fixed "
        "charges per job, trial and replica placement).\n",
        table(["seed", "beside least s", "beside median s", "inline least s", "inline median s",
               "least ratio", "same plan", "work s (deterministic)", "fork used"], rows)])
    write("kueue-speed", text + "\n")


if __name__ == "__main__":
    main()
