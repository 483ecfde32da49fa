"""Demand scenarios from a job trace: hourly GPU occupancy, resampled by whole weeks.

Readers turn a trace into jobs (start s, duration s, GPUs, device model):
- `generic` CSV: columns `start_s`, `duration_s`, `gpus` and optionally `model` (docs/capacity.md);
- `philly`: Microsoft Philly per-job summaries (`timestamp`, `duration`, `num_gpus`), as shipped
  by Pollux (OSDI'21), one device model given by the caller;
- `openb`: Alibaba's openb pod lists (`creation_time`, `deletion_time`, `num_gpu`, `gpu_milli`,
  `gpu_spec`; fractional GPUs count as num_gpu x gpu_milli / 1000); the first model of
  `gpu_spec`, or the caller's model when the pod accepts any.

Hourly occupancy counts every job in every hour it overlaps (an upper bound within the hour, so
that guaranteed demand is covered). Each scenario draws whole weeks of that history with
replacement (whole days when it is shorter than a week) until it spans the horizon, scales it by
a growth trend and a lognormal level, and is aggregated into periods by the maximum.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np

from optsched.capacity.inputs import Demand
from optsched.errors import InputError, InputIssue

FORMATS = ("generic", "philly", "openb")
HOUR = 3600.0


def read_jobs(path: Path, fmt: str, model: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(start s, end s, GPUs, model) of every GPU job of the trace, starts relative to the first."""
    if fmt not in FORMATS:
        raise InputError([InputIssue("format", "unknown_format", f"{fmt!r}; known: {list(FORMATS)}")])
    starts, ends, gpus, models = [], [], [], []
    try:
        for row, line in _rows(path):
            s, e, g, m = _parse(row, fmt, model, line)
            if g > 0 and e > s:
                starts.append(s)
                ends.append(e)
                gpus.append(g)
                models.append(m)
    except OSError as exc:
        raise InputError([InputIssue(str(path), "unreadable", str(exc))]) from None
    if not starts:
        raise InputError([InputIssue(str(path), "empty", "the trace holds no GPU job with a positive duration")])
    t0 = min(starts)
    return np.array(starts) - t0, np.array(ends) - t0, np.array(gpus), models


def _rows(path: Path) -> Iterator[tuple[dict[str, str], int]]:
    with path.open(newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            yield row, i + 2


def _parse(row: dict[str, str], fmt: str, model: str, line: int) -> tuple[float, float, float, str]:
    try:
        if fmt == "generic":
            start = float(row["start_s"])
            return start, start + float(row["duration_s"]), float(row["gpus"]), row.get("model") or model
        if fmt == "philly":
            start = datetime.fromisoformat(row["timestamp"]).timestamp()
            return start, start + float(row["duration"]), float(row["num_gpus"]), model
        spec = (row.get("gpu_spec") or "").split("|")[0].strip()
        gpus = float(row["num_gpu"]) * float(row.get("gpu_milli") or 1000) / 1000.0
        return float(row["creation_time"]), float(row["deletion_time"]), gpus, spec or model
    except (KeyError, ValueError) as exc:
        raise InputError([InputIssue(f"line {line}", "bad_row", f"{fmt} trace row: {exc!r}")]) from None


def hourly_occupancy(starts: np.ndarray, ends: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """GPUs of the jobs overlapping each hour (difference array; vectorised)."""
    first = np.floor(starts / HOUR).astype(np.int64)
    last = np.ceil(ends / HOUR).astype(np.int64)  # exclusive
    diff = np.zeros(int(last.max()) + 1)
    np.add.at(diff, first, gpus)
    np.add.at(diff, last, -gpus)
    occupancy: np.ndarray = np.cumsum(diff)[:-1]
    return np.clip(occupancy, 0.0, None)


def demand_from_trace(path: Path, *, fmt: str = "generic", model: str = "GPU", weeks: int = 4,
                      scenarios: int = 20, period_hours: int = 1, growth: float = 0.0, level_sigma: float = 0.1,
                      spot_tolerant: float = 0.0, seed: int = 0) -> Demand:
    """Demand scenarios (module docstring) over `weeks` weeks; `growth` = relative rise over the
    horizon; every model of the trace gets the same `spot_tolerant` share."""
    starts, ends, gpus, models = read_jobs(path, fmt, model)
    rng = np.random.default_rng(seed)
    horizon = weeks * 7 * 24
    names = sorted(set(models))
    of_model = np.array([names.index(x) for x in models])
    per_model = {m: hourly_occupancy(starts[of_model == i], ends[of_model == i], gpus[of_model == i])
                 for i, m in enumerate(names)}
    length = max(len(v) for v in per_model.values())
    history = {m: np.pad(v, (0, length - len(v))) for m, v in per_model.items()}
    block = 168 if length >= 168 else 24 if length >= 24 else length
    n_blocks = length // block
    trend = 1.0 + growth * np.arange(horizon) / max(horizon - 1, 1)
    out = []
    for s in range(scenarios):
        picks = rng.integers(0, n_blocks, size=-(-horizon // block))
        level = rng.lognormal(0.0, level_sigma) if level_sigma > 0 else 1.0
        series = {}
        for m in names:
            hourly = np.concatenate([history[m][b * block:(b + 1) * block] for b in picks])[:horizon]
            hourly = hourly * trend * level
            periods = hourly[: horizon // period_hours * period_hours].reshape(-1, period_hours).max(axis=1)
            series[m] = np.ceil(periods - 1e-9).tolist()
        out.append({"name": f"s{s}", "probability": 1.0 / scenarios, "demand": series,
                    "spot_tolerant": {m: spot_tolerant for m in names}})
    return Demand.model_validate({"period_hours": float(period_hours), "scenarios": out})
