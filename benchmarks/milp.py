"""The two back ends of the round model, cpsat and milp (HiGHS), at the same time limits.

Run: `.venv/bin/python benchmarks/milp.py [--quick]`. Writes benchmarks/results/milp.md.

- Size sweep: dgx-h100-1k with 25 to 300 queued jobs (`mixed`, load 2), 2 and 10 s limits.
- Reference rounds: the three reference clusters at their benchmark sizes, 10 s.
- Greedy gaps: every greedy baseline's admitted value against the round's value bound
  (`optsched.bound` with its default 10 s: the LP, or HiGHS's bound on the whole round model when
  that is cheap and tighter; both hold for any plan).

Per run: admitted value, status, wall time; `first` = seconds from the call's start to the model
solver's first solution (after the greedy start, the build and, for milp, the translation and
HiGHS's presolve); `to 1%` = seconds until that solver's incumbent was within 1% of the bound it
had then (the LP bound, or its own proven bound when tighter and its model covers every candidate
node); `gap` = the returned plan's gap to the tighter of the two at the end. Every plan is checked.
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
from optsched import load_cluster
from optsched.bound import bound_problem
from optsched.bundled import DATA_DIR
from optsched.check import check_problem
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan
from optsched.problem import Problem, compile_problem
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from optsched.solvers.kueue import solve_kueue
from optsched.solvers.milp import solve_milp

REFERENCE = {"dgx-h100-1k": 300, "ascend-910b-4k": 500, "mixed-cloud-10k": 1000}
SWEEP = (25, 50, 100, 200, 300)
BACKENDS = {"cpsat": solve_cpsat, "milp": solve_milp}


def _times(plan: Plan, lp: float | None) -> tuple[str, str]:
    """(first model solution s, s to 1% gap) from the solver's trace (module docstring)."""
    model = plan.solver.model
    trace = [] if model is None else model.trace
    if not trace:
        return "-", "-"
    exact = model is not None and not model.truncated_groups
    to_1 = "-"
    for t, value, bound in trace:
        bounds = [b for b in (lp, bound if exact else None) if b is not None and b != float("inf")]
        if bounds and value >= (1 - 0.01) * min(bounds) - 1e-9:
            to_1 = f"{t:.2f}"
            break
    return f"{trace[0][0]:.2f}", to_1


def run(p: Problem, name: str, limit: float, seed: int, lp: float | None) -> dict[str, Any]:
    """One back end on one round: the row's numbers."""
    start = time.perf_counter()
    plan = BACKENDS[name](p, time_limit=limit, seed=seed)
    wall = time.perf_counter() - start
    assert not check_problem(p, plan), f"{name} returned an invalid plan"
    st = plan.solver
    first, to_1 = _times(plan, lp)
    note = str(st.reason or (st.model.tie if st.model else None) or "")[:60]
    if name == "milp" and st.milp is not None and st.milp.levels is not None:
        note = f"{st.milp.levels_solved}/{st.milp.levels} levels; {st.milp.highs_status or ''}; " + note
    return {"value": evaluate_problem(p, plan).admitted_value, "status": st.status, "wall": wall, "first": first,
            "to1": to_1, "gap": "-" if st.gap is None else f"{100 * st.gap:.2f}%", "note": note,
            "size": f"{(st.milp.columns if st.milp else None) or (st.model.variables if st.model else None) or '-'}"}


def compare(name: str, jobs: int, seeds: list[int], limits: list[float]) -> tuple[list[list[Any]], list[Any]]:
    """Rows of cpsat vs milp on one cluster and queue size; and (cpsat wins, milp wins, ties)."""
    cluster = load_cluster(DATA_DIR / "clusters" / f"{name}.yaml")
    rows, tally = [], [0, 0, 0]
    for seed in seeds:
        queue = generate_queue(cluster, "mixed", jobs=jobs, load=2.0, seed=seed)
        p = compile_problem(cluster, queue)
        lp = bound_problem(p, exact=False).value
        for limit in limits:
            got = {b: run(p, b, limit, seed, lp) for b in BACKENDS}
            a, m = got["cpsat"]["value"], got["milp"]["value"]
            tally[0 if a > m + 1e-6 else 1 if m > a + 1e-6 else 2] += 1
            for b, r in got.items():
                rows.append([name, jobs, seed, limit, b, r["size"], round(r["value"], 1), r["status"],
                             round(r["wall"], 2), r["first"], r["to1"], r["gap"], r["note"]])
                print(rows[-1], flush=True)
    return rows, tally


