"""Slurm JSON records for tests and benchmarks: Slurm-web's recorded slurmrestd 25.11 responses
(tests/data/slurm/SOURCES.md) with a few fields replaced, so every other field keeps Slurm's shape."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "slurm"
V44 = DATA / "slurmweb-25.11-v0.0.44"
NOW = 1_763_200_000.0
"""After every capture time in the fixtures (their BeginTime jobs are eligible by then)."""


def load(path: Path) -> Any:
    return json.loads(path.read_text())


NODES = load(V44 / "nodes.json")
JOBS = load(V44 / "jobs.json")


def one(name: str, directory: Path = V44) -> dict[str, Any]:
    """The one job of a single-job capture."""
    jobs = load(directory / f"{name}.json")["jobs"]
    assert len(jobs) == 1
    return dict(jobs[0])


def node_record(name: str, gres: str = "gpu:h100:8", cpus: int = 96, memory: int = 1_048_576,
                partitions: tuple[str, ...] = ("gpu",), state: tuple[str, ...] = ("IDLE",), **extra: Any) -> dict[str, Any]:
    """A v0.0.44 node record: Slurm-web's `gpu1` with its name, GRES, size and state replaced."""
    base = copy.deepcopy(next(n for n in NODES["nodes"] if n["name"] == "gpu1"))
    base.update({"name": name, "hostname": name, "address": name, "gres": gres, "gres_used": "", "cpus": cpus,
                 "effective_cpus": cpus, "real_memory": memory, "partitions": list(partitions), "state": list(state),
                 "alloc_cpus": 0, "alloc_memory": 0, **extra})
    return base


def pending(job_id: int, nodes: int = 1, gpus_per_node: int = 0, cpus: int = 1, qos: str = "normal",
            partition: str = "gpu", **extra: Any) -> dict[str, Any]:
    """A v0.0.44 pending job: Slurm-web's pending GPU job with its id, size and QOS replaced."""
    base = one("job-gpus-pending")
    base.update({"job_id": job_id, "node_count": {"set": True, "infinite": False, "number": nodes},
                 "cpus": {"set": True, "infinite": False, "number": cpus}, "tres_per_job": "",
                 "tres_per_node": f"gres/gpu:{gpus_per_node}" if gpus_per_node else "", "qos": qos,
                 "partition": partition, "state_reason": "Priority", **extra})
    return base


def running(job_id: int, nodes: list[str], gpus: int, qos: str, start: float, cpus: int = 1,
            **extra: Any) -> dict[str, Any]:
    """A v0.0.44 running job: Slurm-web's two-node GPU job with its id, nodes, devices and QOS replaced."""
    base = one("job-gpus-multi-nodes")
    alloc = base["job_resources"]["nodes"]["allocation"][0]
    base.update({"job_id": job_id, "qos": qos, "nodes": ",".join(nodes),
                 "node_count": {"set": True, "infinite": False, "number": len(nodes)},
                 "start_time": {"set": True, "infinite": False, "number": int(start)},
                 "gres_detail": [f"gpu:h100:{gpus}(IDX:0-{gpus - 1})" if gpus else "" for _ in nodes], **extra})
    base["job_resources"] = {**base["job_resources"], "nodes": {**base["job_resources"]["nodes"], "allocation": [
        {**alloc, "index": i, "name": n, "cpus": {"count": cpus, "used": 0}} for i, n in enumerate(nodes)]}}
    return base


def qos_record(name: str, preempts: tuple[str, ...] | list[str] = (), mode: str = "DISABLED",
               exempt_s: int | None = None) -> dict[str, Any]:
    """A QOS record: Slurm-web's `normal` QOS with its name and preemption replaced."""
    base = copy.deepcopy(load(V44 / "qos.json")["qos"][0])
    base["name"] = name
    base["preempt"] = {"list": list(preempts), "mode": [mode], "exempt_time": {
        "set": exempt_s is not None, "infinite": False, "number": exempt_s or 0}}
    return base
