"""Greedy baselines on the three reference clusters: wall time, checked, quality.

Run: `.venv/bin/python benchmarks/baselines.py` (or `make bench`). Writes
benchmarks/results/baselines.md. Each row is one baseline on one generated queue; all rows of a
table come from one run on this machine.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table, timed, write
from optsched import load_cluster
from optsched.bundled import DATA_DIR
from optsched.check import check_problem
from optsched.generate import free_gpus, generate_queue
from optsched.metrics import evaluate_problem
from optsched.problem import compile_problem
from optsched.solvers.greedy import STRATEGIES, solve_greedy

CASES = [  # cluster, jobs, load (x free GPUs), seeds
    ("dgx-h100-1k", 300, 2.0, (0, 1)),
    ("ascend-910b-4k", 500, 2.0, (0, 1)),
    ("mixed-cloud-10k", 1000, 2.0, (0, 1, 2)),
]


def main() -> None:
    out = [f"# Greedy baselines on the reference clusters\n\n{dt.date.today()}, {machine()}. "
           "Queues from the `mixed` workload mix, GPU demand at 2x the free GPUs. "
           "`wall s` is the baseline alone (median of 3 runs); `check` is the validator's verdict; "
           "value = admitted_value (see docs/metrics.md).\n"]
    for name, jobs, load, seeds in CASES:
        cluster = load_cluster(DATA_DIR / "clusters" / f"{name}.yaml")
        rows = []
        for seed in seeds:
            queue = generate_queue(cluster, "mixed", jobs=jobs, load=load, seed=seed)
            p, t_compile = timed(lambda q=queue, c=cluster: compile_problem(c, q))
            for solver in STRATEGIES:
                plan, wall = timed(lambda s=solver, p=p: solve_greedy(p, s), repeat=3)
                violations, t_check = timed(lambda plan=plan, p=p: check_problem(p, plan))
                m, t_eval = timed(lambda plan=plan, p=p: evaluate_problem(p, plan))
                rows.append([seed, solver, round(wall, 3), "ok" if not violations else f"{len(violations)} violations",
                             round(t_check, 3), round(t_eval, 3),
                             int(m.details["admitted_jobs"]), round(m.details["placed_gpus"], 1),
                             round(m.admitted_value, 1), m.topology, round(m.details["uplink_gbps"]),
                             round(m.fragmentation, 1)])
        out.append(f"\n## {name}: {jobs} jobs, load {load}x of {free_gpus(cluster):,.0f} free GPUs "
                   f"(compile {t_compile:.3f} s)\n")
        out.append(table(["seed", "baseline", "wall s", "check", "check s", "evaluate s", "admitted jobs",
                          "placed GPUs", "value", "topology", "uplink Gbps", "fragmentation"], rows))
        slowest = max(r[2] for r in rows)
        out.append(f"\nSlowest baseline: {slowest:.3f} s.\n")
    write("baselines", "\n".join(out) + "\n")


if __name__ == "__main__":
    main()
