"""Concern: fabric topology, uplink bandwidth and colocation (hard rules 4 and 8; topology term).

A job *crosses* a domain when it has replicas both inside and outside it; each crossing job
loads that domain's uplink with its `bandwidth_gbps` (one ring flow per direction, uplinks are
full duplex). A `required` topology level puts the whole job in one domain of that level;
`colocate` does the same for a subset of groups. The topology term counts domains spanned beyond
the fewest that could hold the job, at its level and every level above it.
"""

from __future__ import annotations

import math

import numpy as np

from optsched.concerns.base import Violation
from optsched.ledger import EPS, crossed_domains
from optsched.problem import IArray, JobSpec, Problem
from optsched.view import PlanView


def domains_spanned(p: Problem, nodes: IArray, level: int) -> int:
    """Distinct domains of `level` holding the job's replicas."""
    return len(np.unique(p.node_domain_at(level)[nodes])) if len(nodes) else 0


def min_domains(p: Problem, job: JobSpec, counts: list[int], level: int) -> int:
    """Fewest domains of `level` that could hold the job, by GPU count (or replicas when CPU-only)."""
    gpus = sum(c * g.gpu for c, g in zip(counts, job.groups, strict=True))
    if level >= p.n_levels or gpus <= 0:
        return 1
    key = ("domain_gpus", level)
    if key not in p._cache:
        real = ~p.node_provisioned
        p._cache[key] = float(np.bincount(p.node_dom[real, level], weights=p.node_dev_count[real]).max())
    return max(1, math.ceil(gpus / max(p._cache[key], 1.0) - 1e-9))


def check(view: PlanView) -> list[Violation]:
    """Required topology, colocation, and uplink capacity where the plan adds crossing traffic."""
    p = view.problem
    out = []
    for job_id, reps in view.by_job.items():
        job = reps[0].job
        nodes = np.array([r.node for r in reps], dtype=np.int64)
        if job.topo_required and job.topo_level is not None:
            n = domains_spanned(p, nodes, job.topo_level)
            if n > 1:
                level_name = p.levels[job.topo_level] if job.topo_level < p.n_levels else "node"
                out.append(Violation("topology", f"required in one {level_name} domain, spans {n}",
                                     job=job_id, values={"domains": n}))
        for groups, level in job.colocate:
            sub = np.array([r.node for r in reps if r.group in groups], dtype=np.int64)
            n = domains_spanned(p, sub, level)
            if n > 1:
                names = [job.groups[g].name for g in groups]
                out.append(Violation("colocate", f"groups {names} span {n} domains of level {level}",
                                     job=job_id, values={"domains": n}))
    new_load = np.zeros(len(p.domain_ids))
    for job in view.placed_jobs():
        np.add.at(new_load, crossed_domains(p, view.job_nodes(job.id)), job.bandwidth)
    load = view.ledger.uplink_load + new_load
    for d in np.flatnonzero((new_load > 0) & (load > p.uplink + EPS)):
        out.append(Violation("bandwidth", f"uplink of {p.domain_ids[d]} carries {load[d]:g} Gbps > {p.uplink[d]:g}",
                             values={"domain": p.domain_ids[d], "load_gbps": float(load[d]),
                                     "uplink_gbps": float(p.uplink[d])}))
    return out


def uplink_load(view: PlanView) -> np.ndarray:
    """Gbps on every domain's uplink after the plan (kept running and placed jobs)."""
    p = view.problem
    load = view.ledger.uplink_load.copy()
    for job in view.placed_jobs():
        np.add.at(load, crossed_domains(p, view.job_nodes(job.id)), job.bandwidth)
    return load


def term(view: PlanView) -> dict[str, float]:
    """`topology`: extra domains spanned (count); `uplink_gbps`: Gbps crossing uplinks of new jobs."""
    p = view.problem
    extra = 0.0
    gbps = 0.0
    for job in view.placed_jobs():
        nodes = view.job_nodes(job.id)
        gbps += job.bandwidth * len(crossed_domains(p, nodes))
        if job.topo_level is None or len(nodes) < 2:
            continue
        counts = [0] * len(job.groups)
        for r in view.by_job[job.id]:
            counts[r.group] += 1
        for level in range(min(job.topo_level, p.n_levels) + 1):
            if level >= p.n_levels:
                break
            extra += max(0, domains_spanned(p, nodes, level) - min_domains(p, job, counts, level))
    return {"topology": extra, "uplink_gbps": gbps}
