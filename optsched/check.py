"""The validator: the ground truth every solver is tested against.

`check(cluster, queue, plan)` returns every broken hard rule of DESIGN.md, each naming the rule,
the job/replica/node and the numbers. It asks each concern in `optsched.concerns.CHECKS` for its
violations and imports no solver.
"""

from __future__ import annotations

from optsched.concerns import CHECKS, Violation
from optsched.model.cluster import Cluster
from optsched.model.plan import Plan
from optsched.model.queue import Queue
from optsched.problem import Problem, compile_problem
from optsched.view import PlanView


def check_problem(problem: Problem, plan: Plan) -> list[Violation]:
    """Violations of `plan` against an already compiled problem."""
    return check_view(PlanView(problem, plan))


def check_view(view: PlanView) -> list[Violation]:
    """Violations of a plan already indexed as a `PlanView` (a caller that also evaluates the plan
    builds the view once: `metrics.evaluate_view`)."""
    out: list[Violation] = []
    for _name, fn in CHECKS:
        out.extend(fn(view))
    return out


def check(cluster: Cluster, queue: Queue, plan: Plan) -> list[Violation]:
    """Every hard-rule violation of `plan` for `cluster` and `queue` (empty list: valid)."""
    return check_problem(compile_problem(cluster, queue), plan)


__all__ = ["Violation", "check", "check_problem", "check_view"]
