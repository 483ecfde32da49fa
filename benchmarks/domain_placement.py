"""How much of the domain model's decision its placement keeps (issue 19; rule 10's serving pass).

Run: `.venv/bin/python benchmarks/domain_placement.py [--seeds 5] [--out DIR]`. Writes
domain-placement.md into DIR (default ./optsched-results/; `make bench` passes benchmarks/results).

Per seed of mixed-cloud-10k (1,000 `mixed` jobs at 2x load): the domain model built and its LP solved
(`build_model`, `solve_model`), then placed without a clock (`optsched.domain.assign`, the plan
checked by the validator), with the serving pass and, for comparison, without it
(`SERVE_ATTEMPTS` = 0). Reported: the model's evictions, the victims the placement put back (no
admitted preemptor it serves), the plan's admitted value and its share of the model's value.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS, machine, table
from optsched import load_cluster
from optsched.bundled import DATA_DIR
from optsched.domain import assign as placement
from optsched.domain.model import build_model, solve_model
from optsched.generate import generate_queue
from optsched.metrics import evaluate_problem
from optsched.problem import compile_problem


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for domain-placement.md")
    args = ap.parse_args()
    cluster = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    rows = []
    totals = {True: 0.0, False: 0.0}
    model_total = 0.0
    for seed in range(args.seeds):
        p = compile_problem(cluster, generate_queue(cluster, "mixed", jobs=1000, load=2.0, seed=seed))
        m = build_model(p)
        sol = solve_model(m, 10.0, integral=False)
        assert sol.value is not None
        model_total += sol.value
        for serve in (True, False):
            saved = placement.SERVE_ATTEMPTS
            placement.SERVE_ATTEMPTS = saved if serve else 0
            try:
                t0 = time.perf_counter()
                got = placement.assign(p, m.cells, sol, deadline=time.perf_counter() + 600)
                wall = time.perf_counter() - t0
            finally:
                placement.SERVE_ATTEMPTS = saved
            assert isinstance(got, placement.Assigned), got
            value = evaluate_problem(p, got.plan).admitted_value
            totals[serve] += value
            rows.append([seed, "yes" if serve else "no", len(sol.preempted) + len(sol.reclaimed), got.kept_back,
                         len(got.plan.evictions), round(value, 1), round(sol.value, 1),
                         f"{100 * value / sol.value:.1f}%", round(wall, 2)])
            print(rows[-1], flush=True)
    text = "\n".join([
        "# The domain model's decision, placed (benchmarks/domain_placement.py)",
        "",
        f"{dt.date.today()}, {machine()}. mixed-cloud-10k, 1,000 `mixed` jobs at 2x load; the domain LP, rounded,",
        "placed without a clock; every plan checked by the validator. Serving pass: admitted preemptors placed",
        "first beside their victims (rule 10's room); without it (`SERVE_ATTEMPTS` = 0) best-fit order alone.",
        "",
        table(["seed", "serving pass", "model evictions", "victims put back", "plan evictions", "plan value",
               "model value", "plan / model", "assign s"], rows),
        "",
        f"All seeds: {totals[True]:,.1f} with the pass, {totals[False]:,.1f} without, model {model_total:,.1f}.",
        "",
    ])
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "domain-placement.md"
    path.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
