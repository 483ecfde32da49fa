"""Concern: what admitting work is worth (`admitted_value`) and what waiting costs (`queue_delay`).

A replica's value is its size in GPU-equivalents (its GPUs, or a share of one; a CPU-only replica
counts cpu / 32,000 millicores) times the relative speed of the device model it lands on, times
the job's priority weight (1 at priority 0, doubling every 100 levels), times 0.5 for elastic
replicas beyond `min`.
"""

from __future__ import annotations

from optsched.problem import CPU_PER_GPU_EQUIVALENT, ELASTIC_WEIGHT, GroupSpec, JobSpec, Problem, priority_weight
from optsched.view import PlanView


def replica_value(p: Problem, job: JobSpec, group: GroupSpec, node: int, elastic: bool) -> float:
    """Value of one replica of `group` on `node`."""
    if group.gpu > 0:
        size = group.gpu * float(group.model_speed[p.node_model[node]])
    else:
        size = float(group.req[0]) / CPU_PER_GPU_EQUIVALENT
    return priority_weight(job.priority) * size * (ELASTIC_WEIGHT if elastic else 1.0)


def term(view: PlanView) -> dict[str, float]:
    """`admitted_value` (priority-weighted GPU-equivalents x speed) and `queue_delay`.

    `queue_delay` is the priority-weighted hours that deferred jobs have waited so far.
    """
    p = view.problem
    value = 0.0
    delay = 0.0
    for job in p.jobs:
        reps = view.by_job.get(job.id)
        if reps:
            value += sum(replica_value(p, job, job.groups[r.group], r.node, r.elastic) for r in reps)
        else:
            waited = max(0.0, p.queue.now - job.submitted_at)
            delay += priority_weight(job.priority) * waited / 3600.0
    return {"admitted_value": value, "queue_delay": delay,
            "admitted_jobs": float(sum(1 for j in p.jobs if view.by_job.get(j.id)))}
