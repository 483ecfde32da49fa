"""A plan in a few numbers: what `optsched solve --json` prints and the service returns beside it."""

from __future__ import annotations

from collections import Counter
from typing import Any

from optsched.model.plan import Plan
from optsched.model.queue import Queue
from optsched.model.stats import STATUS_MEANING


def plan_summary(queue: Queue, plan: Plan) -> dict[str, Any]:
    """The solver's statistics, what its status means, the counts (queued and admitted jobs, placed
    replicas, deferrals by reason, evictions, provisioned nodes) and the objective terms."""
    jobs = {j.id for j in queue.jobs}
    return {"solver": plan.solver.model_dump(mode="json"),
            "status_meaning": STATUS_MEANING.get(plan.solver.status),
            "queued_jobs": len(queue.jobs),
            "admitted_jobs": len({p.job for p in plan.placements if p.job in jobs}),
            "placed_replicas": len(plan.placements),
            "deferred": dict(Counter(d.reason for d in plan.deferred)),
            "evictions": len(plan.evictions),
            "provisioned_nodes": sum(p.count for p in plan.provisioning),
            "objective": dict(plan.objective)}
