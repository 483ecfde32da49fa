"""Concern: fabric topology, uplink bandwidth and colocation (hard rules 4 and 8; topology term).

A job *crosses* a domain when it has replicas both inside and outside it; each crossing job
loads that domain's uplink with its `bandwidth_gbps` (one ring flow per direction, uplinks are
full duplex). A `required` topology level puts the whole job in one domain of that level;
`colocate` does the same for a subset of groups. The topology term counts domains spanned beyond
the fewest that could hold the job, at its level and every level above it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from optsched.concerns.base import Violation
from optsched.ledger import EPS, Ledger, PlacedReplica, crossed_domains
from optsched.problem import BArray, Derived, IArray, JobSpec, Problem
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel


def domains_spanned(p: Problem, nodes: IArray, level: int) -> int:
    """Distinct domains of `level` holding the job's replicas."""
    return len(np.unique(p.node_domain_at(level)[nodes])) if len(nodes) else 0


def min_domains(p: Problem, job: JobSpec, level: int) -> int:
    """Fewest domains of `level` that could hold the job at its minimum size, by GPU count.

    The largest domain of the level (in devices) bounds what one domain holds; CPU-only jobs
    and the per-node level count 1.
    """
    gpus = sum(g.rmin * g.gpu for g in job.groups)
    if level >= p.n_levels or gpus <= 0:
        return 1
    return max(1, math.ceil(gpus / max(p.derived(LARGEST_DOMAIN_GPUS, level), 1.0) - 1e-9))


def _largest_domain_gpus(p: Problem, level: int) -> float:
    real = ~p.node_provisioned
    return float(np.bincount(p.node_dom[real, level], weights=p.node_dev_count[real]).max())


LARGEST_DOMAIN_GPUS: Derived[float] = Derived("fabric.largest_domain_gpus", _largest_domain_gpus)
"""Devices of the largest domain of a level (real nodes)."""


def uplink_problem(p: Problem, ledger: Ledger, job: JobSpec,
                   placed: Sequence[PlacedReplica]) -> tuple[str, str] | None:
    """Search primitive: ("bandwidth", detail) when the job's replicas `placed` would overload an
    uplink they cross, given the traffic already in `ledger` (the job's own not yet added)."""
    if not job.bandwidth or len(placed) <= 1:
        return None
    crossed = crossed_domains(p, np.array([r.node for r in placed], dtype=np.int64))
    over = crossed[ledger.uplink_load[crossed] + job.bandwidth > p.uplink[crossed] + EPS]
    if not len(over):
        return None
    d = int(over[0])
    return "bandwidth", (f"uplink of {p.domain_ids[d]}: {ledger.uplink_load[d]:g} + {job.bandwidth:g} Gbps > "
                         f"{p.uplink[d]:g}")


def colocate_domains(p: Problem, job: JobSpec, group: int, placed: Sequence[PlacedReplica]) -> list[tuple[int, int]]:
    """Search primitive: the (level, domain) pairs a replica of group `group` must go inside so
    that the job's `colocate` rules still hold, given its replicas placed so far (each rule whose
    groups hold a placed replica: that replica's domain at the rule's level); empty when no rule
    restricts it."""
    out: list[tuple[int, int]] = []
    for groups, level in job.colocate:
        if group not in groups:
            continue
        anchor = next((r.node for r in placed if r.group in groups), None)
        if anchor is not None:
            out.append((level, int(p.node_domain_at(level)[anchor])))
    return out


def colocate_mask(p: Problem, job: JobSpec, group: int, placed: Sequence[PlacedReplica],
                  domain_mask: Callable[[int, int], BArray] | None = None) -> BArray | None:
    """Search primitive: the nodes where a replica of group `group` may go so that the job's
    `colocate` rules still hold, given its replicas placed so far; None when no rule restricts it
    (the nodes of every domain `colocate_domains` names, each from `domain_mask(level, domain)`,
    default a fresh mask: under one rule the result is that array itself)."""
    mask: BArray | None = None
    for level, domain in colocate_domains(p, job, group, placed):
        m = p.node_domain_at(level) == domain if domain_mask is None else domain_mask(level, domain)
        mask = m if mask is None else mask & m
    return mask


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
        for level in range(min(job.topo_level + 1, p.n_levels)):
            extra += max(0, domains_spanned(p, nodes, level) - min_domains(p, job, level))
    return {"topology": extra, "uplink_gbps": gbps}


def _span(r: RoundModel, j: int, level: int, dom: int, groups: tuple[int, ...] | None = None) -> Any:
    """Bool: job j (or its `groups`) has a replica in domain `dom` of `level` (cached per key)."""
    cache = r.device_plan.setdefault("span", {})
    key = (j, level, dom, groups)
    if key not in cache:
        keys = [k for k in r.keys_by_domain(j, level).get(dom, []) if groups is None or k[1] in groups]
        has = r.model.new_bool_var(f"has[{j},{level},{dom}]")
        count = r.sum(r.y[k] for k in keys)
        r.model.add(count >= 1).only_enforce_if(has)
        r.model.add(count == 0).only_enforce_if(~has)
        cache[key] = has
    return cache[key]


