"""A Slurm cluster's round through the Slurm adapter: read, solve, write back, against Slurm's own
placement strategy (`topo-best-fit`: topology/tree + cons_tres best fit, the lowest switch that
holds the job).

The cluster is built from Slurm-web's recorded slurmrestd 25.11 records (tests/slurm_records.py:
every field Slurm prints, a few replaced): N nodes of 8 H100 (`gpu:h100:8`, 96 CPUs, 1 TiB) under
leaf switches of 32 nodes and spines of 8 leaves (topology.conf), QOS `normal`, `scavenger`
(REQUEUE) and `high` (preempts scavenger). 60% of the nodes run 2- and 4-node 8-GPU jobs, a third
of them scavenger; the queue asks 1.2x the free GPUs: 1-, 2-, 4- and 8-node 8-GPU jobs (a sixth
with `--switches=1`, a tenth in QOS high) and 1-GPU jobs.

Per size and seed: `snapshot` (read), `optsched.solve(solver="auto", time_limit=1)` (its wall time,
whole call), `actions` (write back), each plan checked by the validator; and `topo-best-fit`,
`kueue` and `best-fit` run to completion on the same round. Value is admitted value (GPU-weighted,
docs/metrics.md).

Run: `.venv/bin/python benchmarks/slurm.py [--seeds 3] [--out DIR]`. Writes slurm.md into DIR
(default ./optsched-results/; `make bench` passes benchmarks/results).
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS, machine, preemptor_elsewhere, table
from optsched import check, solve
from optsched.adapters.slurm import actions, snapshot
from optsched.metrics import evaluate
from tests.slurm_records import NOW, node_record, pending, qos_record, running

LEAF, SPINE = 32, 8


def slurm_round(n_nodes: int, seed: int, preemption: bool = True) -> dict[str, Any]:
    """Slurm's JSON for one round (module docstring)."""
    rng = random.Random(seed)
    names = [f"gpu{i:05d}" for i in range(n_nodes)]
    nodes = [node_record(n) for n in names]
    leaves = (n_nodes + LEAF - 1) // LEAF
    tree = "".join(f"SwitchName=leaf{s} Nodes=gpu[{LEAF * s:05d}-{min(LEAF * s + LEAF, n_nodes) - 1:05d}]\n"
                   for s in range(leaves))
    tree += "".join(f"SwitchName=spine{s} Switches=leaf[{SPINE * s}-{min(SPINE * s + SPINE, leaves) - 1}]\n"
                    for s in range((leaves + SPINE - 1) // SPINE))
    qos = [qos_record("normal"), qos_record("scavenger", mode="REQUEUE"),
           qos_record("high", preempts=["scavenger"] if preemption else [])]
    jobs: list[dict[str, Any]] = []
    free = list(names)
    rng.shuffle(free)
    busy_target, job_id = int(0.6 * n_nodes), 1000
    busy = 0
    while busy < busy_target:
        width = rng.choice([2, 4])
        leaf = rng.randrange(leaves)  # a running job sits in one leaf, as Slurm's tree placed it
        members = [n for n in free if int(n[3:]) // LEAF == leaf][:width]
        if len(members) < width:
            continue
        for n in members:
            free.remove(n)
        jobs.append(running(job_id, members, 8, "scavenger" if rng.random() < 1 / 3 else "normal",
                            NOW - rng.uniform(600, 36_000), cpus=32))
        job_id += 1
        busy += width
    want, asked = 1.2 * 8 * len(free), 0.0
    while asked < want:
        if rng.random() < 0.2:
            jobs.append(pending(job_id, nodes=1, gpus_per_node=1, cpus=8, qos="normal"))
            asked += 1
        else:
            width = rng.choice([1, 2, 4, 8])
            jobs.append(pending(job_id, nodes=width, gpus_per_node=8, cpus=32 * width,
                                qos="high" if rng.random() < 0.1 else "normal",
                                required_switches=1 if rng.random() < 1 / 6 else 0))
            asked += 8 * width
        job_id += 1
    return {"nodes": nodes, "jobs": jobs, "qos": qos, "topology": tree}


def measure(n_nodes: int, seed: int, preemption: bool) -> list[Any]:
    doc = slurm_round(n_nodes, seed, preemption)
    t = time.perf_counter()
    snap = snapshot(doc["nodes"], doc["jobs"], qos=doc["qos"], topology=doc["topology"], now=NOW)
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    plan = solve(snap.cluster, snap.queue, solver="auto", time_limit=1.0, seed=seed)
    solve_s = time.perf_counter() - t
    t = time.perf_counter()
    todo = actions(plan, snap)
    write_s = time.perf_counter() - t
    assert check(snap.cluster, snap.queue, plan) == [], "an invalid plan"
    value = evaluate(snap.cluster, snap.queue, plan).admitted_value
    base, unused = {}, {"auto": preemptor_elsewhere(snap.cluster, plan)}
    for name in ("topo-best-fit", "kueue", "best-fit"):
        other = solve(snap.cluster, snap.queue, solver=name, time_limit=60.0, seed=seed)
        assert check(snap.cluster, snap.queue, other) == [], f"an invalid {name} plan"
        base[name] = evaluate(snap.cluster, snap.queue, other).admitted_value
        unused[name] = preemptor_elsewhere(snap.cluster, other)
        if name == "kueue":
            kueue_requeues = len(other.evictions)
    return [n_nodes, seed, "yes" if preemption else "no", len(snap.cluster.running), len(snap.queue.jobs),
            round(read_s, 2), round(solve_s, 2), plan.solver.status, round(write_s, 3), len(todo.starts),
            f"{len(todo.evictions)} ({unused['auto']})", f"{kueue_requeues} ({unused['kueue']})", round(value, 1),
            round(base["topo-best-fit"], 1), f"{value / max(base['topo-best-fit'], 1e-9):.3f}",
            f"{value / max(base['kueue'], 1e-9):.3f}", f"{value / max(base['best-fit'], 1e-9):.3f}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sizes", default="256,1280")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    rows = []
    for preemption in (False, True):
        for size in [int(s) for s in args.sizes.split(",")]:
            for seed in range(args.seeds):
                rows.append(measure(size, seed, preemption))
                print(rows[-1], flush=True)
    text = "\n".join([
        "# A Slurm round through the adapter (benchmarks/slurm.py)", "",
        f"{dt.date.today()}, {machine()}. One run each; `auto` at a 1 s limit (whole call), the baselines to "
        "completion. Read: `snapshot` of Slurm's JSON and topology.conf; write: `actions` (the scontrol commands). "
        "Value ratios are admitted value over each baseline's on the same round. Preemption: QOS high preempts "
        "scavenger (else no QOS preempts). Requeues: the plan's evictions, in brackets those whose preemptor has no "
        "replica on the victim's nodes: with one tenant and no quotas only node room serves a preemptor, and rule "
        "10 (docs/rules.md `serving`) refuses an eviction that serves none, so the bracket must read 0.", "",
        table(["nodes", "seed", "preemption", "running", "pending", "read s", "solve s", "status", "write s",
               "starts", "requeues (unused)", "kueue requeues (unused)", "value", "topo-best-fit value",
               "/ topo-best-fit", "/ kueue", "/ best-fit"], rows), ""])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "slurm.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
