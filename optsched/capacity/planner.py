"""The capacity planner: a two-stage stochastic MILP in Pyomo, solved by HiGHS (docs/capacity.md).

First stage: reserved nodes per pool type, committed for the horizon. Second stage, per period
and scenario: on-demand and spot nodes, spot capped by the provider's availability and by the
spot-tolerant share of the demand. Guaranteed demand is covered in every period and scenario, or
in a probability-weighted share `service_level` of them (a chance constraint with one indicator
per period-scenario). Expected cost is minimised. Symbols as in docs/capacity.md.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pydantic import BaseModel, ConfigDict
from pyomo.contrib.appsi.base import TerminationCondition
from pyomo.contrib.appsi.solvers import Highs

from optsched.arguments import require_time_limit
from optsched.capacity.inputs import Demand, Pools, cross_check
from optsched.errors import InputError, InputIssue


class CostSplit(BaseModel):
    """Expected cost over the horizon, in $, by part."""

    model_config = ConfigDict(frozen=True)

    reserved: float
    on_demand: float
    spot: float

    @property
    def total(self) -> float:
        """Reserved + on-demand + spot ($)."""
        return self.reserved + self.on_demand + self.spot


class CapacityPlan(BaseModel):
    """The planner's decision and what it costs."""

    model_config = ConfigDict(frozen=True)

    reserved: dict[str, int]
    """Reserved nodes per pool type."""
    on_demand_node_hours: dict[str, float]
    """Expected on-demand node-hours per pool type over the horizon."""
    spot_node_hours: dict[str, float]
    """Expected spot node-hours per pool type over the horizon."""
    cost: CostSplit
    cost_by_tenant: dict[str, float]
    """Expected cost ($) attributed to tenants: each device model's cost (its pools' reserved,
    on-demand and spot cost) split by the tenants' expected GPU-hours of demand on that model
    (reserved idle time included: it is paid for the tenants of that model)."""
    reserved_utilisation: float
    """Expected share of reserved GPU-hours that guaranteed demand uses (reserved capacity is used
    first: it is paid anyway); 0 without reserved nodes."""
    service_level: float
    """Probability-weighted share of period-scenarios whose guaranteed demand is covered."""
    status: str
    """HiGHS termination: ``optimal`` or ``time_limit`` (then `gap` says how far)."""
    gap: float | None
    seconds: float
    """Wall time: building the model and solving it."""
    build_seconds: float
    """Of which building the Pyomo model (Python)."""
    variables: int


def _val(var: Any) -> float:
    """A variable's value; 0 for one no constraint or objective uses (HiGHS never sees it)."""
    v = pyo.value(var, exception=False)
    return 0.0 if v is None else float(v)


def _arrays(demand: Demand, pools: Pools) -> tuple[dict[str, Any], ...]:
    """Per model m, scenario s: demand D[m][s] (periods,) and spot share tol[m][s]."""
    models = demand.models
    totals = [s.totals() for s in demand.scenarios]
    d = {m: np.array([t.get(m, [0.0] * demand.periods) for t in totals], dtype=float) for m in models}
    tol = {m: np.array([s.spot_tolerant.get(m, 0.0) for s in demand.scenarios]) for m in models}
    return d, tol


