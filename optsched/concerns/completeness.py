"""Concern: no job vanishes (reliability contract, hard rule 9).

Every queued job is placed or deferred (exactly one of the two); every running job is kept or
evicted, and a running job appears among the placements only when it is migrated.
"""

from __future__ import annotations

from collections import Counter

from optsched.concerns.base import Violation
from optsched.view import PlanView


def check(view: PlanView) -> list[Violation]:
    """Queued jobs neither placed nor deferred (or both); stray deferrals; unexplained moves."""
    p = view.problem
    out = list(view.reference_violations)
    deferred = Counter(d.job for d in view.plan.deferred)
    for job_id, n in deferred.items():
        if job_id not in p.job_index:
            out.append(Violation("reference", f"deferred job {job_id!r} is not queued", job=job_id))
        elif n > 1:
            out.append(Violation("completeness", f"job deferred {n} times", job=job_id))
    for job in p.jobs:
        placed = bool(view.by_job.get(job.id))
        if placed and deferred[job.id]:
            out.append(Violation("completeness", "job is both placed and deferred", job=job.id))
        elif not placed and not deferred[job.id]:
            out.append(Violation("completeness", "queued job is neither placed nor deferred (vanished)",
                                 job=job.id))
    for job in p.running:
        ev = view.evicted.get(job.id)
        if view.by_job.get(job.id) and (ev is None or ev.reason != "migrated"):
            out.append(Violation("completeness", "running job placed again without a `migrated` eviction",
                                 job=job.id))
    return out
