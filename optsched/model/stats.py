"""What a solver reports about how it made a plan: typed statistics kept in the plan's JSON.

`SolverStats` is the plan's `solver` field. Its first fields (name, status, bound, gap, wall time,
seed) every solver fills; the others only the solvers they name: the start plan of a model
solver (`start`), the model it built and solved (`model`, and `milp` for the HiGHS back end), the
neighbourhood and eviction steps of a large round (`steps`), the greedy portfolio's tries
(`portfolio`), a Pareto search (`pareto`). Seconds are wall-clock seconds; values are in the
units of the objective terms (docs/metrics.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from optsched.model.base import Frozen, NonNeg

SolverStatus = Literal["optimal", "feasible", "fallback", "timeout_no_improvement", "heuristic"]

STATUS_MEANING: dict[str, str] = {
    "optimal": "the model solved (on large rounds a restriction of the round) was proven optimal; for the "
               "domain model or a start plan, the plan meets the round's bound on admitted value",
    "feasible": "a model's plan, not proven optimal (`gap` says how far at most): the domain model's, or a "
                "node-level model's better than the start plan",
    "fallback": "no model plan beat the start plan within the limit; the best baseline is returned",
    "timeout_no_improvement": "not produced by the solvers of this version (kept so that older plans load)",
    "heuristic": "a baseline's plan: no model was solved, no bound is claimed",
}
"""What each status tells a user (printed by the CLI's summary and docs/format.md)."""


class CandidateStats(Frozen):
    """A baseline plan the start plan was chosen among: its admitted value and what it cost."""

    admitted_value: float
    """Its admitted value (the `admitted_value` term)."""
    disruption: float | None = None
    """Lost work of its evictions, GPU-equivalent hours (the `disruption` term; the `kueue` candidate)."""
    cost: float | None = None
    """$/h (the `karpenter` candidate)."""
    cut: bool = False
    """The candidate was cut by the clock (jobs deferred with reason `time_limit`)."""


class ValueBoundStats(Frozen):
    """The aggregate LP value bound computed for the round (`optsched.solvers.bound`)."""

    value: float | None
    """The bound on admitted value; None: not computed."""
    s: NonNeg
    """Seconds the bound took."""
    status: str
    """HiGHS's status for the LP."""


class StartStats(Frozen):
    """How a model solver's start plan (its fallback and its hint) was found."""

    hint: str | None = None
    """The solver whose plan the start plan is (e.g. ``greedy:best-fit``, ``kueue``, ``best-fit+lp``)."""
    kueue: CandidateStats | None = None
    """The `kueue` candidate plan, where tenants and running jobs made it one."""
    karpenter: CandidateStats | None = None
    """The `karpenter` candidate plan, where nodes may be provisioned."""
    value_bound: ValueBoundStats | None = None
    """The aggregate LP value bound, when it fit the time limit."""
    guided: dict[str, float | None] = Field(default_factory=dict)
    """Admitted value of each baseline rerun in the bound's order, by label (None: cut by the clock)."""


class ModelStats(Frozen):
    """The round model a model back end built and solved."""

    max_candidates: int | None = None
    """Candidate nodes per group."""
    evictable: int | None = None
    """Running jobs the model could evict."""
    truncated_groups: int | None = None
    """Groups whose candidates were capped (then the model's bound is not the round's)."""
    variables: int | None = None
    """Variables of the model."""
    constraints: int | None = None
    """Constraints of the model."""
    hinted_vars: int | None = None
    """Variables given a hint value from the start plan."""
    build: dict[str, float] = Field(default_factory=dict)
    """Seconds per part of the build (the variables, then each concern's encoding)."""
    build_s: float | None = None
    """Seconds from the call's start until the model was built and hinted."""
    hint_status: str | None = None
    """CP-SAT's status completing the start plan into every variable (INFEASIBLE: a model bug)."""
    hint_s: float | None = None
    """Seconds completing the hint."""
    solve_s: float | None = None
    """Seconds in the solver."""
    phases: int = 1
    """1, or 2 for a lexicographic order with a tolerance (the first term, then the rest)."""
    unmodelled_terms: list[str] = Field(default_factory=list)
    """Objective terms the model does not state (compared on the metrics only)."""
    terms: dict[str, float] = Field(default_factory=dict)
    """The model's value of every term it states, for the model's own plan."""
    plan_terms: dict[str, float] | None = None
    """The metrics of the model's plan when another plan was returned (the start plan, kept on a
    tie or because the model's plan was not better)."""
    candidate_bound: float | None = None
    """The capped model's bound on admitted value (not a bound of the round)."""
    trace: list[tuple[float, float, float | None]] = Field(default_factory=list)
    """(seconds from the call's start, admitted value, bound at that moment) per solution found."""
    tie: str | None = None
    """How a tie with the start plan was settled (`hint kept`), if there was one."""
    violations: list[str] = Field(default_factory=list)
    """The validator's findings on a model plan that failed the check (a model bug)."""


class MilpStats(Frozen):
    """The HiGHS back end's translation and solve."""

    model_s: float | None = None
    """Seconds building the round model."""
    translate_s: float | None = None
    """Seconds translating it into HiGHS's arrays."""
    columns: int | None = None
    """Columns (variables) of the MILP."""
    rows: int | None = None
    """Rows (constraints) of the MILP."""
    nonzeros: int | None = None
    """Nonzero coefficients of the MILP."""
    highs_status: str | None = None
    """HiGHS's model status of the last solve."""
    levels: int | None = None
    """Levels of a lexicographic objective (one solve each)."""
    levels_solved: int | None = None
    """Levels solved within the time limit."""


class DomainStats(Frozen):
    """The domain model (`optsched.domain`): the round decided per cell, then placed on nodes."""

    cells: int
    """Cells (a leaf domain's nodes of one device model and flavor class)."""
    classes: int
    """Classes (the cells of one model and flavor class across the leaves)."""
    columns: int
    """Columns (variables) of the MILP."""
    rows: int
    """Rows (constraints) of the MILP."""
    nonzeros: int
    """Nonzero coefficients."""
    victims: int
    """Running jobs the model could evict."""
    integral: bool
    """The MIP was solved (False: its LP relaxation, rounded)."""
    highs_status: str
    """HiGHS's status of the solve."""
    lost_price: float
    """Objective weight of a GPU-equivalent hour of lost work against one unit of admitted value."""
    model_value: float | None = None
    """Admitted value of the model's own solution (the plan's may be lower: node-level packing)."""
    bound: float | None = None
    """The model's bound on the admitted value of every valid plan on the existing nodes."""
    build_s: float | None = None
    """Seconds building the model (its cells included)."""
    solve_s: float | None = None
    """Seconds HiGHS took."""
    assign_s: float | None = None
    """Seconds placing the model's replicas on nodes, naming preemptors and checking the plan."""
    admitted: int | None = None
    """Jobs the model admitted."""
    evictions: int | None = None
    """Evictions the model chose."""
    kept_back: int = 0
    """Victims put back because no admitted job might evict them (their room's jobs deferred)."""


class StepStats(Frozen):
    """One sub-model step of a large round: a neighbourhood of the best plan, or the re-decision
    of some preemptors' evictions."""

    kind: Literal["neighbourhood", "evictions"]
    """`neighbourhood` (a part of the best plan re-solved) or `evictions` (some preemptors' evictions re-decided)."""
    step: int | None = None
    """The step's number."""
    nodes: int | None = None
    """Nodes in the sub-model."""
    placed: int | None = None
    """Jobs of the plan inside the neighbourhood (they may move)."""
    deferred: int | None = None
    """Deferred jobs the neighbourhood may admit."""
    preemptors: int | None = None
    """Preemptors re-decided (`evictions` steps)."""
    victims: int | None = None
    """Running jobs the step may evict."""
    left_s: float | None = None
    """Seconds left to the steps' deadline when the step began."""
    build_s: float | None = None
    """Seconds building the sub-model."""
    hint_s: float | None = None
    """Seconds completing its hint."""
    s: float | None = None
    """Seconds the step took in all."""
    cpsat: str | None = None
    """CP-SAT's status."""
    phases: int = 1
    """Solves of the step (2 for a lexicographic order with a tolerance)."""
    result: str = ""
    """What the step changed, in words (e.g. value and lost work before and after)."""


class PortfolioStats(Frozen):
    """The `greedy` portfolio: each baseline tried, its admitted value and seconds."""

    tried: dict[str, float] = Field(default_factory=dict)
    """Admitted value of each baseline tried, by name."""
    seconds: dict[str, float] = Field(default_factory=dict)
    """Seconds each baseline took, by name."""


class ParetoStats(Frozen):
    """The Pareto set an `nsga2` plan was selected from."""

    objectives: list[str]
    """The objective terms the Pareto set trades off."""
    selected_by: Any
    """The selection rule (``"knee"``, weights or bounds)."""
    front_size: int
    """Plans on the Pareto front."""
    search: dict[str, Any] = Field(default_factory=dict)
    """The search's own statistics (`ParetoSet.stats`: evaluations, seconds, ...)."""


class SolverStats(Frozen):
    """Who made the plan and how: status, proven bound and gap where known, wall time (s), seed,
    and what the solver did (module docstring)."""

    name: str
    """The solver (and, for `auto` or a model solver's fallback, the route: `auto:cpsat`)."""
    status: SolverStatus = "heuristic"
    """`optimal`, `feasible`, `fallback`, `heuristic` (`STATUS_MEANING` says what each means)."""
    bound: float | None = None
    """A proven upper bound on the round's admitted value, where one is known."""
    gap: float | None = None
    """(bound - admitted value) / bound, a fraction; None: no bound."""
    wall_s: NonNeg = 0.0
    """Wall-clock seconds of the whole call, compile included."""
    seed: int = 0
    """The random seed the solver was given."""
    reason: str | None = None
    """Why the plan is the one returned (e.g. why a model solver fell back to its start plan)."""
    route: str | None = None
    """How a model solver searched: ``whole model``, ``neighbourhoods`` or ``eviction steps``, with why."""
    auto: str | None = None
    """Why `auto` chose this back end."""
    start: StartStats | None = None
    """How a model solver's start plan was found."""
    model: ModelStats | None = None
    """The round model a model solver built and solved."""
    milp: MilpStats | None = None
    """The HiGHS back end's translation and solve."""
    domain: DomainStats | None = None
    """The domain model, where the plan or its start plan came from it."""
    steps: list[StepStats] = Field(default_factory=list)
    """The sub-model steps of a large round, in order."""
    improved: int = 0
    """Steps that improved the plan."""
    lp_bound_existing_nodes: float | None = None
    """The LP value bound over existing nodes, where nodes may be provisioned (it is then not the round's)."""
    portfolio: PortfolioStats | None = None
    """The `greedy` portfolio's tries."""
    pareto: ParetoStats | None = None
    """The Pareto set an `nsga2` plan was selected from."""
