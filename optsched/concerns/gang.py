"""Concern: replica counts, gang admission, elasticity and group ratios (hard rules 3 and 8).

A gang job is admitted with every group between `min` and `max` replicas, or not at all; a
non-gang job's replicas stand alone (0 to `max`). Replica indices are distinct, below `max`, and
marked elastic exactly when at or beyond `min`. A ratio keeps a group's count between `min` and
`max` times the count of its `per` group.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

from optsched.concerns.base import Violation
from optsched.problem import JobSpec
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel


def count_problems(job: JobSpec, counts: list[int]) -> list[tuple[str, str]]:
    """(rule, message) for replica counts per group that break gang or ratio rules."""
    out: list[tuple[str, str]] = []
    if sum(counts) == 0:
        return out
    for g, n in zip(job.groups, counts, strict=True):
        if n > g.rmax:
            out.append(("gang", f"group {g.name}: {n} replicas > max {g.rmax}"))
        elif job.gang and n < g.rmin:
            out.append(("gang", f"gang group {g.name}: {n} replicas < min {g.rmin}"))
    for gi, per, lo, hi in job.ratios:
        n, base = counts[gi], counts[per]
        if n < lo * base - 1e-9 or (not math.isinf(hi) and n > hi * base + 1e-9):
            out.append(("ratio", f"{job.groups[gi].name}={n} not within [{lo:g}, {hi:g}] x "
                                 f"{job.groups[per].name}={base}"))
    return out


def target_counts(job: JobSpec) -> list[int] | None:
    """The smallest replica counts that satisfy the gang minimums and every ratio, or None."""
    counts = [g.rmin if job.gang else max(g.rmin, 1) for g in job.groups]
    for _ in range(len(job.groups) + 1):
        changed = False
        for gi, per, lo, _hi in job.ratios:
            need = math.ceil(lo * counts[per] - 1e-9)
            if counts[gi] < need:
                counts[gi] = need
                changed = True
        if not changed:
            break
    return counts if not count_problems(job, counts) else None


def check(view: PlanView) -> list[Violation]:
    """Replica indices, elastic marks, gang min/max and ratios of every placed job."""
    out = []
    for job_id, reps in view.by_job.items():
        job = reps[0].job
        seen: Counter[tuple[int, int]] = Counter((r.group, r.replica) for r in reps)
        for (g, i), n in seen.items():
            if n > 1:
                out.append(Violation("replicas", f"replica {i} placed {n} times", job=job_id,
                                     group=job.groups[g].name, replica=i))
        for r in reps:
            spec = job.groups[r.group]
            if r.replica >= spec.rmax:
                out.append(Violation("replicas", f"replica index {r.replica} >= max {spec.rmax}",
                                     job=job_id, group=spec.name, replica=r.replica))
            if r.elastic != (r.replica >= spec.rmin):
                out.append(Violation("replicas", f"elastic={r.elastic} but min is {spec.rmin}",
                                     job=job_id, group=spec.name, replica=r.replica))
        counts = [0] * len(job.groups)
        for r in reps:
            counts[r.group] += 1
        for rule, msg in count_problems(job, counts):
            out.append(Violation(rule, msg, job=job_id, values={"counts": counts}))
    return out


def cpsat(r: RoundModel) -> None:
    """CP-SAT: gang admission, min/elastic split, non-gang independence, ratios (docs/formulation.md G1-G5)."""
    m = r.model
    for job in r.jobs:
        j = job.index
        a = r.a[j]
        for g in job.groups:
            tot_m, tot_e = r.total(j, g.index, "ym"), r.total(j, g.index, "ye")
            if job.gang:
                m.add(tot_m == g.rmin * a)  # G1
                m.add(tot_e <= (g.rmax - g.rmin) * a)  # G2
            else:
                full = m.new_bool_var(f"full[{j},{g.index}]")
                m.add(full <= a)
                m.add(tot_m <= g.rmin * a)  # G3
                m.add(tot_m >= g.rmin * full)
                m.add(tot_e <= (g.rmax - g.rmin) * full)  # elastic indices only after min is full
        every = r.sum(r.y[k] for k in r.job_keys(j))
        m.add(every >= a)  # G4: admitted iff some replica is placed (gang jobs too: all mins may be 0)
        if not job.gang:
            m.add(every <= sum(g.rmax for g in job.groups) * a)
        for gi, per, lo, hi in job.ratios:  # G5, in thousandths
            t_g, t_per = r.total(j, gi), r.total(j, per)
            m.add(1000 * t_g >= math.ceil(lo * 1000 - 1e-9) * t_per)
            if not math.isinf(hi):
                m.add(1000 * t_g <= math.floor(hi * 1000 + 1e-9) * t_per)
