"""LP-guided greedy (optsched/solvers/guided.py) against the plain baselines on the reference rounds.

Run: `.venv/bin/python benchmarks/guided.py`. Writes benchmarks/results/guided.md. For each
reference cluster, seed 0..2 and load 1/2/4 (`mixed` queues): the best of the six baselines, and
first-fit / best-fit / spread run in two LP-guided orders: `guided` (priority first, the value
bound's admission as the tie-break: what the CP-SAT round uses) and `lp-first` (the bound's
admission first, then priority: rejected, shown for the record). Every plan is checked.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table, write
from benchmarks.cpsat import CLUSTERS
from optsched import load_cluster
from optsched.bundled import DATA_DIR
from optsched.check import check_problem
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.problem import Problem, compile_problem
from optsched.solvers.bound import value_bound
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from optsched.solvers.guided import ADMITTED_DIGITS, guided_order

GUIDED_STRATEGIES = ("first-fit", "best-fit", "spread")


def best_of(p: Problem, names: tuple[str, ...], order: list | None = None) -> tuple[float, str, float]:
    """(admitted value, strategy, seconds of that run) of the best checked plan."""
    best = (-1.0, "", 0.0)
    for name in names:
        start = time.perf_counter()
        plan = solve_greedy(p, name, order=order)
        seconds = time.perf_counter() - start
        if check_problem(p, plan):
            raise SystemExit(f"{name} produced an invalid plan")
        value = evaluate_problem(p, plan).admitted_value
        if value > best[0]:
            best = (value, name, seconds)
    return best


def main() -> None:
    rows = []
    ratios: dict[str, list[float]] = {"guided": [], "lp-first": []}
    for cluster_name, jobs in CLUSTERS.items():
        cluster = load_cluster(DATA_DIR / "clusters" / f"{cluster_name}.yaml")
        for seed in range(3):
            for load in (1.0, 2.0, 4.0):
                p = compile_problem(cluster, generate_queue(cluster, "mixed", jobs=jobs, load=load, seed=seed))
                lp = value_bound(p)
                base, base_name, _ = best_of(p, tuple(STRATEGIES))
                guided, g_name, g_s = best_of(p, GUIDED_STRATEGIES, guided_order(p, lp.admitted))
                lp_first = sorted(p.jobs, key=lambda j: (-round(lp.admitted[j.id], ADMITTED_DIGITS), -j.priority,
                                                         j.submitted_at, j.index))
                first, _, _ = best_of(p, GUIDED_STRATEGIES, lp_first)
                ratios["guided"].append(guided / base)
                ratios["lp-first"].append(first / base)
                lp_v = lp.value or 0.0
                rows.append([cluster_name, seed, load, f"{lp_v:,.1f}", f"{base:,.1f} ({base_name})",
                             f"{100 * (lp_v - base) / lp_v:.2f}%", f"{guided:,.1f} ({g_name}, {g_s:.2f} s)",
                             f"{guided / base:.4f}", f"{100 * (lp_v - max(guided, base)) / lp_v:.2f}%",
                             f"{first / base:.4f}"])
                print(rows[-1], flush=True)
    summary = [[k, len(v), f"{min(v):.4f}", f"{sum(v) / len(v):.4f}", f"{max(v):.4f}", sum(r > 1.0 + 1e-9 for r in v)]
               for k, v in ratios.items()]
    write("guided", f"# LP-guided greedy vs the plain baselines\n\n{dt.date.today()}, {machine()}. `mixed` queues, "
          "seeds 0-2. `guided` = the best of first-fit, best-fit and spread in priority order with the value "
          "bound's admitted share as the tie-break within a priority; `lp-first` = the same strategies with the "
          "bound's admission first (ignores priority). Ratios are to the best of the six plain baselines; "
          "`gap after` uses the better of the plain and guided plans (what the CP-SAT round's hint gets).\n\n"
          "## Summary (ratio to the best plain baseline)\n\n"
          + table(["order", "rounds", "min", "mean", "max", "rounds improved"], summary)
          + "\n\n## Rounds\n\n"
          + table(["cluster", "seed", "load", "LP bound", "best baseline", "gap", "guided", "ratio",
                   "gap after", "lp-first ratio"], rows) + "\n")


if __name__ == "__main__":
    main()
