"""The Cluster document: topology, nodes, pools, tenants and running jobs.

Units: cpu in millicores, memory in MiB, bandwidth in Gbps, sizes in bytes, times in seconds,
prices in $ per node-hour.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from optsched.model.base import (
    SCHEMA_ID,
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
    """Unique name of the domain (a switch: spine, leaf, ...)."""
    level: str
    """Its topology level, one of `Topology.levels`."""
    parent: str | None = None
    """The domain of the level above it; required below the top level."""
    uplink_gbps: NonNeg | None = None
    """Bandwidth of its link to `parent`, Gbps; None: unlimited."""


class Topology(Frozen):
    """Ordered level names from the top (e.g. ``[spine, leaf]``) and their domains."""

    levels: list[Identifier] = Field(min_length=1)
    """Level names from the top (e.g. `[spine, leaf]`); `node` is reserved for the built-in per-node level."""
    domains: list[Domain] = Field(min_length=1)
    """Every switch domain; each node hangs under a domain of the last level."""


class Network(Frozen):
    """Image pull rates: from the registry, and peer-to-peer inside a leaf (Gbps)."""

    registry_gbps: Positive = 10.0
    """Image pull rate from the registry, Gbps per node."""
    p2p_gbps: Positive = 100.0
    """Image pull rate from a peer node in the same leaf, Gbps."""


class DeviceModel(Frozen):
    """An accelerator model: memory (GiB) and default relative speed (H100 = 1.0 by convention)."""

    memory_gib: NonNeg = 0.0
    """Memory of one device, GiB."""
    speed: Positive = 1.0
    """Default relative speed (H100 = 1.0 by convention), used where a job lists no `models`."""


class Taint(Frozen):
    """A node taint; `NoSchedule` and `NoExecute` need a matching toleration, `PreferNoSchedule` is soft."""

    key: Identifier
    """Taint key, as in Kubernetes."""
    value: str | None = None
    """Taint value; None matches a toleration by key alone."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"
    """`NoSchedule` and `NoExecute` need a matching toleration; `PreferNoSchedule` is soft."""


class Devices(Frozen):
    """The node's accelerators: `count` devices of one `model`, indices 0..count-1."""

    model: Identifier
    """The device model, a key of `Cluster.device_models`."""
    count: DeviceCount
    """Number of devices on the node (0..64), indexed 0..count-1."""
    unhealthy: list[Count] = Field(default_factory=list)
    """Indices of devices that may not be used."""


class NodeShape(Frozen):
    """What a node is made of (shared by nodes and provisioning templates)."""

    capacity: dict[Identifier, NonNeg] = Field(default_factory=dict)
    """Allocatable amount per resource: `cpu` in millicores, `memory` in MiB, `rdma_nics` in NICs, other names in
    their own unit."""
    devices: Devices | None = None
    """The node's accelerators; None: a CPU-only node."""
    interconnect: list[Annotated[list[Count], Field(min_length=1)]] | None = None
    """Groups of device indices; every group names at least one device (`[[]]` is refused)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Node labels, matched by jobs' `node_selector`."""
    taints: list[Taint] = Field(default_factory=list)
    """Node taints, tolerated by jobs' `tolerations`."""


class Node(NodeShape):
    """A schedulable machine under one leaf domain.

    `interconnect` lists groups of device indices that are fully connected at high bandwidth
    (NVSwitch: one group of 8; Ascend 910B HCCS: two groups of 4); default is one group of all.
    `images` are cached layer digests.
    """

    id: Identifier
    """Unique node name; may not contain `/` (provisioned nodes are `<pool>/new-<i>`)."""
    domain: Identifier
    """The leaf domain (a domain of the last topology level) the node hangs under."""
    pool: Identifier | None = None
    """Its pricing pool (a `Pool.name`); required when pools are defined."""
    images: list[str] = Field(default_factory=list)
    """Image layer digests cached on the node."""
    healthy: bool = True
    """False: nothing new may be placed on the node."""


