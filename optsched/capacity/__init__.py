"""Offline capacity planning: how many reserved nodes to buy, and the on-demand and spot use
they leave, for demand scenarios over a horizon (Pyomo + HiGHS; docs/capacity.md)."""

from optsched.capacity.inputs import Demand, Pools, PoolType, Scenario, load_demand, load_pools
from optsched.capacity.planner import CapacityPlan, CostSplit, frontier, plan_capacity

__all__ = ["CapacityPlan", "CostSplit", "Demand", "PoolType", "Pools", "Scenario", "frontier", "load_demand",
           "load_pools", "plan_capacity"]
