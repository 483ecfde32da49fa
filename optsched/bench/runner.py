"""Run a suite's cases in parallel and write `<out>/<suite>.csv` and `<out>/<suite>.md`.

Executors: `local` (a process pool of `workers`; 1 runs in this process) and `ray` (the optional
`ray` extra: `pip install optsched[ray]`; a local Ray unless `RAY_ADDRESS` names a cluster). Rows
come back in case order whatever the executor, so the report is the same.
"""

from __future__ import annotations

import csv
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from optsched.bench.kinds import Row, report, run_case
from optsched.bench.suite import Case, Suite
from optsched.errors import InputError, InputIssue

EXECUTORS = ("local", "ray")


def _local(cases: list[Case], workers: int) -> Iterator[tuple[int, Row]]:
    if workers <= 1:
        for i, case in enumerate(cases):
            yield i, run_case(case)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_case, case): i for i, case in enumerate(cases)}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()


def _ray(cases: list[Case], workers: int) -> Iterator[tuple[int, Row]]:
    try:
        import ray
    except ImportError as err:
        raise InputError([InputIssue("executor", "missing_extra",
                                     "--executor ray needs the ray extra: pip install 'optsched[ray]'")]) from err
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=workers if "RAY_ADDRESS" not in os.environ else None, include_dashboard=False,
                 log_to_driver=False)
    try:
        remote = ray.remote(run_case)
        pending = {remote.remote(case): i for i, case in enumerate(cases)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                yield pending.pop(ref), ray.get(ref)
    finally:
        if started:
            ray.shutdown()


def run_cases(cases: list[Case], *, executor: str = "local", workers: int | None = None,
              progress: bool = True, on_row: Callable[[Case, Row], None] | None = None) -> list[Row]:
    """Every case's row, in case order; `on_row` sees each as it lands. `progress`: a live bar on a
    terminal, else one line per finished case on stderr (a log or a pipe sees the run move)."""
    if executor not in EXECUTORS:
        raise InputError([InputIssue("executor", "unknown_executor", f"{executor!r}; one of {EXECUTORS}")])
    workers = workers or os.cpu_count() or 1
    rows: list[Row | None] = [None] * len(cases)
    run = _local if executor == "local" else _ray
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    lines = progress and not sys.stdout.isatty()
    start = time.perf_counter()
    with Progress(*columns, disable=not progress or lines, transient=False) as bar:
        task = bar.add_task("cases", total=len(cases))
        for done, (i, row) in enumerate(run(cases, workers), start=1):
            rows[i] = row
            if on_row is not None:
                on_row(cases[i], row)
            bar.advance(task)
            if lines:
                c = cases[i]
                sys.stderr.write(f"[{done}/{len(cases)}] {c.kind} {c.cluster} {c.solver} seed {c.seed} "
                                 f"({time.perf_counter() - start:.0f} s)\n")
                sys.stderr.flush()
    return [r for r in rows if r is not None]


def write_csv(rows: list[Row], path: Path) -> None:
    """All rows, the union of their columns in first-seen order."""
    columns: list[str] = []
    for r in rows:
        columns += [k for k in r if k not in columns]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def run_suite(suite: Suite, *, out: Path, seeds: int | None = None, executor: str = "local",
              workers: int | None = None, progress: bool = True, **kwargs: Any) -> tuple[Path, list[Row]]:
    """Run `suite` and write its CSV and report under `out`; returns the report's path and rows."""
    rows = run_cases(suite.cases(seeds), executor=executor, workers=workers, progress=progress, **kwargs)
    write_csv(rows, out / f"{suite.name}.csv")
    path = out / f"{suite.name}.md"
    path.write_text(report(suite, rows, out))
    return path, rows