class Provisionable(Frozen):
    """Nodes a plan may create in a pool (Karpenter-like): template, target leaf, limit, start-up time."""

    template: Identifier
    """The `Cluster.node_templates` entry new nodes are made from."""
    domain: Identifier
    """The leaf domain new nodes join."""
    max_nodes: NodeCount
    """Most nodes a plan may create in the pool (0..100,000)."""
    startup_s: Seconds = 0.0
    """Seconds from request to a usable node (reported, not yet enforced)."""


class Pool(Frozen):
    """A pricing pool; `price_per_hour` is per node; spot pools have an interruption rate (1/h)."""

    name: Identifier
    """Unique pool name, referenced by `Node.pool`."""
    pricing: Literal["reserved", "on_demand", "spot"]
    """How its nodes are paid: `reserved` (sunk), `on_demand` or `spot` (interruptible)."""
    price_per_hour: NonNeg = 0.0
    """Price of one node, $ per node-hour."""
    interruption_rate_per_hour: NonNeg = 0.0
    """Spot interruptions per node-hour (1/h); 0 for other pools."""
    provisionable: Provisionable | None = None
    """Nodes a plan may create in this pool; None: a fixed pool."""


class Quota(Frozen):
    """Kueue-style quota of one flavor: nominal, and optional borrowing and lending limits."""

    nominal: NonNeg = 0.0
    """Quota the tenant owns of the flavor: GPUs (shares as fractions) for a device model, the resource's unit
    (millicores, MiB, ...) for a resource."""
    borrowing_limit: NonNeg | None = None
    """Most the tenant may borrow beyond nominal from its cohort, same unit; None: no limit."""
    lending_limit: NonNeg | None = None
    """Most of its unused nominal the tenant lends to its cohort, same unit; None: all of it."""


class BorrowWithinCohort(Frozen):
    """Kueue's borrowWithinCohort: may preempt lower-priority jobs of others while borrowing."""

    policy: Literal["never", "lower_priority"] = "never"
    """`lower_priority`: while borrowing, its jobs may reclaim lower-priority jobs of other tenants (and preempt
    above nominal quota, rule 5); `never`: they may not."""
    max_priority_threshold: Priority | None = None
    """Only victims of at most this priority; None: any lower priority."""


class PreemptionPolicy(Frozen):
    """Kueue's ClusterQueue preemption policy (defaults are Kueue's: never)."""

    within_tenant: Literal["never", "lower_priority", "lower_or_newer_equal_priority"] = "never"
    """Which of the tenant's own running jobs its jobs may preempt: `never`, `lower_priority`, or
    `lower_or_newer_equal_priority` (also equal priority, submitted later)."""
    reclaim_within_cohort: Literal["never", "lower_priority", "any"] = "never"
    """Which running jobs of cohort members that borrow its jobs may reclaim: `never`, `lower_priority`, or `any`."""
    borrow_within_cohort: BorrowWithinCohort | None = None
    """Preemption while the tenant borrows (Kueue's borrowWithinCohort); None: never."""


class ResourceFlavor(Frozen):
    """Kueue's ResourceFlavor as a node set: the nodes (and node templates) whose labels include
    every entry of `node_labels`. A tenant's quota key ``<flavor>/<resource>`` (``gpu``, ``cpu``,
    ``memory``, ...) then counts that resource of the replicas on the flavor's nodes, so two
    flavors of one GPU model (reserved and spot H100s) carry separate quotas."""

    name: Identifier
    """Unique flavor name (no `/`), the first part of quota keys ``<flavor>/<resource>``."""
    node_labels: dict[str, str] = Field(default_factory=dict)
    """Labels a node must carry to belong to the flavor; empty: every node."""


