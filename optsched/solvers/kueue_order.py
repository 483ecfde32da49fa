"""The order in which the `kueue` baseline admits a round's queued jobs.

Kueue keeps one queue per ClusterQueue (here: per tenant), ordered by priority, then age (with
admission fair sharing, its LocalQueues by their usage first). The scheduler takes every queue's
head and admits them in order: a head that fits its tenant's nominal quota before one that
borrows, borrowing heads by the lower fair-sharing share value, then priority, then age
(pkg/scheduler/scheduler.go, `entryOrdering`). Whether a head borrows and its share value depend
on the usage, so the order is evaluated again after every admission: `admission_order` is a
generator the engine resumes after each job.
"""

from __future__ import annotations

from collections.abc import Iterator

from optsched.concerns.tenancy.fairshare import QueueUsage
from optsched.problem import JobSpec, Problem
from optsched.solvers.flavors import FlavorAssigner


def admission_order(p: Problem, flavors: FlavorAssigner, queue_usage: QueueUsage) -> Iterator[JobSpec]:
    """Kueue's order: each tenant's queue by priority then age (with admission fair sharing, by
    its LocalQueues' usage first: `_next_of`); among the heads, one that fits without borrowing
    first (`FlavorAssigner.borrows`), then the share value (`FlavorAssigner.share_value`), then
    priority, then age, on the usage as it is when the next job is asked for."""
    queues: dict[int, dict[str | None, list[JobSpec]]] = {}
    """Per tenant, per LocalQueue (one list, keyed None, where usage does not order the tenant's
    jobs): its pending jobs by priority, then age."""
    for j in sorted(p.jobs, key=lambda j: (-j.priority, j.submitted_at, j.index)):
        lq = j.spec.local_queue if queue_usage.orders(j.tenant) else None
        queues.setdefault(j.tenant, {}).setdefault(lq, []).append(j)
    for lqs in queues.values():
        for jobs in lqs.values():
            jobs.reverse()  # popped from the end
    heads = {t: _next_of(queue_usage, lqs) for t, lqs in queues.items()}

    def order(t: int) -> tuple[bool, float, int, float, int]:
        head = heads[t]
        borrows = flavors.borrows(head)
        return borrows, flavors.share_value(head) if borrows else 0.0, -head.priority, head.submitted_at, head.index

    while heads:
        t = min(heads, key=order)
        job = heads[t]
        yield job
        lq = job.spec.local_queue if queue_usage.orders(t) else None
        queues[t][lq].pop()
        if not queues[t][lq]:
            del queues[t][lq]
        if queues[t]:
            heads[t] = _next_of(queue_usage, queues[t])
        else:
            del heads[t]


def _next_of(queue_usage: QueueUsage, lqs: dict[str | None, list[JobSpec]]) -> JobSpec:
    """A tenant's head: of its LocalQueues' heads, the lowest usage, then priority, then age
    (Kueue's `queueOrderingFunc`; one queue where usage does not order them)."""
    usage = queue_usage.usage
    return min((jobs[-1] for jobs in lqs.values()),
               key=lambda j: (usage(j.spec.local_queue) if len(lqs) > 1 else 0.0, -j.priority, j.submitted_at,
                              j.index))
