"""The benchmark harness: suites as data (YAML), run in parallel, reported as CSV and markdown.

`optsched bench SUITE` runs a shipped suite (`fgd`, `rounds`, `philly`) or a suite file
(docs/bench.md); `run_suite` is the same from Python.
"""

from optsched.bench.kinds import DataMissing, data_dir, run_case
from optsched.bench.runner import EXECUTORS, run_cases, run_suite, write_csv
from optsched.bench.suite import Case, Suite, load_suite, suite_names

__all__ = [
    "EXECUTORS",
    "Case",
    "DataMissing",
    "Suite",
    "data_dir",
    "load_suite",
    "run_case",
    "run_cases",
    "run_suite",
    "suite_names",
    "write_csv",
]
