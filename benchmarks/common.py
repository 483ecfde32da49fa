"""Helpers shared by the benchmark scripts: timing and markdown tables."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

RESULTS = Path(__file__).parent / "results"
T = TypeVar("T")


def timed(fn: Callable[[], T], repeat: int = 1) -> tuple[T, float]:
    """Run `fn` `repeat` times; return its last result and the median wall time (s)."""
    times = []
    out: T
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, float(np.median(times))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table."""
    def fmt(x: Any) -> str:
        if isinstance(x, float):
            return f"{x:,.3f}" if abs(x) < 1000 else f"{x:,.0f}"
        return str(x)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---:" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    """One line about where the numbers come from."""
    import os

    py = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{py}, {os.cpu_count()} CPUs, {platform.machine()}"


def write(name: str, text: str) -> Path:
    """Write benchmarks/results/<name>.md and echo it."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.md"
    path.write_text(text)
    print(text)
    return path
