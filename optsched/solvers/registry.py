"""The solvers behind `solve(..., solver=name)`: one registry of names.

Each solver module declares its `SolverInfo` list (`optsched.solvers.contract`: name, what it is,
which knobs it honours, the function of the one signature); `LOADERS` maps each name to a small
function that imports that module only when the solver is asked for, so that OR-Tools, HiGHS and
pymoo load only with the solvers that use them. A new solver is one module with its `SOLVERS`
plus one line in `LOADERS` (a test checks that every loader returns the solver of its name, and
that every solver keeps the contract).
"""

from __future__ import annotations

from collections.abc import Callable

from optsched.errors import InputError, InputIssue
from optsched.solvers.contract import SolverInfo


def _greedy() -> list[SolverInfo]:
    from optsched.solvers.portfolio import SOLVERS

    return SOLVERS


def _kueue() -> list[SolverInfo]:
    from optsched.solvers.kueue import SOLVERS

    return SOLVERS


def _karpenter() -> list[SolverInfo]:
    from optsched.solvers.karpenter import SOLVERS

    return SOLVERS


def _cpsat() -> list[SolverInfo]:
    from optsched.solvers.cpsat.solver import SOLVERS

    return SOLVERS


def _milp() -> list[SolverInfo]:
    from optsched.solvers.milp.solver import SOLVERS

    return SOLVERS


def _domain() -> list[SolverInfo]:
    from optsched.solvers.domain import SOLVERS

    return SOLVERS


def _nsga2() -> list[SolverInfo]:
    from optsched.pareto.solver import SOLVERS

    return SOLVERS


def _baseline_names() -> tuple[str, ...]:
    from optsched.solvers.greedy import NAMED_STRATEGIES

    return tuple(NAMED_STRATEGIES)


LOADERS: dict[str, Callable[[], list[SolverInfo]]] = {
    "cpsat": _cpsat,
    "milp": _milp,
    "domain": _domain,
    "nsga2": _nsga2,
    "greedy": _greedy,
    "kueue": _kueue,
    "karpenter": _karpenter,
}
"""Solver name -> the loader of the module that provides it (the placement baselines, by their
strategy names, come with ``greedy``)."""


MODEL_BACK_ENDS = ("cpsat", "milp")
"""The back ends `auto` chooses between: `optsched.solve` loads them when it is imported."""


def preload(names: tuple[str, ...] = MODEL_BACK_ENDS) -> None:
    """Import the modules of these solvers now (OR-Tools with pandas, SciPy's LP, HiGHS: 0.93 s
    median in benchmarks/results/startup.md), so that the first round of a process does not spend
    its time limit importing them."""
    for name in names:
        LOADERS[name]()


def solver_names() -> list[str]:
    """Names `solve(..., solver=...)` accepts (``auto`` picks one of the model back ends)."""
    return ["auto", *LOADERS, *_baseline_names()]


def lookup(name: str) -> SolverInfo:
    """The registered solver `name` (InputError naming the field when there is none)."""
    loader = LOADERS.get(name) or (_greedy if name in _baseline_names() else None)
    if loader is not None:
        for info in loader():
            if info.name == name:
                return info
    raise InputError([InputIssue("solver", "unknown_solver", f"{name!r}; known: {solver_names()}")])


__all__ = ["LOADERS", "MODEL_BACK_ENDS", "lookup", "preload", "solver_names"]
