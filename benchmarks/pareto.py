"""NSGA-II Pareto sets against exact CP-SAT fronts (small rounds) and the greedy baselines (10k GPUs).

Usage: python benchmarks/pareto.py [--quick]

Small rounds: an 8-node fat tree with reserved H100, on-demand H100, spot A100 and on-demand L40S
nodes (2 each) and a generated 8-job "mixed" queue at 1.3x its GPUs. The exact front of the CP-SAT
model (no evictions) is enumerated by epsilon-constraint; NSGA-II gets 5 s per seed. Hypervolume
(pymoo) uses one reference per round: each objective scaled to the union's range, reference 10%
beyond the union's worst values. Large round: mixed-cloud-10k with 1,000 generated jobs, 30 s;
for each greedy baseline, whether a plan of the set dominates or equals its point. Writes
benchmarks/results/pareto.md and the two figures beside it.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS, machine, table, write
from optsched import load_cluster
from optsched.bundled import DATA_DIR
from optsched.generate import NodeGroup, fat_tree_cluster, generate_queue
from optsched.model import Cluster
from optsched.pareto import ParetoSet, exact_front, hypervolume, pareto_problem
from optsched.pareto.front import minimised
from optsched.pareto.plot import plot_front
from optsched.problem import compile_problem

EIGHT = [list(range(8))]
BIG: dict[str, float] = {"cpu": 192000, "memory": 2097152, "rdma_nics": 8}


def small_cloud(per_pool: int = 2) -> Cluster:
    """Reserved H100 ($60/h, sunk), on-demand H100 ($98.3/h), spot A100 ($14/h), on-demand L40S ($7.3/h)."""
    groups = [NodeGroup(per_pool, "H100-SXM", 8, EIGHT, BIG, "reserved"),
              NodeGroup(per_pool, "H100-SXM", 8, EIGHT, BIG, "on-demand"),
              NodeGroup(per_pool, "A100-SXM", 8, EIGHT, BIG, "spot"),
              NodeGroup(per_pool, "L40S", 4, [[0, 1], [2, 3]], {"cpu": 64000.0, "memory": 524288.0}, "l40s")]
    pools = [{"name": "reserved", "pricing": "reserved", "price_per_hour": 60.0},
             {"name": "on-demand", "pricing": "on_demand", "price_per_hour": 98.3},
             {"name": "spot", "pricing": "spot", "price_per_hour": 14.0, "interruption_rate_per_hour": 0.05},
             {"name": "l40s", "pricing": "on_demand", "price_per_hour": 7.3}]
    return fat_tree_cluster(groups, nodes_per_leaf=4, leaves_per_spine=2, pools=pools)


def _frame(*sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ideal, reference) over the union of point sets (minimisation form)."""
    allf = np.vstack([s for s in sets if len(s)])
    ideal, nadir = allf.min(axis=0), allf.max(axis=0)
    return ideal, nadir + 0.1 * np.where(nadir > ideal, nadir - ideal, 1.0)


def small_rounds(instances: list[int], seeds: list[int], objectives: tuple[str, ...], exact_s: float,
                 nsga_s: float) -> tuple[list[list[object]], tuple[ParetoSet, ParetoSet] | None, list[float]]:
    rows: list[list[object]] = []
    every: list[float] = []
    shown = None
    cluster = small_cloud()
    for inst in instances:
        queue = generate_queue(cluster, "mixed", jobs=8, load=1.3, seed=inst)
        p = compile_problem(cluster, queue)
        t0 = time.perf_counter()
        ex = exact_front(p, objectives, time_limit=exact_s, seed=0)
        ex_s = time.perf_counter() - t0
        runs = [pareto_problem(p, objectives, time_limit=nsga_s, seed=s) for s in seeds]
        ideal, ref = _frame(ex.minimised, *(r.minimised for r in runs))
        hv_ex = hypervolume(ex.minimised, ref, ideal)
        ratios = [hypervolume(r.minimised, ref, ideal) / hv_ex for r in runs]
        every += ratios
        base = np.array([minimised(b, objectives) for b in runs[0].baselines.values()])
        hv_base = hypervolume(base, ref, ideal) / hv_ex
        exact_pts = {tuple(np.round(x, 6)) for x in ex.minimised}
        hit = [sum(tuple(np.round(x, 6)) in exact_pts for x in r.minimised) for r in runs]
        rows.append([inst, "complete" if ex.stats["complete"] else "partial", len(ex), round(ex_s, 1),
                     round(float(np.mean([len(r) for r in runs])), 1),
                     round(float(np.mean([r.stats["evaluations_per_s"] for r in runs])), 1),
                     round(float(np.mean([r.stats["seconds"] for r in runs])), 2),
                     f"{np.mean(ratios):.1%}", f"{min(ratios):.1%}", f"{hv_base:.1%}", f"{np.mean(hit):.1f}"])
        print(rows[-1], flush=True)
        if shown is None:
            shown = (runs[0], ex)
    return rows, shown, every


