"""Cost and locality on mixed-cloud-10k: $/h, spot risk and start-up time of the optimiser against
the baselines platform teams run, the cost-vs-value trade-off, and the pre-warm advisor.

Usage: python benchmarks/cost.py [--quick]

Small cloud (exact): benchmarks/pareto.py's 8-node cluster (reserved and on-demand H100, spot
A100, on-demand L40S) plus a provisionable on-demand H100 pool of 4 nodes; 'mixed' queues of 10
jobs at 1.0x, 1.5x, 2.0x; CP-SAT proves its plans there, and the exact (admitted value, $/h) front
is the trade-off curve. 10k: mixed-cloud-10k (a provisionable on-demand H100 pool of 16 nodes)
with its tenants' quotas taken away (with them, every job the baselines leave out is quota-bound
and no node can be provisioned for it: docs/baselines.md); the 'mixed' mix, 1,000 jobs, at the
same loads; then image pulls and the pre-warm advisor at 1.5x. Writes benchmarks/results/cost.md
and cost-vs-value.png.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS, machine, table, write
from optsched import load_cluster
from optsched.bundled import DATA_DIR
from optsched.check import check_problem
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.model import Cluster, Plan, Queue
from optsched.pareto import exact_front
from optsched.prewarm import GB, prewarm
from optsched.problem import compile_problem
from optsched.solve import solve_problem

COST_SOLVERS: list[tuple[str, str, Any]] = [
    ("volcano", "volcano", None),
    ("best-fit", "best-fit", None),
    ("karpenter", "karpenter", None),
    ("cpsat", "cpsat", None),
    ("cpsat: value, then cost", "cpsat", ["admitted_value", "cost"]),
    ("cpsat: value within 2%, then cost", "cpsat", {"lexicographic": ["admitted_value", "cost"], "tolerance": 0.02}),
]
FRONT_SECONDS = 300.0
"""The exact front's time limit: with the priced spot loss in `cost`, plans a few cents apart are
distinct points, and the 1.5x front has 69 of them (220 s to complete, benchmarks/results/cost.md;
a 60 s limit found 11, a profile)."""

LOCALITY_SOLVERS: list[tuple[str, str, Any]] = [
    ("best-fit", "best-fit", None),
    ("image-best-fit (kube ImageLocality)", "image-best-fit", None),
    ("cpsat", "cpsat", None),
    ("cpsat: value, then locality", "cpsat", ["admitted_value", "locality"]),
]


def no_quota_cluster() -> Cluster:
    """mixed-cloud-10k without tenants (quotas); running jobs move to the default tenant."""
    c = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    running = [r.model_copy(update={"job": r.job.model_copy(update={"tenant": "default"})}) for r in c.running]
    return c.model_copy(update={"tenants": [], "running": running})


def run(c: Cluster, q: Queue, solver: str, objective: Any, limit: float) -> tuple[Plan, dict[str, float], float]:
    p = compile_problem(c, q)
    t0 = time.perf_counter()
    plan = solve_problem(p, solver=solver, objective=objective, time_limit=limit, seed=0)
    wall = time.perf_counter() - t0
    assert not check_problem(p, plan), f"{solver}: invalid plan"
    m = evaluate_problem(p, plan)
    return plan, {**m.objective(), **m.details}, wall


def small_cluster() -> Cluster:
    """benchmarks/pareto.py's small cloud with a provisionable on-demand H100 pool (4 nodes)."""
    from benchmarks.pareto import small_cloud

    c = small_cloud()
    doc = c.model_dump()
    leaf = next(d.id for d in c.topology.domains if d.level == c.topology.levels[-1])
    template = next(n for n in doc["nodes"] if n["pool"] == "on-demand")
    doc["node_templates"] = {"h100": {k: template[k] for k in ("capacity", "devices", "interconnect")}}
    doc["pools"].append({"name": "h100-new", "pricing": "on_demand", "price_per_hour": 98.3,
                         "provisionable": {"template": "h100", "domain": leaf, "max_nodes": 4, "startup_s": 600}})
    return Cluster.model_validate(doc)


Point = tuple[float, float, int, float]
"""(admitted value, $/h, new nodes, spot loss $/h) of one plan."""


