"""Decoding: a solution of the round model as a Plan (replicas, device indices, evictions).

The solution is anything with `value(var)`: a CP-SAT solver after a solve, or the MILP back end's
`Assignment` of HiGHS's columns. Device indices are chosen per node from the per-group and
per-device counts the devices concern modelled; evictions are named with their preemptor.
"""

from __future__ import annotations

from typing import Any, Protocol

from optsched.concerns import devices, eligibility
from optsched.model.plan import Deferred, Placement, Plan, SolverStats
from optsched.roundmodel.evictions import name_preemptors
from optsched.roundmodel.variables import RoundModel

NOT_ADMITTED = "not admitted by the model"
"""Deferral detail of a job a model left out (`explain_deferred` turns it into a reason)."""


class Solution(Protocol):
    """A value for every variable of a model."""

    def value(self, var: Any) -> Any: ...


def decode(r: RoundModel, solver: Solution, stats: SolverStats, *,
            rest: Plan | None = None) -> Plan | None:
    """The plan of a solution. With `rest` (a neighbourhood), the solution replaces the jobs and
    evictable running jobs of the model in `rest`, and the merged plan is returned."""
    p = r.p
    placements: list[Placement] = []
    deferred: list[Deferred] = []
    evicted = [p.running[k] for k, var in r.keep.items() if not solver.value(var)]
    if r.keep:  # devices are picked around the evictable jobs that stay
        kept = r.base.copy()
        for k, var in r.keep.items():
            if solver.value(var):
                kept.add_running(p.running[k])
        r.base = kept
    per_node: dict[int, list[tuple[tuple[int, int, int], Any, bool]]] = {}
    for job in r.jobs:
        if not solver.value(r.a[job.index]):
            deferred.append(Deferred(job=job.id, reason="capacity", detail=NOT_ADMITTED))
            continue
        for g in job.groups:
            for v in r.by_group[(job.index, g.index)]:
                key = (job.index, g.index, v)
                lo = int(solver.value(r.ym[key]))
                hi = int(solver.value(r.ye[key])) if key in r.ye else 0
                for i in range(lo + hi):
                    per_node.setdefault(v, []).append((key, g, i >= lo))
    rows: list[tuple[int, int, int, bool, tuple[int, ...], float]] = []
    for v, reps in per_node.items():
        picked = devices.pick_from_counts(r, solver, v, [(k, g) for k, g, _ in reps])
        if picked is None:
            return None
        for (key, _g, elastic), (devs, share) in zip(reps, picked, strict=True):
            rows.append((key[0], key[1], v, elastic, devs, share))
    counters: dict[tuple[int, int, bool], int] = {}
    for j, gi, v, elastic, devs, share in sorted(rows, key=lambda x: (x[0], x[1], x[3], x[2])):
        g = p.jobs[j].groups[gi]
        base = g.rmin if elastic else 0
        i = counters.get((j, gi, elastic), 0)
        counters[(j, gi, elastic)] = i + 1
        placements.append(Placement(job=p.jobs[j].id, group=g.name, replica=base + i, node=p.node_ids[v],
                                    devices=[int(p.dev_local[d]) for d in devs],
                                    share=share if g.share else None, elastic=elastic))
    plan = Plan(placements=placements, deferred=deferred, solver=stats)
    if rest is not None:
        ids = {j.id for j in r.jobs}
        decided = {v.id for v in r.evictable}
        plan = Plan(placements=[pl for pl in rest.placements if pl.job not in ids] + placements,
                    deferred=[d for d in rest.deferred if d.job not in ids] + deferred,
                    evictions=[ev for ev in rest.evictions if ev.job not in decided], solver=stats)
    new = eligibility.provisioning_of(p, (p.node_index[pl.node] for pl in plan.placements))
    if new:
        plan = plan.model_copy(update={"provisioning": new})
    if not evicted:
        return plan
    evictions = name_preemptors(p, plan, evicted, r.device_plan.get("evict", {}), solver)
    return None if evictions is None else plan.model_copy(update={"evictions": [*plan.evictions, *evictions]})


