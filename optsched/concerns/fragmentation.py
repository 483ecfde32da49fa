"""Concern: GPU fragmentation as FGD defines it (Weng et al., USENIX ATC'23), the fragmentation term.

For a node n and a task type m of the workload (its per-replica GPU request d, its cpu/memory
request and allowed models), F_n(m) is the free GPU capacity on n that m cannot use:
- m cannot fit on n at all (resources, model, or not enough free GPU): all free GPU of n;
- m requests no GPU: all free GPU of n (FGD's "x-axis" case);
- 0 < d < 1: the free share of every GPU whose free share is below d;
- d >= 1: the free share of every partially used GPU.
The cluster's fragmentation is sum_n sum_m p_m F_n(m) with p_m the popularity of m in the
workload (here: the queue's task groups by minimum replica count, else the running jobs').
Unit: GPUs. `free_whole_nodes` counts nodes with every device free.
"""

from __future__ import annotations

import numpy as np

from optsched.ledger import EPS, Ledger
from optsched.problem import FArray, GroupSpec, JobSpec, Problem
from optsched.view import PlanView


def workload_mix(p: Problem) -> list[tuple[JobSpec, GroupSpec, float]]:
    """Task types with their popularity (summing to 1)."""
    source = p.jobs if p.jobs else p.running
    types: dict[tuple[bytes, float, bytes, str], tuple[JobSpec, GroupSpec, float]] = {}
    for j in source:
        for g in j.groups:
            key = (g.req.tobytes(), g.gpu, g.model_speed.tobytes() if g.gpu else b"", g.affinity)
            old = types.get(key)
            types[key] = (j, g, (old[2] if old else 0.0) + float(max(g.rmin, 1)))
    total = sum(w for _, _, w in types.values())
    return [(j, g, w / total) for j, g, w in types.values()] if total else []


def node_fragmentation(p: Problem, ledger: Ledger, mix: list[tuple[JobSpec, GroupSpec, float]]) -> FArray:
    """Expected fragment GPUs per node under the task mix."""
    real = ~p.node_provisioned
    free_dev = np.where(p.dev_healthy, np.clip(1.0 - ledger.dev_used, 0.0, 1.0), 0.0)
    free_total = np.bincount(p.dev_node, weights=free_dev, minlength=p.n_nodes)
    partial = np.bincount(p.dev_node, weights=np.where(free_dev < 1.0 - EPS, free_dev, 0.0),
                          minlength=p.n_nodes)
    frag = np.zeros(p.n_nodes)
    for _job, group, weight in mix:
        if group.gpu <= 0:
            frag += weight * free_total
            continue
        fits = ledger.fits_mask(group)
        has_model = p.node_model >= 0
        allowed = np.zeros(p.n_nodes, dtype=bool)
        allowed[has_model] = group.model_speed[p.node_model[has_model]] > 0
        fits &= allowed & p.node_healthy
        if group.share:
            small = np.bincount(p.dev_node, weights=np.where(free_dev < group.share - EPS, free_dev, 0.0),
                                minlength=p.n_nodes)
            usable_frag = small
        else:
            usable_frag = partial
        frag += weight * np.where(fits, usable_frag, free_total)
    frag[~real] = 0.0
    return frag


def term(view: PlanView) -> dict[str, float]:
    """`fragmentation` (expected fragment GPUs, FGD) and `free_whole_nodes`."""
    p = view.problem
    mix = workload_mix(p)
    frag = node_fragmentation(p, view.ledger, mix) if mix else np.zeros(p.n_nodes)
    free_whole = (view.ledger.free_whole == p.node_dev_count) & (p.node_dev_count > 0) & ~p.node_provisioned
    return {"fragmentation": float(frag.sum()), "free_whole_nodes": float(free_whole.sum())}
