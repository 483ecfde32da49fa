"""Cells: the unit of the domain model (`optsched.domain.model`).

A cell is the set of real, healthy nodes of one leaf domain (the fabric's lowest level; the whole
cluster when it has no topology) that share a device model and a quota flavor class
(`optsched.ledger.flavor_class`: every flavor counts a replica on them alike). So a replica's
value (its device model's speed) and its quota usage depend on its cell only, and what a cell can
hold is summed from its nodes' free capacity in bulk (numpy, no per-node Python). A pool's
provisioning slots make cells of their own (the bound counts what a plan may add; the plan of the
domain path does not provision). A class is the
union of the cells of one model and flavor class across the leaves: a job whose topology does not
bind it to one domain is decided per class, the others per cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optsched.ledger import RUNNING_PACK, Ledger, flavor_class
from optsched.problem import BArray, FArray, IArray, Problem


@dataclass(frozen=True)
class Cells:
    """The round's cells and what they hold before the round (arrays over cells unless noted)."""

    node_cell: IArray
    """Per node: its cell, or -1 (an unhealthy node: no cell)."""
    leaf: IArray
    """The cell's domain at the lowest level (global domain id; -1 without topology)."""
    model: IArray
    """The cell's device model (-1: nodes without devices)."""
    node: IArray
    """One node of the cell (its flavors and model stand for the cell's)."""
    free: FArray
    """(cells, resources): free capacity with every running job where it sits."""
    dev_free: FArray
    """Free device capacity (fractions of partly used devices included)."""
    cls: IArray
    """The cell's class: cells of one device model and flavor class, across leaf domains."""
    slot: BArray
    """The cell holds provisioning slots (nodes a plan may add), never real nodes."""

    @property
    def n(self) -> int:
        return len(self.leaf)

    @property
    def n_classes(self) -> int:
        return int(self.cls.max()) + 1 if len(self.cls) else 0

    def at_level(self, p: Problem, level: int) -> IArray:
        """Per cell, its domain at topology `level` (global id)."""
        return p.node_domain_at(level)[self.node]


def build_cells(p: Problem, base: Ledger) -> Cells:
    """The cells of the round, their free capacity measured on `base` (running jobs in place).
    Provisioning slots form cells of their own (`Cells.slot`)."""
    real = p.node_healthy.copy()
    leaf = p.node_domain_at(p.n_levels - 1) if p.n_levels else np.full(p.n_nodes, -1, dtype=np.int64)
    key = np.stack([leaf, p.node_model, flavor_class(p), p.node_provisioned.astype(np.int64)], axis=1)[real]
    uniq, inverse = np.unique(key, axis=0, return_inverse=True)
    node_cell = np.full(p.n_nodes, -1, dtype=np.int64)
    node_cell[real] = inverse.reshape(-1)
    first = np.full(len(uniq), p.n_nodes, dtype=np.int64)
    np.minimum.at(first, node_cell[real], np.flatnonzero(real))
    n = len(uniq)
    free = np.zeros((n, len(p.resources)))
    np.add.at(free, node_cell[real], np.clip(p.cap - base.used, 0.0, None)[real])
    dev_free_each = np.where(p.dev_healthy, np.clip(1.0 - base.dev_used, 0.0, 1.0), 0.0)
    dev_cell = node_cell[p.dev_node]
    on = dev_cell >= 0
    dev_free = np.bincount(dev_cell[on], weights=dev_free_each[on], minlength=n).astype(float)
    _, cls = np.unique(uniq[:, 1:], axis=0, return_inverse=True)
    return Cells(node_cell, uniq[:, 0].astype(np.int64), uniq[:, 1].astype(np.int64), first, free, dev_free,
                 cls.reshape(-1).astype(np.int64), uniq[:, 3] > 0)


@dataclass(frozen=True)
class RunningUse:
    """What evicting some running jobs frees, per (victim, cell) pair where it holds something:
    the pairs in sorted order, each with its requests and device capacity there."""

    victim: IArray
    """Position of the pair's job among the victims asked for."""
    cell: IArray
    resources: FArray
    """(pairs, resources): requests its replicas hold in the cell."""
    devices: FArray
    """Device capacity its replicas hold in the cell (shares as fractions)."""


def running_use(p: Problem, cells: Cells, victims: IArray) -> RunningUse:
    """`RunningUse` of the running jobs at positions `victims` of `p.running`, from the round's
    flat running table (`optsched.ledger.RunningPack`) in bulk; usage on a node outside every cell
    (unhealthy) frees nothing a cell can use."""
    pack = p.derived(RUNNING_PACK)
    row_of = np.full(len(p.running), -1, dtype=np.int64)
    row_of[victims] = np.arange(len(victims))
    k = row_of[pack.place_job]
    c = cells.node_cell[pack.place_node]
    ok = (k >= 0) & (c >= 0)
    kd = row_of[pack.dev_job]
    cd = cells.node_cell[p.dev_node[pack.dev_index]]
    okd = (kd >= 0) & (cd >= 0)
    n = max(cells.n, 1)
    keys, inverse = np.unique(np.concatenate([k[ok] * n + c[ok], kd[okd] * n + cd[okd]]), return_inverse=True)
    split = int(ok.sum())
    res = np.zeros((len(keys), len(p.resources)))
    np.add.at(res, inverse[:split], pack.place_req[ok])
    dev = np.bincount(inverse[split:], weights=pack.dev_share[okd], minlength=len(keys)).astype(float)
    return RunningUse(keys // n, keys % n, res, dev)



@dataclass(frozen=True)
class WholeFreed:
    """Whole devices each of some running jobs holds per node, per (victim, node) pair."""

    victim: IArray
    """Position of the pair's job among the victims asked for."""
    node: IArray
    devices: IArray
    """Devices the job holds on the node (whole or shared: an upper bound of what leaving frees)."""


def whole_freed(p: Problem, victims: IArray) -> WholeFreed:
    """`WholeFreed` of the running jobs at positions `victims` of `p.running`, in bulk."""
    pack = p.derived(RUNNING_PACK)
    row_of = np.full(len(p.running), -1, dtype=np.int64)
    row_of[victims] = np.arange(len(victims))
    k = row_of[pack.dev_job]
    ok = k >= 0
    keys, counts = np.unique(k[ok] * p.n_nodes + p.dev_node[pack.dev_index[ok]], return_counts=True)
    return WholeFreed(keys // max(p.n_nodes, 1), keys % max(p.n_nodes, 1), counts.astype(np.int64))


__all__ = ["Cells", "RunningUse", "WholeFreed", "build_cells", "running_use", "whole_freed"]
