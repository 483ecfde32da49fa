"""The capacity planner's input documents: node pool types and demand scenarios (docs/capacity.md).

Units: prices in $ per node-hour, demand in GPUs per period (the GPUs that must be running in
that period), periods of `period_hours` hours each, probabilities summing to 1.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field, model_validator

from optsched.errors import InputError, InputIssue
from optsched.model.base import Count, Frozen, Identifier, NonNeg, Positive
from optsched.model.io import Source, parse_document

Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class PoolType(Frozen):
    """A kind of node that can be bought: reserved for the horizon, on demand, or as spot."""

    name: Identifier
    model: Identifier
    """Device model of its GPUs (demand is per device model)."""
    gpus_per_node: Annotated[int, Field(gt=0)]
    reserved_per_node_hour: NonNeg
    """$/node-hour of a reserved node, paid for every hour of the horizon, used or not."""
    on_demand_per_node_hour: NonNeg
    """$/node-hour of an on-demand node, paid for the hours it is provisioned."""
    spot_per_node_hour: NonNeg | None = None
    """$/node-hour of a spot node; None: no spot for this pool."""
    spot_available_nodes: NonNeg = 0.0
    """Spot nodes the provider can sell in any period (a cap on spot capacity)."""
    max_reserved: Count | None = None
    """Most reserved nodes that can be committed (None: no limit)."""


class Pools(Frozen):
    """The pool types a plan may buy."""

    pools: list[PoolType] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Pools:
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate pool names in {names}")
        return self


class Scenario(Frozen):
    """One demand scenario: guaranteed GPUs per period and device model, and its probability."""

    name: Identifier
    probability: Positive
    demand: dict[Identifier, list[NonNeg] | dict[Identifier, list[NonNeg]]]
    """Per device model: GPUs that must run in each period (guaranteed demand), as one series or
    as one series per tenant (summed for the plan, kept for the chargeback)."""
    spot_tolerant: dict[Identifier, Share] = Field(default_factory=dict)
    """Per device model: the share of its demand that may run on spot nodes (default 0)."""


    def by_tenant(self) -> dict[str, dict[str, list[float]]]:
        """Per device model, per tenant: the demand series (a single series is tenant ``all``)."""
        return {m: (dict(v) if isinstance(v, dict) else {ALL: list(v)}) for m, v in self.demand.items()}

    def totals(self) -> dict[str, list[float]]:
        """Per device model: the demand summed over tenants."""
        return {m: [float(x) for x in np.sum(list(v.values()), axis=0)] for m, v in self.by_tenant().items()}


ALL = "all"
"""Tenant name of demand given as one series per model."""


class Demand(Frozen):
    """Demand scenarios over a horizon of equal periods."""

    period_hours: Positive = 1.0
    scenarios: list[Scenario] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Demand:
        lengths = {len(v) for s in self.scenarios for per in s.by_tenant().values() for v in per.values()}
        if len(lengths) > 1:
            raise ValueError(f"every demand series needs the same number of periods, got lengths {sorted(lengths)}")
        if lengths == {0}:
            raise ValueError("demand series are empty")
        total = sum(s.probability for s in self.scenarios)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"scenario probabilities sum to {total:g}, not 1")
        names = [s.name for s in self.scenarios]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate scenario names in {names}")
        return self

    @property
    def periods(self) -> int:
        """Number of periods of the horizon."""
        return len(next(iter(self.scenarios[0].totals().values()), []))

    @property
    def models(self) -> list[str]:
        """Device models with demand, sorted."""
        return sorted({m for s in self.scenarios for m in s.demand})


def cross_check(demand: Demand, pools: Pools) -> None:
    """Every device model with demand needs a pool type that sells it (InputError otherwise)."""
    sold = {p.model for p in pools.pools}
    issues = [InputIssue(f"scenarios[{i}].demand.{m}", "no_pool", f"no pool type sells device model {m!r}")
              for i, s in enumerate(demand.scenarios) for m, v in s.totals().items() if m not in sold and any(v)]
    issues += [InputIssue(f"scenarios[{i}].spot_tolerant.{m}", "unknown_model", f"{m!r} has no demand")
               for i, s in enumerate(demand.scenarios) for m in s.spot_tolerant if m not in s.demand]
    if issues:
        raise InputError(issues)


def load_demand(source: Source) -> Demand:
    """Load and validate a demand document (path, YAML/JSON text or mapping)."""
    return parse_document(Demand, source)


def load_pools(source: Source) -> Pools:
    """Load and validate a pools document."""
    return parse_document(Pools, source)
