"""Concern: what the plan costs per hour, and the spot risk it takes (cost term).

- `cost` ($/h): on-demand and spot nodes that host work (kept or placed) at their pool price,
  plus every provisioned node at its pool price. Reserved nodes are paid whether used or not:
  they are sunk, and reported apart (`reserved_idle_cost`: $/h of reserved nodes left empty).
- `spot_risk` (GPU-hours lost per hour): over replicas on spot nodes, the pool's interruption
  rate x the replica's GPUs x (half the job's checkpoint interval + restart time) / 3600.
"""

from __future__ import annotations

import numpy as np

from optsched.problem import PRICING_CODES
from optsched.view import PlanView


def term(view: PlanView) -> dict[str, float]:
    """`cost`, `reserved_idle_cost` and `spot_risk` of the plan."""
    p = view.problem
    if not len(p.pool_names):
        return {"cost": 0.0, "reserved_idle_cost": 0.0, "spot_risk": 0.0}
    hosting = np.any(view.ledger.used > 0, axis=1)
    hosting |= np.bincount(p.dev_node, weights=view.ledger.dev_used > 0, minlength=p.n_nodes) > 0
    real = ~p.node_provisioned
    has_pool = p.node_pool >= 0
    pricing = np.where(has_pool, p.pool_pricing[np.maximum(p.node_pool, 0)], -1)
    reserved = pricing == PRICING_CODES["reserved"]
    cost = float(p.node_price[hosting & real & has_pool & ~reserved].sum())
    cost += sum(count * float(p.pool_price[pool]) for pool, count in view.provisioned.items())
    idle = float(p.node_price[~hosting & real & reserved].sum())
    risk = 0.0
    for rep in view.replicas:
        if p.node_spot[rep.node]:
            group = rep.job.groups[rep.group]
            lost_s = rep.job.spec.checkpoint_interval_s / 2 + rep.job.restart_s
            risk += float(p.pool_rate[p.node_pool[rep.node]]) * group.gpu * lost_s / 3600.0
    return {"cost": cost, "reserved_idle_cost": idle, "spot_risk": risk}