class FlavorFungibility(Frozen):
    """Kueue's FlavorFungibility of a ClusterQueue: whether a workload whose current flavor fits
    only by borrowing, or only by preempting, takes it or tries the next flavor first (Kueue's
    defaults: take a borrowing fit, try the next flavor before preempting). The `kueue` baseline
    follows it; the validator and the models do not (they judge plans, not search orders)."""

    when_can_borrow: Literal["may_stop_search", "try_next_flavor"] = "may_stop_search"
    """`may_stop_search`: a flavor that fits by borrowing is taken; `try_next_flavor`: a later one
    that fits without borrowing is preferred."""
    when_can_preempt: Literal["may_stop_search", "try_next_flavor"] = "try_next_flavor"
    """`try_next_flavor`: a flavor that needs preemption is passed over for a later one that fits;
    `may_stop_search`: the first flavor that may preempt is taken."""


FairShareStrategy = Literal["less_than_or_equal_to_final_share", "less_than_initial_share"]
"""Kueue's fair-sharing preemption strategies (KEP-1714 rules S2-a and S2-b)."""
DEFAULT_FAIR_SHARE_STRATEGIES: tuple[FairShareStrategy, ...] = ("less_than_or_equal_to_final_share",
                                                               "less_than_initial_share")
"""Kueue's default: S2-a, then S2-b."""


class FairSharing(Frozen):
    """Kueue's fair sharing (its Configuration's `fairSharing`): a tenant reclaims from other
    tenants of its cohort by comparing dominant resource shares instead of by
    `borrow_within_cohort`. A tenant's share is, over resources, the most it borrows beyond its
    nominal quota (summed over the flavors of the resource) per 1,000 of what its cohort can lend
    of that resource, divided by its `weight` (`optsched.concerns.tenancy.fairshare`). With it, a
    preemptor above its nominal quota may reclaim a lower-priority job (`reclaim_within_cohort:
    lower_priority`, or any job with `any`) of a tenant that borrows, when a strategy holds:
    `less_than_or_equal_to_final_share` (S2-a: the preemptor's share with its job is at most the
    victim's tenant's share after the eviction), then, for the rest,
    `less_than_initial_share` (S2-b: below that tenant's share before it). A preemptor whose
    tenant stays within nominal reclaims as without fair sharing (Kueue's
    FairSharingPreemptWithinNominal)."""

    preemption_strategies: list[FairShareStrategy] = Field(default_factory=lambda: list(DEFAULT_FAIR_SHARE_STRATEGIES))
    """The strategies in the order they are tried (Kueue's default: both, S2-a first); as Kueue
    validates it, one strategy, or S2-a then S2-b."""

    @model_validator(mode="after")
    def _kueue_sequences(self) -> FairSharing:
        allowed = (["less_than_or_equal_to_final_share"], ["less_than_initial_share"],
                   ["less_than_or_equal_to_final_share", "less_than_initial_share"])
        if self.preemption_strategies not in [list(a) for a in allowed]:
            raise ValueError("preemption_strategies must be one strategy, or less_than_or_equal_to_final_share "
                             "then less_than_initial_share (Kueue's validation)")
        return self


class AdmissionFairSharing(Frozen):
    """Kueue's admission fair sharing (its Configuration's `admissionFairSharing`): in a tenant
    that enables it (`Tenant.admission_fair_sharing`), pending jobs are admitted in the order of
    their LocalQueues' historical usage (`LocalQueue.consumed`, decayed by Kueue), lowest first,
    then by priority and age; each admission adds an entry penalty to its LocalQueue's usage, so
    one queue cannot take a round by submitting many jobs at once."""

    usage_half_life_s: NonNeg = 7 * 24 * 3600.0
    """Kueue's `usageHalfLifeTime`, seconds: how fast past usage decays (0: the penalty is 0)."""
    usage_sampling_interval_s: Positive = 300.0
    """Kueue's `usageSamplingInterval`, seconds (default 5 min): the entry penalty of an admitted
    job is its requests x (1 - 0.5^(interval / half life))."""
    resource_weights: dict[Identifier, NonNeg] = Field(default_factory=dict)
    """Weight per resource (`gpu` for GPUs, or a resource name) in a LocalQueue's usage; 1 when
    not listed. Usage is summed in Kueue's units (cores, bytes, devices), as its weights assume."""


