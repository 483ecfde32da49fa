"""Helpers shared by the benchmark scripts: timing, markdown tables, and where results go.

Results go to `RESULTS`: ``$OPTSCHED_RESULTS`` when set, else ./optsched-results/. Only `make bench`
sets it to benchmarks/results, so a script run by hand never overwrites the committed evidence.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from optsched.bench.report import machine, table

RESULTS = Path(os.environ.get("OPTSCHED_RESULTS") or "optsched-results")
"""Folder the scripts write their reports and plots into (module docstring)."""
T = TypeVar("T")
__all__ = ["RESULTS", "machine", "table", "timed", "write"]


def timed(fn: Callable[[], T], repeat: int = 1) -> tuple[T, float]:
    """Run `fn` `repeat` times; return its last result and the median wall time (s)."""
    times = []
    out: T
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, float(np.median(times))


def write(name: str, text: str) -> Path:
    """Write RESULTS/<name>.md and echo it."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.md"
    path.write_text(text)
    print(text)
    return path
