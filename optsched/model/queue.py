"""The Queue document: jobs waiting for this round, with task groups and placement wishes."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from optsched.model.base import MAX_COUNT, SCHEMA_ID, Count, Frozen, Identifier, NonNeg, Positive, Priority, Seconds


class Toleration(Frozen):
    """Tolerates taints with `key` (None: every key); `Equal` also matches the value."""

    key: str | None = None
    """Taint key it tolerates; None: every key (with `Exists`)."""
    operator: Literal["Exists", "Equal"] = "Exists"
    """`Exists` matches any value of the key; `Equal` only `value`."""
    value: str | None = None
    """The taint value `Equal` matches."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """The taint effect it tolerates; None: every effect."""


class NodeSelectorRequirement(Frozen):
    """One expression of a required node affinity term, as Kubernetes' NodeSelectorRequirement:
    `In` (the label is set to one of `values`), `NotIn` (unset, or set to none of them), `Exists`,
    `DoesNotExist`, `Gt` / `Lt` (set to an integer above / below the one value)."""

    key: Identifier
    """The node label key."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    """How the label is compared with `values`."""
    values: list[str] = Field(default_factory=list)
    """`In`/`NotIn`: at least one value; `Exists`/`DoesNotExist`: none; `Gt`/`Lt`: one integer."""

    @model_validator(mode="after")
    def _values_fit_operator(self) -> NodeSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"{self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"{self.operator} takes no values")
        if self.operator in ("Gt", "Lt"):
            if len(self.values) != 1:
                raise ValueError(f"{self.operator} takes exactly one value")
            try:
                int(self.values[0])
            except ValueError:
                raise ValueError(f"{self.operator} takes an integer, got {self.values[0]!r}") from None
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether a node with `labels` satisfies the expression (Kubernetes' semantics)."""
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        try:
            number = int(value) if value is not None else None
        except ValueError:
            return False
        if number is None:
            return False
        bound = int(self.values[0])
        return number > bound if self.operator == "Gt" else number < bound


class NodeSelectorTerm(Frozen):
    """A term of a required node affinity: a node matches when it satisfies every expression."""

    match_expressions: list[NodeSelectorRequirement] = Field(min_length=1)
    """Expressions a node must all satisfy (at least one: Kubernetes' empty term matches no node)."""

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether a node with `labels` satisfies every expression."""
        return all(e.matches(labels) for e in self.match_expressions)


class Replicas(Frozen):
    """Replica bounds of a task group: `min` for admission, up to `max` elastic."""

    min: Count = 1
    """Replicas the group needs to be admitted (0: an elastic-only group)."""
    max: Count = 1
    """Most replicas the group may get (at least 1 and at least `min`); those beyond `min` are elastic."""

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
    """Millicores per replica."""
    memory: NonNeg = 0.0
    """MiB per replica."""
    gpu: NonNeg = 0.0
    """Devices per replica: a whole count, or a share 0 < gpu < 1 of one device (at least 1/1000)."""
    rdma_nics: NonNeg = 0.0
    """RDMA NICs per replica."""
    resources: dict[Identifier, NonNeg] = Field(default_factory=dict)
    """Other node-capacity resources per replica, by name, in the unit of `NodeShape.capacity`."""

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
    """The topology level (or `node`) replicas spread over."""
    max_skew: int = Field(default=1, ge=1, le=MAX_COUNT)
    """Most the replica counts of two eligible domains of the level may differ by."""


class TaskGroup(Frozen):
    """Identical replicas of one role (worker, learner, env, ...)."""

    name: Identifier
    """Unique name of the group within its job."""
    replicas: Replicas = Field(default_factory=Replicas)
    """Replica bounds: `min` to be admitted, up to `max`."""
    request: Request = Field(default_factory=Request)
    """What one replica asks for."""
    models: dict[Identifier, Positive] | None = None
    """Device models a replica may run on, with its relative speed there (positive); None: any model at
    `DeviceModel.speed`."""
    device_affinity: Literal["none", "preferred", "required"] = "none"
    """`required`: a replica's devices in one interconnect group (whole groups when larger); `preferred`: a wish;
    `none`."""
    image: Identifier | None = None
    """Container image (a key of `Cluster.images`), for image locality."""
    datasets: list[Identifier] = Field(default_factory=list)
    """Datasets (keys of `Cluster.datasets`) it reads, for data locality."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Labels a node must carry (all of them)."""
    node_affinity: list[NodeSelectorTerm] = Field(default_factory=list)
    """Required node affinity (Kubernetes' `requiredDuringSchedulingIgnoredDuringExecution`): a node
    must match at least one term; empty: no rule. Applies together with `node_selector`."""
    tolerations: list[Toleration] = Field(default_factory=list)
    """Taints it tolerates."""
    spread: Spread | None = None
    """Spread of its replicas over a level's domains; None: no spread rule."""


