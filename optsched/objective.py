"""How plans are compared: a weighted sum or a lexicographic order of the objective terms.

`admitted_value` is maximised; every other term is minimised. The default is lexicographic:
admitted value first, then disruption (lost work in GPU-equivalent hours: evict only what buys
value), then topology,
then fragmentation (DESIGN.md, the CP-SAT and tenancy issues), each
compared within a relative tolerance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optsched.errors import InputError, InputIssue
from optsched.model.plan import OBJECTIVE_TERMS

MAXIMISED = frozenset({"admitted_value"})
DEFAULT_ORDER = ("admitted_value", "disruption", "topology", "fragmentation")
ObjectiveSpec = Mapping[str, Any] | Sequence[str] | None
EXACT = 1e-6
"""Relative tolerance under which two values of a term count as equal."""
TIE_BREAKS = ("victim_priority", "evictions")
"""Model-only terms after every term of a lexicographic order, in this order: at equal terms,
evict lower-priority jobs (the sum of their priority ranks), then as few jobs as possible
(`preemption.cpsat`). Plans do not report them."""


@dataclass(frozen=True)
class Objective:
    """A parsed objective: `weights` (weighted sum) or `order` (lexicographic)."""

    weights: Mapping[str, float] | None = None
    order: tuple[str, ...] = DEFAULT_ORDER
    tolerance: float = EXACT

    @classmethod
    def parse(cls, spec: ObjectiveSpec) -> Objective:
        """None: default order; a mapping of term weights; a sequence of names: lexicographic order;
        ``{"lexicographic": [names], "tolerance": 0.01}``: each term may give up that relative share
        of its best value for the next ones (solve, fix the first within the tolerance, solve on)."""
        if spec is None:
            return cls()
        if isinstance(spec, Mapping) and "lexicographic" in spec:
            extra = set(spec) - {"lexicographic", "tolerance"}
            tol = spec.get("tolerance", EXACT)
            if extra or not isinstance(tol, int | float) or not 0 <= tol < 1:
                raise InputError([InputIssue("objective", "bad_objective",
                                             "expected {'lexicographic': [terms], 'tolerance': 0 <= t < 1}")])
            parsed = cls.parse(list(spec["lexicographic"]))
            return cls(order=parsed.order, tolerance=max(float(tol), EXACT))
        names = list(spec.keys()) if isinstance(spec, Mapping) else list(spec)
        bad = [n for n in names if n not in OBJECTIVE_TERMS]
        if bad or isinstance(spec, str):
            raise InputError([InputIssue("objective", "unknown_term",
                                      f"unknown objective terms {bad or [spec]}; known: {list(OBJECTIVE_TERMS)}")])
        if isinstance(spec, Mapping):
            return cls(weights=dict(spec), order=())
        return cls(order=tuple(names))

    def terms(self) -> frozenset[str]:
        """The terms this objective names."""
        return frozenset(self.order if self.weights is None else self.weights)

    def key(self, terms: Mapping[str, float]) -> tuple[float, ...]:
        """A sort key: smaller is better."""
        def signed(name: str) -> float:
            v = float(terms.get(name, 0.0))
            return -v if name in MAXIMISED else v

        if self.weights is not None:
            return (sum(w * signed(k) for k, w in self.weights.items()),)
        return tuple(signed(k) for k in self.order)

    def better(self, a: Mapping[str, float], b: Mapping[str, float]) -> bool:
        """True when terms `a` beat `b` (lexicographic levels compared within the tolerance)."""
        for x, y in zip(self.key(a), self.key(b), strict=True):
            if abs(x - y) > self.tolerance * max(1.0, abs(x), abs(y)):
                return x < y
        return False