def _domains(r: RoundModel, j: int, level: int, groups: tuple[int, ...] | None = None) -> list[int]:
    by_dom = r.keys_by_domain(j, level)
    return sorted(d for d, keys in by_dom.items() if groups is None or any(k[1] in groups for k in keys))


def cpsat(r: RoundModel) -> None:
    """CP-SAT: required topology, colocation, uplink bandwidth, and the topology term (F1-F4).

    ``has[j, l, d]`` is true iff job j has a replica in domain d of level l. A required level
    allows one such domain (F1); a colocation the same for its groups (F2). A job crosses d when
    it has replicas inside and outside; crossing jobs' bandwidth fits what d's uplink has left
    after running jobs (F3; an evictable running job's flow counts while it is kept), skipped where
    even every candidate crossing could not exceed it.
    Topology term (F4): sum over jobs with a topology wish and levels down to theirs of
    max(0, domains spanned - fewest possible x a[j]) (a non-gang job placed in part may span fewer).
    """
    p, m = r.p, r.model
    extra_terms = []
    extra_ub = 0
    for job in r.jobs:
        j = job.index
        if job.topo_level is not None:
            if job.topo_required:
                doms = _domains(r, j, job.topo_level)
                if len(doms) > 1:
                    m.add(r.sum(_span(r, j, job.topo_level, d) for d in doms) <= 1)  # F1
            for level in range(min(job.topo_level + 1, p.n_levels)):
                doms = _domains(r, j, level)
                if len(doms) > 1:
                    extra = m.new_int_var(0, len(doms), f"extra[{j},{level}]")
                    spanned = r.sum(_span(r, j, level, d) for d in doms)
                    m.add_max_equality(extra, [0, spanned - min_domains(p, job, level) * r.a[j]])
                    extra_terms.append(extra)
                    extra_ub += len(doms)
        for groups, level in job.colocate:
            doms = _domains(r, j, level, groups)
            if len(doms) > 1:
                m.add(r.sum(_span(r, j, level, d, groups) for d in doms) <= 1)  # F2
    r.add_term("topology", r.sum(extra_terms), 1.0, maximise=False)
    r.term_ub["topology"] = extra_ub
    # F3: uplinks
    crossing: dict[int, list[tuple[float, int, int]]] = {}
    for job in r.jobs:
        if job.bandwidth <= 0 or sum(g.rmax for g in job.groups) < 2:
            continue
        j = job.index
        for level in range(1, p.n_levels):
            doms = sorted(r.keys_by_domain(j, level))
            if len(doms) < 2:
                continue
            for d in doms:
                if math.isinf(p.uplink[d]):
                    continue
                crossing.setdefault(d, []).append((job.bandwidth, j, level))
    kept_flows: dict[int, list[tuple[float, Any]]] = {}  # evictable running jobs crossing d, while kept
    for job in r.evictable:
        if job.bandwidth > 0:
            nodes = np.array([pl.node for pl in job.placements], dtype=np.int64)
            for d in crossed_domains(p, nodes).tolist():
                kept_flows.setdefault(d, []).append((job.bandwidth, r.keep[p.running_index[job.id]]))
    for d, kept in kept_flows.items():  # kept running jobs alone, where no new job may cross
        left = p.uplink[d] - r.base.uplink_load[d]
        if d not in crossing and sum(bw for bw, _ in kept) > left + EPS:
            m.add(r.wsum((x for _, x in kept), (math.ceil(bw * 1000 - 1e-9) for bw, _ in kept))
                  <= math.floor(max(left, 0.0) * 1000 + 1e-6))
    for d, jobs in crossing.items():
        left = p.uplink[d] - r.base.uplink_load[d]
        kept = kept_flows.get(d, [])
        if sum(bw for bw, _, _ in jobs) + sum(bw for bw, _ in kept) <= left + EPS:
            continue
        flows = [(math.ceil(bw * 1000 - 1e-9), keep) for bw, keep in kept]
        for bw, j, level in jobs:
            inside = _span(r, j, level, d)
            outside_count = r.sum(r.y[k] for dd, keys in r.keys_by_domain(j, level).items() if dd != d
                                  for k in keys)
            out = m.new_bool_var(f"out[{j},{d}]")
            m.add(outside_count >= 1).only_enforce_if(out)
            m.add(outside_count == 0).only_enforce_if(~out)
            cross = m.new_bool_var(f"cross[{j},{d}]")
            m.add(cross >= inside + out - 1)
            flows.append((math.ceil(bw * 1000 - 1e-9), cross))
        m.add(r.wsum((x for _, x in flows), (c for c, _ in flows)) <= math.floor(max(left, 0.0) * 1000 + 1e-6))
