"""The Cluster document: topology, nodes, pools, tenants and running jobs.

Units: cpu in millicores, memory in MiB, bandwidth in Gbps, sizes in bytes, times in seconds,
prices in $ per node-hour.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from optsched.model.base import (
    Bytes,
    Count,
    DeviceCount,
    Frozen,
    Identifier,
    NodeCount,
    NonNeg,
    Positive,
    Priority,
    Seconds,
    Share,
)
from optsched.model.queue import Job, Toleration

NODE_LEVEL = "node"
"""Pseudo topology level below the leaves: one domain per node (usable in `topology`, `spread`)."""


class Domain(Frozen):
    """A switch domain of one topology level; `uplink_gbps` is its link to `parent` (None = unlimited)."""

    id: Identifier
    level: str
    parent: str | None = None
    uplink_gbps: NonNeg | None = None


class Topology(Frozen):
    """Ordered level names from the top (e.g. ``[spine, leaf]``) and their domains."""

    levels: list[Identifier] = Field(min_length=1)
    domains: list[Domain] = Field(min_length=1)


class Network(Frozen):
    """Image pull rates: from the registry, and peer-to-peer inside a leaf (Gbps)."""

    registry_gbps: Positive = 10.0
    p2p_gbps: Positive = 100.0


class DeviceModel(Frozen):
    """An accelerator model: memory (GiB) and default relative speed (H100 = 1.0 by convention)."""

    memory_gib: NonNeg = 0.0
    speed: Positive = 1.0


class Taint(Frozen):
    """A node taint; `NoSchedule` and `NoExecute` need a matching toleration, `PreferNoSchedule` is soft."""

    key: Identifier
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Devices(Frozen):
    """The node's accelerators: `count` devices of one `model`, indices 0..count-1."""

    model: Identifier
    count: DeviceCount
    unhealthy: list[Count] = Field(default_factory=list)


class NodeShape(Frozen):
    """What a node is made of (shared by nodes and provisioning templates)."""

    capacity: dict[Identifier, NonNeg] = Field(default_factory=dict)
    devices: Devices | None = None
    interconnect: list[Annotated[list[Count], Field(min_length=1)]] | None = None
    """Groups of device indices; every group names at least one device (`[[]]` is refused)."""
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)


class Node(NodeShape):
    """A schedulable machine under one leaf domain.

    `interconnect` lists groups of device indices that are fully connected at high bandwidth
    (NVSwitch: one group of 8; Ascend 910B HCCS: two groups of 4); default is one group of all.
    `images` are cached layer digests.
    """

    id: Identifier
    domain: Identifier
    pool: Identifier | None = None
    images: list[str] = Field(default_factory=list)
    healthy: bool = True


class Provisionable(Frozen):
    """Nodes a plan may create in a pool (Karpenter-like): template, target leaf, limit, start-up time."""

    template: Identifier
    domain: Identifier
    max_nodes: NodeCount
    startup_s: Seconds = 0.0


class Pool(Frozen):
    """A pricing pool; `price_per_hour` is per node; spot pools have an interruption rate (1/h)."""

    name: Identifier
    pricing: Literal["reserved", "on_demand", "spot"]
    price_per_hour: NonNeg = 0.0
    interruption_rate_per_hour: NonNeg = 0.0
    provisionable: Provisionable | None = None


class Quota(Frozen):
    """Kueue-style quota of one flavor: nominal, and optional borrowing and lending limits."""

    nominal: NonNeg = 0.0
    borrowing_limit: NonNeg | None = None
    lending_limit: NonNeg | None = None


class BorrowWithinCohort(Frozen):
    """Kueue's borrowWithinCohort: may preempt lower-priority jobs of others while borrowing."""

    policy: Literal["never", "lower_priority"] = "never"
    max_priority_threshold: Priority | None = None


class PreemptionPolicy(Frozen):
    """Kueue's ClusterQueue preemption policy (defaults are Kueue's: never)."""

    within_tenant: Literal["never", "lower_priority", "lower_or_newer_equal_priority"] = "never"
    reclaim_within_cohort: Literal["never", "lower_priority", "any"] = "never"
    borrow_within_cohort: BorrowWithinCohort | None = None


class Tenant(Frozen):
    """A team (Kueue ClusterQueue): cohort, fair-share weight, quotas per flavor.

    A flavor is a device model name (counts GPUs of that model, fractional shares included) or a
    resource name (``cpu``, ``memory``, ``rdma_nics``, ...).
    """

    name: Identifier
    cohort: str | None = None
    weight: Positive = 1.0
    quotas: dict[Identifier, Quota] = Field(default_factory=dict)
    preemption: PreemptionPolicy = Field(default_factory=PreemptionPolicy)


class Layer(Frozen):
    """One image layer."""

    digest: Identifier
    bytes: Bytes


class Dataset(Frozen):
    """A dataset (or checkpoint) and the domains (any level) that cache it."""

    bytes: Bytes
    cached_at: list[Identifier] = Field(default_factory=list)


class ReplicaPlacement(Frozen):
    """Where one replica of a running job sits: node, device indices, share (fractional GPUs)."""

    group: Identifier
    replica: Count
    node: Identifier
    devices: list[Count] = Field(default_factory=list)
    share: Share | None = None


class RunningJob(Frozen):
    """A job already placed: its spec, start time, work since its last checkpoint, placement."""

    job: Job
    started_at: Seconds = 0.0
    checkpoint_age_s: Seconds = 0.0
    restart_s: Seconds = 0.0
    migratable: bool = False
    placements: list[ReplicaPlacement] = Field(min_length=1)


class Cluster(Frozen):
    """The state of the cluster at the start of a round."""

    version: Literal["optsched/v1"] = "optsched/v1"
    topology: Topology
    network: Network = Field(default_factory=Network)
    device_models: dict[Identifier, DeviceModel] = Field(default_factory=dict)
    pools: list[Pool] = Field(default_factory=list)
    node_templates: dict[Identifier, NodeShape] = Field(default_factory=dict)
    nodes: list[Node] = Field(min_length=1)
    images: dict[Identifier, list[Layer]] = Field(default_factory=dict)
    datasets: dict[Identifier, Dataset] = Field(default_factory=dict)
    tenants: list[Tenant] = Field(default_factory=list)
    running: list[RunningJob] = Field(default_factory=list)


__all__ = [
    "NODE_LEVEL",
    "BorrowWithinCohort",
    "Cluster",
    "Dataset",
    "DeviceModel",
    "Devices",
    "Domain",
    "Layer",
    "Network",
    "Node",
    "NodeShape",
    "Pool",
    "PreemptionPolicy",
    "Provisionable",
    "Quota",
    "ReplicaPlacement",
    "RunningJob",
    "Taint",
    "Tenant",
    "Toleration",
    "Topology",
]