class TopologyWish(Frozen):
    """All replicas inside one domain of `level` (`required`) or in as few as possible (`preferred`)."""

    level: Identifier
    """The topology level (e.g. `leaf`) whose domain should hold all replicas."""
    mode: Literal["required", "preferred"] = "preferred"
    """`required`: one domain of the level; `preferred`: as few as possible (the `topology` term)."""


class Ratio(Frozen):
    """`group` has between `min` and `max` replicas per replica of group `per`."""

    group: Identifier
    """The group whose count is bounded."""
    per: Identifier
    """The group it is counted per replica of."""
    min: NonNeg = 0.0
    """Fewest replicas of `group` per replica of `per`."""
    max: NonNeg | None = None
    """Most replicas of `group` per replica of `per`; None: no upper bound."""


class Colocate(Frozen):
    """The listed groups share one domain of `level`."""

    groups: list[Identifier] = Field(min_length=2)
    """The groups (at least two) that share one domain."""
    level: Identifier
    """The topology level (or `node`) of that domain."""


class Job(Frozen):
    """A job: tenant, priority, task groups and its placement wishes."""

    id: Identifier
    """Unique job id, referenced by the plan."""
    tenant: Identifier = "default"
    """The tenant (a `Tenant.name`) whose quota it uses."""
    priority: Priority = 0
    """Priority (int32, higher first), as a Kubernetes PriorityClass value; the admitted-value weight is
    2^(priority/100)."""
    submitted_at: Seconds = 0.0
    """When it was submitted, seconds (the clock of `Queue.now`)."""
    local_queue: Identifier | None = None
    """The Kueue LocalQueue (`Cluster.local_queues`) it was submitted to, of its tenant; None: none
    named (admission fair sharing then counts it with no usage history)."""
    deadline: Seconds | None = None
    """When it should have finished, seconds (reported, not yet enforced); None: none."""
    gang: bool | None = None
    """All groups at their minimum or nothing; None: true when the job needs more than one replica."""
    topology: TopologyWish | None = None
    """Where its replicas should lie in the fabric; None: anywhere."""
    bandwidth_gbps: NonNeg = 0.0
    """Gbps each direction its traffic puts on every uplink its replicas cross."""
    spot: Literal["forbidden", "allowed", "preferred"] = "allowed"
    """`forbidden`: never on spot nodes; `allowed`: there when it pays (its interruption loss is charged);
    `preferred`: on spot, its owner taking the risk."""
    preemptible: bool = False
    """Whether a running instance of it may be preempted or reclaimed."""
    checkpoint_interval_s: Seconds = 3600.0
    """Seconds between its checkpoints (the work a spot interruption loses is half of it)."""
    groups: list[TaskGroup] = Field(min_length=1)
    """Its task groups (at least one)."""
    ratios: list[Ratio] = Field(default_factory=list)
    """Bounds on replicas of one group per replica of another."""
    colocate: list[Colocate] = Field(default_factory=list)
    """Groups that must share one domain of a level."""

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

    model_config = ConfigDict(json_schema_extra={"$id": SCHEMA_ID.format(document="queue")})

    version: Literal["optsched/v1"] = "optsched/v1"
    """The format version, `optsched/v1`."""
    now: Seconds = 0.0
    """The time of the round, seconds (the clock of `submitted_at`, `started_at`)."""
    jobs: list[Job] = Field(default_factory=list)
    """The jobs waiting for this round."""
