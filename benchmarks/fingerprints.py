"""Fingerprints of every baseline's plan on 14 reference rounds: the check that a speed change to
the greedy engine or the `kueue` / `karpenter` baselines keeps the same plans.

Run: `.venv/bin/python benchmarks/fingerprints.py --compare benchmarks/results/baseline-fingerprints.json`
(exit 1 when a plan differs); `--out DIR` writes DIR/baseline-fingerprints.json. A fingerprint is
the first 12 hex digits of the SHA-1 of the plan document without its solver statistics.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optsched import load_cluster
from optsched.bundled import DATA_DIR
from optsched.generate import generate_queue
from optsched.model import Cluster, Plan, Queue
from optsched.problem import compile_problem
from optsched.solvers.greedy import NAMED_STRATEGIES, solve_greedy
from optsched.solvers.karpenter import solve_karpenter
from optsched.solvers.kueue import solve_kueue


def fingerprint(plan: Plan) -> str:
    """The plan document without its solver statistics, hashed."""
    doc = plan.model_dump(mode="json")
    doc["solver"] = None
    return hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]


def reference_rounds() -> list[tuple[str, Cluster, Queue]]:
    """dgx-h100-1k (300 jobs) and ascend-910b-4k (500 jobs), seeds 0-1, mixes mixed / topology-tight
    / inference at 2x load; mixed-cloud-10k (tenants, preemptible running jobs), 400 jobs, seeds 0-1."""
    rounds = []
    for name, jobs in [("dgx-h100-1k", 300), ("ascend-910b-4k", 500)]:
        cluster = load_cluster(DATA_DIR / "clusters" / f"{name}.yaml")
        for seed in (0, 1):
            for mix in ("mixed", "topology-tight", "inference"):
                rounds.append((f"{name}/{mix}/{seed}", cluster,
                               generate_queue(cluster, mix, jobs=jobs, load=2.0, seed=seed)))
    cluster = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    for seed in (0, 1):
        rounds.append((f"mixed-cloud-10k/{seed}", cluster, generate_queue(cluster, "mixed", jobs=400, load=2.0,
                                                                          seed=seed)))
    return rounds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compare", type=Path, help="a saved fingerprint file: report every plan that differs")
    ap.add_argument("--out", type=Path, help="folder to write baseline-fingerprints.json into")
    args = ap.parse_args()
    got: dict[str, str] = {}
    start = time.perf_counter()
    for key, cluster, queue in reference_rounds():
        p = compile_problem(cluster, queue)
        for name in NAMED_STRATEGIES:
            got[f"{key}/{name}"] = fingerprint(solve_greedy(p, name))
        got[f"{key}/kueue"] = fingerprint(solve_kueue(p))
        got[f"{key}/karpenter"] = fingerprint(solve_karpenter(p))
        print(f"{key}: {time.perf_counter() - start:.1f} s", flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "baseline-fingerprints.json").write_text(json.dumps(got, indent=0, sort_keys=True) + "\n")
    if args.compare is not None:
        saved = json.loads(args.compare.read_text())
        differ = sorted(k for k in saved.keys() | got.keys() if saved.get(k) != got.get(k))
        print(f"{len(got)} plans, {len(differ)} differ from {args.compare}: {differ}")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
