"""The `kueue` baseline's evictions so far, judged by the validator's rules as the round goes.

Every preemption the `kueue` engine keeps must leave the round's evictions legal (rules 6 and 10:
`concerns.tenancy.preemption`, `concerns.tenancy.serving`) as if the round ended there. Most of
what those rules read of an earlier eviction never changes once it is made: its victim, reason
and preemptor (job, quota usage, standing at admission, nodes). Only the plan's final quota usage
moves. `EvictionBook` keeps the fixed parts, so that a new step judges again only what the step
can change:

- the serving rule's room clause (the preemptor has a replica on a node the victim held) holds
  for good once it holds: such evictions are not judged again; the others are, on the final usage;
- the flavors each tenant reclaims within nominal (`serving.reclaiming_flavors`) are a union over
  reclaims of a part that reads no plan state: kept as it grows;
- the reclaim order (`preemption.reclaim_order`) of a tenant changes only when that tenant is
  reclaimed from again; with fair sharing, when anything is (`EvictionBook.rejudged`).

The verdicts are those of the rules applied to the whole list (mixed-cloud-10k seed 0: 266
judgements a round over up to 90 earlier evictions each).
"""

from __future__ import annotations

import numpy as np

from optsched.concerns.tenancy import fairshare, preemption, running, serving
from optsched.model.plan import Eviction
from optsched.problem import BArray, FArray, JobSpec, Problem

Judged = tuple[JobSpec, str, preemption.Preemptor | None]
"""An eviction as the rules take it: victim, reason, preemptor (None: not admitted)."""


class EvictionBook:
    """The round's evictions so far, in order, with what the rules need of them kept."""

    def __init__(self, p: Problem) -> None:
        self.p = p
        self.entries: list[tuple[JobSpec, str, preemption.Preemptor]] = []
        """Victim, reason, preemptor as it stood at its admission (its `final` is not read)."""
        self.reclaiming: BArray = np.zeros((len(p.tenant_names), len(p.flavors)), dtype=bool)
        """`serving.plan_reclaiming` of the entries (it reads nothing that changes later)."""
        self.quota_served: list[int] = []
        """Entries the serving rule's room clause does not serve: their quota clause reads the
        final usage, so each step judges them again."""

    def add(self, victim: JobSpec, reason: str, by: preemption.Preemptor) -> None:
        """Record an eviction the round keeps."""
        self.entries.append((victim, reason, by))
        self.reclaiming |= serving.plan_reclaiming(self.p, [(victim, reason, by)])
        if reason != "migrated" and not by.nodes & serving.victim_nodes(victim):
            self.quota_served.append(len(self.entries) - 1)

    def plan_evictions(self) -> list[Eviction]:
        """The entries as a plan lists them, in the order they happened (the validator judges a
        reclaim after those listed before it), each with its lost work."""
        return [Eviction(job=v.id, reason=reason, by=by.job.id, lost_gpu_hours=running.lost_gpu_hours(self.p, v))
                for v, reason, by in self.entries]

    def _at(self, positions: list[int], final: FArray) -> list[Judged]:
        """The entries at `positions`, each with its preemptor seeing the final usage `final`."""
        out: list[Judged] = []
        for k in positions:
            v, reason, b = self.entries[k]
            out.append((v, reason, preemption.Preemptor(b.job, b.uses, b.within_nominal, b.nodes, final)))
        return out

    def reclaiming_with(self, tail: list[Judged]) -> BArray:
        """`serving.plan_reclaiming` of the entries and `tail` (evictions not recorded)."""
        out: BArray = self.reclaiming | serving.plan_reclaiming(self.p, tail)
        return out

    def rejudged(self, tail: list[Judged]) -> list[int]:
        """Positions of the entries whose rule-6 verdict (`preemption.evictions_problems`) this
        step's evictions `tail` can change. Each entry passed when it was made, and its verdict
        depends on its victim, its preemptor's job, request and standing at admission (fixed
        then), and for a reclaim on the other reclaims of its victim's tenant (`reclaim_order`):
        the reclaims of the tenants `tail` reclaims from. With fair sharing a strategy also reads
        the preemptor's own preempted jobs: every entry."""
        if fairshare.enabled(self.p):
            return list(range(len(self.entries)))
        tenants = {v.tenant for v, reason, by in tail if reason == "reclaimed" and by is not None}
        return [k for k, (v, reason, _by) in enumerate(self.entries) if reason == "reclaimed" and v.tenant in tenants]

    def legal_with(self, tail: list[Judged], final: FArray) -> bool:
        """Whether the entries and `tail` (this step's evictions, their preemptor seeing `final`)
        pass rules 6 and 10 with the plan's final usage `final`: the verdict of
        `preemption.evictions_problems` and `serving.serves_problems` on the whole list, judging
        again only what `tail` and the new final usage can change (`rejudged`, `quota_served`)."""
        p = self.p
        if preemption.evictions_problems(p, self._at(self.rejudged(tail), final) + tail):
            return False
        reclaiming = self.reclaiming_with(tail)
        judged = self._at(self.quota_served, final) + [e for e in tail if e[2] is not None and e[1] != "migrated"]
        return not any(serving.serves_problems(p, v, by, reclaiming) for v, _reason, by in judged if by is not None)