def plan_capacity(demand: Demand, pools: Pools, *, service_level: float = 1.0, time_limit: float = 60.0,
                  mip_gap: float = 1e-4, fixed_reserved: dict[str, int] | None = None) -> CapacityPlan:
    """Minimise the expected cost of covering `demand` with `pools` (module docstring).

    `service_level` in (0, 1]: 1 covers every period of every scenario; below 1, uncovered
    period-scenarios (probability-weighted) may add up to 1 - service_level. `fixed_reserved`
    fixes the first stage (a rule of thumb to compare with); pools not named get 0.
    """
    if not 0 < service_level <= 1:
        raise InputError([InputIssue("service_level", "range", f"must be in (0, 1], got {service_level}")])
    time_limit = require_time_limit(time_limit)
    cross_check(demand, pools)
    if fixed_reserved is not None:
        unknown = [k for k in fixed_reserved if k not in {p.name for p in pools.pools}]
        if unknown:
            raise InputError([InputIssue("fixed_reserved", "unknown_pool", f"unknown pool types {unknown}")])
    start = time.perf_counter()
    d, tol = _arrays(demand, pools)
    n_t, n_s, h = demand.periods, len(demand.scenarios), demand.period_hours
    prob = [s.probability for s in demand.scenarios]
    pool_list = pools.pools
    by_model = {m: [i for i, p in enumerate(pool_list) if p.model == m] for m in demand.models}

    m = pyo.ConcreteModel("capacity")
    m.P = pyo.RangeSet(0, len(pool_list) - 1)
    m.T = pyo.RangeSet(0, n_t - 1)
    m.S = pyo.RangeSet(0, n_s - 1)

    def reserved_bounds(_: Any, i: int) -> tuple[int, int | None]:
        p = pool_list[i]
        if fixed_reserved is not None:
            k = fixed_reserved.get(p.name, 0)
            return k, k
        return 0, p.max_reserved

    m.R = pyo.Var(m.P, domain=pyo.NonNegativeIntegers, bounds=reserved_bounds)
    m.O = pyo.Var(m.P, m.T, m.S, domain=pyo.NonNegativeReals)

    def spot_bounds(_: Any, i: int, t: int, s: int) -> tuple[float, float]:
        p = pool_list[i]
        return 0.0, (p.spot_available_nodes if p.spot_per_node_hour is not None else 0.0)

    m.X = pyo.Var(m.P, m.T, m.S, domain=pyo.NonNegativeReals, bounds=spot_bounds)  # spot nodes
    chance = service_level < 1.0
    if chance:
        m.U = pyo.Var(m.T, m.S, domain=pyo.Binary)  # 1: the period-scenario's demand is not covered

    def cover(mdl: Any, mi: int, t: int, s: int) -> Any:
        model = demand.models[mi]
        need = float(d[model][s, t])
        if need <= 0:
            return pyo.Constraint.Skip
        supply = sum(pool_list[i].gpus_per_node * (mdl.R[i] + mdl.O[i, t, s] + mdl.X[i, t, s]) for i in by_model[model])
        return supply + (need * mdl.U[t, s] if chance else 0) >= need  # C1

    m.M = pyo.RangeSet(0, len(demand.models) - 1)
    m.cover = pyo.Constraint(m.M, m.T, m.S, rule=cover)

    def spot_share(mdl: Any, mi: int, t: int, s: int) -> Any:
        model = demand.models[mi]
        spots = [i for i in by_model[model] if pool_list[i].spot_per_node_hour is not None]
        if not spots:
            return pyo.Constraint.Skip
        cap = float(tol[model][s] * d[model][s, t])
        return sum(pool_list[i].gpus_per_node * mdl.X[i, t, s] for i in spots) <= cap  # C2

    m.spot_share = pyo.Constraint(m.M, m.T, m.S, rule=spot_share)
    if chance:
        m.chance = pyo.Constraint(expr=sum(prob[s] * m.U[t, s] for t in m.T for s in m.S) / n_t
                                  <= 1.0 - service_level + 1e-12)  # C3
    horizon = n_t * h
    reserved_cost = horizon * sum(pool_list[i].reserved_per_node_hour * m.R[i] for i in m.P)
    od_cost = h * sum(prob[s] * pool_list[i].on_demand_per_node_hour * m.O[i, t, s]
                      for i in m.P for t in m.T for s in m.S)
    spot_cost = h * sum(prob[s] * (pool_list[i].spot_per_node_hour or 0.0) * m.X[i, t, s]
                        for i in m.P if pool_list[i].spot_per_node_hour is not None for t in m.T for s in m.S)
    m.cost = pyo.Objective(expr=reserved_cost + od_cost + spot_cost, sense=pyo.minimize)

    built = time.perf_counter() - start
    opt = Highs()
    opt.config.time_limit = max(1.0, time_limit - (time.perf_counter() - start))
    opt.config.mip_gap = mip_gap
    opt.config.load_solution = False
    res = opt.solve(m)
    tc = res.termination_condition
    if tc == TerminationCondition.infeasible:
        raise InputError([InputIssue("pools", "infeasible",
                                     "the pools cannot cover the demand at this service level (max_reserved and "
                                     "spot caps, no on-demand price?)")])
    if res.best_feasible_objective is None:
        raise RuntimeError(f"HiGHS found no capacity plan: {tc}")
    res.solution_loader.load_vars()
    reserved = {pool_list[i].name: round(_val(m.R[i])) for i in m.P}
    o = np.array([[[_val(m.O[i, t, s]) for s in m.S] for t in m.T] for i in m.P]).reshape(len(pool_list), n_t, n_s)
    x = np.array([[[_val(m.X[i, t, s]) for s in m.S] for t in m.T] for i in m.P]).reshape(len(pool_list), n_t, n_s)
    pr = np.array(prob)
    od_hours = {pool_list[i].name: float(h * (o[i] @ pr).sum()) for i in range(len(pool_list))}
    spot_hours = {pool_list[i].name: float(h * (x[i] @ pr).sum()) for i in range(len(pool_list))}
    split = CostSplit(
        reserved=horizon * sum(p.reserved_per_node_hour * reserved[p.name] for p in pool_list),
        on_demand=sum(p.on_demand_per_node_hour * od_hours[p.name] for p in pool_list),
        spot=sum((p.spot_per_node_hour or 0.0) * spot_hours[p.name] for p in pool_list))
    by_tenant: dict[str, float] = {}
    for model, idx in by_model.items():
        cost_m = sum(horizon * pool_list[i].reserved_per_node_hour * reserved[pool_list[i].name]
                     + pool_list[i].on_demand_per_node_hour * od_hours[pool_list[i].name]
                     + (pool_list[i].spot_per_node_hour or 0.0) * spot_hours[pool_list[i].name] for i in idx)
        hours: dict[str, float] = {}
        for s_i, sc in enumerate(demand.scenarios):
            for tenant, series in sc.by_tenant().get(model, {}).items():
                hours[tenant] = hours.get(tenant, 0.0) + prob[s_i] * float(np.sum(series))
        total_h = sum(hours.values())
        for tenant, hrs in hours.items():
            by_tenant[tenant] = by_tenant.get(tenant, 0.0) + (cost_m * hrs / total_h if total_h else 0.0)
    used = total = 0.0
    for model, idx in by_model.items():
        cap = sum(pool_list[i].gpus_per_node * reserved[pool_list[i].name] for i in idx)
        used += float((np.minimum(d[model], cap).sum(axis=1) * pr).sum()) * h
        total += cap * horizon
    uncovered = 0.0
    if chance:
        u = np.array([[_val(m.U[t, s]) for s in m.S] for t in m.T])
        uncovered = float((np.round(u) @ pr).sum() / n_t)
    best, bound = res.best_feasible_objective, res.best_objective_bound
    gap = None if bound is None or not math.isfinite(bound) else max(0.0, (best - bound) / max(abs(best), 1e-9))
    return CapacityPlan(
        reserved=reserved, on_demand_node_hours=od_hours, spot_node_hours=spot_hours, cost=split,
        cost_by_tenant=by_tenant,
        reserved_utilisation=used / total if total else 0.0, service_level=1.0 - uncovered,
        status="optimal" if tc == TerminationCondition.optimal else str(tc.name),
        gap=gap, seconds=time.perf_counter() - start, build_seconds=built, variables=m.nvariables())


def frontier(demand: Demand, pools: Pools, levels: list[float], **kwargs: Any) -> list[tuple[float, CapacityPlan]]:
    """The cost-vs-service-level frontier: one plan per service level."""
    return [(level, plan_capacity(demand, pools, service_level=level, **kwargs)) for level in levels]
