"""MILP back end: the round model translated to sparse arrays (`translate`) and solved by HiGHS
(`highs`); `solver` runs a round."""

from optsched.solvers.milp.solver import MIP_GAP, model_bound, solve_milp

__all__ = ["MIP_GAP", "model_bound", "solve_milp"]
