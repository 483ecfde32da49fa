"""The objective terms of any plan, computed the same way for every solver (imports no solver).

Units (see docs/metrics.md):
- admitted_value: priority-weighted GPU-equivalents x device speed (higher is better)
- disruption: work lost by evictions, in GPU-equivalent hours (every resource priced by its dominant share)
- topology: domains spanned beyond the fewest possible, summed over jobs and levels
- cost: $/h of non-reserved nodes hosting work plus provisioned nodes, plus the expected spot interruption loss
- locality: seconds of image pulls and dataset reads
- fragmentation: expected free GPUs the workload mix cannot use (FGD)
- fairness: summed deviation of dominant shares from weighted fair shares (fraction of cluster)
- queue_delay: priority-weighted hours deferred jobs have waited
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from optsched import clock
from optsched.concerns import TERMS, cost
from optsched.model.cluster import Cluster
from optsched.model.plan import OBJECTIVE_TERMS, Plan
from optsched.model.queue import Queue
from optsched.problem import Problem, compile_problem
from optsched.view import PlanView


class Metrics(BaseModel):
    """Every objective term of a plan, plus the details behind them."""

    model_config = ConfigDict(frozen=True)

    admitted_value: float
    disruption: float
    topology: float
    cost: float
    locality: float
    fragmentation: float
    fairness: float
    queue_delay: float
    details: dict[str, float]

    def objective(self) -> dict[str, float]:
        """The eight objective terms as a dict (what a Plan carries)."""
        return {k: float(getattr(self, k)) for k in OBJECTIVE_TERMS}


def evaluate_problem(problem: Problem, plan: Plan) -> Metrics:
    """Metrics of `plan` against an already compiled problem."""
    return evaluate_view(PlanView(problem, plan))


def evaluate_view(view: PlanView) -> Metrics:
    """Metrics of a plan already indexed as a `PlanView` (a caller that also checks the plan
    builds the view once: `check.check_view`)."""
    problem, plan = view.problem, view.plan
    clock.charge(clock.EVALUATE_S * (len(problem.jobs) + len(problem.running)))  # deterministic mode's measure
    values: dict[str, float] = {}
    for _name, fn in TERMS:
        values.update(fn(view))
    terms = {k: values.pop(k) for k in OBJECTIVE_TERMS}
    gpus = sum(r.job.groups[r.group].gpu for r in view.replicas)
    values["placed_gpus"] = float(gpus)
    values["placed_replicas"] = float(len(view.replicas))
    values["deferred_jobs"] = float(len(plan.deferred))
    values["evictions"] = float(len(plan.evictions))
    return Metrics(**terms, details=values)


def evaluate(cluster: Cluster, queue: Queue, plan: Plan) -> Metrics:
    """Every objective term of `plan` for `cluster` and `queue`."""
    return evaluate_problem(compile_problem(cluster, queue), plan)


Chargeback = dict[str, dict[str, dict[str, float]]]
"""tenant -> pool -> {"used": $/h, "idle_reserved": $/h} (`optsched.concerns.cost.chargeback`)."""


def chargeback_problem(problem: Problem, plan: Plan) -> Chargeback:
    """The plan's $/h per tenant and pool against an already compiled problem."""
    return cost.chargeback(PlanView(problem, plan))


def chargeback(cluster: Cluster, queue: Queue, plan: Plan) -> Chargeback:
    """What each tenant is charged per pool ($/h) for `plan`: the nodes it works on by its share
    of each, and its share of idle reserved nodes (docs/metrics.md, "Chargeback")."""
    return chargeback_problem(compile_problem(cluster, queue), plan)


__all__ = ["Chargeback", "Metrics", "chargeback", "chargeback_problem", "evaluate", "evaluate_problem", "evaluate_view"]
