"""Running jobs as preemption and quota read them: what an eviction loses, the quota a running job
holds where it sits, and their table (arrays aligned with `Problem.running`, built once per
problem). The data under `preemption`, `fairshare`, `serving` and the `kueue` baseline; no rule of
its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optsched.ledger import Ledger, flavor_use
from optsched.problem import BArray, Derived, FArray, JobSpec, Problem


def lost_gpu_hours(p: Problem, job: JobSpec) -> float:
    """GPU-hours of work an eviction of running `job` loses (what an `Eviction` reports)."""
    return (job.checkpoint_age_s + job.restart_s) * p.gpus_of(job.placements) / 3600.0


def lost_work(p: Problem, job: JobSpec) -> float:
    """Work an eviction of running `job` loses, priced over every resource it holds, in
    GPU-equivalent hours (the `disruption` term): ``(checkpoint_age_s + restart_s) / 3600`` x the
    sum over its replicas of the replica's dominant share of the cluster in GPUs,
    ``max(GPUs, cpu / cpu_per_gpu, memory / memory_per_gpu)`` (`per_gpu`). A replica shaped
    like its node's share of a GPU counts its GPUs (so GPU work costs its GPU-hours, as before),
    CPU-only work costs what it blocks, and no resource is counted twice."""
    cpu_per_gpu, memory_per_gpu = per_gpu(p)
    held = 0.0
    for pl in job.placements:
        g = job.groups[pl.group]
        held += max(len(pl.devices) * pl.share, float(g.req[0]) / cpu_per_gpu, float(g.req[1]) / memory_per_gpu)
    return (job.checkpoint_age_s + job.restart_s) * held / 3600.0


def per_gpu(p: Problem) -> tuple[float, float]:
    """(millicores, MiB) that one GPU-equivalent stands for: the cpu and memory of the cluster's
    real accelerator nodes over their devices (on mixed-cloud-10k, an H100 node's 8 GPUs come with
    its cpu and memory). A cluster without accelerators: one average node is one equivalent."""
    return p.derived(PER_GPU)


def _per_gpu(p: Problem) -> tuple[float, float]:
    real = ~p.node_provisioned
    accel = real & (p.node_dev_count > 0)
    nodes = accel if accel.any() else real
    units = float(p.node_dev_count[nodes].sum()) if accel.any() else float(nodes.sum())
    if units <= 0 or not len(p.resources):
        return math.inf, math.inf
    cap = p.cap[nodes].sum(axis=0)
    cpu, memory = (float(cap[0]) / units, float(cap[1]) / units) if len(cap) > 1 else (float(cap[0]) / units, 0.0)
    return (cpu if cpu > 0 else math.inf), (memory if memory > 0 else math.inf)


PER_GPU: Derived[tuple[float, float]] = Derived("running.per_gpu", _per_gpu)


def running_usage_before(p: Problem) -> np.ndarray:
    """Quota usage (T x F) of all running jobs at the start of the round."""
    return p.derived(RUNNING_QUOTA)


RUNNING_QUOTA: Derived[np.ndarray] = Derived("running.running_quota",
                                             lambda p: Ledger.with_running(p).quota_used.copy())
"""Quota usage (T x F) of all running jobs at the start of the round."""


def held_flavors(p: Problem, job: JobSpec) -> FArray:
    """Quota usage (per flavor) of a running job where it sits (a row of `running_table`)."""
    if job.running and job.index < len(p.running) and p.running[job.index] is job:
        row: FArray = running_table(p).held[job.index]
        return row
    return _held(p, job)


def _held(p: Problem, job: JobSpec) -> FArray:
    held = np.zeros(len(p.flavors))
    for pl in job.placements:
        held += flavor_use(p, job.groups[pl.group], pl.node)
    return held


@dataclass(frozen=True)
class RunningTable:
    """Per running job, what preemption reads (arrays aligned with `p.running`; read-only)."""

    tenant: np.ndarray
    priority: np.ndarray
    submitted: np.ndarray
    started: np.ndarray
    preemptible: np.ndarray
    id_rank: np.ndarray
    """Rank of the job id in sorted order (the last tie-break of victim orders)."""
    held: np.ndarray
    """(running, flavors): quota usage where the job sits."""
    lost: np.ndarray
    """GPU-equivalent hours an eviction loses (`lost_work`: the `disruption` term)."""
    gpus: np.ndarray
    """GPUs the job holds."""
    place_job: np.ndarray
    place_node: np.ndarray
    """Per replica of a running job: the job (its index) and its node."""


def touching(rt: RunningTable, nodes: BArray) -> BArray:
    """Per running job: whether one of its replicas sits on one of `nodes` (a node mask)."""
    hit = nodes[rt.place_node]
    out: BArray = np.bincount(rt.place_job[hit], minlength=len(rt.tenant)) > 0
    return out


def running_table(p: Problem) -> RunningTable:
    """The `RunningTable` of the round (built once per problem)."""
    return p.derived(RUNNING_TABLE)


def _running_table(p: Problem) -> RunningTable:
    run = p.running
    n_f = len(p.flavors)
    held = np.array([_held(p, j) for j in run], dtype=float).reshape(len(run), n_f)
    place_job = np.array([k for k, j in enumerate(run) for _ in j.placements], dtype=np.int64)
    place_node = np.array([pl.node for j in run for pl in j.placements], dtype=np.int64)
    order = sorted(range(len(run)), key=lambda k: run[k].id)
    id_rank = np.empty(len(run), dtype=np.int64)
    id_rank[order] = np.arange(len(run))
    table = RunningTable(
        tenant=np.array([j.tenant for j in run], dtype=np.int64),
        priority=np.array([j.priority for j in run], dtype=np.int64),
        submitted=np.array([j.submitted_at for j in run], dtype=float),
        started=np.array([j.started_at for j in run], dtype=float),
        preemptible=np.array([j.preemptible for j in run], dtype=bool),
        id_rank=id_rank, held=held,
        lost=np.array([lost_work(p, j) for j in run], dtype=float),
        gpus=np.array([p.gpus_of(j.placements) for j in run], dtype=float), place_job=place_job,
        place_node=place_node)
    for a in (table.tenant, table.priority, table.submitted, table.started, table.preemptible, id_rank, held,
              table.lost, table.gpus, place_job, place_node):
        a.setflags(write=False)
    return table


RUNNING_TABLE: Derived[RunningTable] = Derived("running.running_table", _running_table)