class LocalQueue(Frozen):
    """Kueue's LocalQueue: a queue of one tenant (ClusterQueue) that jobs name (`Job.local_queue`),
    with its fair-sharing weight and its decayed usage history (for admission fair sharing)."""

    name: Identifier
    """Unique name (Kueue's `<namespace>/<name>`; any identifier here)."""
    tenant: Identifier
    """The tenant (ClusterQueue) it feeds."""
    weight: NonNeg = 1.0
    """Kueue's `spec.fairSharing.weight`: its usage counts divided by it (0: it goes last)."""
    consumed: dict[Identifier, NonNeg] = Field(default_factory=dict)
    """Its decayed historical usage per resource (Kueue's `status.fairSharing.admissionFairSharingStatus.
    consumedResources`): `gpu` in GPUs, `cpu` in millicores, `memory` in MiB, others in their unit."""


class Cohort(Frozen):
    """Kueue's Cohort object: a node of a cohort tree. Tenants name their (leaf) cohort; a cohort
    may have a `parent` and quotas of its own, lent to its subtree. Borrowing and lending then
    follow the tree (Kueue's hierarchical cohorts): what a subtree lends up is its quota past each
    member's local share (nominal minus lending limit), and every node's usage stays within its
    subtree's quota plus its borrowing limit, the root's within its subtree's quota."""

    name: Identifier
    """Unique cohort name, as tenants' `cohort` and other cohorts' `parent` name it."""
    parent: Identifier | None = None
    """The cohort above it; None: a root."""
    quotas: dict[Identifier, Quota] = Field(default_factory=dict)
    """The cohort's own quota per flavor (keys as `Tenant.quotas`), shared by its subtree."""
    weight: Positive = 1.0
    """Fair-share weight (Kueue's `spec.fairSharing.weight`) of the cohort against its siblings
    under fair sharing."""


class Tenant(Frozen):
    """A team (Kueue ClusterQueue): cohort, fair-share weight, quotas per flavor.

    A flavor is a device model name (counts GPUs of that model, fractional shares included) or a
    resource name (``cpu``, ``memory``, ``rdma_nics``, ...).
    """

    name: Identifier
    """Unique tenant name (a Kueue ClusterQueue), referenced by `Job.tenant`."""
    cohort: str | None = None
    """The cohort it borrows from and lends to; None: it uses only its nominal quota."""
    weight: Positive = 1.0
    """Fair-share weight (positive), used by fair-sharing order and the `fairness` term."""
    quotas: dict[Identifier, Quota] = Field(default_factory=dict)
    """Quota per flavor, in the tenant's flavor order: a device model name (its GPUs on every node),
    a resource name (`cpu`, `memory`, ...: on every node), or ``<resource flavor>/<resource>``
    (``gpu`` or a resource, on the flavor's nodes)."""
    preemption: PreemptionPolicy = Field(default_factory=PreemptionPolicy)
    """Kueue's ClusterQueue preemption policy; defaults are Kueue's (never)."""
    flavor_fungibility: FlavorFungibility = Field(default_factory=FlavorFungibility)
    """How the `kueue` baseline walks the tenant's flavors (Kueue's defaults)."""
    admission_fair_sharing: bool = False
    """Kueue's `admissionScope.admissionMode: UsageBasedAdmissionFairSharing`: its pending jobs go in
    the order of their LocalQueues' usage (with `Cluster.admission_fair_sharing`)."""


class Layer(Frozen):
    """One image layer."""

    digest: Identifier
    """Content digest of the layer."""
    bytes: Bytes
    """Size of the layer, bytes."""


class Dataset(Frozen):
    """A dataset (or checkpoint) and the domains (any level) that cache it."""

    bytes: Bytes
    """Size of the dataset, bytes."""
    cached_at: list[Identifier] = Field(default_factory=list)
    """Domains (any level) that hold a cached copy."""


