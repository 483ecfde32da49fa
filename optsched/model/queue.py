"""The Queue document: jobs waiting for this round, with task groups and placement wishes."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer, model_validator

from optsched.model.base import MAX_COUNT, Count, Frozen, Identifier, NonNeg, Positive, Priority, Seconds


class Toleration(Frozen):
    """Tolerates taints with `key` (None: every key); `Equal` also matches the value."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Exists"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None


class Replicas(Frozen):
    """Replica bounds of a task group: `min` for admission, up to `max` elastic."""

    min: Count = 1
    max: Count = 1

    @model_validator(mode="after")
    def _ordered(self) -> Replicas:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) < min ({self.min})")
        if self.max < 1:
            raise ValueError("max must be at least 1")
        return self


class Request(Frozen):
    """Per-replica request. `gpu` is a whole count (1, 2, 8, ...) or a share of one device (0 < gpu < 1).
    An unset `cpu` or `memory` is 0 for fit and quota, and 100 millicores / 200 MiB in
    kube-scheduler's scores (best-fit, spread), as kube-scheduler counts a container without
    requests; an explicit 0 is 0 everywhere.

    `resources` holds other named, node-capacity resources (e.g. ``ephemeral_storage``).
    """

    cpu: NonNeg = 0.0
    memory: NonNeg = 0.0
    gpu: NonNeg = 0.0
    rdma_nics: NonNeg = 0.0
    resources: dict[Identifier, NonNeg] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _unset_stays_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An unset cpu or memory request is written as unset: kube-scheduler's scores count it as
        100 millicores / 200 MiB, an explicit 0 as 0 (`optsched.problem.NONZERO_CPU`)."""
        data: dict[str, Any] = handler(self)
        for name in ("cpu", "memory"):
            if name not in self.model_fields_set:
                data.pop(name, None)
        return data

    @field_validator("gpu")
    @classmethod
    def _whole_or_fraction(cls, v: float) -> float:
        if v >= 1 and not float(v).is_integer():
            raise ValueError(f"gpu must be a whole count or a fraction below 1, got {v}")
        if 0 < v < 1 and round(v * 1000) == 0:
            raise ValueError(f"gpu share {v} is below 1/1000 of a device")
        return v

    @property
    def is_fractional(self) -> bool:
        """True when the replica takes a share of one device."""
        return 0 < self.gpu < 1

    @property
    def whole_gpus(self) -> int:
        """Whole devices the replica takes (0 for fractional or CPU-only)."""
        return int(self.gpu) if self.gpu >= 1 else 0


class Spread(Frozen):
    """PodTopologySpread-like: replicas over the level's eligible domains differ by <= max_skew."""

    level: Identifier
    max_skew: int = Field(default=1, ge=1, le=MAX_COUNT)


class TaskGroup(Frozen):
    """Identical replicas of one role (worker, learner, env, ...)."""

    name: Identifier
    replicas: Replicas = Field(default_factory=Replicas)
    request: Request = Field(default_factory=Request)
    models: dict[Identifier, Positive] | None = None
    device_affinity: Literal["none", "preferred", "required"] = "none"
    image: Identifier | None = None
    datasets: list[Identifier] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    spread: Spread | None = None


class TopologyWish(Frozen):
    """All replicas inside one domain of `level` (`required`) or in as few as possible (`preferred`)."""

    level: Identifier
    mode: Literal["required", "preferred"] = "preferred"


class Ratio(Frozen):
    """`group` has between `min` and `max` replicas per replica of group `per`."""

    group: Identifier
    per: Identifier
    min: NonNeg = 0.0
    max: NonNeg | None = None


class Colocate(Frozen):
    """The listed groups share one domain of `level`."""

    groups: list[Identifier] = Field(min_length=2)
    level: Identifier


class Job(Frozen):
    """A job: tenant, priority, task groups and its placement wishes."""

    id: Identifier
    tenant: Identifier = "default"
    priority: Priority = 0
    submitted_at: Seconds = 0.0
    deadline: Seconds | None = None
    gang: bool | None = None
    topology: TopologyWish | None = None
    bandwidth_gbps: NonNeg = 0.0
    spot: Literal["forbidden", "allowed", "preferred"] = "allowed"
    preemptible: bool = False
    checkpoint_interval_s: Seconds = 3600.0
    groups: list[TaskGroup] = Field(min_length=1)
    ratios: list[Ratio] = Field(default_factory=list)
    colocate: list[Colocate] = Field(default_factory=list)

    @property
    def is_gang(self) -> bool:
        """Gang default: true when the job needs more than one replica in all."""
        if self.gang is not None:
            return self.gang
        return sum(g.replicas.min for g in self.groups) > 1

    @property
    def min_gpus(self) -> float:
        """GPUs (shares included) of the job at its minimum replica counts."""
        return math.fsum(g.replicas.min * g.request.gpu for g in self.groups)


class Queue(Frozen):
    """The jobs waiting at time `now` (seconds, same clock as `submitted_at`)."""

    version: Literal["optsched/v1"] = "optsched/v1"
    now: Seconds = 0.0
    jobs: list[Job] = Field(default_factory=list)
