"""A previous plan made into a start plan of this round (a warm start).

A scheduler that runs round after round has the last round's plan; most of it still holds
(the same jobs wait, the same nodes are up). `adapt` keeps what of it is a valid decision of this
round and drops the rest: placements and deferrals of jobs no longer queued, placements on nodes
the cluster no longer has, evictions of jobs no longer running; the round's jobs the plan does not
mention are deferred. The result is then checked by the validator, and every job a violation
names is deferred instead of placed (with the evictions it caused), until the plan is valid. The
adapted plan is a start (a hint), not an input: nothing in it is trusted that the validator does
not accept.
"""

from __future__ import annotations

from optsched.check import check_problem
from optsched.concerns import eligibility
from optsched.model.plan import Deferred, Plan, SolverStats
from optsched.problem import Problem

MAX_PASSES = 8
"""Check-and-defer passes before the plan is given up (each pass defers every job named)."""

WARM_START = "the previous plan, adapted to this round"
"""Deferral detail of the round's jobs the previous plan did not mention."""


def adapt(p: Problem, plan: Plan) -> Plan | None:
    """The part of `plan` that is a valid plan of this round (module docstring), or None when no
    valid part of it remains after `MAX_PASSES` passes."""
    nodes = set(p.node_ids)
    queued = set(p.job_index)
    running = set(p.running_index)
    placements = [pl for pl in plan.placements if pl.job in queued and pl.node in nodes]
    gone = {pl.job for pl in plan.placements if pl.job in queued and pl.node not in nodes}
    placements = [pl for pl in placements if pl.job not in gone]
    evictions = [ev for ev in plan.evictions if ev.job in running and (ev.by is None or ev.by in queued)]
    placed = {pl.job for pl in placements}
    kept = {d.job: d for d in plan.deferred if d.job in queued and d.job not in placed}
    deferred = [kept.get(j.id) or Deferred(job=j.id, reason="other", detail=WARM_START)
                for j in p.jobs if j.id not in placed]
    candidate = Plan(placements=placements, evictions=evictions, deferred=deferred,
                     solver=SolverStats(name="warm-start", status="heuristic"))
    for _ in range(MAX_PASSES):
        candidate = candidate.model_copy(update={"provisioning": eligibility.provisioning_of(
            p, (p.node_index[pl.node] for pl in candidate.placements))})
        violations = check_problem(p, candidate)
        if not violations:
            return candidate
        named = {v.job for v in violations if v.job is not None}
        bad = named & queued
        dropped = {ev.job for ev in candidate.evictions if ev.job in named or ev.by in bad}
        if not bad and not dropped:
            return None  # nothing left to defer or to keep running
        candidate = candidate.model_copy(update={
            "placements": [pl for pl in candidate.placements if pl.job not in bad],
            "evictions": [ev for ev in candidate.evictions if ev.job not in dropped],
            "deferred": [*(d for d in candidate.deferred if d.job not in bad),
                         *(Deferred(job=j, reason="other", detail=WARM_START) for j in sorted(bad)
                           if j not in {d.job for d in candidate.deferred})]})
    return None


__all__ = ["WARM_START", "adapt"]
