"""optsched: schedule AI compute clusters by mathematical optimisation.

The public surface: the documents (`Cluster`, `Queue`, `Plan`) and their loaders,
`reference_cluster` (a bundled cluster by name), `solve`, `check` (the validator), `evaluate`
(the metrics), `chargeback` (a plan's $/h per tenant and pool), `bound` (an upper bound on
admitted value for any plan), `lost_work_bound` (the least lost work of any plan admitting a
given value), `pareto` (the trade-off between objectives as a set of plans) and
`InputError`.

Names are loaded on first use (PEP 562), so that ``import optsched`` does not load OR-Tools,
HiGHS, scipy or pymoo: a `check` or an `evaluate` never pays for the solvers
(benchmarks/results/startup.md).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_PUBLIC = {
    "Bound": "optsched.bound",
    "LostWorkBound": "optsched.bound",
    "bound": "optsched.bound",
    "lost_work_bound": "optsched.bound",
    "Violation": "optsched.check",
    "check": "optsched.check",
    "InputError": "optsched.errors",
    "InputIssue": "optsched.errors",
    "Metrics": "optsched.metrics",
    "chargeback": "optsched.metrics",
    "evaluate": "optsched.metrics",
    "Cluster": "optsched.model",
    "Plan": "optsched.model",
    "Queue": "optsched.model",
    "dump": "optsched.model",
    "load_cluster": "optsched.model",
    "load_plan": "optsched.model",
    "load_queue": "optsched.model",
    "ParetoSet": "optsched.pareto",
    "pareto": "optsched.pareto",
    "solve": "optsched.solve",
    "solver_names": "optsched.solve",
    "reference_cluster": "optsched.bundled",
}
"""Public name -> the module that defines it."""

if TYPE_CHECKING:
    from optsched.bound import Bound, LostWorkBound, bound, lost_work_bound
    from optsched.bundled import reference_cluster
    from optsched.check import Violation, check
    from optsched.errors import InputError, InputIssue
    from optsched.metrics import Metrics, chargeback, evaluate
    from optsched.model import Cluster, Plan, Queue, dump, load_cluster, load_plan, load_queue
    from optsched.pareto import ParetoSet, pareto
    from optsched.solve import solve, solver_names


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'optsched' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


class _Package(types.ModuleType):
    """The package object: three public functions share their name with the module that defines
    them (`bound`, `pareto`, `solve`). Importing such a module binds it as an attribute of the
    package; the function keeps the name, as it did when the package imported them eagerly."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _PUBLIC.get(name) == value.__name__ \
                and not isinstance(getattr(value, name, None), types.ModuleType):
            return  # the submodule stays reachable as sys.modules[...] and by `from ... import`
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "Bound",
    "Cluster",
    "InputError",
    "InputIssue",
    "LostWorkBound",
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
    "lost_work_bound",
    "pareto",
    "reference_cluster",
    "solve",
    "solver_names",
]
