"""Concern: what admitting work is worth (`admitted_value`) and what waiting costs (`queue_delay`).

A replica's value is its size in GPU-equivalents (its GPUs, or a share of one; a CPU-only replica
counts cpu / 32,000 millicores) times the relative speed of the device model it lands on, times
the job's priority weight (1 at priority 0, doubling every 100 levels), times 0.5 for elastic
replicas beyond `min`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optsched.problem import CPU_PER_GPU_EQUIVALENT, ELASTIC_WEIGHT, GroupSpec, JobSpec, Problem, priority_weight
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel


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


VALUE_SCALE = 10_000
"""Fixed-point scale of admitted value and queue delay in the CP-SAT objective."""


def rounding_slack(r: RoundModel) -> float:
    """How far the model's admitted value may sit below the metric's: each replica's value is
    rounded to 1/VALUE_SCALE (at most half of it), so a bound of the model plus this bounds the
    metric."""
    return sum(g.rmax for j in r.jobs for g in j.groups) * 0.5 / VALUE_SCALE


def cpsat(r: RoundModel) -> None:
    """CP-SAT: admitted value (V1) and queue delay (V2) as integer terms scaled by VALUE_SCALE."""
    p = r.p
    vars_, coefs, ub = [], [], 0
    for table, elastic in ((r.ym, False), (r.ye, True)):
        for key, var in table.items():
            job = p.jobs[key[0]]
            c = round(VALUE_SCALE * replica_value(p, job, job.groups[key[1]], key[2], elastic=elastic))
            vars_.append(var)
            coefs.append(c)
            ub += c * r.model_ub(var)
    r.add_term("admitted_value", r.wsum(vars_, coefs), VALUE_SCALE, maximise=True)
    r.term_ub["admitted_value"] = ub
    cs = [round(VALUE_SCALE * priority_weight(job.priority) * max(0.0, p.queue.now - job.submitted_at) / 3600)
          for job in r.jobs]
    d_ub = sum(cs)
    r.add_term("queue_delay", d_ub - r.wsum((r.a[job.index] for job in r.jobs), cs), VALUE_SCALE, maximise=False)
    r.term_ub["queue_delay"] = d_ub