def large_round(seconds: float) -> tuple[list[list[object]], ParetoSet, ParetoSet]:
    cluster = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    queue = generate_queue(cluster, "mixed", jobs=1000, seed=0)
    p = compile_problem(cluster, queue)
    names = ("admitted_value", "cost", "fragmentation")
    single = pareto_problem(p, names, time_limit=seconds, seed=0, workers=1)
    front = pareto_problem(p, names, time_limit=seconds, seed=0)
    f = front.minimised
    rows: list[list[object]] = []
    for name, terms in sorted(front.baselines.items()):
        b = minimised(terms, names)
        dominating = int(sum(bool(np.all(x <= b) and np.any(x < b)) for x in f))
        equal = int(sum(bool(np.array_equal(x, b)) for x in f))
        rows.append([name, round(terms["admitted_value"], 1), round(terms["cost"], 1),
                     round(terms["fragmentation"], 1), dominating, equal,
                     "yes" if dominating or equal else "NO"])
    return rows, front, single


def main(quick: bool = False) -> None:
    instances, seeds = ([0], [0]) if quick else ([0, 1, 2, 3], [0, 1, 2])
    two = ("admitted_value", "cost")
    out = [f"# Pareto sets: NSGA-II against exact fronts and the greedy baselines\n\n{dt.date.today()}, "
           f"{machine()}. `python benchmarks/pareto.py`{' --quick' if quick else ''}. Method: docs/pareto.md.\n"]
    rows, shown, every = small_rounds(instances, seeds, two, exact_s=300.0, nsga_s=5.0)
    out.append("## Small rounds: 8 nodes, 8 jobs, admitted value vs cost\n\nAn 8-node fat tree (2 reserved "
               "H100, 2 on-demand H100 at $98.3/h, 2 spot A100 at $14/h, 2 on-demand L40S at $7.3/h) and a "
               "generated 8-job mixed queue at 1.3x its GPUs (seed = round). Exact: the CP-SAT model's front "
               "by epsilon-constraint (no evictions), up to 300 s. NSGA-II: `pareto(..., time_limit=5)`, "
               f"seeds {seeds}. HV: hypervolume relative to the exact front's (same reference); baselines HV: "
               "the six greedy baselines' points as a set; on exact: NSGA-II points that are exact points.\n")
    out.append(table(["round", "exact front", "exact points", "exact s", "NSGA-II plans", "evals/s", "NSGA-II s",
                      "HV mean", "HV min", "baselines HV", "on exact"], rows))
    out.append(f"\nOver all {len(every)} runs: HV {np.mean(every):.1%} of the exact front's on average, "
               f"{sum(r >= 0.95 for r in every)} of {len(every)} runs at 95% or more, worst {min(every):.1%}.\n")
    if shown is not None:
        path = plot_front(shown[0], RESULTS / "pareto-small.png", title="8 nodes, 8 jobs: NSGA-II (5 s) vs exact",
                          reference=shown[1])
        out.append(f"\nFigure: `{path.name}` (round {instances[0]}, seed {seeds[0]}).\n")
    large_rows, front, single = large_round(30.0)
    st, one = front.stats, single.stats
    out.append(f"\n## mixed-cloud-10k, 1,000 jobs: admitted value, cost, fragmentation in 30 s\n\n"
               f"{len(front)} plans in {st['seconds']} s; {st['evaluations']} evaluations "
               f"({st['evaluations_per_s']}/s with {st['workers']} worker processes; in the same run with one: "
               f"{one['evaluations_per_s']}/s, {one['evaluations']} evaluations, {len(single)} plans), "
               f"{st['generations']} generations of {st['population']}; "
               f"CP-SAT seeds: {', '.join(str(r.get('status', r.get('skipped'))) for r in st.get('cpsat_seeds', []))}. "
               "Per greedy baseline: plans of the set that dominate its point, that equal it, and whether "
               "one does either.\n")
    out.append(table(["baseline", "admitted value", "cost $/h", "fragmentation", "dominated by", "equal to",
                      "covered"], large_rows))
    by_source: dict[str, int] = {}
    for pl in front.plans:
        by_source[pl.solver.name] = by_source.get(pl.solver.name, 0) + 1
    out.append(f"\nPlans of the set by origin: {dict(sorted(by_source.items()))}. Not from NSGA-II: " + "; ".join(
        f"{pl.solver.name} ({pl.solver.status}): admitted value {pl.objective['admitted_value']:,.1f}, "
        f"{len(pl.evictions)} evictions" for pl in front.plans if pl.solver.name != "nsga2") + ".\n")
    path = plot_front(front, RESULTS / "pareto-10k.png", title="mixed-cloud-10k, 1,000 jobs, 30 s")
    out.append(f"Figure: `{path.name}`.\n")
    write("pareto", "\n".join(out))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
