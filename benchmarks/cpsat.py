"""CP-SAT rounds against the best greedy baseline on the reference clusters.

Run: `.venv/bin/python benchmarks/cpsat.py [--quick]`. Writes benchmarks/results/cpsat.md.
Per row: one generated queue (mix `mixed`, GPU demand = load x free GPUs), one time limit.
`best greedy` is the best of the six placement baselines, and of `kueue` on a cluster with
tenants (it evicts preemptible running jobs), on the same queue in the same run (by admitted
value); `ratio` = CP-SAT's admitted value / the best greedy's. Bound and gap are CP-SAT's, and
only when its model covers every candidate node (otherwise the restricted model's bound is shown
in brackets: it is not a bound of the round).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table, write
from optsched import load_cluster
from optsched.bundled import DATA_DIR
from optsched.check import check_problem
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.problem import compile_problem
from optsched.solvers.cpsat import solve_cpsat
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from optsched.solvers.kueue import solve_kueue

CLUSTERS = {"dgx-h100-1k": 300, "ascend-910b-4k": 500, "mixed-cloud-10k": 1000}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="seed 0, load 2, limits 0.2 and 1 s")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--tight", action="store_true",
                    help="topology-tight queues (gangs of 16-256 GPUs, required leaves) on the two fabric clusters")
    args = ap.parse_args()
    if args.tight:
        tight(args.seeds)
        return
    seeds = [0] if args.quick else list(range(args.seeds))
    loads = [2.0] if args.quick else [1.0, 2.0, 4.0]
    limits = [0.2, 1.0] if args.quick else [0.2, 1.0, 10.0]
    out = [f"# CP-SAT rounds vs the best greedy baseline\n\n{dt.date.today()}, {machine()}, 2 CP-SAT workers. "
           "Generated `mixed` queues; load = GPU demand / free GPUs. Wall time includes building the model "
           "and the greedy hint; every plan was checked by the validator.\n"]
    summary: dict[tuple[str, float], list[tuple[float, float | None, float, str]]] = {}
    for name, jobs in CLUSTERS.items():
        cluster = load_cluster(DATA_DIR / "clusters" / f"{name}.yaml")
        rows = []
        for seed in seeds:
            for load in loads:
                queue = generate_queue(cluster, "mixed", jobs=jobs, load=load, seed=seed)
                p = compile_problem(cluster, queue)
                greedy = {}
                for s in STRATEGIES:
                    plan = solve_greedy(p, s)
                    greedy[s] = (evaluate_problem(p, plan), plan)
                if cluster.tenants:  # the multi-tenant baseline evicts: it is the one to beat there
                    plan = solve_kueue(p)
                    greedy["kueue"] = (evaluate_problem(p, plan), plan)
                best_name = max(greedy, key=lambda s: greedy[s][0].admitted_value)
                best = greedy[best_name][0]
                for limit in limits:
                    start = time.perf_counter()
                    plan = solve_cpsat(p, time_limit=limit, seed=seed)
                    wall = time.perf_counter() - start
                    ok = "ok" if not check_problem(p, plan) else "INVALID"
                    m = evaluate_problem(p, plan)
                    st = plan.solver
                    if st.bound is not None:
                        bound, gap = f"{st.bound:,.1f}", f"{100 * (st.gap or 0):.2f}%"
                    else:
                        bound = gap = "-"
                    ratio = m.admitted_value / max(best.admitted_value, 1e-9)
                    summary.setdefault((name, limit), []).append((ratio, st.gap, wall, st.status))
                    note = st.reason or ""
                    if st.route is not None and st.route != "whole model":
                        note = f"{len(st.steps)} neighbourhoods, {st.improved} improved"
                    rows.append([seed, load, limit, round(wall, 3), st.status, ok, round(m.admitted_value, 1),
                                 bound, gap, f"{best_name} {best.admitted_value:,.1f}",
                                 f"{ratio:.4f}",
                                 f"{m.topology:g} / {best.topology:g}",
                                 f"{m.details['uplink_gbps']:,.0f} / {best.details['uplink_gbps']:,.0f}",
                                 f"{m.fragmentation:,.1f} / {best.fragmentation:,.1f}",
                                 note])
                    print(name, rows[-1], flush=True)
        out.append(f"\n## {name}: {jobs} queued jobs\n")
        out.append(table(["seed", "load", "limit s", "wall s", "status", "check", "value", "bound", "gap",
                          "best greedy", "ratio", "topology (cpsat / greedy)", "uplink Gbps", "fragmentation",
                          "note"], rows))
    rows = []
    for (name, limit), got in summary.items():
        gaps = [g for _, g, _, _ in got if g is not None]
        rows.append([name, limit, len(got), f"{min(r for r, _, _, _ in got):.4f}",
                     sum(1 for r, _, _, _ in got if r >= 1 - 1e-9),
                     f"{100 * max(gaps):.2f}%" if gaps else "-", f"{100 * sum(gaps) / len(gaps):.2f}%" if gaps else "-",
                     f"{max(w for _, _, w, _ in got):.3f}",
                     ", ".join(f"{k} {v}" for k, v in sorted(Counter(s for *_, s in got).items()))])
    out.insert(1, "\n## Summary\n\nratio = admitted value / best greedy baseline's in the same run; gap = (bound - "
               "value) / bound, bound = the aggregate LP bound (optsched/solvers/bound.py) or an exact model's.\n\n"
               + table(["cluster", "limit s", "rounds", "min ratio", "ratio >= 1", "max gap", "mean gap",
                        "max wall s", "status"], rows) + "\n")
    write("cpsat", "\n".join(out) + "\n")


def tight(n_seeds: int) -> None:
    """Where greedy loses on topology: gangs of 16-256 GPUs with required leaves, 10 s limit."""
    rows = []
    for name in ("dgx-h100-1k", "ascend-910b-4k"):
        cluster = load_cluster(DATA_DIR / "clusters" / f"{name}.yaml")
        for seed in range(n_seeds):
            queue = generate_queue(cluster, "topology-tight", load=1.5, seed=seed)
            p = compile_problem(cluster, queue)
            for s in STRATEGIES:
                m = evaluate_problem(p, solve_greedy(p, s))
                rows.append([name, seed, len(queue.jobs), s, "-", round(m.admitted_value, 1),
                             int(m.details["admitted_jobs"]), m.topology, round(m.details["uplink_gbps"])])
            plan = solve_cpsat(p, time_limit=10.0, seed=seed)
            assert not check_problem(p, plan)
            m = evaluate_problem(p, plan)
            rows.append([name, seed, len(queue.jobs), "cpsat", plan.solver.status, round(m.admitted_value, 1),
                         int(m.details["admitted_jobs"]), m.topology, round(m.details["uplink_gbps"])])
            print(rows[-1], flush=True)
    write("cpsat-topology", f"# Topology-tight queues\n\n{dt.date.today()}, {machine()}. Queue: the "
          "`topology-tight` mix at 1.5x the free GPUs (gangs of 16-256 GPUs, 70% with a required leaf). "
          "CP-SAT with a 10 s limit; the baselines run to completion.\n\n"
          + table(["cluster", "seed", "jobs", "solver", "status", "value", "admitted jobs", "topology",
                   "uplink Gbps"], rows) + "\n")


if __name__ == "__main__":
    main()
