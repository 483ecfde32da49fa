"""FGD's protocol on an openb trace: the six published policies and optsched's two, against the
FGD authors' numbers (the `fgd` suite of the harness, optsched/bench/suites/fgd.yaml).

Run: `.venv/bin/python benchmarks/fgd.py [--seeds N] [--workload openb_pod_list_cpu250]`, the
same as `optsched bench fgd` for the default trace. Writes benchmarks/results/fgd.md (other
workloads: fgd-<suffix>.md), fgd.csv and the allocation plot. Data: ../shared/data (the script
says so and stops when it is absent). Protocol and policies: optsched/sim/fgd.py, batched.py.
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
    ap.add_argument("--workload", default="openb_pod_list_default")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    suite = load_suite("fgd")
    workload = {**suite.workloads[0], "trace": args.workload}
    suffix = args.workload.removeprefix("openb_pod_list_")
    name = "fgd" if suffix == "default" else f"fgd-{suffix}"
    suite = suite.model_copy(update={"name": name, "workloads": [workload],
                                     "solvers": args.policies.split(",") if args.policies else suite.solvers})
    try:
        path, _ = run_suite(suite, out=RESULTS, seeds=args.seeds, workers=args.workers)
    except DataMissing as exc:
        print(f"skipped: {exc}")
        return
    print(path.read_text())


if __name__ == "__main__":
    main()
