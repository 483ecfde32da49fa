"""`auto`'s choice, measured: on rounds from small to large, `auto` against each model path it
chooses between (`cpsat`, `milp`, `domain`), same limit, same round (issue 19 item 7).

Per round (a reference cluster and a `mixed` queue at load 2, seed 0) and limit (1 s, 5 s): each
solver's whole `optsched.solve` call (compiling included), its admitted value and status, and
which path `auto` took (`auto:<solver>`, and the domain model where the round is large enough).
Every plan is checked by the validator.

Run: `.venv/bin/python benchmarks/auto.py [--limits 1,5] [--out DIR]`. Writes auto.md into DIR
(default ./optsched-results/; `make bench` passes benchmarks/results).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS, machine, table
from optsched import check, reference_cluster, solve
from optsched.generate import generate_queue

ROUNDS = [("dgx-h100-1k", 25), ("dgx-h100-1k", 100), ("dgx-h100-1k", 300), ("ascend-910b-4k", 500),
          ("mixed-cloud-10k", 400), ("mixed-cloud-10k", 1000)]
SOLVERS = ("auto", "cpsat", "milp", "domain")


def measure(cluster_name: str, jobs: int, limit: float) -> list[Any]:
    cluster = reference_cluster(cluster_name)
    queue = generate_queue(cluster, "mixed", jobs=jobs, load=2.0, seed=0)
    got: dict[str, tuple[float, str, float]] = {}
    route = ""
    for name in SOLVERS:
        t = time.perf_counter()
        plan = solve(cluster, queue, solver=name, time_limit=limit, seed=0)
        wall = time.perf_counter() - t
        assert check(cluster, queue, plan) == [], f"an invalid {name} plan"
        got[name] = (plan.objective["admitted_value"], plan.solver.status, wall)
        if name == "auto":
            route = plan.solver.name + (" (domain model)" if plan.solver.domain is not None else "")
    best = max(v for v, _, _ in got.values())
    row: list[Any] = [cluster_name, jobs, limit, route]
    for name in SOLVERS:
        value, status, wall = got[name]
        row.append(f"{value:,.1f} ({status}, {wall:.2f} s)")
    row.append(f"{got['auto'][0] / max(best, 1e-9):.4f}")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limits", default="1,5")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    rows = []
    for limit in [float(x) for x in args.limits.split(",")]:
        for cluster_name, jobs in ROUNDS:
            rows.append(measure(cluster_name, jobs, limit))
            print(rows[-1], flush=True)
    at_best = sum(1 for r in rows if float(r[-1]) >= 1.0 - 1e-9)
    text = "\n".join([
        "# `auto`'s choice, measured (benchmarks/auto.py)", "",
        f"{dt.date.today()}, {machine()}. One run each, seed 0, `mixed` queues at load 2. Each cell: admitted "
        "value (status, whole-call wall time). `auto` ran: the path it chose. The last column is auto's value over "
        "the best of the four on that round.", "",
        f"auto matched the best of the four on {at_best} of {len(rows)} rounds.", "",
        table(["cluster", "jobs", "limit s", "auto ran", *SOLVERS, "auto / best"], rows), ""])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "auto.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
