"""Concern: topology spread of a group's replicas (hard rule 8), like PodTopologySpread.

Over the domains of the spread level that hold at least one node eligible for the group, the
replica counts differ by at most `max_skew`. `allowed_domains` is the filter search applies per
replica (count + 1 - global minimum <= max_skew), which keeps the rule true after every step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from optsched.concerns import eligibility
from optsched.concerns.base import Violation
from optsched.problem import BArray, Derived, GroupSpec, IArray, JobSpec, Problem
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel


def eligible_domains(p: Problem, job: JobSpec, group: GroupSpec, level: int) -> IArray:
    """Domains of `level` with a real node eligible for the group (sorted; cached per mask)."""
    return p.derived(ELIGIBLE_DOMAINS, job, group, level)


def _eligible_domains(p: Problem, job: JobSpec, group: GroupSpec, level: int) -> IArray:
    ok = eligibility.mask(p, job, group)
    doms: IArray = np.unique(p.node_domain_at(level)[ok & ~p.node_provisioned])
    return doms


ELIGIBLE_DOMAINS: Derived[IArray] = Derived(
    "spread.eligible_domains", _eligible_domains,
    key=lambda p, job, group, level: (eligibility.shape_key(p, job, group), level))
"""`eligible_domains` per replica shape and level."""


def _domain_position(p: Problem, job: JobSpec, group: GroupSpec, level: int) -> IArray:
    doms = eligible_domains(p, job, group, level)
    at = p.node_domain_at(level)
    if not len(doms):
        return np.zeros(len(at), dtype=np.int64)
    pos = np.searchsorted(doms, at)
    inside = (pos < len(doms)) & (doms[np.minimum(pos, len(doms) - 1)] == at)
    out: IArray = np.where(inside, pos, len(doms))
    return out


DOMAIN_POSITION: Derived[IArray] = Derived(
    "spread.domain_position", _domain_position,
    key=lambda p, job, group, level: (eligibility.shape_key(p, job, group), level))
"""Per node: the position of its domain of `level` among `eligible_domains`, or their count
when its domain holds no eligible node."""


def domain_position(p: Problem, job: JobSpec, group: GroupSpec, level: int) -> IArray:
    """Per node: its domain's position among the group's eligible domains of `level` (their
    count where none): index `allowed_domains` with it."""
    return p.derived(DOMAIN_POSITION, job, group, level)


def allowed_domains(p: Problem, job: JobSpec, group: GroupSpec, counts_by_domain: dict[int, int]) -> BArray:
    """Whether each eligible spread domain may take one more replica (count + 1 - lowest count
    <= max_skew), with one trailing False for nodes outside them (`domain_position`)."""
    spread = group.spec.spread
    assert spread is not None
    doms = eligible_domains(p, job, group, p.level_index(spread.level))
    counts = np.zeros(len(doms), dtype=np.int64)
    if counts_by_domain and len(doms):
        placed = np.fromiter(counts_by_domain, dtype=np.int64)
        pos = np.searchsorted(doms, placed)
        inside = (pos < len(doms)) & (doms[np.minimum(pos, len(doms) - 1)] == placed)
        counts[pos[inside]] = np.fromiter(counts_by_domain.values(), dtype=np.int64)[inside]
    lowest = counts.min() if len(counts) else 0
    out = np.zeros(len(doms) + 1, dtype=bool)
    out[:-1] = counts + 1 - lowest <= spread.max_skew
    return out


def blocked_domains(p: Problem, job: JobSpec, group: GroupSpec, counts_by_domain: dict[int, int]) -> list[int]:
    """The eligible spread domains (ids at the spread level) that may not take one more replica:
    exactly those `allowed_domains` refuses, listed instead of masked. Only a domain that holds
    replicas can be refused (max_skew >= 1), so a search over thousands of domains with a few
    replicas placed hides a few domains instead of masking every node (plain Python: the dict
    holds a group's few replicas)."""
    spread = group.spec.spread
    assert spread is not None
    if not counts_by_domain:
        return []
    doms = p.derived(GROUP_DOMAIN_SET, job, group, p.level_index(spread.level))
    inside = {d: c for d, c in counts_by_domain.items() if d in doms}
    lowest = min(inside.values()) if len(inside) == len(doms) and doms else 0  # else some domain holds none
    return [d for d, c in inside.items() if c + 1 - lowest > spread.max_skew]


ELIGIBLE_DOMAIN_SET: Derived[frozenset[int]] = Derived(
    "spread.eligible_domain_set",
    lambda p, job, group, level: frozenset(eligible_domains(p, job, group, level).tolist()),
    key=lambda p, job, group, level: (eligibility.shape_key(p, job, group), level))
"""`eligible_domains` as a set, per replica shape."""

GROUP_DOMAIN_SET: Derived[frozenset[int]] = Derived(
    "spread.group_domain_set", lambda p, job, group, level: p.derived(ELIGIBLE_DOMAIN_SET, job, group, level),
    key=lambda p, job, group, level: (job.running, job.index, group.index, level))
"""The same set looked up by the group (asked per replica: the shape's key costs more than the set)."""


def allowed_nodes(p: Problem, job: JobSpec, group: GroupSpec, counts_by_domain: dict[int, int],
                  nodes: IArray | None = None) -> BArray:
    """Whether each node (all, or `nodes`) is in a spread domain that may take one more replica."""
    spread = group.spec.spread
    assert spread is not None
    position = domain_position(p, job, group, p.level_index(spread.level))
    ok = allowed_domains(p, job, group, counts_by_domain)
    out: BArray = ok[position] if nodes is None else ok[position[nodes]]
    return out


def check(view: PlanView) -> list[Violation]:
    """Spread skew of every placed group that asks for it."""
    p = view.problem
    out = []
    for job_id, reps in view.by_job.items():
        job = reps[0].job
        for group in job.groups:
            if group.spec.spread is None:
                continue
            level = p.level_index(group.spec.spread.level)
            doms = eligible_domains(p, job, group, level)
            at = p.node_domain_at(level)
            placed = [int(at[r.node]) for r in reps if r.group == group.index]
            if not placed:
                continue
            placed_arr = np.array(placed, dtype=np.int64)
            inside = np.isin(placed_arr, doms)
            counts = np.zeros(max(len(doms), 1), dtype=np.int64)
            if len(doms):
                np.add.at(counts, np.searchsorted(doms, placed_arr[inside]), 1)
            _, outside = np.unique(placed_arr[~inside], return_counts=True)
            hi = max(int(counts.max()), int(outside.max()) if len(outside) else 0)
            skew = hi - int(counts.min())
            if skew > group.spec.spread.max_skew:
                out.append(Violation("spread", f"skew {skew} > max_skew {group.spec.spread.max_skew}",
                                     job=job_id, group=group.name, values={"skew": skew}))
    return out


def cpsat(r: RoundModel) -> None:
    """CP-SAT: per spread group, max - min replicas over its eligible domains <= max_skew (S1)."""
    p, m = r.p, r.model
    for job in r.jobs:
        for group in job.groups:
            if group.spec.spread is None:
                continue
            level = p.level_index(group.spec.spread.level)
            at = p.node_domain_at(level)
            doms = eligible_domains(p, job, group, level)
            counts: dict[int, list[Any]] = {}
            for v in r.by_group[(job.index, group.index)]:
                counts.setdefault(int(at[v]), []).append(r.y[(job.index, group.index, v)])
            skew = group.spec.spread.max_skew
            if len(counts) < len(doms):  # some eligible domain cannot get a replica: min is 0
                for c in counts.values():
                    m.add(r.sum(c) <= skew)
                continue
            hi = m.new_int_var(0, group.rmax, f"sprmax[{job.index},{group.index}]")
            lo = m.new_int_var(0, group.rmax, f"sprmin[{job.index},{group.index}]")
            for c in counts.values():
                m.add(r.sum(c) <= hi)
                m.add(r.sum(c) >= lo)
            m.add(hi - lo <= skew)
