"""CP-SAT back end: the round model solved by OR-Tools CP-SAT (docs/formulation.md).

`solver` runs a round: the whole round as one model where it can be built in time, else the
eviction and placement neighbourhoods (`evictions`, `neighbourhood`); `params` maps the neutral
knobs onto CP-SAT's parameters.
"""

from optsched.solvers.cpsat.solver import solve_cpsat

__all__ = ["solve_cpsat"]
