"""What Slurm's JSON does not say about a cluster: which GRES are accelerators and what their
types are as device models, how jobs map to tenants, how preemption is done.

Defaults follow a GPU partition as Slurm documents it: GRES `gpu` with its type as the model
(`gpu:h100:8`), `preempt/qos` with the preempted job's QOS `PreemptMode` (`REQUEUE` where unset),
one queue for the whole cluster (Slurm has one scheduler queue; its accounts are not quota
tenants unless asked: `tenant_by`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from optsched.model.base import Frozen, Identifier, NonNeg, Positive

PARTITION_LABEL = "slurm.schedmd.com/partition-"
"""Node label prefix: a node in partition `p` carries the label `slurm.schedmd.com/partition-p: "true"`,
and a job submitted to `p` selects it."""
FEATURE_LABEL = "slurm.schedmd.com/feature-"
"""Node label prefix of an active feature (`--constraint` selects it)."""
NODE_LABEL = "slurm.schedmd.com/node"
"""Node label with the node's name (`--nodelist` / `--exclude` select on it)."""
EXCLUSIVE_RESOURCE = "slurm_node_share"
"""A resource every node has `EXCLUSIVE_SHARES` of when some job asks for a whole node
(`--exclusive`): such a job takes all of them, every other job one, so an exclusive job never
shares a node and others share as before (up to `EXCLUSIVE_SHARES - 1` per node)."""
EXCLUSIVE_SHARES = 1000


class SlurmConfig(Frozen):
    """How Slurm's nodes, jobs and QOS are read into a round, and how a plan is written back."""

    gpu_gres: Identifier = "gpu"
    """The GRES name that counts accelerators (`gres.conf` `Name=`)."""
    models: dict[Identifier, Identifier] = Field(default_factory=dict)
    """GRES type -> device model name (`h100` -> `H100-SXM`); a type not listed is its own model;
    an untyped GRES (`gpu:4`) is the model `gpu`."""
    device_memory_gib: dict[Identifier, NonNeg] = Field(default_factory=dict)
    """Device model -> memory of one device, GiB (Slurm does not report it); absent: 0."""
    speeds: dict[Identifier, Positive] = Field(default_factory=dict)
    """Device model -> relative speed (`DeviceModel.speed`); absent: 1."""
    uplinks_gbps: dict[str, NonNeg] = Field(default_factory=dict)
    """Switch or block name (topology.conf) -> its uplink, Gbps. topology.conf's `LinkSpeed` is in
    arbitrary units, so it is not read; absent: unlimited."""
    tenant_by: Literal["cluster", "account", "partition", "qos"] = "cluster"
    """What a tenant is: `cluster`, one tenant `slurm` (Slurm's one queue, in which QOS preemption
    works across accounts); or each job's account, partition or QOS. Tenants do not preempt one
    another (they have no quotas to reclaim), so QOS preemption works only within a tenant."""
    preempt_type: Literal["qos", "partition_prio"] = "qos"
    """Slurm's `PreemptType`: `qos` (`preempt/qos`: a QOS preempts the QOS it lists), or
    `partition_prio` (`preempt/partition_prio`: jobs of a partition with a higher `PriorityTier`
    preempt those of lower ones; needs the partitions)."""
    preempt_mode: Literal["requeue", "cancel", "off"] = "requeue"
    """Slurm's cluster-wide `PreemptMode`, used for a job whose QOS has none (or when no QOS is
    given): `requeue` (`scontrol requeue`), `cancel` (`scancel`), `off` (nothing is preemptible).
    `SUSPEND` and `GANG` are read as not preemptible: a suspended job keeps its memory."""
    preempt_exempt_s: NonNeg = 0.0
    """Slurm's `PreemptExemptTime`, seconds a job runs before it may be preempted, for a QOS that
    sets none."""
    restart_s: NonNeg = 0.0
    """Seconds a requeued job takes to start again (lost work on eviction, with its run time)."""
