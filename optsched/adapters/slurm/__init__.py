"""Slurm in and out: nodes, jobs, partitions, QOS (Slurm's JSON) and topology.conf -> a round's
Cluster and Queue (`snapshot`); a Plan -> preemptions and node-list updates (`actions`).

Reads what `scontrol show nodes --json`, `squeue --json`, `scontrol show partitions --json` and
`sacctmgr show qos --json` print (and slurmrestd answers: data_parser v0.0.39 to v0.0.44). Needs
the `slurm` extra (`pip install 'optsched[slurm]'`: python-hostlist, for hostlist expressions).
docs/integration.md says what is read and what is not yet.

    >>> snap = snapshot(json.load(open("nodes.json")), json.load(open("jobs.json")),
    ...                 qos=json.load(open("qos.json")), topology=open("topology.conf").read())
    >>> plan = optsched.solve(snap.cluster, snap.queue, time_limit=1.0)
    >>> for command in actions(plan, snap).commands(): subprocess.run(command, check=True)
"""

from __future__ import annotations

from optsched.adapters.slurm.actions import JobEviction, JobStart, JobWaiting, SlurmActions, actions
from optsched.adapters.slurm.config import SlurmConfig
from optsched.adapters.slurm.jobs import HeldJob
from optsched.adapters.slurm.snapshot import SlurmSnapshot, snapshot

__all__ = [
    "HeldJob",
    "JobEviction",
    "JobStart",
    "JobWaiting",
    "SlurmActions",
    "SlurmConfig",
    "SlurmSnapshot",
    "actions",
    "snapshot",
]
