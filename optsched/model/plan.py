"""The Plan document: what a round decides."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from optsched.model.base import MAX_PROVISIONED_NODES, Count, Frozen, Identifier, NonNeg, Positive
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
    group: Identifier
    replica: Count
    node: Identifier
    devices: list[Count] = Field(default_factory=list)
    share: Positive | None = None
    elastic: bool = False


class Eviction(Frozen):
    """A running job removed: why, for which job, and the GPU-hours of work lost."""

    job: Identifier
    reason: Literal["preempted", "reclaimed", "migrated"]
    by: Identifier | None = None
    lost_gpu_hours: NonNeg = 0.0


class Provision(Frozen):
    """New nodes of a provisionable pool: ``<pool>/new-0`` .. ``<pool>/new-<count-1>``."""

    pool: Identifier
    count: int = Field(ge=1, le=MAX_PROVISIONED_NODES)


class Deferred(Frozen):
    """A queued job not admitted this round, with the binding reason."""

    job: Identifier
    reason: DeferReason
    detail: str = ""


class Plan(Frozen):
    """The decisions of one round; every queued job is placed or deferred."""

    version: Literal["optsched/v1"] = "optsched/v1"
    placements: list[Placement] = Field(default_factory=list)
    evictions: list[Eviction] = Field(default_factory=list)
    provisioning: list[Provision] = Field(default_factory=list)
    deferred: list[Deferred] = Field(default_factory=list)
    objective: dict[str, float] = Field(default_factory=dict)
    solver: SolverStats = Field(default_factory=lambda: SolverStats(name="manual"))
