"""One module per concern; each holds its rule's semantics once.

A concern module may provide `check(view) -> list[Violation]` (a hard rule, used by the
validator) and `term(view) -> dict[str, float]` (objective terms, used by the metrics). Its search
primitives (masks, pickers, count rules) sit beside them and are what the solvers call. A new
concern is one new module plus one line in each list below.
"""

from __future__ import annotations

from collections.abc import Callable

from optsched.concerns import (
    capacity,
    completeness,
    cost,
    devices,
    eligibility,
    fabric,
    fragmentation,
    gang,
    locality,
    spread,
    value,
)
from optsched.concerns.base import Violation
from optsched.concerns.tenancy import preemption, quota
from optsched.view import PlanView

CheckFn = Callable[[PlanView], list[Violation]]
TermFn = Callable[[PlanView], dict[str, float]]

CHECKS: tuple[tuple[str, CheckFn], ...] = (
    ("completeness", completeness.check),  # no job vanishes; references resolve
    ("eligibility", eligibility.check),  # health, selectors, taints, spot, provisioning slots
    ("capacity", capacity.check),  # per-node resources
    ("devices", devices.check),  # device counts, shares, models, interconnect
    ("gang", gang.check),  # replica indices, gang min/max, ratios
    ("fabric", fabric.check),  # required topology, colocation, uplinks
    ("spread", spread.check),  # topology spread skew
    ("quota", quota.check),  # nominal, borrowing, lending
    ("preemption", preemption.check),  # eviction legality and accounting
)
"""The hard rules, in the order the validator reports them."""

TERMS: tuple[tuple[str, TermFn], ...] = (
    ("value", value.term),
    ("preemption", preemption.term),
    ("fabric", fabric.term),
    ("cost", cost.term),
    ("locality", locality.term),
    ("fragmentation", fragmentation.term),
    ("quota", quota.term),
)
"""The objective terms, each from the concern that defines it."""

__all__ = ["CHECKS", "TERMS", "Violation"]
