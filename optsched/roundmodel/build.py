"""Building the round model: the shared variables, then each concern's encoding, in order.

`ENCODINGS` is the ordered list of the concerns' round-model encodings (each concern module holds
its rule's check, metric term and encoding side by side: `optsched.concerns`); `encode_all`
builds a model through it, within a deadline.
"""

from __future__ import annotations

from collections.abc import Callable

from optsched import clock
from optsched.concerns import capacity, cost, devices, fabric, gang, locality, spread, value
from optsched.concerns.tenancy import preemption, quota, serving
from optsched.roundmodel.variables import BuildTimeout, RoundModel

ENCODINGS: tuple[tuple[str, Callable[[RoundModel], None]], ...] = (
    ("gang", gang.cpsat),  # admission, min/elastic replicas, ratios
    ("capacity", capacity.cpsat),  # per-node resources
    ("devices", devices.cpsat),  # whole devices per interconnect group, shares per device
    ("fabric", fabric.cpsat),  # required topology, colocation, uplinks, topology term
    ("spread", spread.cpsat),  # topology spread skew
    ("quota", quota.cpsat),  # nominal, borrowing, lending
    ("fairness", quota.fairness_cpsat),  # weighted DRF deviation (when the objective names it)
    ("provisioning", cost.provisioning_cpsat),  # which provisioning slots are created, in order
    ("cost", cost.cpsat),  # $/h: nodes hosting work, new nodes, spot loss (when the objective names it)
    ("locality", locality.cpsat),  # image pull and dataset read seconds (when the objective names it)
    ("preemption", preemption.cpsat),  # which evictable running jobs go, why, and the work lost
    ("serving", serving.cpsat),  # each eviction serves its preemptor: room or quota
    ("value", value.cpsat),  # admitted value and queue delay terms
)
"""Each concern's CP-SAT encoding, in the order they are added (eligibility: candidate nodes)."""

MODELLED_TERMS = frozenset({"admitted_value", "queue_delay", "disruption", "topology", "fairness", "cost",
                            "locality"})
"""Objective terms the encodings add to the model (`fragmentation` is not modelled)."""

MAX_EVICTABLE = 512
"""Running jobs the model may evict (lowest priority, least work lost first); the others stay."""


def encode_all(r: RoundModel, deadline: float, variables_by: float) -> None:
    """Build the variables (by `variables_by`) and every encoding of `ENCODINGS`; BuildTimeout
    past `deadline` (`clock.now()` seconds). Every sub-model is built this way."""
    size = _size(r)
    r.build_variables(deadline=variables_by)
    size = _charge_growth(r, size)
    for name, encode in ENCODINGS:
        if clock.now() > deadline:
            raise BuildTimeout(name)
        encode(r)
        size = _charge_growth(r, size)


def _size(r: RoundModel) -> int:
    """Variables and constraints in the model so far."""
    return len(r.model.proto.variables) + len(r.model.proto.constraints)


def _charge_growth(r: RoundModel, before: int) -> int:
    """Charge the work clock for what the model grew by since `before` (`clock.VARIABLE_S` each);
    returns its size now."""
    after = _size(r)
    clock.charge((after - before) * clock.VARIABLE_S)
    return after




def encode_timed(r: RoundModel, variables_by: float, deadline: float) -> dict[str, float]:
    """Build the whole round's model, timing each part: the variables by `variables_by`, then each
    encoding only while the slowest part so far would still end before `deadline` (`clock.now()`
    seconds); BuildTimeout (naming the part) otherwise. Returns seconds per part."""
    t0 = clock.now()
    size = _size(r)
    r.build_variables(deadline=variables_by)
    size = _charge_growth(r, size)
    build: dict[str, float] = {"variables": clock.now() - t0}
    for name, encode in ENCODINGS:
        slowest = max(build.values())  # the next encoding may take as long as the slowest so far
        if clock.now() + slowest > deadline:
            raise BuildTimeout(name)
        t0 = clock.now()
        encode(r)
        size = _charge_growth(r, size)
        build[name] = clock.now() - t0
    return build
