"""What one case of each suite kind runs, and the report each kind writes.

- `rounds`: one scheduling round (reference cluster, generated queue); the plan is checked, and
  its admitted value is set against the round's upper bound (`optsched.bound`): the gap.
- `fgd`: one run of FGD's protocol on an openb trace (`optsched.sim.fgd`, `optsched.sim.batched`),
  reported beside the FGD authors' published results.
- `philly`: a time-based replay of Philly's job summaries through the simulator
  (`optsched.sim.engine`): queue delay and JCT percentiles per policy.

Data (traces, published results) is read from `data_dir()`: `$OPTSCHED_DATA`, else
`../shared/data` beside the project. A case whose data is absent raises `DataMissing`.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from optsched.bench.report import machine, table
from optsched.bench.suite import Case, Suite
from optsched.errors import InputError, InputIssue

Row = dict[str, Any]
FGD_PUBLISHED = {"random": "01-Random", "dot-product": "02-DotProd", "gpu-clustering": "03-GpuClustering",
                 "gpu-packing": "04-GpuPacking", "best-fit": "05-BestFit", "fgd": "06-FGD"}
BATCHED = "batched-cpsat"
LOADS = list(range(0, 131, 10))
"""Arrived load points (% of the cluster's GPUs) of the allocation curve."""


class DataMissing(FileNotFoundError):
    """A suite's data files are not on this machine (see ../shared/data/README.md)."""


def data_dir() -> Path:
    """Where traces and published results live."""
    return Path(os.environ.get("OPTSCHED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))


def _need(path: Path) -> Path:
    if not path.exists():
        raise DataMissing(f"{path} is absent (set OPTSCHED_DATA or see ../shared/data/README.md)")
    return path


def cluster_path(name: str) -> Path:
    """A reference cluster by name (optsched/data/clusters/<name>.yaml) or a path."""
    from optsched.bundled import resolve

    return resolve("cluster", name, field="clusters")


def run_case(case: Case) -> Row:
    """Run one case (its kind's function) and return its row."""
    return {"rounds": _round_case, "fgd": _fgd_case, "philly": _philly_case}[case.kind](case)


def report(suite: Suite, rows: list[Row], out: Path) -> str:
    """The suite's markdown (and plots under `out`)."""
    head = (f"# Suite `{suite.name}`\n\n{dt.date.today()}, {machine()}. {suite.description.strip()}\n\n"
            f"Regenerate: `optsched bench {suite.name}`; every row is in `{suite.name}.csv`.\n\n")
    return head + {"rounds": _round_report, "fgd": _fgd_report, "philly": _philly_report}[suite.kind](suite, rows, out)


# -- rounds ----------------------------------------------------------------------------------------
def _round_case(case: Case) -> Row:
    from optsched.bound import bound_problem
    from optsched.check import check_problem
    from optsched.generate import generate_queue
    from optsched.model.io import load_cluster
    from optsched.problem import compile_problem
    from optsched.solve import solve_problem

    w = case.workload
    cluster = load_cluster(cluster_path(case.cluster))
    queue = generate_queue(cluster, w.get("mix", "mixed"), jobs=w.get("jobs"), load=w.get("load", 2.0),
                           seed=case.seed)
    p = compile_problem(cluster, queue)
    t0 = time.perf_counter()
    plan = solve_problem(p, solver=case.solver, time_limit=case.time_limit, seed=case.seed)
    wall = time.perf_counter() - t0
    upper = bound_problem(p, time_limit=max(case.time_limit, 10.0)).value
    value = plan.objective["admitted_value"]
    return {"cluster": case.cluster, "mix": w.get("mix", "mixed"), "load": w.get("load", 2.0), "jobs": len(queue.jobs),
            "solver": case.solver, "seed": case.seed, "time_limit": case.time_limit, "wall_s": wall,
            "status": plan.solver.status, "valid": not check_problem(p, plan), "admitted_value": value,
            "bound": upper, "gap": (upper - value) / upper if upper else math.nan,
            "evictions": len(plan.evictions), "new_nodes": sum(pr.count for pr in plan.provisioning),
            "cost": plan.objective["cost"],
            "fragmentation": plan.objective["fragmentation"]}


def _groups(rows: list[Row], keys: tuple[str, ...]) -> dict[tuple[Any, ...], list[Row]]:
    out: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def _round_report(suite: Suite, rows: list[Row], out: Path) -> str:
    lines = []
    for (cluster, load, limit, solver), rs in _groups(rows, ("cluster", "load", "time_limit", "solver")).items():
        gaps = [r["gap"] for r in rs if not math.isnan(r["gap"])]
        lines.append([cluster, f"{load:g}x", f"{limit:g}", solver, len(rs), sum(r["valid"] for r in rs),
                      f"{np.mean([r['admitted_value'] for r in rs]):,.0f}", f"{np.mean([r['bound'] for r in rs]):,.0f}",
                      f"{100 * np.mean(gaps):.1f}" if gaps else "-", f"{np.mean([r['new_nodes'] for r in rs]):.1f}",
                      f"{np.mean([r['wall_s'] for r in rs]):.2f}"])
    return ("Mean over seeds; `gap` = (bound - admitted value) / bound, the bound being the round's LP/MILP "
            "upper bound on admitted value over the existing nodes (`optsched.bound`; a plan that provisions "
            "nodes, `new nodes`, could pass it); `valid` = plans the validator accepts.\n\n"
            + table(["cluster", "load", "limit s", "solver", "runs", "valid", "admitted value", "bound", "gap %",
                     "new nodes", "wall s"], lines) + "\n")


# -- fgd -------------------------------------------------------------------------------------------
LIMIT = "limit"
"""The suite's solver name for the limit (`optsched.sim.limit`): bounds, not a policy."""
PROTOCOLS = ("artifact", "optsched")
"""`artifact`: the FGD artifact's own stream, tie order and FGD rules (`optsched.sim.artifact`),
measured as the artifact measures; `optsched`: numpy's stream, ties to the first node in CSV
order, FGD with the best-fit tie-break for CPU-only tasks (the suite's rules before issue 23)."""


@functools.lru_cache(maxsize=4)
def _openb(trace: str, artifact: bool = True) -> tuple[Any, Any, Any]:
    from optsched.sim.fgd import load_nodes, load_tasks, typical_tasks

    root = data_dir() / "alibaba-gpu-v2023"
    nodes = load_nodes(_need(root / "openb_node_list_gpu_node.csv"))
    tasks = load_tasks(_need(root / f"{trace}.csv"), nodes.models)
    return nodes, tasks, typical_tasks(tasks, artifact=artifact)


def _fgd_case(case: Case) -> Row:
    from optsched.sim.artifact import artifact_protocol, in_rank_order
    from optsched.sim.batched import BatchStats, place_batched
    from optsched.sim.fgd import inflate, place

    w = case.workload
    trace = w.get("trace", "openb_pod_list_default")
    protocol = w.get("protocol", "artifact")
    if protocol not in PROTOCOLS:
        raise InputError([InputIssue("workloads.protocol", "unknown_protocol", f"{protocol!r}; one of {PROTOCOLS}")])
    artifact = protocol == "artifact"
    nodes, tasks, typical = _openb(trace, artifact)
    rng = np.random.default_rng(case.seed)
    if artifact:
        got = artifact_protocol(tasks, nodes, case.seed, w.get("ratio", 1.3))
        nodes, order = in_rank_order(nodes, got.node_rank)[0], got.order
    else:
        order = inflate(tasks, nodes.gpu_milli, w.get("ratio", 1.3), rng)
    row: Row = {"trace": trace, "protocol": protocol, "policy": case.solver, "seed": case.seed}
    t0 = time.perf_counter()
    if case.solver == LIMIT:
        return row | _limit_row(nodes, tasks, order, float(w.get("limit_s", 10.0))) | {
            "seconds": time.perf_counter() - t0}
    if case.solver == BATCHED:
        stats = BatchStats()
        run = place_batched(nodes, tasks, order, int(w.get("batch", 100)), rng, typical,
                            time_limit=float(w.get("round_limit", 2.0)), stats=stats)
        row.update(batch=int(w.get("batch", 100)), rounds=stats.rounds, modelled=stats.modelled,
                   optimal=stats.optimal, model_s=stats.model_s, gained_tasks=stats.gained_tasks,
                   gained_gpus=stats.gained_milli / 1000)
    else:
        run = place(nodes, tasks, order, case.solver, rng, typical, cpu_bestfit=not artifact)
    row["seconds"] = time.perf_counter() - t0
    row["tasks"], row["nodes"], row["gpus"] = len(order), len(nodes.cpu), nodes.gpu_milli // 1000
    for load in LOADS:
        row[f"alloc_{load}"] = run.allocation_artifact(load) if artifact else 100 * run.allocation_at(load / 100)
    ref = FGD_PUBLISHED.get(case.solver)
    seed_pub = fgd_published_seed(trace).get((ref, case.seed), {}) if ref else {}
    for load in (100, 130):
        row[f"published_{load}"] = seed_pub.get(load, math.nan)
    row["equal"] = (artifact and case.solver != "random" and bool(seed_pub)
                    and all(abs(row[f"alloc_{x}"] - seed_pub[x]) < 0.005 for x in (100, 130)))
    return row


def _limit_row(nodes: Any, tasks: Any, order: Any, time_limit: float) -> Row:
    """The limit at each load (`optsched.sim.limit.limit_curve`), in % of the cluster's GPUs:
    `alloc_<load>` the tightest bound, `lp_`/`mip_` the aggregate relaxation's, `pattern_` the
    configuration LP's and `placed_` the placement rounded from it (where computed)."""
    from optsched.sim.limit import limit_curve

    pct = 100 / nodes.gpu_milli
    row: Row = {"tasks": len(order), "nodes": len(nodes.cpu), "gpus": nodes.gpu_milli // 1000}
    for load, (agg, pattern) in limit_curve(nodes, tasks, order, LOADS, time_limit).items():
        bound = min(agg.bound_milli, pattern.bound_milli) if pattern is not None else agg.bound_milli
        row.update({f"alloc_{load}": bound * pct, f"lp_{load}": agg.lp_milli * pct, f"mip_{load}": agg.mip_milli * pct,
                    f"mip_optimal_{load}": agg.mip_optimal})
        if agg.device_milli is not None:
            row[f"device_{load}"] = agg.device_milli * pct
        if pattern is not None:
            row.update({f"pattern_{load}": pattern.bound_milli * pct, f"placed_{load}": pattern.placed_milli * pct,
                        f"pattern_s_{load}": pattern.seconds})
    return row


def fgd_published(trace: str) -> dict[tuple[str, int], tuple[float, float]]:
    """(policy, arrived %) -> (mean, std) allocation % from the FGD authors' summary."""
    out = {}
    path = _need(data_dir() / "fgd-results" / "DERIVED_summary_alloc_at_100_and_130.csv")
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            if r["workload"] == trace:
                out[(r["sc_policy"], int(r["arrived_gpu_pct"]))] = (float(r["alloc_pct_mean"]),
                                                                     float(r["alloc_pct_std"]))
    return out


@functools.lru_cache(maxsize=8)
def fgd_published_seed(trace: str) -> dict[tuple[str, int], dict[int, float]]:
    """(policy, seed) -> {100: %, 130: %}: the FGD authors' per-seed allocation
    (fgd-results/analysis_allo_discrete.csv); empty where the file is absent."""
    path = data_dir() / "fgd-results" / "analysis_allo_discrete.csv"
    out: dict[tuple[str, int], dict[int, float]] = {}
    if not path.exists():
        return out
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            if r["workload"] == trace:
                out[(r["sc_policy"], int(r["seed"]))] = {x: float(r[str(x)]) for x in (100, 130)}
    return out


def _nanmean(values: list[float]) -> float:
    """The mean of the values that are not NaN (a load a run never reached is NaN); NaN if none."""
    kept = [v for v in values if not math.isnan(v)]
    return float(np.mean(kept)) if kept else math.nan


def paired(ours: list[float], theirs: list[float]) -> tuple[float, float, float]:
    """Mean of the paired differences `ours - theirs` and its 95% t-interval (NaN with one pair)."""
    from scipy import stats

    d = np.asarray(ours) - np.asarray(theirs)
    if len(d) < 2:
        return float(d.mean()) if len(d) else math.nan, math.nan, math.nan
    if np.allclose(d, d[0]):
        return float(d[0]), float(d[0]), float(d[0])
    lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    return float(d.mean()), float(lo), float(hi)


def _fgd_report(suite: Suite, rows: list[Row], out: Path) -> str:
    text = []
    for (trace, protocol), trs in _groups(rows, ("trace", "protocol")).items():
        text.append(_fgd_trace_report(suite, trace, protocol, trs, out))
    return "\n".join(text)


def _fgd_trace_report(suite: Suite, trace: str, protocol: str, trs: list[Row], out: Path) -> str:
    paper = fgd_published(trace)
    artifact = protocol == "artifact"
    policies = {p: rs for (p,), rs in _groups(trs, ("policy",)).items() if p != LIMIT}
    limits = {r["seed"]: r for r in trs if r["policy"] == LIMIT}
    lines, curves, note = [], {}, ""
    for policy, rs in policies.items():
        a100, a130 = [r["alloc_100"] for r in rs], [r["alloc_130"] for r in rs]
        ref = FGD_PUBLISHED.get(policy, "06-FGD")
        p100 = paper.get((ref, 100), (math.nan, 0.0))
        p130 = paper.get((ref, 130), (math.nan, 0.0))
        if not artifact or policy not in FGD_PUBLISHED:
            equal = "-"
        elif policy == "random":
            equal = "not reproduced"
        else:
            equal = f"{sum(bool(r['equal']) for r in rs)} of {len(rs)}"
        lines.append([policy, f"{np.mean(a100):.2f} ± {np.std(a100):.2f}", f"{p100[0]:.2f} ± {p100[1]:.2f}",
                      f"{np.mean(a130):.2f} ± {np.std(a130):.2f}", f"{p130[0]:.2f} ± {p130[1]:.2f}",
                      f"{np.mean(a130) - p130[0]:+.2f}", equal, f"{np.mean([r['seconds'] for r in rs]):.1f}"])
        curves[policy] = [_nanmean([r[f"alloc_{x}"] for r in rs]) for x in LOADS]
        if policy == BATCHED:
            note = (f"\n\n`{BATCHED}`: rounds of {rs[0]['batch']} arrivals; CP-SAT on the rounds where the "
                    f"online hint (fgd-bestfit) leaves a task out: {np.mean([r['modelled'] for r in rs]):.0f} of "
                    f"{np.mean([r['rounds'] for r in rs]):.0f} rounds per run, "
                    f"{100 * sum(r['optimal'] for r in rs) / max(1, sum(r['modelled'] for r in rs)):.0f}% "
                    f"proven optimal, {np.mean([r['model_s'] for r in rs]):.1f} s of CP-SAT per run; over "
                    f"their hints they placed {np.mean([r['gained_tasks'] for r in rs]):.1f} more tasks and "
                    f"{np.mean([r['gained_gpus'] for r in rs]):.1f} more GPUs per run (mean over seeds). In the "
                    "curve a task counts at its arrival (its round decides it up to one batch later).")
    first = trs[0]
    seeds = sorted({r["seed"] for r in trs})
    name = trace.removeprefix("openb_pod_list_")
    picture = f"{suite.name}-{name}-allocation.png"
    diffs = _paired_to_fgd(policies)
    limit_curve = [_nanmean([r.get(f"alloc_{x}", math.nan) for r in limits.values()]) for x in LOADS]
    _fgd_plot(curves, paper, out / picture, trace, limit_curve if limits else None, diffs)
    if artifact:
        rules = ("the artifact's protocol (`optsched.sim.artifact`: its Go stream for order, inflation and the "
                 "node tie order, its FGD rules), measured as the artifact measures (`Run.allocation_artifact`)")
    else:
        rules = "optsched's protocol (numpy's stream, ties to the first node in CSV order)"
    head = (f"## `{trace}`\n\n{first['nodes']:,} GPU nodes, {first['gpus']:,} GPUs; tasks inflated to 130% of the "
            f"GPUs; {len(seeds)} seeds ({seeds[0]}..); {rules}. Allocation = allocated / cluster GPUs (%), mean ± "
            "std over seeds; `published` = the FGD authors' results (../shared/data/fgd-results/); FGD's for "
            "optsched's policies `fgd-bestfit` (online: FGD's score, best fit among equal scores; same order, no "
            "look-ahead) and `batched-cpsat` (rounds that see a batch of arrivals at once); `equal` = seeds whose "
            "allocation at 100% and 130% equals the published value of that seed to its two decimals; `s` = "
            "seconds per run of the placement loop.\n\n")
    body = table(["policy", "at 100% (ours)", "at 100% (published)", "at 130% (ours)", "at 130% (published)",
                  "diff at 130%", "equal", "s"], lines) + note
    body += "\n\n" + _paired_table(diffs, len(seeds))
    if limits:
        body += "\n\n" + _limit_table(limits, policies)
    curve_rows = [[p, *[f"{v:.1f}" for v in c]] for p, c in curves.items()]
    if limits:
        curve_rows.append([f"**{LIMIT}**", *[f"{v:.1f}" for v in limit_curve]])
    body += ("\n\n### Allocation (%) against arrived load (%), mean over seeds\n\n"
             + table(["policy", *[f"{x}%" for x in LOADS]], curve_rows)
             + f"\n\n![allocation against arrived load]({picture})\n")
    return head + body


PAIRED_LOADS = (90, 100, 110, 120, 130)
"""Loads (%) of the paired differences to FGD."""


def _paired_to_fgd(policies: dict[str, list[Row]]) -> dict[str, dict[int, tuple[float, float, float]]]:
    """Per policy other than `fgd`, per load: the paired difference to `fgd` on the same seeds
    (mean, 95% interval), in points of allocation."""
    if "fgd" not in policies:
        return {}
    base = {r["seed"]: r for r in policies["fgd"]}
    out: dict[str, dict[int, tuple[float, float, float]]] = {}
    for policy, rs in policies.items():
        both = [r for r in rs if r["seed"] in base]
        if policy == "fgd" or not both:
            continue
        out[policy] = {x: paired([r[f"alloc_{x}"] for r in both], [base[r["seed"]][f"alloc_{x}"] for r in both])
                       for x in LOADS}
    return out


def _paired_table(diffs: dict[str, dict[int, tuple[float, float, float]]], seeds: int) -> str:
    if not diffs:
        return ""
    cells = [[p, *(f"{d[x][0]:+.2f} [{d[x][1]:+.2f}, {d[x][2]:+.2f}]" for x in PAIRED_LOADS)] for p, d in diffs.items()]
    return ("### Paired with FGD: each policy minus `fgd`, same stream and seeds\n\n"
            f"Per seed the difference in allocation (points) to `fgd` on that seed, then the mean over the {seeds} "
            "seeds and its 95% t-interval (scipy.stats). An interval that holds 0 is no difference that these "
            "seeds show.\n\n" + table(["policy", *(f"{x}%" for x in PAIRED_LOADS)], cells))


def _limit_table(limits: dict[int, Row], policies: dict[str, list[Row]]) -> str:
    def mean(key: str) -> str:
        vals = [r[key] for r in limits.values() if key in r]
        return f"{np.mean(vals):.2f}" if vals else "-"

    best = {x: max((_nanmean([r[f"alloc_{x}"] for r in rs]), p) for p, rs in policies.items())
            for x in PAIRED_LOADS}
    lines = []
    for x in PAIRED_LOADS:
        if all(f"alloc_{x}" in r for r in limits.values()):
            bound = float(np.mean([r[f"alloc_{x}"] for r in limits.values()]))
            lines.append([f"{x}%", mean(f"lp_{x}"), mean(f"mip_{x}"), mean(f"device_{x}"), mean(f"pattern_{x}"),
                          f"**{bound:.2f}**", mean(f"placed_{x}"), f"{best[x][0]:.2f} ({best[x][1]})",
                          f"{bound - best[x][0]:.2f}"])
    seconds = np.mean([r["seconds"] for r in limits.values()])
    return ("### The limit: how far the policies are from any placement\n\n"
            "Upper bounds on the allocation (%) any placement of the arrived tasks could reach (offline: all known, "
            "any subset placed, same nodes and sharing rules; `optsched.sim.limit`, docs/fgd.md \"The limit\"), mean "
            "over seeds: the aggregate relaxation over task shapes x node types as an LP and as a MIP (HiGHS, its "
            "dual bound); the device-pattern LP (what each device holds exact, by column generation); the "
            "configuration LP (per-node columns by column generation, its Lagrangian bound); `limit` = the "
            "smallest, per seed. `placement` is a valid placement rounded from the configuration LP, so the "
            "optimum lies between it and the limit. `gap` = limit minus the best policy, an upper bound on what "
            f"that policy leaves. {seconds:.0f} s per seed.\n\n"
            + table(["load", "LP", "MIP", "device LP", "configuration LP", "limit", "placement", "best policy", "gap"],
                    lines))


def _fgd_plot(curves: dict[str, list[float]], paper: dict[tuple[str, int], tuple[float, float]], path: Path,
              trace: str, limit: list[float] | None = None,
              diffs: dict[str, dict[int, tuple[float, float, float]]] | None = None) -> None:
    """Left: mean allocation against arrived load per policy (the FGD paper's figure), from 70%
    load, the published means at 100% and 130% as crosses and the limit as a dashed line. Right:
    each policy's paired difference to FGD with its 95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, dx) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors: dict[str, str] = {}
    for policy, c in curves.items():
        line, = ax.plot(LOADS[7:], c[7:], marker="o", ms=3, label=policy)
        colors[policy] = line.get_color()
        for pct in (100, 130):
            got = paper.get((FGD_PUBLISHED.get(policy, ""), pct))
            if got is not None:
                ax.plot([pct], [got[0]], marker="x", color=line.get_color(), ms=8)
    if limit is not None:
        ax.plot(LOADS[7:], limit[7:], "k--", label=LIMIT)
    ax.set_xlabel("arrived GPU load (% of capacity)")
    ax.set_ylabel("GPUs allocated (%)")
    ax.set_title(f"{trace} (x: published means)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    for policy, d in (diffs or {}).items():
        xs = list(PAIRED_LOADS)
        mid = [d[x][0] for x in xs]
        dx.plot(xs, mid, marker="o", ms=3, color=colors.get(policy), label=policy)
        dx.fill_between(xs, [d[x][1] for x in xs], [d[x][2] for x in xs], color=colors.get(policy), alpha=0.15)
    dx.axhline(0, color="grey", lw=0.8)
    dx.set_xlabel("arrived GPU load (% of capacity)")
    dx.set_ylabel("minus fgd, same seed (points)")
    dx.set_title("paired difference to fgd (band: 95% interval)")
    dx.grid(alpha=0.3)
    if diffs:
        dx.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- philly ----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=2)
def _philly() -> Any:
    from optsched.sim.trace import read_philly

    return read_philly(_need(data_dir() / "pollux-osdi21" / "traces" / "philly.csv"))


def _philly_case(case: Case) -> Row:
    from optsched.model.io import load_cluster
    from optsched.sim.engine import Rounds, SimConfig, simulate

    w = case.workload
    day = 86400.0
    start = float(w.get("start_day", 0)) * day
    trace = _philly().window(start, start + float(w.get("days", 1)) * day, w.get("limit"))
    cluster = load_cluster(cluster_path(case.cluster))
    if w.get("nodes"):  # the first N nodes: a smaller cluster of the same shape
        cluster = cluster.model_copy(update={"nodes": cluster.nodes[: int(w["nodes"])]})
    config = SimConfig(policy=case.solver, rounds=Rounds("seconds", float(w.get("round_every_s", 60))),
                       time_limit=case.time_limit, seed=case.seed)
    t0 = time.perf_counter()
    res = simulate(cluster, trace.jobs, config)
    gpus = sum(n.devices.count for n in cluster.nodes if n.devices)
    row: Row = {"cluster": f"{case.cluster}[:{w['nodes']}]" if w.get("nodes") else case.cluster,
                "gpus": gpus, "policy": case.solver, "seed": case.seed, "jobs": len(trace.jobs),
                "start_day": w.get("start_day", 0), "days": w.get("days", 1),
                "gpu_hours": sum(t.gpus * t.duration_s for t in trace.jobs) / 3600, "sim_s": time.perf_counter() - t0}
    row.update(res.summary())
    return row


def _philly_report(suite: Suite, rows: list[Row], out: Path) -> str:
    lines = []
    for (cluster, policy), rs in _groups(rows, ("cluster", "policy")).items():
        r = rs[0] if len(rs) == 1 else {k: float(np.mean([x[k] for x in rs])) if isinstance(rs[0][k], float)
                                        else rs[0][k] for k in rs[0]}
        lines.append([cluster, policy, int(r["jobs"]), f"{r['jobs_finished']:.0f}", f"{r['jobs_failed']:.0f}",
                      *(f"{r[f'queue_delay_p{q}_s'] / 60:.1f}" for q in (50, 95, 99)),
                      *(f"{r[f'jct_p{q}_s'] / 3600:.2f}" for q in (50, 95, 99)),
                      f"{100 * r['utilisation_arrivals']:.1f}", f"{100 * r['utilisation']:.1f}",
                      f"{r['rounds']:.0f}", f"{r['round_wall_mean_s']:.3f}", f"{r['sim_s']:.0f}"])
    first = rows[0]
    headers = ["cluster", "policy", "jobs", "finished", "failed", "delay p50", "delay p95", "delay p99", "JCT p50",
               "JCT p95", "JCT p99", "util %", "util % all", "rounds", "round s", "sim s"]
    return (f"Jobs arriving in {first['days']} day(s) from day {first['start_day']} of the trace "
            f"({first['jobs']:,} jobs, {first['gpu_hours']:,.0f} GPU-hours); a round every 60 s; no failures or "
            "interruptions; CP-SAT and MILP are left out (about 1,700 rounds each, at up to the time limit each). "
            "Queue delay = arrival to first start (minutes), JCT = arrival to finish (hours); utilisation = allocated "
            "/ healthy GPU-time until the last arrival (`util %`) and over the whole replay (`util % all`: long jobs "
            "run on for weeks after the arrivals); `round s` = the policy's mean wall time per round; `sim s` = the "
            "whole replay.\n\n" + table(headers, lines) + "\n")
