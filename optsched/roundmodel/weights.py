"""The round model's objective: integer weights per term, and its value at a given assignment.

A weighted objective becomes integer weights (`goal.weights[t] / scale_t`, times 1e6); a
lexicographic order becomes big-M weights, each level's weight above the whole range of every
level below it (docs/formulation.md, "Objective").
"""

from __future__ import annotations

from typing import Any

from optsched.objective import TIE_BREAKS, Objective
from optsched.roundmodel.variables import RoundModel


def objective_weights(r: RoundModel, goal: Objective) -> tuple[dict[str, int], list[str]]:
    """Integer weights per modelled term; lexicographic orders become big-M weights."""
    modelled = [t for t in (goal.order if goal.weights is None else goal.weights) if t in r.terms]
    unmodelled = [t for t in (goal.order if goal.weights is None else goal.weights) if t not in r.terms]
    weights: dict[str, int] = {}
    if goal.weights is not None:
        for name in modelled:
            w = goal.weights[name] / r.terms[name].scale
            weights[name] = round(w * 1e6)
        return weights, unmodelled
    modelled += [t for t in TIE_BREAKS if t in r.terms]  # lower-priority victims, then fewest evictions
    while True:
        weights, w = {}, 1
        for name in reversed(modelled):
            weights[name] = w
            w *= int(r.term_ub.get(name, 0)) + 1
        if w <= OBJECTIVE_RANGE or len(modelled) == 1:
            return weights, unmodelled
        unmodelled.append(modelled.pop())  # the exact big-M chain would overflow: drop the last level


OBJECTIVE_RANGE = 2**62
"""Largest value the lexicographic big-M objective may span (CP-SAT objectives are 64-bit: on
mixed-cloud-10k with 270 evictable jobs, value, disruption, topology and eviction count
overflowed; the least important levels are dropped until it fits, and reported as unmodelled)."""


def objective_expression(r: RoundModel, weights: dict[str, int]) -> Any:
    return r.sum((w if r.terms[name].maximise else -w) * r.terms[name].expr for name, w in weights.items())



def objective_at(r: RoundModel, values: list[int]) -> float:
    """The value of the model's current objective at `values` (a complete hint), in the units
    of the maximised expression."""
    objective = r.model.proto.objective
    raw = sum(c * values[v] for v, c in zip(objective.vars, objective.coeffs, strict=True)) + objective.offset
    return float((objective.scaling_factor or 1.0) * raw)


