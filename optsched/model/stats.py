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
    "optimal": "the model solved (on large rounds a restriction of the round) was proven optimal",
    "feasible": "a model plan better than the start plan, not proven optimal (`gap` says how far at most)",
    "fallback": "no model plan beat the start plan within the limit; the best baseline is returned",
    "timeout_no_improvement": "not produced by the solvers of this version (kept so that older plans load)",
    "heuristic": "a baseline's plan: no model was solved, no bound is claimed",
}
"""What each status tells a user (printed by the CLI's summary and docs/format.md)."""


class CandidateStats(Frozen):
    """A baseline plan the start plan was chosen among: its admitted value and what it cost."""

    admitted_value: float
    disruption: float | None = None
    """Lost GPU-hours of its evictions (the `kueue` candidate)."""
    cost: float | None = None
    """$/h (the `karpenter` candidate)."""
    cut: bool = False
    """The candidate was cut by the clock (jobs deferred with reason `time_limit`)."""


class ValueBoundStats(Frozen):
    """The aggregate LP value bound computed for the round (`optsched.solvers.bound`)."""

    value: float | None
    s: NonNeg
    status: str


class StartStats(Frozen):
    """How a model solver's start plan (its fallback and its hint) was found."""

    hint: str | None = None
    """The solver whose plan the start plan is (e.g. ``greedy:best-fit``, ``kueue``, ``best-fit+lp``)."""
    kueue: CandidateStats | None = None
    karpenter: CandidateStats | None = None
    value_bound: ValueBoundStats | None = None
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
    constraints: int | None = None
    hinted_vars: int | None = None
    build: dict[str, float] = Field(default_factory=dict)
    """Seconds per part of the build (the variables, then each concern's encoding)."""
    build_s: float | None = None
    """Seconds from the call's start until the model was built and hinted."""
    hint_status: str | None = None
    """CP-SAT's status completing the start plan into every variable (INFEASIBLE: a model bug)."""
    hint_s: float | None = None
    solve_s: float | None = None
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
    violations: list[str] = Field(default_factory=list)
    """The validator's findings on a model plan that failed the check (a model bug)."""


class MilpStats(Frozen):
    """The HiGHS back end's translation and solve."""

    model_s: float | None = None
    translate_s: float | None = None
    columns: int | None = None
    rows: int | None = None
    nonzeros: int | None = None
    highs_status: str | None = None
    levels: int | None = None
    levels_solved: int | None = None


class StepStats(Frozen):
    """One sub-model step of a large round: a neighbourhood of the best plan, or the re-decision
    of some preemptors' evictions."""

    kind: Literal["neighbourhood", "evictions"]
    step: int | None = None
    nodes: int | None = None
    placed: int | None = None
    """Jobs of the plan inside the neighbourhood (they may move)."""
    deferred: int | None = None
    """Deferred jobs the neighbourhood may admit."""
    preemptors: int | None = None
    victims: int | None = None
    left_s: float | None = None
    """Seconds left to the steps' deadline when the step began."""
    build_s: float | None = None
    hint_s: float | None = None
    s: float | None = None
    cpsat: str | None = None
    """CP-SAT's status."""
    phases: int = 1
    result: str = ""


class PortfolioStats(Frozen):
    """The `greedy` portfolio: each baseline tried, its admitted value and seconds."""

    tried: dict[str, float] = Field(default_factory=dict)
    seconds: dict[str, float] = Field(default_factory=dict)


class ParetoStats(Frozen):
    """The Pareto set an `nsga2` plan was selected from."""

    objectives: list[str]
    selected_by: Any
    """The selection rule (``"knee"``, weights or bounds)."""
    front_size: int
    search: dict[str, Any] = Field(default_factory=dict)
    """The search's own statistics (`ParetoSet.stats`: evaluations, seconds, ...)."""


class SolverStats(Frozen):
    """Who made the plan and how: status, proven bound and gap where known, wall time (s), seed,
    and what the solver did (module docstring)."""

    name: str
    status: SolverStatus = "heuristic"
    bound: float | None = None
    gap: float | None = None
    wall_s: NonNeg = 0.0
    seed: int = 0
    reason: str | None = None
    """Why the plan is the one returned (e.g. why a model solver fell back to its start plan)."""
    route: str | None = None
    """How a model solver searched: ``whole model``, ``neighbourhoods`` or ``eviction steps``, with why."""
    auto: str | None = None
    """Why `auto` chose this back end."""
    start: StartStats | None = None
    model: ModelStats | None = None
    milp: MilpStats | None = None
    steps: list[StepStats] = Field(default_factory=list)
    improved: int = 0
    """Steps that improved the plan."""
    lp_bound_existing_nodes: float | None = None
    """The LP value bound over existing nodes, where nodes may be provisioned (it is then not the round's)."""
    portfolio: PortfolioStats | None = None
    pareto: ParetoStats | None = None
