"""How much of the domain model's decision its placement keeps (issue 19; rule 10's serving pass).

Run: `.venv/bin/python benchmarks/domain_placement.py [--seeds 5] [--out DIR]`. Writes
domain-placement.md into DIR (default ./optsched-results/; `make bench` passes benchmarks/results).

Per seed of mixed-cloud-10k (1,000 `mixed` jobs at 2x load): the domain model built, its LP and its
MIP solved (`build_model`, `solve_model`), each solution placed without a clock
(`optsched.domain.assign`, the plan checked by the validator), with the serving passes and, for
comparison, without them (`SERVE_ATTEMPTS` = 0). Reported: the model's evictions, the victims the
placement put back (no preemptor it serves), the plan's admitted value, its share of the
solution's value and its gap to the model's bound (the round's).
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
    totals: dict[tuple[str, bool], float] = {}
    bound_total = 0.0
    for seed in range(args.seeds):
        p = compile_problem(cluster, generate_queue(cluster, "mixed", jobs=1000, load=2.0, seed=seed))
        m = build_model(p)
        sols = {kind: solve_model(m, 30.0, integral=kind == "MIP") for kind in ("LP", "MIP")}
        bounds = [sol.bound for sol in sols.values() if sol.bound is not None]
        assert bounds, "no bound"
        bound = min(bounds)  # the tighter of the two
        for kind, sol in sols.items():
            assert sol.value is not None
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
                totals[kind, serve] = totals.get((kind, serve), 0.0) + value
                rows.append([seed, kind, "yes" if serve else "no", len(sol.preempted) + len(sol.reclaimed),
                             got.kept_back, len(got.plan.evictions), round(value, 1), round(sol.value, 1),
                             f"{100 * value / sol.value:.1f}%", f"{100 * (1 - value / bound):.2f}%", round(wall, 2)])
                print(rows[-1], flush=True)
        bound_total += bound
    text = "\n".join([
        "# The domain model's decision, placed (benchmarks/domain_placement.py)",
        "",
        f"{dt.date.today()}, {machine()}. mixed-cloud-10k, 1,000 `mixed` jobs at 2x load; the domain LP (rounded)",
        "and MIP solutions, placed without a clock; every plan checked by the validator. Serving passes:",
        "admitted preemptors placed first beside their victims (rule 10's room), deferred ones beside the",
        "victims still unserved after the naming; without them (`SERVE_ATTEMPTS` = 0) best-fit order alone.",
        "Gap: to the model's bound (the round's, `DomainSolution.bound`).",
        "",
        table(["seed", "solution", "serving passes", "model evictions", "victims put back", "plan evictions",
               "plan value", "model value", "plan / model", "gap to bound", "assign s"], rows),
        "",
        "All seeds: " + ", ".join(f"{kind} {'with' if serve else 'without'} the passes {v:,.1f}"
                                  for (kind, serve), v in totals.items()) + f"; bounds {bound_total:,.1f}.",
        "",
    ])
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "domain-placement.md"
    path.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
