"""The shared variables of the round model (docs/formulation.md, same symbols).

The round model is written with OR-Tools' CP-SAT modelling layer (`cp_model.CpModel`) as its
one representation: CP-SAT solves it directly and the MILP back end translates it to sparse
arrays for HiGHS (`optsched.solvers.milp.translate`). `RoundModel` builds what every concern
talks about:

- ``a[j]``: job j admitted (bool);
- ``y[j, g, v]``: replicas of group g of job j on node v (integer), split into ``ym`` (replicas
  below `min`, full value) and ``ye`` (elastic replicas, half value) where the group is elastic;
- candidate nodes per group (eligible, holding at least one replica on what is free, and at most
  `max_candidates` of them plus the nodes of the hint plan);
- ``keep[k]``: evictable running job k stays (bool); its usage is left out of `base` and each
  concern adds it back, times ``keep[k]``, where it counts usage (`held` lists it per node).

Each concern then adds its constraints and objective terms through `add_term` (the ordered list
`ENCODINGS` in `optsched.roundmodel.build`). Device indices are chosen after the nodes are fixed,
from the per-interconnect-group and per-device counts that the devices concern adds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from optsched import clock
from optsched.budget import slot_candidates
from optsched.concerns import eligibility
from optsched.ledger import Ledger
from optsched.model.plan import Plan
from optsched.problem import BArray, GroupSpec, IArray, JobSpec, Problem, RunningPlacement
from optsched.scores import score_most_allocated


class BuildTimeout(Exception):
    """Raised when building the model would overrun the round's time limit."""


MILLI = 1000
"""Fixed-point scale for fractional quantities (GPU shares, values)."""

Key = tuple[int, int, int]
"""(job, group, node)."""


@dataclass
class Term:
    """An objective term: an integer expression that equals `scale` x the metric's value."""

    expr: Any
    scale: float
    maximise: bool


