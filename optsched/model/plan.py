"""The Plan document: what a round decides."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from optsched.model.base import Count, Frozen, Identifier, NonNeg, Positive

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
SolverStatus = Literal["optimal", "feasible", "fallback", "timeout_no_improvement", "heuristic"]


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
    count: int = Field(ge=1)


class Deferred(Frozen):
    """A queued job not admitted this round, with the binding reason."""

    job: Identifier
    reason: DeferReason
    detail: str = ""


class SolverStats(Frozen):
    """Who made the plan and how: status, proven bound and gap where known, wall time (s), seed."""

    name: str
    status: SolverStatus = "heuristic"
    bound: float | None = None
    gap: float | None = None
    wall_s: NonNeg = 0.0
    seed: int = 0
    extra: dict[str, Any] = Field(default_factory=dict)


class Plan(Frozen):
    """The decisions of one round; every queued job is placed or deferred."""

    version: Literal["optsched/v1"] = "optsched/v1"
    placements: list[Placement] = Field(default_factory=list)
    evictions: list[Eviction] = Field(default_factory=list)
    provisioning: list[Provision] = Field(default_factory=list)
    deferred: list[Deferred] = Field(default_factory=list)
    objective: dict[str, float] = Field(default_factory=dict)
    solver: SolverStats = Field(default_factory=lambda: SolverStats(name="manual"))
