"""Shared pydantic configuration and constrained number types for the public model."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

FORMAT_VERSION = "optsched/v1"
SCHEMA_ID = "urn:optsched:v1:{document}"
"""The `$id` of a document's JSON Schema (`optsched schema`), per document: cluster, queue, plan."""


class Frozen(BaseModel):
    """Base of every public model: unknown fields are errors, values are immutable, NaN/inf refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, use_attribute_docstrings=True)


MAX_AMOUNT = 1e9
"""Largest amount, in the field's documented unit: resources (millicores, MiB, NICs, ...), GPUs,
quotas, bandwidth (Gbps), prices ($/h), rates (1/h), speeds and weights. Larger numbers are input
errors: no real cluster has them, and they overflow the integer scaling of the round model."""
MAX_SECONDS = 1e11
"""Largest time or duration (s): about 3,000 years, so epoch timestamps fit."""
MAX_COUNT = 1_000_000
"""Largest count or index (replicas, device indices, skew)."""
MAX_BYTES = 2**53
"""Largest size (bytes): about 9 PB, the largest integer a float64 holds exactly."""
MAX_DEVICES_PER_NODE = 64
"""Largest number of accelerators on one node."""
MAX_PROVISIONED_NODES = 100_000
"""Largest number of nodes one pool may create (`max_nodes`) or a plan provision."""
PRIORITY_RANGE = (-(2**31), 2**31 - 1)
"""Priorities are int32, as Kubernetes PriorityClass values are."""

NonNeg = Annotated[float, Field(ge=0, le=MAX_AMOUNT, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, le=MAX_AMOUNT, allow_inf_nan=False)]
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
Share = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
"""A fraction of one device (0 < share <= 1)."""
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Bytes = Annotated[int, Field(ge=0, le=MAX_BYTES)]
DeviceCount = Annotated[int, Field(ge=0, le=MAX_DEVICES_PER_NODE)]
NodeCount = Annotated[int, Field(ge=0, le=MAX_PROVISIONED_NODES)]
Priority = Annotated[int, Field(ge=PRIORITY_RANGE[0], le=PRIORITY_RANGE[1])]
Identifier = Annotated[str, Field(min_length=1, max_length=253)]