class ReplicaPlacement(Frozen):
    """Where one replica of a running job sits: node, device indices, share (fractional GPUs)."""

    group: Identifier
    """The job's task group this replica belongs to."""
    replica: Count
    """Replica index within the group, below the group's `replicas.max`."""
    node: Identifier
    """The node it runs on."""
    devices: list[Count] = Field(default_factory=list)
    """Device indices it holds on that node."""
    share: Share | None = None
    """Share of its one device for a fractional request (0 < share <= 1); None: whole devices."""


class RunningJob(Frozen):
    """A job already placed: its spec, start time, work since its last checkpoint, placement."""

    job: Job
    """The job's spec, as queued."""
    started_at: Seconds = 0.0
    """When it started, seconds (the clock of `Queue.now`)."""
    checkpoint_age_s: Seconds = 0.0
    """Seconds of work since its last checkpoint, lost if it is evicted."""
    restart_s: Seconds = 0.0
    """Seconds an evicted job needs to start again, also lost."""
    migratable: bool = False
    """Whether a plan may evict it and place it again in the same round (`migrated`)."""
    placements: list[ReplicaPlacement] = Field(min_length=1)
    """Where each of its replicas sits."""


class Cluster(Frozen):
    """The state of the cluster at the start of a round."""

    model_config = ConfigDict(json_schema_extra={"$id": SCHEMA_ID.format(document="cluster")})

    version: Literal["optsched/v1"] = "optsched/v1"
    """The format version, `optsched/v1`."""
    topology: Topology
    """Switch levels and domains, from the top."""
    network: Network = Field(default_factory=Network)
    """Image pull rates."""
    device_models: dict[Identifier, DeviceModel] = Field(default_factory=dict)
    """Accelerator models by name."""
    pools: list[Pool] = Field(default_factory=list)
    """Pricing pools; when given, every node names one."""
    node_templates: dict[Identifier, NodeShape] = Field(default_factory=dict)
    """Node shapes provisionable pools create nodes from, by name."""
    nodes: list[Node] = Field(min_length=1)
    """Every schedulable node (at least one)."""
    images: dict[Identifier, list[Layer]] = Field(default_factory=dict)
    """Container images by name: their layers."""
    datasets: dict[Identifier, Dataset] = Field(default_factory=dict)
    """Datasets and checkpoints by name: size and where they are cached."""
    resource_flavors: list[ResourceFlavor] = Field(default_factory=list)
    """Kueue ResourceFlavors as node sets, for quota keys ``<flavor>/<resource>``."""
    tenants: list[Tenant] = Field(default_factory=list)
    """Teams with quotas (Kueue ClusterQueues); none: quota is not managed."""
    cohorts: list[Cohort] = Field(default_factory=list)
    """Kueue Cohort objects (parents and cohort quotas); a cohort tenants name but that is not
    listed is a root without quota of its own."""
    local_queues: list[LocalQueue] = Field(default_factory=list)
    """Kueue LocalQueues that jobs name (`Job.local_queue`), with weights and usage history."""
    admission_fair_sharing: AdmissionFairSharing | None = None
    """Kueue's admission fair sharing (its Configuration's `admissionFairSharing`); None: off."""
    fair_sharing: FairSharing | None = None
    """Kueue's fair sharing of the cohorts (its Configuration's `fairSharing`); None: off (classic
    preemption: reclaim while borrowing only by `borrow_within_cohort`)."""
    running: list[RunningJob] = Field(default_factory=list)
    """Jobs already placed at the start of the round."""


__all__ = [
    "NODE_LEVEL",
    "AdmissionFairSharing",
    "BorrowWithinCohort",
    "Cluster",
    "Cohort",
    "Dataset",
    "DeviceModel",
    "Devices",
    "Domain",
    "FairShareStrategy",
    "FairSharing",
    "FlavorFungibility",
    "Layer",
    "LocalQueue",
    "Network",
    "Node",
    "NodeShape",
    "Pool",
    "PreemptionPolicy",
    "Provisionable",
    "Quota",
    "ReplicaPlacement",
    "ResourceFlavor",
    "RunningJob",
    "Taint",
    "Tenant",
    "Toleration",
    "Topology",
]
