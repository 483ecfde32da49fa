"""A Plan -> what to tell Slurm: which jobs to preempt, where to start the others, why the rest wait.

Slurm has no binding call: a pending job is pinned to the plan's nodes by setting its required
node list, `scontrol update JobId=<id> ReqNodeList=<hostlist> NumNodes=<n>` (scontrol(1):
`ReqNodeList`, `NumNodes`), and slurmctld then starts it there once the nodes are free. A task
of a pending array is its own job id (`123_7`): the update splits it out of the array. Device
indices cannot be pinned from outside Slurm (its `gres.conf` binding picks them); the plan's are
reported per node.

Evictions: `scontrol requeue <id>` for a job whose preempt mode is REQUEUE, `scancel <id>` for
CANCEL (and for a REQUEUE job that cannot be requeued, as Slurm does). Order: evictions first,
then the updates (the evicted jobs' nodes are what the plan used).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from optsched.adapters.slurm.hostlists import compress
from optsched.adapters.slurm.snapshot import SlurmSnapshot
from optsched.errors import InputError, InputIssue
from optsched.model.plan import Plan


@dataclass
class JobStart:
    """A pending job (or array task) to start on the plan's nodes."""

    job_id: str
    nodes: list[str]
    node_list: str
    """`nodes` as a hostlist expression."""
    devices: dict[str, list[int]]
    """Node -> the device indices the plan gave it there (reported, not enforced)."""
    command: list[str]


@dataclass
class JobEviction:
    """A running job to preempt, how, and for whom."""

    job_id: str
    mode: str
    """`requeue` or `cancel`."""
    reason: str
    """`preempted` or `reclaimed`, as the plan says."""
    by: str | None
    lost_gpu_hours: float
    command: list[str]


@dataclass
class JobWaiting:
    """A pending job the plan does not start (or that was held), and why."""

    job_id: str
    reason: str
    detail: str


@dataclass
class SlurmActions:
    """What to do for one round: evictions, then starts; why the other pending jobs wait."""

    evictions: list[JobEviction] = field(default_factory=list)
    starts: list[JobStart] = field(default_factory=list)
    waiting: list[JobWaiting] = field(default_factory=list)

    def commands(self) -> list[list[str]]:
        """Every command, in the order to run them (evictions first)."""
        return [e.command for e in self.evictions] + [s.command for s in self.starts]

    def to_dict(self) -> dict[str, Any]:
        """The actions as JSON-ready data."""
        return {"evictions": [asdict(e) for e in self.evictions], "starts": [asdict(s) for s in self.starts],
                "waiting": [asdict(w) for w in self.waiting]}


def _start(job_id: str, nodes: list[str], devices: dict[str, list[int]]) -> JobStart:
    hosts = compress(nodes)
    return JobStart(job_id=job_id, nodes=nodes, node_list=hosts, devices=devices,
                    command=["scontrol", "update", f"JobId={job_id}", f"ReqNodeList={hosts}", f"NumNodes={len(nodes)}"])


def actions(plan: Plan, snap: SlurmSnapshot) -> SlurmActions:
    """The preemptions and node-list updates that carry out `plan` on `snap`'s jobs.

    Raises `InputError` for a plan that places a job the snapshot did not offer, evicts one it
    does not hold, or places on a node to be provisioned (Slurm's cloud nodes are not read)."""
    out = SlurmActions()
    issues: list[InputIssue] = []
    queued = {j.id for j in snap.queue.jobs}
    running = {r.job.id for r in snap.cluster.running}
    by_job: dict[str, list[tuple[int, str, list[int]]]] = {}
    by_group: dict[tuple[str, str], list[tuple[int, str, list[int]]]] = {}
    for i, pl in enumerate(plan.placements):
        if pl.job not in queued:
            issues.append(InputIssue(f"placements[{i}].job", "unknown_reference", f"{pl.job!r} is not a queued job"))
        elif "/new-" in pl.node:
            issues.append(InputIssue(f"placements[{i}].node", "unsupported", f"{pl.node} is a node to provision"))
        else:
            by_job.setdefault(pl.job, []).append((pl.replica, pl.node, list(pl.devices)))
            by_group.setdefault((pl.job, pl.group), []).append((pl.replica, pl.node, list(pl.devices)))
    for i, ev in enumerate(plan.evictions):
        if ev.job not in running:
            issues.append(InputIssue(f"evictions[{i}].job", "unknown_reference", f"{ev.job!r} is not a running job"))
            continue
        mode = snap.preempt_mode.get(ev.job, "requeue")
        command = ["scontrol", "requeue", ev.job] if mode == "requeue" else ["scancel", ev.job]
        out.evictions.append(JobEviction(job_id=ev.job, mode=mode, reason=ev.reason, by=ev.by,
                                         lost_gpu_hours=ev.lost_gpu_hours, command=command))
    if issues:
        raise InputError(issues)
    for job, rows in by_job.items():
        rows.sort()
        tasks = snap.tasks.get(job)
        components = snap.components.get(job)
        if components is not None:  # heterogeneous: each component (task group) its own nodes
            for group, component in sorted(components.items()):
                got = sorted(by_group.get((job, group), []))
                out.starts.append(_start(component, [node for _, node, _ in got], {node: d for _, node, d in got if d}))
        elif tasks is not None:  # an array: each replica is a task of its own
            out.starts += [_start(tasks[r], [node], {node: devs} if devs else {}) for r, node, devs in rows]
            left = tasks[len(rows):]
            if left:
                out.waiting.append(JobWaiting(job, "capacity",
                                              f"the plan starts {len(rows)} of its {len(tasks)} tasks"))
        else:
            out.starts.append(_start(job, [node for _, node, _ in rows], {node: d for _, node, d in rows if d}))
    out.waiting += [JobWaiting(d.job, d.reason, d.detail) for d in plan.deferred]
    out.waiting += [JobWaiting(h.job_id, h.reason, h.detail) for h in snap.held]
    return out
