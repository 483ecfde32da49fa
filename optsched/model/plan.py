"""The Plan document: what a round decides."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from optsched.model.base import MAX_PROVISIONED_NODES, SCHEMA_ID, Count, Frozen, Identifier, NonNeg, Positive
from optsched.model.stats import SolverStats

OBJECTIVE_TERMS = (
    "admitted_value",
    "disruption",
    "topology",
    "cost",
    "locality",
    "fragmentation",
    "fairness",
    "queue_delay",
)
"""The objective terms every plan reports (see docs/metrics.md for units)."""

DeferReason = Literal[
    "capacity",
    "quota",
    "topology",
    "bandwidth",
    "gang",
    "device_model",
    "selector",
    "spread",
    "ratio",
    "colocate",
    "priority",
    "time_limit",
    "other",
]


class Placement(Frozen):
    """One replica of an admitted job: node, device indices, device share (fractional requests).

    Nodes created by provisioning are named ``<pool>/new-<i>``.
    """

    job: Identifier
    """The admitted queued job (`Job.id`), or a migrated running job placed again."""
    group: Identifier
    """Its task group."""
    replica: Count
    """Replica index within the group, below `replicas.max`."""
    node: Identifier
    """The node (an existing `Node.id`, or `<pool>/new-<i>` for a provisioned one)."""
    devices: list[Count] = Field(default_factory=list)
    """Device indices it takes on the node (whole requests: exactly `gpu` of them; fractional: one)."""
    share: Positive | None = None
    """Share of its one device for a fractional request; None: whole devices."""
    elastic: bool = False
    """True exactly for replicas at or beyond the group's `replicas.min` (elastic ones)."""


class Eviction(Frozen):
    """A running job removed: why, for which job, and the GPU-hours of work lost."""

    job: Identifier
    """The running job removed (`RunningJob.job.id`)."""
    reason: Literal["preempted", "reclaimed", "migrated"]
    """`preempted` (by a job of its tenant), `reclaimed` (by a job of another cohort member), `migrated` (placed
    again in this plan)."""
    by: Identifier | None = None
    """The admitted job it makes room for; required for `preempted` and `reclaimed`."""
    lost_gpu_hours: NonNeg = 0.0
    """GPU-hours of work it loses: (checkpoint_age_s + restart_s) x GPUs / 3600."""


class Provision(Frozen):
    """New nodes of a provisionable pool: ``<pool>/new-0`` .. ``<pool>/new-<count-1>``."""

    pool: Identifier
    """The provisionable pool (`Pool.name`)."""
    count: int = Field(ge=1, le=MAX_PROVISIONED_NODES)
    """Nodes to create (1..100,000, at most the pool's `max_nodes`)."""


class Deferred(Frozen):
    """A queued job not admitted this round, with the binding reason."""

    job: Identifier
    """The queued job not admitted."""
    reason: DeferReason
    """The binding reason: the rule that kept it out (`capacity`, `quota`, `topology`, `priority`, ...)."""
    detail: str = ""
    """What, in words (the flavor and amounts for quota, the rule's numbers)."""


class Plan(Frozen):
    """The decisions of one round; every queued job is placed or deferred."""

    model_config = ConfigDict(json_schema_extra={"$id": SCHEMA_ID.format(document="plan")})

    version: Literal["optsched/v1"] = "optsched/v1"
    """The format version, `optsched/v1`."""
    placements: list[Placement] = Field(default_factory=list)
    """Every replica placed this round, of admitted and migrated jobs."""
    evictions: list[Eviction] = Field(default_factory=list)
    """Running jobs removed, in the order they happen (a reclaim is judged after those listed before it)."""
    provisioning: list[Provision] = Field(default_factory=list)
    """Nodes created in provisionable pools."""
    deferred: list[Deferred] = Field(default_factory=list)
    """Every queued job not admitted, with its reason."""
    objective: dict[str, float] = Field(default_factory=dict)
    """Every objective term of the plan, in docs/metrics.md's units."""
    solver: SolverStats = Field(default_factory=lambda: SolverStats(name="manual"))
    """Who made the plan and how (status, bound, gap, wall time, seed, what it did)."""
