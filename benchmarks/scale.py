"""Rounds at production scale: issue 19's targets, measured as the code stands.

Run: `.venv/bin/python benchmarks/scale.py [--seeds 5] [--huge] [--out DIR]`. Writes
benchmarks/results/scale.md only under `make bench` or with `--out` (default: ./optsched-results/).

Per row: one generated `mixed` queue, `optsched.solve(cluster, queue, solver="cpsat",
time_limit=T)` timed as a whole call (compiling included), every plan checked by the validator.
- mixed-cloud-10k, 1,000 jobs at 2x load: against Kueue run to completion (value and lost work:
  the `disruption` term, GPU-equivalent hours).
- dgx-h100-1k (300 jobs) and ascend-910b-4k (500 jobs), loads 1/2/4, at 1 s: against the best
  placement baseline run to completion.
- `--huge`: 102,400 GPUs / 10,000 jobs at 10 s against the best baseline (its setup takes about a
  minute).
The gap is the plan's reported gap (`solver.gap`: to the LP value bound, or the exact model's).
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, preemptor_elsewhere, table
from optsched import load_cluster, solve
from optsched.bundled import DATA_DIR
from optsched.check import check_problem
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Plan, Queue
from optsched.problem import Problem, compile_problem
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from optsched.solvers.kueue import solve_kueue

WEIGHTED = {"admitted_value": 1.0, "disruption": 2.0}
"""The weighted objective of the second mixed-cloud-10k rows: a GPU-equivalent hour of lost work
costs two units of admitted value (the default order puts value first, so it evicts whatever buys
any value)."""


TOLERANT = {"lexicographic": ["admitted_value", "disruption", "topology", "fragmentation"], "tolerance": 0.1}
"""The lexicographic objective of the third rows: admitted value within 10% of its best, then the
least lost work."""


def _round(cluster: Cluster, queue: Queue, limit: float, seed: int, objective: Any = None) -> dict[str, Any]:
    start = time.perf_counter()
    plan = solve(cluster, queue, solver="cpsat", time_limit=limit, seed=seed, objective=objective)
    wall = time.perf_counter() - start
    p = compile_problem(cluster, queue)
    assert not check_problem(p, plan), "an invalid plan"
    m = evaluate_problem(p, plan)
    st = plan.solver
    return {"value": m.admitted_value, "lost": m.disruption, "wall": wall, "status": st.status,
            "gap": st.gap, "route": (st.route or "").split(":")[0], "reason": st.reason or "",
            "evictions": f"{len(plan.evictions)} ({preemptor_elsewhere(cluster, plan)})"}


SPEED_RUNS = 3
"""Runs per timed baseline (item 5's targets): the median is reported, the range beside it (single
runs on this 2-core shared machine differ by 15% and more from one to the next)."""


def timed_runs(cluster: Cluster, queue: Queue, run: Callable[[Problem], Plan]) -> tuple[Plan, float]:
    """The plan of `run` on the round (each run on a freshly compiled problem, compiling not
    timed), and the median wall seconds of `SPEED_RUNS` runs."""
    walls: list[float] = []
    plans: list[Plan] = []
    for _ in range(SPEED_RUNS):
        p = compile_problem(cluster, queue)
        start = time.perf_counter()
        plans.append(run(p))
        walls.append(time.perf_counter() - start)
    return plans[0], statistics.median(walls)


GAP_TARGET = 0.03
"""The issue's gap target at 1 s on mixed-cloud-10k (a share of the round's optimum)."""


def least_lost_near_optimum(p: Problem, best_value: float) -> float | None:
    """The least lost work (GPU-h) of any valid plan within `GAP_TARGET` of the round's optimum
    (`optsched.bound.lost_work_bound_problem` at (1 - GAP_TARGET) x `best_value`, the value of a
    valid plan, so at most that share of the optimum): where it exceeds Kueue's lost work, no plan
    meets the gap target and the lost-work target together."""
    from optsched.bound import lost_work_bound_problem

    return lost_work_bound_problem(p, (1.0 - GAP_TARGET) * best_value, 60.0).value


def mixed_cloud(seeds: list[int], limits: list[float]) -> tuple[list[list[Any]], list[list[Any]], list[list[Any]]]:
    """cpsat vs Kueue run to completion on mixed-cloud-10k, 1,000 jobs at 2x load: the default
    objective at every limit, and the `WEIGHTED` and `TOLERANT` ones at the first; per seed, the
    least lost work of any plan within the gap target (`least_lost_near_optimum`)."""
    cluster = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    rows, summary, floor_rows = [], [], []
    runs = [(limit, "default", None) for limit in limits] + [(limits[0], "value 1, lost 2", WEIGHTED),
                                                             (limits[0], "value within 10%, then lost", TOLERANT)]
    for seed in seeds:
        queue = generate_queue(cluster, "mixed", jobs=1000, load=2.0, seed=seed)
        p = compile_problem(cluster, queue)
        kueue, kueue_s = timed_runs(cluster, queue, solve_kueue)
        km = evaluate_problem(p, kueue)
        kueue_ev = f"{len(kueue.evictions)} ({preemptor_elsewhere(cluster, kueue)})"
        for limit, label, objective in runs:
            got = _round(cluster, queue, limit, seed, objective)
            ratio = got["value"] / max(km.admitted_value, 1e-9)
            rows.append([seed, limit, label, round(got["wall"], 2), got["status"], got["route"],
                         round(got["value"], 1), round(km.admitted_value, 1), f"{ratio:.3f}", round(got["lost"], 1),
                         round(km.disruption, 1), "-" if got["gap"] is None else f"{100 * got['gap']:.2f}%",
                         round(kueue_s, 2), got["evictions"], kueue_ev, got["reason"][:60]])
            print("mixed-cloud-10k", rows[-1], flush=True)
        best = max([km.admitted_value] + [r[6] for r in rows if r[0] == seed])
        least = least_lost_near_optimum(p, best)
        floor_rows.append([seed, round(best, 1), round((1.0 - GAP_TARGET) * best, 1),
                           "-" if least is None else round(least, 1), round(km.disruption, 1),
                           "-" if least is None else ("yes" if least > km.disruption + 1e-6 else "no")])
        print("lost work near the optimum", floor_rows[-1], flush=True)
    for limit, label, _ in runs:
        mine = [r for r in rows if r[1] == limit and r[2] == label]
        wins = sum(1 for r in mine if float(r[8]) >= 1.0 and r[9] <= r[10] + 1e-6)
        more = sum(1 for r in mine if float(r[8]) >= 1.0)
        gaps = [float(r[11].rstrip("%")) for r in mine if r[11] != "-"]
        counts = [tuple(int(x) for x in r[13].replace("(", "").replace(")", "").split()) for r in mine]
        summary.append(["mixed-cloud-10k", limit, label, len(mine), more, wins, f"{max(gaps):.2f}%" if gaps else "-",
                        max(r[3] for r in mine), f"{sum(c[1] for c in counts)} of {sum(c[0] for c in counts)}",
                        ", ".join(f"{k} {v}" for k, v in sorted(Counter(r[4] for r in mine).items()))])
    return rows, summary, floor_rows


def fabric_clusters(seeds: list[int], limit: float) -> tuple[list[list[Any]], list[list[Any]]]:
    """cpsat at `limit` vs the best placement baseline run to completion, loads 1/2/4."""
    rows, summary = [], []
    for name, jobs in (("dgx-h100-1k", 300), ("ascend-910b-4k", 500)):
        cluster = load_cluster(DATA_DIR / "clusters" / f"{name}.yaml")
        mine = []
        for seed in seeds:
            for load in (1.0, 2.0, 4.0):
                queue = generate_queue(cluster, "mixed", jobs=jobs, load=load, seed=seed)
                p = compile_problem(cluster, queue)
                best = max(evaluate_problem(p, solve_greedy(p, s)).admitted_value for s in STRATEGIES)
                got = _round(cluster, queue, limit, seed)
                ratio = got["value"] / max(best, 1e-9)
                row = [name, seed, load, round(got["wall"], 2), got["status"], got["route"], round(got["value"], 1),
                       round(best, 1), f"{ratio:.4f}", "-" if got["gap"] is None else f"{100 * got['gap']:.2f}%",
                       got["reason"][:60]]
                rows.append(row)
                mine.append((ratio, got["status"], got["gap"], got["wall"]))
                print(row, flush=True)
        gaps = [g for *_, g, _ in mine if g is not None]
        summary.append([name, limit, len(mine), sum(1 for r, *_ in mine if r >= 1 - 1e-9),
                        sum(1 for _, s, *_ in mine if s != "fallback"),
                        f"{100 * max(gaps):.2f}%" if gaps else "-", round(max(w for *_, w in mine), 2)])
    return rows, summary


CURVE_NODES = (128, 512, 1280, 3200, 6400, 12800)
"""Node counts of the scaling curve (8 GPUs each: 1,024 to 102,400 GPUs; `benchmarks.compile.big_cluster`)."""


def curve(limit_small: float, limit_large: float) -> list[list[Any]]:
    """cpsat on `big_cluster` fat trees with a proportional `mixed` queue (one job per 10.24 GPUs,
    1x load, seed 0): 1 s up to 10,240 GPUs, `limit_large` above; against the best baseline run to
    completion, the gap to the reported bound."""
    from benchmarks.compile import big_cluster

    rows = []
    for nodes in CURVE_NODES:
        cluster = big_cluster(nodes)
        jobs = max(50, round(nodes * 8 / 10.24))
        queue = generate_queue(cluster, "mixed", jobs=jobs, load=1.0, seed=0)
        p = compile_problem(cluster, queue)
        best, best_s = 0.0, 0.0
        for name in STRATEGIES:
            t = time.perf_counter()
            value = evaluate_problem(p, solve_greedy(p, name)).admitted_value
            if value > best:
                best, best_s = value, time.perf_counter() - t
        limit = limit_small if nodes * 8 <= 10_240 else limit_large
        got = _round(cluster, queue, limit, 0)
        rows.append([nodes * 8, jobs, limit, round(got["wall"], 2), got["status"], round(got["value"], 1),
                     round(best, 1), round(best_s, 2), f"{got['value'] / max(best, 1e-9):.4f}",
                     "-" if got["gap"] is None else f"{100 * got['gap']:.2f}%"])
        print("curve", rows[-1], flush=True)
    return rows


def plot_curve(rows: list[list[Any]], path: Path) -> None:
    """Wall time, value ratio and gap against GPUs (log scale), one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpus = [r[0] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    series = [([r[3] for r in rows], "wall s (limit: dashed)"), ([float(r[8]) for r in rows], "value / best greedy"),
              ([float(r[9].rstrip("%")) if r[9] != "-" else float("nan") for r in rows], "gap to bound, %")]
    for ax, (ys, label) in zip(axes, series, strict=True):
        ax.plot(gpus, ys, marker="o")
        ax.set_xscale("log")
        ax.set_xlabel("GPUs")
        ax.set_title(label)
    axes[0].plot(gpus, [r[2] for r in rows], linestyle="--", color="grey")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def huge(limit: float) -> list[list[Any]]:
    """102,400 GPUs / 10,000 jobs: the baselines to completion, then cpsat at `limit`."""
    from benchmarks.huge import baselines, huge_round

    cluster, queue = huge_round()
    rows = []
    best = 0.0
    for name, wall, _, value in baselines(compile_problem(cluster, queue)):
        best = max(best, value)
        rows.append([name, round(wall, 2), "heuristic", round(value, 1), "-", "-"])
        print(rows[-1], flush=True)
    got = _round(cluster, queue, limit, 0)
    rows.append([f"cpsat {limit:g} s", round(got["wall"], 2), got["status"], round(got["value"], 1),
                 f"{got['value'] / best:.4f}", "-" if got["gap"] is None else f"{100 * got['gap']:.2f}%"])
    print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--huge", action="store_true", help="also the 102,400-GPU round")
    ap.add_argument("--curve", action="store_true", help="also the scaling curve, 1,024 to 102,400 GPUs")
    ap.add_argument("--out", type=Path, default=Path("optsched-results"),
                    help="folder for scale.md (make bench passes benchmarks/results)")
    args = ap.parse_args()
    seeds = list(range(args.seeds))
    m_rows, m_sum, floor_rows = mixed_cloud(seeds, [1.0, 10.0])
    f_rows, f_sum = fabric_clusters(seeds[:min(len(seeds), 5)], 1.0)
    out = [f"# Rounds at production scale (issue 19's targets)\n\n{dt.date.today()}, {machine()}, 2 CP-SAT workers. "
           "`solve(..., solver=\"cpsat\", time_limit=T)` timed as a whole call (compiling included); every plan "
           "checked by the validator; `mixed` queues.\n",
           "## Summary\n",
           "mixed-cloud-10k (1,000 jobs, 2x load; target at 1 s: wall <= 1.1 s, value >= Kueue run to completion "
           "with lost work <= Kueue's on 5/5 seeds, gap <= 3%; at 10 s gap <= 1%):\n",
           table(["cluster", "limit s", "objective", "rounds", ">= Kueue value", ">= Kueue with <= lost", "max gap",
                  "max wall s", "evictions, preemptor elsewhere", "status"], m_sum),
           "\n\"Preemptor elsewhere\": evictions whose named preemptor has no replica on the victim's nodes "
           "(benchmarks/common.py `preemptor_elsewhere`). Every eviction serves its preemptor (rule 10, "
           "docs/rules.md `serving`): these are the ones served by quota (putting the victim back would break a "
           "quota rule the plan keeps), not by room.\n",
           f"\nThe gap target and the lost-work target together: the least lost work of any valid plan within "
           f"{100 * GAP_TARGET:g}% of the round's optimum (`domain.model.lost_bound`: the domain model's LP, whose "
           f"points include every valid plan with its evictions and value, at (1 - {GAP_TARGET:g}) x the best "
           f"value of the seed's plans, at most {1 - GAP_TARGET:g} x the optimum) against Kueue's lost work. Where "
           "it is larger, no plan meets both (docs/formulation.md, \"What a value target costs in lost work\"):\n",
           table(["seed", "best plan value", "value floor", "least lost work at the floor", "kueue lost",
                  "both targets impossible"], floor_rows),
           "\ndgx-h100-1k and ascend-910b-4k at 1 s (target: >= best greedy on 15/15, not fallback on >= 12/15, "
           "gap <= 1.5%):\n",
           table(["cluster", "limit s", "rounds", ">= best greedy", "not fallback", "max gap", "max wall s"], f_sum),
           "\n## mixed-cloud-10k\n",
           table(["seed", "limit s", "objective", "wall s", "status", "route", "value", "kueue value", "ratio",
                  "lost work", "kueue lost", "gap", "kueue s (median)", "evictions (preemptor elsewhere)",
                  "kueue evictions (elsewhere)", "reason"], m_rows),
           "\n## dgx-h100-1k and ascend-910b-4k at 1 s\n",
           table(["cluster", "seed", "load", "wall s", "status", "route", "value", "best greedy", "ratio", "gap",
                  "reason"], f_rows)]
    kueue_s = [r[12] for r in m_rows if r[1] == 1.0 and r[2] == "default"]  # one row per seed
    per_seed = ", ".join(f"{k:.2f}" for k in kueue_s)
    speed = [["kueue, mixed-cloud-10k / 1,000 jobs", "<= 1",
              f"{min(kueue_s):.2f}-{max(kueue_s):.2f} (seeds: {per_seed})"]]
    if args.huge:
        h_rows = huge(10.0)
        from benchmarks.huge import huge_round

        big_cluster, big_queue = huge_round()
        _, best_fit_s = timed_runs(big_cluster, big_queue, lambda p: solve_greedy(p, "best-fit"))
        speed.append(["best-fit, 102,400 GPUs / 10,000 jobs", "<= 1.5", f"{best_fit_s:.2f}"])
        out += ["\n## 102,400 GPUs, 10,000 jobs\n",
                table(["solver", "wall s", "status", "value", "ratio to best", "gap"], h_rows)]
    if args.curve:
        c_rows = curve(1.0, 10.0)
        args.out.mkdir(parents=True, exist_ok=True)
        plot_curve(c_rows, args.out / "scale-curve.png")
        out += ["\n## Scaling curve (cpsat; 1 s up to 10,240 GPUs, 10 s above; seed 0, 1x load)\n",
                "![scaling curve](scale-curve.png)\n",
                table(["GPUs", "jobs", "limit s", "wall s", "status", "value", "best greedy", "best greedy s",
                       "ratio", "gap"], c_rows)]
    out[2:2] = [f"Baselines run to completion (target: item 5 of the issue; the median of {SPEED_RUNS} runs, each on a "
                "freshly compiled round):\n",
                table(["baseline", "target s", "wall s"], speed) + "\n"]
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "scale.md"
    path.write_text("\n".join(out) + "\n")
    print(path.read_text())


if __name__ == "__main__":
    main()
