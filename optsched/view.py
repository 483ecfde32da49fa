"""A plan resolved against its compiled problem: the shared input of every check and metric.

`PlanView` turns the plan's string ids into indices once, collects the references that do not
resolve (as violations, since a plan from outside may be wrong in any way), and replays kept
running jobs and new placements into a `Ledger`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from optsched import clock
from optsched.concerns.base import Violation
from optsched.ledger import Ledger, PlacedReplica
from optsched.model.plan import Eviction, Plan
from optsched.problem import IArray, JobSpec, Problem


@dataclass(frozen=True)
class Replica(PlacedReplica):
    """One placed replica of a plan, resolved to indices, with its job."""

    job: JobSpec
    position: int
    """Index of the placement in `plan.placements`."""


class PlanView:
    """A plan resolved to indices, with the usage it implies."""

    def __init__(self, problem: Problem, plan: Plan) -> None:
        p = problem
        clock.charge(clock.VIEW_S * (len(p.jobs) + len(p.running)))  # deterministic mode's measure of it
        self.problem = p
        self.plan = plan
        self.reference_violations: list[Violation] = []
        bad = self.reference_violations.append

        self.evicted: dict[str, Eviction] = {}
        for ev in plan.evictions:
            if ev.job not in p.running_index:
                bad(Violation("reference", f"evicted job {ev.job!r} is not running", job=ev.job))
            elif ev.job in self.evicted:
                bad(Violation("completeness", "running job evicted twice", job=ev.job))
            else:
                self.evicted[ev.job] = ev
        self.kept: list[JobSpec] = [j for j in p.running if j.id not in self.evicted]

        self.provisioned: dict[int, int] = defaultdict(int)
        pool_index = {name: i for i, name in enumerate(p.pool_names)}
        for pr in plan.provisioning:
            if pr.pool not in pool_index:
                bad(Violation("reference", f"provisioning names unknown pool {pr.pool!r}"))
            else:
                self.provisioned[pool_index[pr.pool]] += pr.count

        self.replicas: list[Replica] = []
        self.by_job: dict[str, list[Replica]] = defaultdict(list)
        for pos, pl in enumerate(plan.placements):
            if pl.job in p.job_index:
                job = p.jobs[p.job_index[pl.job]]
            elif pl.job in p.running_index:
                job = p.running[p.running_index[pl.job]]
            else:
                bad(Violation("reference", f"placement of unknown job {pl.job!r}", job=pl.job))
                continue
            gidx = job.group_index.get(pl.group)
            if gidx is None:
                bad(Violation("reference", f"unknown group {pl.group!r}", job=pl.job, group=pl.group))
                continue
            node = p.node_index.get(pl.node)
            if node is None:
                bad(Violation("reference", f"unknown node {pl.node!r}", job=pl.job, group=pl.group,
                              replica=pl.replica, node=pl.node))
                continue
            count = int(p.node_dev_count[node])
            if any(d >= count for d in pl.devices) or len(set(pl.devices)) != len(pl.devices):
                bad(Violation("devices", f"device indices {pl.devices} are not distinct indices below {count}",
                              job=pl.job, group=pl.group, replica=pl.replica, node=pl.node))
                continue
            start = int(p.node_dev_start[node])
            group = job.groups[gidx]
            share = pl.share if pl.share is not None else (group.share if group.share else 1.0)
            rep = Replica(group=gidx, replica=pl.replica, node=node, devices=tuple(start + d for d in pl.devices),
                          share=share, elastic=pl.elastic, job=job, position=pos)
            self.replicas.append(rep)
            self.by_job[job.id].append(rep)

        self.ledger = Ledger.with_running(p)
        for job in p.running:
            if job.id in self.evicted:
                self.ledger.add_running(job, sign=-1.0)
        items = [(r.job, r.job.groups[r.group], r.node, r.devices, r.share) for r in self.replicas]
        self.ledger.add_many(items)
        self.new_usage = Ledger(p)
        """Usage of the new placements alone (to tell a plan's fault from the input's)."""
        self.new_usage.add_many(items)

    def job_nodes(self, job_id: str) -> IArray:
        """Nodes of the placed replicas of a job (with repetition)."""
        return np.array([r.node for r in self.by_job.get(job_id, [])], dtype=np.int64)

    def placed_jobs(self) -> list[JobSpec]:
        """Queue and migrated jobs that have placements in the plan."""
        return [reps[0].job for reps in self.by_job.values() if reps]