@dataclass
class RoundModel:
    """Variables and bookkeeping of one round model (see module docstring)."""

    p: Problem
    base: Ledger
    jobs: list[JobSpec]
    max_candidates: int = 64
    hint: Plan | None = None
    allowed: BArray | None = None
    """Nodes the model may use (a neighbourhood); None = every node."""
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    a: dict[int, Any] = field(default_factory=dict)
    y: dict[Key, Any] = field(default_factory=dict)
    ym: dict[Key, Any] = field(default_factory=dict)
    ye: dict[Key, Any] = field(default_factory=dict)
    by_node: dict[int, list[Key]] = field(default_factory=lambda: defaultdict(list))
    by_group: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    terms: dict[str, Term] = field(default_factory=dict)
    term_ub: dict[str, float] = field(default_factory=dict)
    """Upper bound of each term's integer expression (for lexicographic weights)."""
    truncated: int = 0
    """Groups whose candidate nodes were capped (then the model's bound is not a bound of the round)."""
    _job_keys: dict[int, list[Key]] = field(default_factory=dict)
    _slots: dict[Any, Any] = field(default_factory=dict)
    _ub: dict[int, int] = field(default_factory=dict)
    _by_domain: dict[tuple[int, int], dict[int, list[Key]]] = field(default_factory=dict)
    device_plan: dict[str, Any] = field(default_factory=dict)
    """Per-device and per-interconnect-group variables, filled by the devices concern."""
    evictable: list[JobSpec] = field(default_factory=list)
    """Running jobs the round may evict: their usage is not in `base`; ``keep[k]`` holds it."""
    keep: dict[int, Any] = field(default_factory=dict)
    """``keep[k]``: running job k (index into `p.running`) stays where it is (bool)."""
    held: dict[int, list[tuple[Any, JobSpec, list[RunningPlacement]]]] = field(default_factory=dict)
    """Per node: (keep variable, running job, its replicas on the node) of the evictable jobs."""
    touched_fixed: BArray | None = None
    """(tenants, flavors): pairs that placements outside the model add usage to (a neighbourhood):
    their quota rules bind whatever the model does."""
    wanted: frozenset[str] = frozenset()
    """Objective terms that are built only when the objective names them (`fairness`)."""
    provision: bool = False
    """Provisioning slots are candidates (clusters with provisionable pools)."""
    slots_created: dict[int, int] = field(default_factory=dict)
    """Per pool: slots ``new-0`` .. ``new-(n-1)`` created whatever the model does, because work
    outside the model uses one of them (a neighbourhood; filled by the provisioning encoding)."""
    slot_used: dict[int, Any] = field(default_factory=dict)
    """``u[v]``: provisioning slot v is created (filled by the provisioning encoding)."""
    quota_usage: dict[tuple[int, int], Any] = field(default_factory=dict)
    """Per (tenant, flavor) with usage the round may change: the total usage after the round, in
    thousandths (filled by the quota concern)."""

    # ------------------------------------------------------------------ building
    @classmethod
    def whole_round(cls, p: Problem, evictable: list[JobSpec], **options: Any) -> RoundModel:
        """The model of every queued job, with the `evictable` running jobs' usage left out of
        `base` (``keep[k]`` holds it); `options` are the other fields (candidate cap, hint, ...)."""
        base = Ledger.with_running(p)
        for victim in evictable:
            base.add_running(victim, sign=-1.0)
        return cls(p, base, list(p.jobs), evictable=evictable, **options)

    def candidates(self, job: JobSpec, group: GroupSpec, hinted: set[int]) -> IArray:
        """Nodes where one replica of `group` could go, best-fit first, capped, hint nodes kept."""
        p = self.p
        ok = eligibility.mask(p, job, group)
        if not self.provision or group.spec.spread is not None:  # spread counts real nodes' domains only
            ok = ok & ~p.node_provisioned
        if self.allowed is not None:
            ok = ok & self.allowed
        ok = self.base.fits_mask(group, ok)
        nodes = np.flatnonzero(ok)
        if len(nodes) > self.max_candidates:
            self.truncated += 1
            order = np.argsort(-score_most_allocated(p, self.base, group, nodes), kind="stable")
            keep = set(nodes[order[: self.max_candidates]].tolist()) | (hinted & set(nodes.tolist()))
            # empty provisioning slots score lowest: the first ones of each pool stay candidates
            slots = nodes[p.node_provisioned[nodes]]
            for q in np.unique(p.node_pool[slots]).tolist():
                keep.update(slots[p.node_pool[slots] == q][: slot_candidates(self.max_candidates)].tolist())
            nodes = np.array(sorted(keep), dtype=np.int64)
        return nodes

    def fit_counts(self, group: GroupSpec, nodes: IArray) -> IArray:
        """Most replicas of `group` each node could hold alone (upper bounds of y), vectorised."""
        slots = None
        if group.share and not group.whole:
            key = ("share_slots", group.share)
            slots = self._slots.get(key)
            if slots is None:
                slots = self._slots[key] = self.base.share_slots(group.share)
        return self.base.replicas_fit(group, nodes, slots)

    def build_variables(self, deadline: float = float("inf")) -> None:
        """Admission and count variables for every job and candidate node (BuildTimeout past `deadline`)."""

        m = self.model
        hinted: dict[tuple[str, str], set[int]] = defaultdict(set)
        if self.hint is not None:
            for pl in self.hint.placements:
                hinted[(pl.job, pl.group)].add(self.p.node_index[pl.node])
        for job in self.evictable:
            k = self.p.running_index[job.id]
            self.keep[k] = m.new_bool_var(f"keep[{k}]")
            by_node: dict[int, list[RunningPlacement]] = defaultdict(list)
            for rp in job.placements:
                by_node[rp.node].append(rp)
            for v, pls in by_node.items():
                self.held.setdefault(v, []).append((self.keep[k], job, pls))
        for n, job in enumerate(self.jobs):
            if n % 32 == 0 and clock.now() > deadline:
                raise BuildTimeout(f"variables ({n} of {len(self.jobs)} jobs)")
            j = job.index
            self.a[j] = m.new_bool_var(f"a[{j}]")
            for g in job.groups:
                nodes = self.candidates(job, g, hinted[(job.id, g.name)])
                kept = []
                for v, ub in zip(nodes.tolist(), self.fit_counts(g, nodes).tolist(), strict=True):
                    if ub <= 0:
                        continue
                    key = (j, g.index, v)
                    var = m.new_int_var(0, ub, f"y[{j},{g.index},{v}]")
                    self._ub[var.index] = ub
                    self.y[key] = var
                    if g.rmax > g.rmin:
                        lo = m.new_int_var(0, min(ub, g.rmin), f"ym[{j},{g.index},{v}]")
                        hi = m.new_int_var(0, min(ub, g.rmax - g.rmin), f"ye[{j},{g.index},{v}]")
                        self._ub[lo.index], self._ub[hi.index] = min(ub, g.rmin), min(ub, g.rmax - g.rmin)
                        m.add(var == lo + hi)
                        self.ym[key], self.ye[key] = lo, hi
                    else:
                        self.ym[key] = var
                    self.by_node[v].append(key)
                    kept.append(v)
                self.by_group[(j, g.index)] = kept

    # ------------------------------------------------------------------ helpers for concerns
    def model_ub(self, var: Any) -> int:
        """Upper bound of a variable of this model (recorded at creation, else read from the model)."""
        known = self._ub.get(var.index)
        if known is not None:
            return known
        domain = self.model.proto.variables[var.index].domain
        return int(domain[len(domain) - 1])  # the proto wrapper ignores negative indices

    @staticmethod
    def sum(items: Any) -> Any:
        """A linear sum built in one call (Python's `sum` nests expressions: quadratic)."""
        items = list(items)
        return cp_model.LinearExpr.sum(items) if items else 0

    @staticmethod
    def wsum(items: Any, coefs: Any) -> Any:
        """A weighted linear sum built in one call."""
        items, coefs = list(items), [int(c) for c in coefs]
        return cp_model.LinearExpr.weighted_sum(items, coefs) if items else 0

    def total(self, j: int, g: int, part: str = "y") -> Any:
        """Sum over nodes of the group's `y` (or `ym` / `ye`)."""
        table = {"y": self.y, "ym": self.ym, "ye": self.ye}[part]
        return self.sum(table[(j, g, v)] for v in self.by_group[(j, g)] if (j, g, v) in table)

    def job_keys(self, j: int) -> list[Key]:
        """Every (job, group, node) key of job j (cached)."""
        cached = self._job_keys.get(j)
        if cached is None:
            job = self.p.jobs[j]
            cached = [(j, g.index, v) for g in job.groups for v in self.by_group[(j, g.index)]]
            self._job_keys[j] = cached
        return cached

    def keys_by_domain(self, j: int, level: int) -> dict[int, list[Key]]:
        """Job j's keys grouped by their node's domain at `level` (cached)."""
        cached = self._by_domain.get((j, level))
        if cached is None:
            at = self.p.node_domain_at(level)
            cached = {}
            for k in self.job_keys(j):
                cached.setdefault(int(at[k[2]]), []).append(k)
            self._by_domain[(j, level)] = cached
        return cached

    def add_term(self, name: str, expr: Any, scale: float, maximise: bool) -> None:
        """Register an objective term: `expr` equals `scale` x the metric's value."""
        self.terms[name] = Term(expr, scale, maximise)

    def hint_values(self) -> dict[Key, tuple[int, int]]:
        """(min, elastic) replica counts per key in the hint plan."""
        out: dict[Key, tuple[int, int]] = {}
        if self.hint is None:
            return out
        p = self.p
        for pl in self.hint.placements:
            job = p.jobs[p.job_index[pl.job]]
            key = (job.index, job.group_index[pl.group], p.node_index[pl.node])
            lo, hi = out.get(key, (0, 0))
            out[key] = (lo, hi + 1) if pl.elastic else (lo + 1, hi)
        return out