def cost_table(c: Cluster, loads: list[float], jobs: int, limit: float,
               points: dict[str, Point], by_load: dict[float, dict[str, Point]] | None = None) -> list[list[object]]:
    rows: list[list[object]] = []
    for load in loads:
        q = generate_queue(c, "mixed", jobs=jobs, load=load, seed=0)
        for label, solver, objective in COST_SOLVERS:
            plan, m, wall = run(c, q, solver, objective, limit)
            new = sum(pr.count for pr in plan.provisioning)
            rows.append([f"{load:g}x", label, plan.solver.status, f"{m['admitted_value']:,.0f}",
                         f"{m['placed_gpus']:,.0f}", f"{m['cost']:,.1f}", f"{m['spot_loss']:,.2f}",
                         f"{m['spot_risk']:.2f}", f"{m['reserved_idle_cost']:,.0f}",
                         f"{m['releasable_nodes']:,.0f} (${m['releasable_cost']:,.0f}/h)", new, f"{wall:.1f}"])
            point = (m["admitted_value"], m["cost"], new, m["spot_loss"])
            if load == 1.5:
                points[label] = point
            if by_load is not None:
                by_load.setdefault(load, {})[label] = point
            print(rows[-1], flush=True)
    return rows


def equal_value_rows(by_load: dict[float, dict[str, Point]]) -> list[list[object]]:
    """Per load and baseline: the cheapest CP-SAT plan of that load admitting at least as much."""
    rows: list[list[object]] = []
    for load, plans in by_load.items():
        ours = {k: v for k, v in plans.items() if k.startswith("cpsat")}
        for label, (value, cost, _, loss) in plans.items():
            if label.startswith("cpsat"):
                continue
            ok = [(v[1], k, v) for k, v in ours.items() if v[0] >= value - 1e-6]
            if not ok:
                rows.append([f"{load:g}x", label, f"{value:,.0f}", f"{cost:,.1f}", f"{loss:,.2f}", "-", "-", "-", "-"])
                continue
            best_cost, best_label, best = min(ok)
            rows.append([f"{load:g}x", label, f"{value:,.0f}", f"{cost:,.1f}", f"{loss:,.2f}", best_label,
                         f"{best[0]:,.0f}", f"{best_cost:,.1f}", f"{best[3]:,.2f}"])
    return rows


