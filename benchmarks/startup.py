"""Start-up cost: what importing optsched and starting its command costs a fresh process.

Run: `.venv/bin/python benchmarks/startup.py [--runs 5] [--out DIR]`. Writes startup.md into
DIR (default ./optsched-results/; `make bench` passes benchmarks/results). Each row is the median
wall time of `--runs` fresh interpreters, so imports are never already cached in the process.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table

CASES = (
    ("import optsched", "import optsched"),
    ("import optsched.check (the validator)", "import optsched.check"),
    ("import optsched.metrics", "import optsched.metrics"),
    ("from optsched import solve (loads the model back ends)", "from optsched import solve"),
)
"""(what, the Python statement timed inside the interpreter)."""


def _inside(statement: str) -> float:
    code = f"import time; s = time.perf_counter(); {statement}; print(time.perf_counter() - s)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def _command(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, capture_output=True, check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("optsched-results"))
    args = ap.parse_args()
    rows = []
    for what, statement in CASES:
        times = [_inside(statement) for _ in range(args.runs)]
        rows.append([what, round(statistics.median(times), 3), round(max(times), 3)])
        print(rows[-1], flush=True)
    cli = str(Path(sys.executable).with_name("optsched"))
    for what, command in (("python -c pass (the interpreter alone, whole process)", [sys.executable, "-c", "pass"]),
                          ("optsched --help (whole process)", [cli, "--help"]),
                          ("optsched --version (whole process)", [cli, "--version"])):
        times = [_command(command) for _ in range(args.runs)]
        rows.append([what, round(statistics.median(times), 3), round(max(times), 3)])
        print(rows[-1], flush=True)
    text = (f"# Start-up cost\n\n{dt.date.today()}, {machine()}. Median and worst of {args.runs} fresh "
            "interpreters each. Statements are timed inside the interpreter (its own start excluded); the "
            "commands are timed as whole processes. Targets (issue 20): import optsched <= 0.3 s, "
            "optsched --help <= 0.5 s.\n\n" + table(["what", "median s", "worst s"], rows) + "\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
