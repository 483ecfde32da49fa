"""optsched: schedule AI compute clusters by mathematical optimisation.

The public surface: the documents (`Cluster`, `Queue`, `Plan`) and their loaders, `solve`,
`check` (the validator), `evaluate` (the metrics), `chargeback` (a plan's $/h per tenant and
pool), `bound` (an upper bound on admitted value for any plan), `pareto` (the trade-off between
objectives as a set of plans) and `InputError`.
"""

from optsched.bound import Bound, bound
from optsched.check import Violation, check
from optsched.errors import InputError, InputIssue
from optsched.metrics import Metrics, chargeback, evaluate
from optsched.model import Cluster, Plan, Queue, dump, load_cluster, load_plan, load_queue
from optsched.pareto import ParetoSet, pareto
from optsched.solve import solve, solver_names

__version__ = "0.1.0"

__all__ = [
    "Bound",
    "Cluster",
    "InputError",
    "InputIssue",
    "Metrics",
    "ParetoSet",
    "Plan",
    "Queue",
    "Violation",
    "__version__",
    "bound",
    "chargeback",
    "check",
    "dump",
    "evaluate",
    "load_cluster",
    "load_plan",
    "load_queue",
    "pareto",
    "solve",
    "solver_names",
]
