"""Concern: topology spread of a group's replicas (hard rule 8), like PodTopologySpread.

Over the domains of the spread level that hold at least one node eligible for the group, the
replica counts differ by at most `max_skew`. `allowed_domains` is the filter search applies per
replica (count + 1 - global minimum <= max_skew), which keeps the rule true after every step.
"""

from __future__ import annotations

import numpy as np

from optsched.concerns import eligibility
from optsched.concerns.base import Violation
from optsched.problem import BArray, GroupSpec, IArray, JobSpec, Problem
from optsched.view import PlanView


def eligible_domains(p: Problem, job: JobSpec, group: GroupSpec, level: int) -> IArray:
    """Domains of `level` with a real node eligible for the group."""
    ok = eligibility.mask(p, job, group) & ~p.node_provisioned
    return np.unique(p.node_domain_at(level)[ok])


def allowed_nodes(p: Problem, job: JobSpec, group: GroupSpec, counts_by_domain: dict[int, int]) -> BArray:
    """Nodes whose spread domain may take one more replica without exceeding the skew."""
    spread = group.spec.spread
    assert spread is not None
    level = p.level_index(spread.level)
    doms = eligible_domains(p, job, group, level)
    counts = np.array([counts_by_domain.get(int(d), 0) for d in doms])
    lowest = counts.min() if len(counts) else 0
    ok_doms = doms[counts + 1 - lowest <= spread.max_skew]
    return np.isin(p.node_domain_at(level), ok_doms)


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
