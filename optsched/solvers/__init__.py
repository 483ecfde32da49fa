"""Search strategies over the shared problem: greedy baselines now; cpsat, milp, nsga2 later."""

from optsched.solvers.greedy import STRATEGIES, solve_greedy

__all__ = ["STRATEGIES", "solve_greedy"]
