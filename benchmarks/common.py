"""Helpers shared by the benchmark scripts: timing, markdown tables, and where results go.

Results go to `RESULTS`: ``$OPTSCHED_RESULTS`` when set, else ./optsched-results/. Only `make bench`
sets it to benchmarks/results, so a script run by hand never overwrites the committed evidence.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from optsched.bench.report import machine, table

RESULTS = Path(os.environ.get("OPTSCHED_RESULTS") or "optsched-results")
"""Folder the scripts write their reports and plots into (module docstring)."""
T = TypeVar("T")
__all__ = ["RESULTS", "machine", "preemptor_elsewhere", "table", "timed", "write"]


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


def preemptor_elsewhere(cluster: Any, plan: Any) -> int:
    """Evictions whose named preemptor has no replica on any node the victim held: since rule 10
    (docs/rules.md `serving`) the evictions served by quota rather than by room (where tenants
    have no quotas, as in Slurm's one queue, there are none)."""
    where: dict[str, set[str]] = {}
    for p in plan.placements:
        where.setdefault(p.job, set()).add(p.node)
    victim_nodes = {r.job.id: {p.node for p in r.placements} for r in cluster.running}
    return sum(1 for e in plan.evictions if not where.get(e.by or "", set()) & victim_nodes[e.job])