HEADERS = ["cluster", "jobs", "seed", "limit s", "backend", "columns", "value", "status", "wall s", "first s",
           "to 1% s", "gap", "note"]


def greedy_gaps(seeds: list[int]) -> list[list[Any]]:
    """Every baseline's gap to the round's value bound (and Kueue's on the cluster with tenants)."""
    rows = []
    for name, jobs in REFERENCE.items():
        cluster = load_cluster(DATA_DIR / "clusters" / f"{name}.yaml")
        for seed in seeds:
            queue = generate_queue(cluster, "mixed", jobs=jobs, load=2.0, seed=seed)
            p = compile_problem(cluster, queue)
            b = bound_problem(p)
            plans = {s: solve_greedy(p, s) for s in STRATEGIES}
            if cluster.tenants:
                plans["kueue"] = solve_kueue(p)
            gaps = {s: b.gap(evaluate_problem(p, plan).admitted_value) for s, plan in plans.items()}
            rows.append([name, seed, f"{b.value:,.1f}", b.method, f"{b.lp_value:,.1f}", round(b.seconds, 3),
                         *[f"{100 * gaps[s]:.2f}%" if s in gaps and gaps[s] is not None else "-"
                           for s in [*STRATEGIES, "kueue"]]])
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="seed 0, sizes 25 and 100, 2 s")
    args = ap.parse_args()
    seeds = [0] if args.quick else [0, 1]
    sizes = (25, 100) if args.quick else SWEEP
    limits = [2.0] if args.quick else [2.0, 10.0]
    out = [f"# cpsat vs milp (HiGHS) on the same round model\n\n{dt.date.today()}, {machine()}. cpsat: 2 "
           "workers; milp: HiGHS (serial branch and bound), relative MIP gap 1e-4. `mixed` queues at load 2. "
           "Wall time includes the greedy start, the build and, for milp, the translation. Every plan passed "
           "the validator. Columns and times are defined in benchmarks/milp.py.\n"]
    sweep_rows, summary = [], []
    for jobs in sizes:
        rows, tally = compare("dgx-h100-1k", jobs, seeds, limits)
        sweep_rows += rows
        summary.append(["dgx-h100-1k", jobs, *tally])
    ref_rows = []
    if not args.quick:
        for name, jobs in REFERENCE.items():
            if name == "dgx-h100-1k":
                continue  # in the sweep
            rows, tally = compare(name, jobs, [0], [10.0])
            ref_rows += rows
            summary.append([name, jobs, *tally])
    out.append("\n## Summary\n\nRuns where each back end's plan had the higher admitted value.\n\n"
               + table(["cluster", "jobs", "cpsat better", "milp better", "equal"], summary) + "\n")
    out.append("\n## Size sweep (dgx-h100-1k)\n\n" + table(HEADERS, sweep_rows) + "\n")
    if ref_rows:
        out.append("\n## Reference rounds, 10 s\n\n" + table(HEADERS, ref_rows) + "\n")
    out.append("\n## Greedy baselines against the value bound\n\ngap = (bound - admitted value) / bound; the bound "
               "is `optsched.bound` (10 s): the aggregate LP with evictable running jobs relaxed, or HiGHS's bound on "
               "the whole round model when that is cheap to build and tighter (`method`); it holds for every plan. "
               "`LP` is the aggregate LP's value.\n\n"
               + table(["cluster", "seed", "bound", "method", "LP", "bound s", *STRATEGIES, "kueue"],
                       greedy_gaps(seeds)) + "\n")
    write("milp", "\n".join(out))


if __name__ == "__main__":
    main()
