"""Tenancy on a contended round: admitted value, work lost to evictions, fairness.

Run: `.venv/bin/python benchmarks/tenancy.py`. Writes tenancy.md into $OPTSCHED_RESULTS (`make bench`:
benchmarks/results), else ./optsched-results/; the kueue rows of the report it replaces are kept in
a before / after table. The
mixed-cloud-10k reference cluster has three tenants in one cohort (research, product, platform,
with Kueue preemption policies) and 473 running jobs, 294 of them preemptible; each row is a
generated `mixed` queue at 2x the free GPUs (seeds 0-2), solved by `kueue` (Kueue admission,
borrowing and classic preemption), `volcano` (priority + DRF order, no preemption), `best-fit`
and `cpsat` (1 s and 10 s with the default objective: admitted value, then lost work; and 10 s
and 30 s with `LEAST_LOST`; 30 s with `FAIREST`). "x kueue" columns: the ratio to the Kueue plan of the same seed.
Every plan is checked. Lost GPU-hours = the `disruption` term: (checkpoint age + restart) x GPUs
of every evicted job; fairness = sum over tenants of |dominant share - weighted fair share| after
the plan (0 = split by weight). A second table runs kueue and cpsat 1 s / 10 s on the same rounds
with Kueue's fair sharing on.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS, machine, table, write
from optsched import load_cluster
from optsched.bundled import DATA_DIR
from optsched.check import check_problem
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.model import FairSharing
from optsched.model.plan import Plan
from optsched.problem import Problem, compile_problem
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.greedy import solve_greedy
from optsched.solvers.kueue import solve_kueue

LEAST_LOST = {"lexicographic": ["admitted_value", "disruption", "topology"], "tolerance": 0.02}
"""Admitted value within 2% of the best found (and never below the hint's), then the least lost work."""

FAIREST = {"lexicographic": ["admitted_value", "fairness", "disruption"], "tolerance": 0.02}
"""Admitted value within 2% of the best found (never below the hint's), then the fairest split."""

SOLVERS = {
    "kueue": lambda p, seed: solve_kueue(p, seed=seed),
    "volcano": lambda p, seed: solve_greedy(p, "volcano", seed=seed),
    "best-fit": lambda p, seed: solve_greedy(p, "best-fit", seed=seed),
    "cpsat 1 s": lambda p, seed: solve_cpsat(p, time_limit=1.0, seed=seed),
    "cpsat 10 s": lambda p, seed: solve_cpsat(p, time_limit=10.0, seed=seed),
    "cpsat 10 s, least lost": lambda p, seed: solve_cpsat(p, time_limit=10.0, seed=seed, objective=LEAST_LOST),
    "cpsat 30 s, least lost": lambda p, seed: solve_cpsat(p, time_limit=30.0, seed=seed, objective=LEAST_LOST),
    "cpsat 30 s, fairest": lambda p, seed: solve_cpsat(p, time_limit=30.0, seed=seed, objective=FAIREST),
}


FAIR_SOLVERS = ("kueue", "cpsat 1 s", "cpsat 10 s")
"""The solvers run again with Kueue's fair sharing on (`Cluster.fair_sharing`, default strategies)."""


def row(p: Problem, name: str, plan: Plan, wall: float, seed: int, kueue: tuple[float, float] | None) -> list[object]:
    """One table row; `kueue` = (admitted value, lost work) of the Kueue plan, for the ratios."""
    if check_problem(p, plan):
        raise SystemExit(f"{name} produced an invalid plan (seed {seed})")
    m = evaluate_problem(p, plan)
    reasons = {r: sum(1 for e in plan.evictions if e.reason == r) for r in ("preempted", "reclaimed")}
    deferred = {r: sum(1 for d in plan.deferred if d.reason == r) for r in ("quota", "priority", "capacity")}
    value_ratio = "" if kueue is None else f"{m.admitted_value / kueue[0]:.4f}"
    lost_ratio = "" if kueue is None or not kueue[1] else f"{m.disruption / kueue[1]:.3f}"
    gpu_hours = sum(e.lost_gpu_hours for e in plan.evictions)
    return [seed, name, f"{wall:.2f}", f"{m.admitted_value:,.1f}", value_ratio, int(m.details["admitted_jobs"]),
            f"{reasons['preempted']} / {reasons['reclaimed']}", f"{gpu_hours:,.1f}", f"{m.disruption:,.1f}",
            lost_ratio, f"{m.fairness:.3f}", f"{deferred['quota']} / {deferred['priority']} / {deferred['capacity']}"]


def previous_kueue(path: Path) -> tuple[str, dict[int, tuple[str, str, str]]]:
    """The kueue rows (seed -> admitted value, evictions, lost GPU-h) and the date of the report
    this run replaces, so that a change of the baseline shows as before / after in one file."""
    if not path.is_file():
        return "", {}
    lines = path.read_text().splitlines()
    date = next((ln.split(",")[0] for ln in lines if ln[:4].isdigit()), "")
    out = {}
    for ln in lines:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if len(cells) >= 11 and cells[1] == "kueue" and cells[0].isdigit():
            out[int(cells[0])] = (cells[3], cells[6], cells[7])
    return date, out


def main() -> None:
    cluster = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    before_date, before = previous_kueue(RESULTS / "tenancy.md")
    rows = []
    for seed in range(3):
        p = compile_problem(cluster, generate_queue(cluster, "mixed", jobs=1000, load=2.0, seed=seed))
        kueue: tuple[float, float] | None = None
        for name, solve in SOLVERS.items():
            start = time.perf_counter()
            plan = solve(p, seed)
            rows.append(row(p, name, plan, time.perf_counter() - start, seed, kueue))
            if name == "kueue":
                m = evaluate_problem(p, plan)
                kueue = (m.admitted_value, m.disruption)
            print(rows[-1], flush=True)
    fair_cluster = cluster.model_copy(update={"fair_sharing": FairSharing()})
    fair_rows = []
    for seed in range(3):
        p = compile_problem(fair_cluster, generate_queue(fair_cluster, "mixed", jobs=1000, load=2.0, seed=seed))
        kueue = None
        for name in FAIR_SOLVERS:
            start = time.perf_counter()
            plan = SOLVERS[name](p, seed)
            fair_rows.append(row(p, name, plan, time.perf_counter() - start, seed, kueue))
            if name == "kueue":
                m = evaluate_problem(p, plan)
                kueue = (m.admitted_value, m.disruption)
            print("fair sharing", fair_rows[-1], flush=True)
    fair = ("\n## With Kueue's fair sharing\n\nThe same rounds with `fair_sharing` on (Kueue's default strategies, "
            "S2-a then S2-b; tenant weights research 2, product 2, platform 1): a tenant above nominal reclaims "
            "by comparing dominant resource shares instead of by `borrow_within_cohort` (docs/rules.md); cpsat's "
            "model states the strategies in a sound restriction (P2f, docs/formulation.md).\n\n"
            + table(["seed", "solver", "wall s", "admitted value", "x kueue", "jobs", "evictions", "lost GPU-h",
                     "lost work", "x kueue", "fairness", "deferred"], fair_rows) + "\n")
    changed = [[seed, *before[seed], *next(r[3:4] + r[6:8] for r in rows if r[0] == seed and r[1] == "kueue")]
               for seed in sorted(before)]
    previous = ("" if not changed else
                f"\n## The kueue baseline against the previous report ({before_date})\n\nThe same rounds: what a "
                "change of the baseline moved.\n\n"
                + table(["seed", "admitted value before", "evictions before", "lost GPU-h before", "admitted value now",
                         "evictions now", "lost GPU-h now"], changed) + "\n")
    running = len(cluster.running)
    preemptible = sum(r.job.preemptible for r in cluster.running)
    write("tenancy", f"# Tenancy on a contended round\n\n{dt.date.today()}, {machine()}. mixed-cloud-10k: tenants "
          f"{', '.join(t.name for t in cluster.tenants)} in one cohort; {running} running jobs ({preemptible} "
          "preemptible); 1,000 queued `mixed` jobs at 2x the free GPUs. Evictions = preempted / reclaimed; lost "
          "GPU-h = the evictions' `lost_gpu_hours`; lost work = the `disruption` term (GPU-equivalent hours: every "
          "resource priced by its dominant share, docs/metrics.md; before 2026-12-03 it was the GPU-hours); "
          "fairness = sum |dominant share - weighted fair share| (0 is best); "
          "deferred = for quota / for priority (equal or higher-priority work its policies protect) / "
          "for capacity. Every plan passed the validator.\n\n"
          + table(["seed", "solver", "wall s", "admitted value", "x kueue", "jobs", "evictions", "lost GPU-h",
                   "lost work", "x kueue", "fairness", "deferred"], rows) + "\n" + fair + previous)


if __name__ == "__main__":
    main()