HEADERS = ["load", "solver", "status", "admitted value", "GPUs placed", "$/h", "spot loss $/h", "spot risk",
           "idle reserved $/h", "releasable nodes", "new nodes", "wall s"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one load, shorter limits")
    args = ap.parse_args()
    limit = 3.0 if args.quick else 10.0
    loads = [1.5] if args.quick else [1.0, 1.5, 2.0]
    small = small_cluster()
    points: dict[str, Point] = {}
    small_rows = cost_table(small, loads, 10, limit, points)
    q_small = generate_queue(small, "mixed", jobs=10, load=1.5, seed=0)
    t0 = time.perf_counter()
    front = exact_front(compile_problem(small, q_small), ["admitted_value", "cost"], time_limit=FRONT_SECONDS,
                        provision=False)
    front_s = time.perf_counter() - t0
    plot(front.points, points, RESULTS / "cost-vs-value.png")
    equal_rows = []
    for label, (value, cost, new, _) in points.items():  # the cheapest front plan admitting at least as much
        ok = front.points[front.points[:, 0] >= value - 1e-9]
        if new or not len(ok):
            equal_rows.append([label, f"{value:,.1f}", f"{cost:,.1f}", "-", "-"])
            continue
        best = float(ok[:, 1].min())
        equal_rows.append([label, f"{value:,.1f}", f"{cost:,.1f}", f"{best:,.1f}",
                           f"{100 * (cost - best) / cost:.0f}%" if cost > 0 else "-"])
    c = no_quota_cluster()
    by_load: dict[float, dict[str, Point]] = {}
    big_rows = cost_table(c, loads, 1000, limit, {}, by_load)
    q = generate_queue(c, "mixed", jobs=1000, load=1.5, seed=0)
    loc_rows: list[list[object]] = []
    last: Plan | None = None
    for label, solver, objective in LOCALITY_SOLVERS:
        plan, m, wall = run(c, q, solver, objective, limit)
        reps = max(m["placed_replicas"], 1.0)
        loc_rows.append([label, f"{m['admitted_value']:,.0f}", f"{m['placed_replicas']:,.0f}",
                         f"{m['pull_bytes'] / 1e12:.2f}", f"{m['pull_bytes'] / reps / 1e9:.2f}",
                         f"{m['locality'] / reps:.2f}", f"{wall:.1f}"])
        print(loc_rows[-1], flush=True)
        last = plan
    assert last is not None
    sim_rows, sim_jobs = simulated_rows()
    advice = prewarm(c, q, last, node_budget_bytes=20 * GB, total_budget_bytes=2000 * GB, time_limit=30.0)
    top = [[a.node, a.layer, f"{a.bytes / 1e9:.0f}", f"{a.seconds_saved:.2f}"] for a in advice.pulls[:5]]
    write("cost", f"# Cost and locality\n\n{dt.date.today()}, {machine()}. Time limit {limit:g} s per solver; "
          "every plan passed the validator. `$/h` = the plan's cost term (on-demand and spot nodes hosting "
          "work, plus provisioned nodes, plus `spot loss $/h`: the expected interruption loss of placed "
          "replicas on spot nodes at the node's $/GPU-hour; reserved nodes are paid anyway: `idle reserved "
          "$/h` is what of them stays idle); `spot risk` = expected GPU-hours lost per hour to spot "
          "interruptions (docs/metrics.md); `releasable nodes` = on-demand and spot nodes the plan leaves "
          "without work (the platform can release them: their $/h is not in `$/h`); `new nodes` = "
          "provisioned; `status` = the solver's (optimal: proved).\n\n"
          "## Small cloud (8 nodes + 4 provisionable), 10 jobs\n\n"
          "Reserved H100 ($60/h), on-demand H100 ($98.3/h), spot A100 ($14/h), on-demand L40S ($7.3/h), 2 "
          "nodes each; 4 more on-demand H100 nodes may be provisioned (by karpenter, and by CP-SAT's whole "
          "model).\n\n" + table(HEADERS, small_rows)
          + f"\n\n### Cost against admitted value (1.5x)\n\nThe exact (admitted value, $/h) front of the "
          "CP-SAT round model on the existing nodes (no provisioning, as the baselines at this load): "
          f"{len(front.plans)} plans in {front_s:.1f} s "
          f"({'complete' if front.stats.get('complete') else 'incomplete'}); the solvers above as points.\n\n"
          "![cost vs value](cost-vs-value.png)\n\nAt equal admitted value: each solver's plan against the "
          "cheapest plan of the exact front found that admits at least as much (`-`: the plan provisions, "
          "or admits more than any plan on the existing nodes).\n\n"
          + table(["solver", "admitted value", "its $/h", "front's $/h at that value", "saving"], equal_rows)
          + "\n\n"
          "## mixed-cloud-10k without quotas, 1,000 jobs\n\n16 on-demand H100 nodes ($98.32/h) may be "
          "provisioned. Where nodes may be provisioned, CP-SAT starts from the karpenter plan (a candidate "
          "hint like the greedy baselines) and improves it neighbourhood by neighbourhood.\n\n"
          + table(HEADERS, big_rows)
          + "\n\nAt equal admitted value: each baseline against the cheapest CP-SAT plan of the same load "
          "that admits at least as much (`-`: none does).\n\n"
          + table(["load", "baseline", "admitted value", "$/h", "spot loss $/h", "cheapest CP-SAT plan at that "
                   "value", "its admitted value", "its $/h", "its spot loss $/h"], equal_value_rows(by_load))
          + "\n\n## Start-up: image pulls (mixed-cloud-10k, 1.5x)\n\nBytes every placed replica must pull "
          "(registry or a peer of its leaf) before it starts, and the seconds that takes at the cluster's "
          "rates (10 Gbps registry, 100 Gbps P2P).\n\n"
          + table(["solver", "admitted value", "replicas", "pulled TB", "GB per replica", "s per replica",
                   "wall s"], loc_rows)
          + "\n\n## A simulated day with burst nodes\n\n"
          f"Philly's day 50 ({sim_jobs:,} jobs, `optsched.sim`) on the first 24 nodes of dgx-h100-1k (192 "
          "reserved H100 GPUs, $60/h per node), rounds every 300 s; an on-demand pool of up to 8 more nodes "
          "($98.32/h each, up 300 s after the plan that creates them, released after 600 s without work). "
          "Run times come from the trace (docs/simulator.md). Delays and JCT in hours; `$` and `utilisation` "
          "until the last arrival (the trace's long jobs run on for days after it); `new node-h` = "
          "provisioned node-hours until the last arrival, and over the whole run.\n\n"
          + table(["policy", "finished", "delay p50 h", "delay p95 h", "JCT p50 h", "utilisation %", "$",
                   "new node-h (day)", "new node-h (run)", "ms per round", "wall s"], sim_rows)
          + "\n\n## Pre-warm advice after the last plan\n\n"
          f"For its {len(advice.upcoming_jobs)} deferred jobs, 20 GB per node and 2 TB in all: {len(advice.pulls)} "
          f"pulls, {advice.bytes / 1e12:.2f} TB; expected start-up seconds of their replicas "
          f"{advice.seconds_before:,.0f} -> {advice.seconds_after:,.0f} ({advice.status}, {advice.wall_s:.1f} s). "
          "First five:\n\n" + table(["node", "layer", "GB", "expected s saved"], top) + "\n")


SIM_POLICIES: list[tuple[str, str, Any, float]] = [
    ("best-fit (no new nodes)", "best-fit", None, 1.0),
    ("karpenter", "karpenter", None, 1.0),
    ("cpsat: value, then cost", "cpsat", ["admitted_value", "cost"], 0.5),
]


def burst_cluster(nodes: int = 24, burst: int = 8) -> Cluster:
    """The first `nodes` DGX nodes of dgx-h100-1k (reserved, $60/h) and an on-demand pool of up
    to `burst` more ($98.32/h, up 300 s after the plan that creates them)."""
    c = load_cluster(DATA_DIR / "clusters" / "dgx-h100-1k.yaml")
    doc = c.model_copy(update={"nodes": c.nodes[:nodes]}).model_dump()
    first = doc["nodes"][0]
    doc["node_templates"] = {"dgx": {k: first[k] for k in ("capacity", "devices", "interconnect")}}
    doc["pools"].append({"name": "h100-burst", "pricing": "on_demand", "price_per_hour": 98.32,
                         "provisionable": {"template": "dgx", "domain": first["domain"], "max_nodes": burst,
                                           "startup_s": 300}})
    return Cluster.model_validate(doc)


def simulated_rows() -> tuple[list[list[object]], int]:
    """One day of Philly arrivals (day 50) through rounds every 300 s on `burst_cluster()`."""
    from optsched.bench.kinds import data_dir
    from optsched.sim import Rounds, SimConfig, read_philly, simulate

    cluster = burst_cluster()
    day = 86400.0
    trace = read_philly(data_dir() / "pollux-osdi21" / "traces" / "philly.csv").window(50 * day, 51 * day)
    last = max(t.arrival_s for t in trace.jobs)
    rows: list[list[object]] = []
    for label, policy, objective, limit in SIM_POLICIES:
        t0 = time.perf_counter()
        res = simulate(cluster, trace.jobs, SimConfig(policy=policy, objective=objective, time_limit=limit,
                                                      rounds=Rounds("seconds", 300), release_empty_s=600))
        s = res.summary()
        rows.append([label, f"{s['jobs_finished']:,.0f}", f"{s['queue_delay_p50_s'] / 3600:.2f}",
                     f"{s['queue_delay_p95_s'] / 3600:.2f}", f"{s['jct_p50_s'] / 3600:.2f}",
                     f"{100 * res.utilisation(0.0, last):.1f}", f"{res.cost(0.0, last):,.0f}",
                     f"{res.provisioned_node_hours(0.0, last):,.1f}", f"{res.provisioned_node_hours():,.1f}",
                     f"{1000 * s['round_wall_mean_s']:.0f}", f"{time.perf_counter() - t0:.0f}"])
        print(rows[-1], flush=True)
    return rows, len(trace.jobs)


def plot(front: np.ndarray, points: dict[str, Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    order = np.argsort(front[:, 0])
    ax.step(front[order, 0], front[order, 1], "o-", where="post", ms=4, label="exact front, existing nodes")
    for label, (value, cost, new, _) in points.items():
        ax.plot([value], [cost], "x", ms=9, label=label + (f" (+{new} nodes)" if new else ""))
    ax.set_xlabel("admitted value (priority-weighted GPU-equivalents)")
    ax.set_ylabel("$/h (non-reserved nodes hosting work + provisioned + spot loss)")
    ax.set_title("small cloud, 10 jobs at 1.5x")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
