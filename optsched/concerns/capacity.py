"""Concern: per-node resource capacity (hard rule 1).

Kept and placed replicas' requests on a node stay within its capacity for every resource
(cpu millicores, memory MiB, rdma_nics, other named resources). The fit test for search lives in
`Ledger.fits_mask`; this module reports overflows of a replayed plan.
"""

from __future__ import annotations

import numpy as np

from optsched.concerns.base import Violation
from optsched.ledger import EPS
from optsched.view import PlanView


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
