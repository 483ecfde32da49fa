"""Concern: per-node resource capacity (hard rule 1).

Kept and placed replicas' requests on a node stay within its capacity for every resource
(cpu millicores, memory MiB, rdma_nics, other named resources). The fit test for search lives in
`Ledger.fits_mask`; this module reports overflows of a replayed plan.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from optsched.concerns.base import Violation
from optsched.ledger import EPS
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel


def check(view: PlanView) -> list[Violation]:
    """Nodes over capacity where the plan placed something."""
    p = view.problem
    over = view.ledger.used > p.cap + EPS * np.maximum(1.0, p.cap)
    touched = np.any(view.new_usage.used > 0, axis=1)
    out = []
    for n, r in zip(*np.nonzero(over & touched[:, None]), strict=True):
        out.append(Violation(
            "capacity", f"{p.resources[r]} requested {view.ledger.used[n, r]:g} > capacity {p.cap[n, r]:g}",
            node=p.node_ids[n], values={"resource": p.resources[r], "used": float(view.ledger.used[n, r]),
                                        "capacity": float(p.cap[n, r])}))
    return out


def cpsat(r: RoundModel) -> None:
    """CP-SAT: per node and resource, sum of requests <= what is free (docs/formulation.md C1),
    evictable running jobs' requests counted while they are kept."""
    p = r.p
    free = p.cap - r.base.used
    for res in range(len(p.resources)):
        reqs = {key: float(p.jobs[key[0]].groups[key[1]].req[res]) for keys in r.by_node.values() for key in keys}
        held = {v: [(float(sum(job.groups[pl.group].req[res] for pl in pls)), keep) for keep, job, pls in items]
                for v, items in r.held.items()}
        integral = all(float(x).is_integer() for x in reqs.values()) and np.all(np.mod(free[:, res], 1) == 0) \
            and all(float(x).is_integer() for items in held.values() for x, _ in items)
        scale = 1 if integral else 1000
        for v in set(r.by_node) | set(held):
            keys = r.by_node.get(v, [])
            terms = [(math.ceil(reqs[k] * scale - 1e-9), r.y[k]) for k in keys if reqs[k] > 0]
            terms += [(math.ceil(x * scale - 1e-9), keep) for x, keep in held.get(v, []) if x > 0]
            if not terms:
                continue
            cap = math.floor(free[v, res] * scale + 1e-6)
            if sum(c * r.model_ub(var) for c, var in terms) <= cap:
                continue  # cannot bind
            r.model.add(r.wsum((var for _, var in terms), (c for c, _ in terms)) <= cap)
