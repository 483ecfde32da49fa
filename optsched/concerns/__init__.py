"""One module per concern; each holds its rule's semantics once.

A concern module provides up to four parts, side by side:

- **check** ``check(view) -> list[Violation]``: the hard rule, for the validator (`optsched.check`);
- **term** ``term(view) -> dict[str, float]``: objective terms, for the metrics (`optsched.metrics`);
- **encoding** ``cpsat(r: RoundModel) -> None``: the rule and terms in the round model
  (`optsched.roundmodel.build.ENCODINGS` lists them in the order they are added);
- **search primitives**: the masks, pickers and count rules the greedy engine and the kueue and
  karpenter baselines call (`optsched.solvers.greedy`), and the per-problem data it derives
  (declared as `optsched.problem.Derived` values in the module, never kept elsewhere).

`CONCERNS` records, for every concern, each part it has or why it has none; a test
(tests/test_architecture.py) fails when a module of this package is not registered, a part is
neither given nor explained, or a check, term or encoding is used that `CONCERNS` does not name.

Adding a rule (say, a power budget per rack) touches exactly these places:

1. a new module here with its check, term (if it scores anything), encoding and search primitives;
2. its `Concern` entry in `CONCERNS` below (CHECKS and TERMS follow from it);
3. its encoding's line in `optsched.roundmodel.build.ENCODINGS` (the order of the model);
4. where replicas are placed one by one, its primitive in `JOB_RULES` (a job-level test) or, for
   a per-node filter, in `GreedyEngine._place_replica` (`optsched.solvers.greedy`);
5. docs/rules.md (the rule), docs/metrics.md (a term) and docs/formulation.md (the encoding).

The MILP back end, the exact fronts and NSGA-II read the round model and the metrics, so they
need no change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

from optsched.concerns import (
    capacity,
    completeness,
    cost,
    devices,
    eligibility,
    fabric,
    fragmentation,
    gang,
    locality,
    spread,
    value,
)
from optsched.concerns.base import Violation
from optsched.concerns.tenancy import fairshare, preemption, quota, running, serving
from optsched.ledger import Ledger, PlacedReplica
from optsched.problem import JobSpec, Problem
from optsched.view import PlanView

CheckFn = Callable[[PlanView], list[Violation]]
TermFn = Callable[[PlanView], dict[str, float]]
JobRule = Callable[[Problem, Ledger, JobSpec, Sequence[PlacedReplica]], "tuple[str, str] | None"]
"""A job-level search test: (reason, detail) when the job with these replicas breaks the rule."""


@dataclass(frozen=True)
class Concern:
    """A concern's parts (module docstring): each is given, or `missing` says why it has none."""

    name: str
    module: ModuleType
    check: CheckFn | None = None
    term: TermFn | None = None
    encodings: tuple[str, ...] = ()
    """Names of its entries in `optsched.roundmodel.build.ENCODINGS`."""
    search: tuple[Callable[..., object], ...] = ()
    """Its search primitives (what the greedy engine calls)."""
    missing: tuple[tuple[str, str], ...] = ()
    """(part, why it has none) for each absent part: check, term, encodings, search."""


CONCERNS: tuple[Concern, ...] = (
    Concern("completeness", completeness, check=completeness.check,
            missing=(("term", "no job vanishes: a rule, not a score"),
                     ("encodings", "the model decides every queued job (a[j]) and running job (keep[k])"),
                     ("search", "every baseline places or defers every job by construction"))),
    Concern("eligibility", eligibility, check=eligibility.check, search=(eligibility.mask, eligibility.device_nodes),
            missing=(("term", "a filter, not a score"),
                     ("encodings", "candidate nodes are eligible ones (`RoundModel.candidates`)"))),
    Concern("capacity", capacity, check=capacity.check, encodings=("capacity",), search=(Ledger.fits_mask,),
            missing=(("term", "a limit, not a score"),)),
    Concern("devices", devices, check=devices.check, encodings=("devices",), search=(devices.pick,),
            missing=(("term", "a limit, not a score"),)),
    Concern("gang", gang, check=gang.check, encodings=("gang",), search=(gang.target_counts, gang.count_problems),
            missing=(("term", "all-or-nothing: a rule, not a score"),)),
    Concern("fabric", fabric, check=fabric.check, term=fabric.term, encodings=("fabric",),
            search=(fabric.uplink_problem, fabric.colocate_mask)),
    Concern("spread", spread, check=spread.check, encodings=("spread",), search=(spread.allowed_nodes,),
            missing=(("term", "a skew limit, not a score"),)),
    Concern("quota", quota, check=quota.check, term=quota.term, encodings=("quota", "fairness"),
            search=(quota.job_problem,)),
    Concern("preemption", preemption, check=preemption.check, term=preemption.term, encodings=("preemption",),
            search=(preemption.preemptors, preemption.evictable_jobs)),
    Concern("serving", serving, check=serving.check, encodings=("serving",), search=(serving.serves_problems,),
            missing=(("term", "a rule, not a score: its cost is in `disruption`"),)),
    Concern("running", running, search=(running.running_table, running.held_flavors, running.lost_work),
            missing=(("check", "the running jobs' data: preemption, quota and serving judge them"),
                     ("term", "lost work is preemption's `disruption` term"),
                     ("encodings", "read by preemption's and quota's encodings"))),
    Concern("fairshare", fairshare, search=(fairshare.shares,),
            missing=(("check", "fair-sharing reclaims are in preemption's rule (`fairshare.strategy_problems`)"),
                     ("term", "Kueue's dominant resource shares order preemption; the `fairness` term is quota's DRF"),
                     ("encodings", "P2f (`strategies_cpsat`) is part of preemption's encoding, docs/formulation.md"))),
    Concern("value", value, term=value.term, encodings=("value",), search=(value.replica_value,),
            missing=(("check", "admitted value is scored, not constrained"),)),
    Concern("cost", cost, term=cost.term, encodings=("provisioning", "cost"),
            search=(cost.spot_loss_per_replica, eligibility.provisioning_of),
            missing=(("check", "provisioning within max_nodes is eligibility's rule; $/h is scored"),)),
    Concern("locality", locality, term=locality.term, encodings=("locality",), search=(locality.replica_seconds,),
            missing=(("check", "pull and read time is scored, not constrained"),)),
    Concern("fragmentation", fragmentation, term=fragmentation.term, search=(fragmentation.node_fragmentation,),
            missing=(("check", "a score, not a rule"),
                     ("encodings", "FGD's expected unusable GPUs depends on every node's free shape after the "
                                   "round: not modelled; plans are compared on the metric"))),
)
"""Every concern, in the order the validator reports its rules."""

CHECKS: tuple[tuple[str, CheckFn], ...] = tuple((c.name, c.check) for c in CONCERNS if c.check is not None)
"""The hard rules, in the order the validator reports them."""

TERM_ORDER = ("value", "preemption", "fabric", "cost", "locality", "fragmentation", "quota")
"""The order the metrics compute the terms in (and list their details)."""

TERMS: tuple[tuple[str, TermFn], ...] = tuple(
    (c.name, c.term) for name in TERM_ORDER for c in CONCERNS if c.name == name and c.term is not None)
"""The objective terms, each from the concern that defines it."""

JOB_RULES: tuple[JobRule, ...] = (fabric.uplink_problem, quota.job_problem)
"""The job-level tests the greedy engine runs after placing a job's replicas (in this order)."""

__all__ = ["CHECKS", "CONCERNS", "JOB_RULES", "TERMS", "Concern", "Violation"]
