"""A set of non-dominated plans, and the rules that pick one of them (docs/pareto.md).

Every objective is compared in minimisation form: `admitted_value` is negated, every other term
is taken as it is (`optsched.objective.MAXIMISED`). A plan `a` dominates `b` when it is no worse
in every objective of the set and better in at least one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optsched.errors import InputError, InputIssue
from optsched.model.plan import OBJECTIVE_TERMS, Plan
from optsched.objective import MAXIMISED, Objective
from optsched.problem import FArray

SelectRule = str | Mapping[str, Any]
"""``"knee"``, ``{"weights": {term: w}}``, ``{"lexicographic": [terms], "tolerance": t}`` or
``{"bounds": {term: limit}, "then": <rule>}`` (see `ParetoSet.select`)."""


def check_objectives(objectives: Sequence[str], where: str = "objectives") -> tuple[str, ...]:
    """The objective names as a tuple; InputError unless 2+ distinct known terms."""
    names = tuple(objectives)
    bad = [n for n in names if n not in OBJECTIVE_TERMS]
    if bad:
        raise InputError([InputIssue(where, "unknown_term", f"unknown objective terms {bad}; known: "
                                                            f"{list(OBJECTIVE_TERMS)}")])
    if len(set(names)) != len(names) or len(names) < 2:
        raise InputError([InputIssue(where, "bad_objectives", f"need two or more distinct terms, got {list(names)}")])
    return names


def minimised(terms: Mapping[str, float], objectives: Sequence[str]) -> FArray:
    """The objective vector of one plan in minimisation form (maximised terms negated)."""
    return np.array([-float(terms[n]) if n in MAXIMISED else float(terms[n]) for n in objectives])


def dominated_mask(points: FArray) -> np.ndarray:
    """True for every row (minimisation form) that another row dominates; of rows with equal
    vectors, all but the first count as dominated (a set keeps one plan per objective vector)."""
    f = np.asarray(points, dtype=float)
    n = len(f)
    if n == 0:
        return np.zeros(0, dtype=bool)
    le = np.all(f[:, None, :] <= f[None, :, :], axis=2)  # le[i, k]: i no worse than k everywhere
    lt = np.any(f[:, None, :] < f[None, :, :], axis=2)
    dominates = le & lt
    equal = le & le.T
    earlier_equal = np.triu(equal, k=1)  # i < k with equal vectors: k is a duplicate of i
    return np.asarray(dominates.any(axis=0) | earlier_equal.any(axis=0))


def hypervolume(points: FArray, reference: FArray, ideal: FArray | None = None) -> float:
    """Hypervolume (pymoo's indicator) of `points` (minimisation form) against `reference`,
    after scaling each objective by (reference - ideal) when `ideal` is given, so that fronts
    measured with the same ideal and reference compare as fractions of one box."""
    from pymoo.indicators.hv import HV

    f = np.asarray(points, dtype=float)
    ref = np.asarray(reference, dtype=float)
    if ideal is not None:
        span = np.where(ref - ideal > 0, ref - ideal, 1.0)
        f = (f - ideal) / span
        ref = (ref - ideal) / span
    f = f[np.all(f < ref, axis=1)]
    return float(HV(ref_point=ref)(f)) if len(f) else 0.0


@dataclass
class ParetoSet:
    """Non-dominated plans over `objectives`, each validated, with every objective term.

    `baselines` are the points of the greedy baselines on the same round (for comparison and
    plots), `stats` what the search did (evaluations, seconds, evaluations per second, ...).
    """

    objectives: tuple[str, ...]
    plans: list[Plan]
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.plans = sorted(self.plans, key=lambda pl: tuple(minimised(pl.objective, self.objectives)))

    def __len__(self) -> int:
        return len(self.plans)

    @property
    def points(self) -> FArray:
        """(plans, objectives) in natural units (admitted value as it is: higher is better)."""
        return np.array([[pl.objective[n] for n in self.objectives] for pl in self.plans], dtype=float)

    @property
    def minimised(self) -> FArray:
        """(plans, objectives) in minimisation form."""
        return np.array([minimised(pl.objective, self.objectives) for pl in self.plans], dtype=float)

    @classmethod
    def of(cls, objectives: Sequence[str], plans: Sequence[Plan], **more: Any) -> ParetoSet:
        """The non-dominated plans among `plans` (one per objective vector)."""
        names = tuple(objectives)
        if not plans:
            return cls(names, [], **more)
        keep = ~dominated_mask(np.array([minimised(pl.objective, names) for pl in plans]))
        return cls(names, [pl for pl, k in zip(plans, keep, strict=True) if k], **more)

    # ------------------------------------------------------------------ selection
    def select(self, rule: SelectRule = "knee") -> Plan:
        """One plan of the set by a stated rule.

        - ``"knee"``: each objective scaled to [0, 1] over the set (0 = the set's best), the plan
          farthest on the good side of the hyperplane through the extreme plans (those best in one
          objective; the plane sum f = 1 when they do not span one): the most balanced trade-off.
        - ``{"weights": {term: w}}``: the smallest weighted sum, terms in their own units, maximised
          terms counted negative (as `solve`'s weighted objective).
        - ``{"lexicographic": [terms], "tolerance": t}``: the best first term, then the next, each
          compared within the relative tolerance (as `solve`'s lexicographic objective).
        - ``{"bounds": {term: limit}, "then": rule}``: among plans with every maximised term >= its
          limit and every minimised term <= its limit, the one `then` picks (default knee).
        """
        if not self.plans:
            raise InputError([InputIssue("select", "empty_set", "the set has no plan to select")])
        return self.plans[self.select_index(rule)]

    def select_index(self, rule: SelectRule) -> int:
        """Index in `plans` of the plan `select(rule)` returns."""
        f = self.minimised
        if rule == "knee":
            return _knee(f)
        if not isinstance(rule, Mapping):
            raise InputError([InputIssue("select", "bad_rule", f"unknown rule {rule!r}")])
        if "bounds" in rule:
            limits = rule["bounds"]
            if not isinstance(limits, Mapping):
                raise InputError([InputIssue("select.bounds", "bad_rule", "expected {term: limit}")])
            ok = np.ones(len(self.plans), dtype=bool)
            for name, limit in limits.items():
                if name not in OBJECTIVE_TERMS:
                    raise InputError([InputIssue(f"select.bounds.{name}", "unknown_term", "not an objective term")])
                vals = np.array([pl.objective[name] for pl in self.plans])
                ok &= vals >= float(limit) if name in MAXIMISED else vals <= float(limit)
            if not ok.any():
                raise InputError([InputIssue("select.bounds", "no_plan_within",
                                             f"no plan of the set meets {dict(limits)}")])
            inside = np.flatnonzero(ok)
            sub = ParetoSet(self.objectives, [self.plans[i] for i in inside])
            chosen = sub.plans[sub.select_index(rule.get("then", "knee"))]
            return int(next(i for i in inside if self.plans[i] is chosen))
        spec = rule.get("weights") if "weights" in rule else rule
        goal = Objective.parse(spec)
        best = 0
        for i in range(1, len(self.plans)):
            if goal.better(self.plans[i].objective, self.plans[best].objective):
                best = i
        return best

    # ------------------------------------------------------------------ output
    def table(self) -> list[dict[str, float]]:
        """One row per plan: its objectives, in natural units."""
        return [{n: float(pl.objective[n]) for n in self.objectives} for pl in self.plans]

    def to_dict(self, selected: int | None = None) -> dict[str, Any]:
        """A JSON-ready document: objectives, points, plans, baselines, stats, selected index."""
        return {
            "objectives": list(self.objectives),
            "points": self.table(),
            "selected": selected,
            "baselines": self.baselines,
            "stats": self.stats,
            "plans": [pl.model_dump(mode="json") for pl in self.plans],
        }


def _knee(f: FArray) -> int:
    """See `ParetoSet.select` ("knee")."""
    if len(f) == 1:
        return 0
    lo, hi = f.min(axis=0), f.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    g = (f - lo) / span
    extremes = g[np.argmin(g, axis=0)]  # row k: a plan best in objective k
    try:
        w = np.linalg.solve(extremes, np.ones(len(lo)))
    except np.linalg.LinAlgError:
        w = np.ones(len(lo))
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        w = np.ones(len(lo))
    return int(np.argmin(g @ w))
