"""Shared pydantic configuration and constrained number types for the public model."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

FORMAT_VERSION = "optsched/v1"


class Frozen(BaseModel):
    """Base of every public model: unknown fields are errors, values are immutable, NaN/inf refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
Identifier = Annotated[str, Field(min_length=1, max_length=253)]
