"""Workload traces for the simulator: jobs with an arrival time and a run time.

Three readers, each returning a `Trace` (the jobs, sorted by arrival, and the rows it could not
use, each with its reason: nothing is dropped silently):
- `read_csv`: optsched's generic schema (docs/traces.md), one row per job;
- `read_philly`: the per-job summary of Microsoft's Philly trace (Pollux artifact's
  `traces/philly.csv`: timestamp, duration s, num_gpus, gpu_time, virtual cluster);
- `read_openb`: Alibaba's openb pod lists (fractional `gpu_milli`, `gpu_spec` models, CPU and
  memory), arrival = creation time, run time = deletion - scheduled time.
"""

from __future__ import annotations

import csv
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from optsched.errors import InputError, InputIssue
from optsched.model.queue import Job

MAX_GPUS_PER_REPLICA = 8
"""Philly jobs above this many GPUs become gangs of equal replicas of at most 8 GPUs each."""


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace: its spec, when it arrives (s) and how long it runs once placed (s)."""

    job: Job
    arrival_s: float
    duration_s: float

    @property
    def gpus(self) -> float:
        """GPUs at its minimum replica counts (shares included)."""
        return self.job.min_gpus


@dataclass(frozen=True)
class Trace:
    """Jobs sorted by arrival (ties by id), and the rows left out: (row number, reason)."""

    jobs: list[TraceJob]
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def window(self, start_s: float = 0.0, end_s: float | None = None, limit: int | None = None) -> Trace:
        """The jobs arriving in [start_s, end_s), at most `limit` of them, re-timed to start at 0."""
        chosen = [j for j in self.jobs if j.arrival_s >= start_s and (end_s is None or j.arrival_s < end_s)]
        chosen = chosen[:limit] if limit is not None else chosen
        t0 = chosen[0].arrival_s if chosen else 0.0
        return Trace([retime(j, j.arrival_s - t0) for j in chosen], self.skipped)


def retime(tj: TraceJob, arrival_s: float) -> TraceJob:
    """`tj` arriving at `arrival_s` (its job's `submitted_at` follows)."""
    return TraceJob(tj.job.model_copy(update={"submitted_at": arrival_s}), arrival_s, tj.duration_s)


def make_trace(rows: list[tuple[int, dict[str, Any], float, float]], skipped: list[tuple[int, str]]) -> Trace:
    """Validate `(row, job document, arrival s, duration s)` rows into a sorted `Trace`; a row whose
    job is invalid is skipped with the validation message."""
    jobs: list[TraceJob] = []
    for row, doc, arrival, duration in rows:
        if arrival < 0 or duration < 0:
            skipped.append((row, f"negative time (arrival {arrival}, duration {duration})"))
            continue
        try:
            job = Job.model_validate({**doc, "submitted_at": arrival})
        except ValidationError as err:
            skipped.append((row, str(err.errors()[0]["msg"])))
            continue
        jobs.append(TraceJob(job, arrival, duration))
    seen: set[str] = set()
    issues = []
    for tj in jobs:
        if tj.job.id in seen:
            issues.append(InputIssue(f"trace[{tj.job.id}]", "duplicate_id", "job id appears twice"))
        seen.add(tj.job.id)
    if issues:
        raise InputError(issues)
    jobs.sort(key=lambda j: (j.arrival_s, j.job.id))
    return Trace(jobs, skipped)


def _rows(path: str | Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _group(gpus: float, replicas: int, cpu: float, memory: float,
           models: list[str] | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"name": "worker", "replicas": {"min": replicas, "max": replicas},
                             "request": {"gpu": gpus, "cpu": cpu, "memory": memory}}
    if models:
        group["models"] = {m: 1.0 for m in models}
    return group


GENERIC_COLUMNS = ("id", "arrival_s", "duration_s", "gpus")
"""Required columns of the generic schema; optional: replicas, cpu, memory, tenant, priority,
gpu_models ('|'-separated), preemptible (true/false), spot (forbidden|allowed|preferred)."""


def read_csv(path: str | Path) -> Trace:
    """The generic schema (docs/traces.md): one job per row, `gpus` per replica (a whole count or
    a share below 1), `cpu` millicores and `memory` MiB per replica."""
    data = _rows(path)
    missing = [c for c in GENERIC_COLUMNS if data and c not in data[0]]
    if missing:
        raise InputError([InputIssue(f"{path}", "missing_column", f"columns {missing} are required")])
    rows, skipped = [], []
    for i, r in enumerate(data, start=2):  # row 1 is the header
        try:
            models = [m for m in r.get("gpu_models", "").split("|") if m]
            doc: dict[str, Any] = {
                "id": r["id"], "tenant": r.get("tenant") or "default", "priority": int(r.get("priority") or 0),
                "groups": [_group(float(r["gpus"]), int(r.get("replicas") or 1), float(r.get("cpu") or 0),
                                  float(r.get("memory") or 0), models)]}
            if r.get("preemptible"):
                doc["preemptible"] = r["preemptible"].strip().lower() == "true"
            if r.get("spot"):
                doc["spot"] = r["spot"]
            rows.append((i, doc, float(r["arrival_s"]), float(r["duration_s"])))
        except ValueError as err:
            skipped.append((i, str(err)))
    return make_trace(rows, skipped)


def philly_replicas(gpus: int) -> tuple[int, int]:
    """(replicas, GPUs each) for a Philly job: one replica up to 8 GPUs, else the fewest equal
    replicas of at most 8 GPUs (16 -> 2 x 8, 12 -> 2 x 6)."""
    if gpus <= MAX_GPUS_PER_REPLICA:
        return 1, gpus
    per = max(d for d in range(1, MAX_GPUS_PER_REPLICA + 1) if gpus % d == 0)
    return gpus // per, per


def read_philly(path: str | Path, *, cpu_per_gpu: float = 0.0, memory_per_gpu: float = 0.0) -> Trace:
    """Philly's per-job summary: arrival = `timestamp` (s after the trace's first), run time =
    `duration` (s), GPUs = `num_gpus` (`philly_replicas`), tenant = the virtual `cluster`.
    CPU (millicores) and memory (MiB) per GPU are not in the trace: 0 unless given."""
    data = _rows(path)
    parsed: list[tuple[int, dict[str, str], float]] = []
    skipped: list[tuple[int, str]] = []
    for i, r in enumerate(data, start=2):
        try:
            stamp = dt.datetime.fromisoformat(r["timestamp"]).replace(tzinfo=dt.UTC).timestamp()
            parsed.append((i, r, stamp))
        except ValueError as err:
            skipped.append((i, f"timestamp: {err}"))
    t0 = min((s for _, _, s in parsed), default=0.0)
    rows = []
    for i, r, stamp in parsed:
        try:
            gpus = int(r["num_gpus"])
            duration = float(r["duration"])
        except ValueError as err:
            skipped.append((i, str(err)))
            continue
        if gpus < 1:
            skipped.append((i, f"num_gpus {gpus} < 1"))
            continue
        replicas, per = philly_replicas(gpus)
        doc = {"id": f"philly-{i - 2}", "tenant": f"vc-{r['cluster']}",
               "groups": [_group(per, replicas, cpu_per_gpu * per, memory_per_gpu * per)]}
        rows.append((i, doc, stamp - t0, duration))
    return make_trace(rows, skipped)


def read_openb(path: str | Path) -> Trace:
    """An openb pod list: one single-replica job per pod; `num_gpu` whole GPUs, or a share
    `gpu_milli`/1000 of one when `gpu_milli` < 1000; `gpu_spec` limits the models; arrival =
    `creation_time`, run time = `deletion_time` - `scheduled_time` (s)."""
    rows, skipped = [], []
    for i, r in enumerate(_rows(path), start=2):
        try:
            ngpu, milli = int(r["num_gpu"]), int(r["gpu_milli"])
            gpus = milli / 1000 if ngpu == 1 and 0 < milli < 1000 else float(ngpu)
            models = [m for m in r.get("gpu_spec", "").split("|") if m]
            doc = {"id": r["name"], "groups": [_group(gpus, 1, float(r["cpu_milli"]), float(r["memory_mib"]),
                                                      models if gpus > 0 else None)]}
            start = float(r["scheduled_time"] or r["creation_time"])
            rows.append((i, doc, float(r["creation_time"]), float(r["deletion_time"]) - start))
        except ValueError as err:
            skipped.append((i, str(err)))
    return make_trace(rows, skipped)
