"""FGD's protocol on an openb trace: the six published policies and optsched's two, against the
FGD authors' numbers (the `fgd` suite of the harness, optsched/bench/suites/fgd.yaml).

Run: `.venv/bin/python benchmarks/fgd.py [--seeds N] [--workload openb_pod_list_cpu250,...] [--out DIR]`,
the same as `optsched bench fgd` for the default trace. Writes fgd.md (other workloads:
fgd-<suffix>.md), its CSV and the allocation plot into DIR (default ./optsched-results/; `make
bench` passes benchmarks/results). Data: ../shared/data (the script says so and stops when it is
absent). Protocol, policies and limit: optsched/sim/artifact.py, fgd.py, batched.py, limit.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS
from optsched.bench import DataMissing, load_suite, run_suite


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=None, help="default: the suite's 10 (42..51)")
    ap.add_argument("--policies", default=None, help="comma-separated subset of the suite's")
    ap.add_argument("--workload", default="openb_pod_list_default", help="comma-separated traces, one report each")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for the reports")
    args = ap.parse_args()
    base = load_suite("fgd")
    for trace in args.workload.split(","):
        workload = {**base.workloads[0], "trace": trace}
        suffix = trace.removeprefix("openb_pod_list_")
        name = "fgd" if suffix == "default" else f"fgd-{suffix}"
        suite = base.model_copy(update={"name": name, "workloads": [workload],
                                        "solvers": args.policies.split(",") if args.policies else base.solvers})
        try:
            path, _ = run_suite(suite, out=args.out, seeds=args.seeds, workers=args.workers)
        except DataMissing as exc:
            print(f"skipped: {exc}")
            return
        print(path.read_text())


if __name__ == "__main__":
    main()
