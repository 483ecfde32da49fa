"""CP-SAT back end: the whole round as one OR-Tools CP-SAT model (docs/formulation.md).

`solve_cpsat` first gets a plan without a model (`optsched.solvers.incumbent`: the best greedy
baselines, the `kueue` plan on a cluster with tenants, the LP-guided reruns); it is the fallback
and a complete hint. It then builds the shared variables (`CpsatRound`), asks each concern to add its
constraints and terms in the order of `ENCODINGS`, solves within what is left of the time limit,
decodes node counts back to replicas, device indices and evictions, and checks the plan with the
validator. Rounds too large for one model go to the eviction and placement neighbourhoods
(`evictions`, `neighbourhood`). If CP-SAT finds nothing better, or its plan fails the check (a
bug, reported in `solver.extra`), the fallback plan is returned with status `fallback`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

from ortools.sat.python import cp_model

from optsched.check import check_problem
from optsched.concerns import capacity, cost, devices, eligibility, fabric, gang, locality, spread, value
from optsched.concerns.tenancy import preemption, quota
from optsched.latency import gc_paused
from optsched.metrics import evaluate_problem
from optsched.model.plan import Deferred, Placement, Plan, SolverStats
from optsched.objective import EXACT, Objective, ObjectiveSpec
from optsched.problem import Problem
from optsched.solvers.cpsat import evictions, neighbourhood
from optsched.solvers.cpsat.variables import BuildTimeout, CpsatRound, slot_candidates
from optsched.solvers.incumbent import NOT_ADMITTED, finish_early, starting_plan

ENCODINGS: tuple[tuple[str, Callable[[CpsatRound], None]], ...] = (
    ("gang", gang.cpsat),  # admission, min/elastic replicas, ratios
    ("capacity", capacity.cpsat),  # per-node resources
    ("devices", devices.cpsat),  # whole devices per interconnect group, shares per device
    ("fabric", fabric.cpsat),  # required topology, colocation, uplinks, topology term
    ("spread", spread.cpsat),  # topology spread skew
    ("quota", quota.cpsat),  # nominal, borrowing, lending
    ("fairness", quota.fairness_cpsat),  # weighted DRF deviation (when the objective names it)
    ("provisioning", cost.provisioning_cpsat),  # which provisioning slots are created, in order
    ("cost", cost.cpsat),  # $/h: nodes hosting work, new nodes, spot loss (when the objective names it)
    ("locality", locality.cpsat),  # image pull and dataset read seconds (when the objective names it)
    ("preemption", preemption.cpsat),  # which evictable running jobs go, why, and the work lost
    ("value", value.cpsat),  # admitted value and queue delay terms
)
"""Each concern's CP-SAT encoding, in the order they are added (eligibility: candidate nodes)."""

MODELLED_TERMS = frozenset({"admitted_value", "queue_delay", "disruption", "topology", "fairness", "cost",
                            "locality"})
"""Objective terms the encodings add to the model (`fragmentation` is not modelled)."""

TARGET_COUNT_VARIABLES = 24_000
"""Candidate nodes per group are capped so that the model has about this many count variables:
on mixed-cloud-10k with 1,000 jobs, 16 candidates per group (48k variables) gave the best plan in
10 s among 8, 16 and 32 (benchmarks/results/cpsat-tuning.md)."""


SECONDS_PER_CANDIDATE = 8e-5
"""Measured cost of building the model and completing its hint per (group, candidate node) pair:
6.5e-5 to 7.6e-5 s on mixed-cloud-10k with 1,000 jobs (benchmarks/results/cpsat-tuning.md), 4.7e-5
on dgx-h100-1k with 300 jobs; rounded up."""


BUILD_MARGIN = 1.5
"""A whole model is built only when the time left to 75% of the limit, after the baselines, is at
least this many times its estimated build time; else the round goes to the neighbourhoods. On
mixed-cloud-10k with 1,000 jobs and provisionable pools, the baselines (karpenter among them)
took 4.6 s of a 10 s round, and building the model (2.8 s estimated) ran past 7.5 s: the round
fell back (a profile beside benchmarks/results/cost.md)."""


def candidate_cap(p: Problem) -> int:
    """Candidate nodes per group: 64 on small rounds, fewer as the queue grows (at least 8)."""
    groups = sum(len(j.groups) for j in p.jobs)
    return int(min(64, max(8, TARGET_COUNT_VARIABLES // max(groups, 1))))


FINISH_SECONDS_PER_JOB = 8e-4
"""Time kept back per queued and running job after the solve: on mixed-cloud-10k at 4x load with
473 running jobs, CP-SAT ran 0.9 s past its limit on a 57k-variable model and decoding, checking
and evaluating took 0.8 s more: a 10 s round took 11.1 s (benchmarks/results/cpsat.md, before this
reserve; 5.4e-4 s per job for the part after the solve, rounded up for the solver's overrun)."""


MAX_EVICTABLE = 512
"""Running jobs the model may evict (lowest priority, least work lost first); the others stay."""


PRESOLVE_MAX_VARIABLES = 5000
"""Above this many variables CP-SAT's presolve is switched off: on a 10,240-GPU round it spent the
whole time limit presolving and returned nothing, while without it the hint is improved at once
(benchmarks/results/cpsat-tuning.md)."""


def solver_parameters(solver: cp_model.CpSolver, *, time_limit: float, seed: int, num_workers: int,
                      deterministic: bool, n_variables: int = 0) -> None:
    """Map the neutral knobs onto CP-SAT's parameters (the one place that does).

    `deterministic` makes parallel workers interleave (CP-SAT's reproducible parallel mode): the
    same seed and worker count give the same plan whenever the search ends before the wall-clock
    limit (a search cut by the clock depends on how far it got).
    """
    solver.parameters.max_time_in_seconds = max(time_limit, 0.01)
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = num_workers
    solver.parameters.interleave_search = deterministic and num_workers > 1
    solver.parameters.cp_model_presolve = n_variables <= PRESOLVE_MAX_VARIABLES
    solver.parameters.log_search_progress = bool(os.environ.get("OPTSCHED_CPSAT_LOG"))


def encode_all(r: CpsatRound, deadline: float, variables_by: float) -> None:
    """Build the variables (by `variables_by`) and every encoding of `ENCODINGS`; BuildTimeout
    past `deadline` (perf_counter seconds). The neighbourhood steps build their models this way."""
    r.build_variables(deadline=variables_by)
    for name, encode in ENCODINGS:
        if time.perf_counter() > deadline:
            raise BuildTimeout(name)
        encode(r)


def _weights(r: CpsatRound, goal: Objective) -> tuple[dict[str, int], list[str]]:
    """Integer weights per modelled term; lexicographic orders become big-M weights."""
    modelled = [t for t in (goal.order if goal.weights is None else goal.weights) if t in r.terms]
    unmodelled = [t for t in (goal.order if goal.weights is None else goal.weights) if t not in r.terms]
    weights: dict[str, int] = {}
    if goal.weights is not None:
        for name in modelled:
            w = goal.weights[name] / r.terms[name].scale
            weights[name] = round(w * 1e6)
        return weights, unmodelled
    if "evictions" in r.terms:  # the last tie-break: as few evictions as possible (Kueue's aim)
        modelled.append("evictions")
    while True:
        weights, w = {}, 1
        for name in reversed(modelled):
            weights[name] = w
            w *= int(r.term_ub.get(name, 0)) + 1
        if w <= OBJECTIVE_RANGE or len(modelled) == 1:
            return weights, unmodelled
        unmodelled.append(modelled.pop())  # the exact big-M chain would overflow: drop the last level


OBJECTIVE_RANGE = 2**62
"""Largest value the lexicographic big-M objective may span (CP-SAT objectives are 64-bit: on
mixed-cloud-10k with 270 evictable jobs, value, disruption, topology and eviction count
overflowed; the least important levels are dropped until it fits, and reported as unmodelled)."""


def _objective(r: CpsatRound, weights: dict[str, int]) -> Any:
    return r.sum((w if r.terms[name].maximise else -w) * r.terms[name].expr for name, w in weights.items())


def _primary_values(r: CpsatRound) -> dict[int, int]:
    """Values of the admission and count variables (by proto index) in the hint plan."""
    values = r.hint_values()
    admitted = {r.p.job_index[pl.job] for pl in (r.hint.placements if r.hint else [])}
    out = {var.index: int(j in admitted) for j, var in r.a.items()}
    for key, var in r.y.items():
        lo, hi = values.get(key, (0, 0))
        out[var.index] = lo + hi
        if key in r.ye:
            out[r.ym[key].index] = lo
            out[r.ye[key].index] = hi
    evicted = {r.p.running_index[ev.job] for ev in (r.hint.evictions if r.hint else [])}
    for k, var in r.keep.items():
        out[var.index] = int(k not in evicted)
    return out


def complete_hint(r: CpsatRound, time_limit: float, seed: int) -> tuple[str, list[int] | None]:
    """Complete the hint plan into a value for every model variable.

    The admission and count variables are fixed to the hint plan's values in a copy of the
    model, and CP-SAT propagates the rest (spans, crossings, device and quota variables). The
    hint plan passed the validator, so an exact model must accept it: an infeasible completion is
    a model bug. Returns (status name, values by variable index).
    """
    status, solver = solve_fixed(r, _primary_values(r), time_limit, seed)
    return status, None if solver is None else list(solver.response_proto.solution)


def solve_fixed(r: CpsatRound, fixed: dict[int, int], time_limit: float,
                seed: int) -> tuple[str, cp_model.CpSolver | None]:
    """CP-SAT on a copy of the model with the variables of `fixed` (proto index -> value) pinned
    and no objective, stopping at the first solution: it completes a partial assignment, or
    checks a complete one (another back end's solution, decoded through the returned solver).
    Returns (status name, the solver when a solution was found)."""
    pinned = r.model.clone()
    for index, val in fixed.items():
        domain = pinned.proto.variables[index].domain  # [lo, hi]: pin it to the value
        if len(domain) != 2 or not domain[0] <= val <= domain[1]:
            return "INFEASIBLE", None
        domain[0] = val
        domain[1] = val
    pinned.clear_objective()
    pinned.clear_hints()
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit, 0.01)
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = 1
    solver.parameters.cp_model_presolve = False  # every choice is fixed: propagation completes it
    solver.parameters.stop_after_first_solution = True
    status = solver.solve(pinned)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return solver.status_name(status), None
    return solver.status_name(status), solver


def objective_at(r: CpsatRound, values: list[int]) -> float:
    """The value of the model's current objective at `values` (a complete hint), in the units
    of the maximised expression."""
    objective = r.model.proto.objective
    raw = sum(c * values[v] for v, c in zip(objective.vars, objective.coeffs, strict=True)) + objective.offset
    return float((objective.scaling_factor or 1.0) * raw)


def _hint(r: CpsatRound, values: list[int]) -> int:
    """Give CP-SAT a complete hint; returns how many variables were hinted."""
    r.model.clear_hints()
    for index, val in enumerate(values):
        r.model.add_hint(r.model.get_int_var_from_proto_index(index), val)
    return len(values)


def _decode(r: CpsatRound, solver: cp_model.CpSolver, stats: SolverStats, *,
            rest: Plan | None = None) -> Plan | None:
    """The plan of a solution. With `rest` (a neighbourhood), the solution replaces the jobs and
    evictable running jobs of the model in `rest`, and the merged plan is returned."""
    p = r.p
    placements: list[Placement] = []
    deferred: list[Deferred] = []
    evicted = [p.running[k] for k, var in r.keep.items() if not solver.value(var)]
    if r.keep:  # devices are picked around the evictable jobs that stay
        kept = r.base.copy()
        for k, var in r.keep.items():
            if solver.value(var):
                kept.add_running(p.running[k])
        r.base = kept
    per_node: dict[int, list[tuple[tuple[int, int, int], Any, bool]]] = {}
    for job in r.jobs:
        if not solver.value(r.a[job.index]):
            deferred.append(Deferred(job=job.id, reason="capacity", detail=NOT_ADMITTED))
            continue
        for g in job.groups:
            for v in r.by_group[(job.index, g.index)]:
                key = (job.index, g.index, v)
                lo = int(solver.value(r.ym[key]))
                hi = int(solver.value(r.ye[key])) if key in r.ye else 0
                for i in range(lo + hi):
                    per_node.setdefault(v, []).append((key, g, i >= lo))
    rows: list[tuple[int, int, int, bool, tuple[int, ...], float]] = []
    for v, reps in per_node.items():
        picked = devices.pick_from_counts(r, solver, v, [(k, g) for k, g, _ in reps])
        if picked is None:
            return None
        for (key, _g, elastic), (devs, share) in zip(reps, picked, strict=True):
            rows.append((key[0], key[1], v, elastic, devs, share))
    counters: dict[tuple[int, int, bool], int] = {}
    for j, gi, v, elastic, devs, share in sorted(rows, key=lambda x: (x[0], x[1], x[3], x[2])):
        g = p.jobs[j].groups[gi]
        base = g.rmin if elastic else 0
        i = counters.get((j, gi, elastic), 0)
        counters[(j, gi, elastic)] = i + 1
        placements.append(Placement(job=p.jobs[j].id, group=g.name, replica=base + i, node=p.node_ids[v],
                                    devices=[int(p.dev_local[d]) for d in devs],
                                    share=share if g.share else None, elastic=elastic))
    plan = Plan(placements=placements, deferred=deferred, solver=stats)
    if rest is not None:
        ids = {j.id for j in r.jobs}
        decided = {v.id for v in r.evictable}
        plan = Plan(placements=[pl for pl in rest.placements if pl.job not in ids] + placements,
                    deferred=[d for d in rest.deferred if d.job not in ids] + deferred,
                    evictions=[ev for ev in rest.evictions if ev.job not in decided], solver=stats)
    new = eligibility.provisioning_of(p, (p.node_index[pl.node] for pl in plan.placements))
    if new:
        plan = plan.model_copy(update={"provisioning": new})
    if not evicted:
        return plan
    evictions = preemption.name_preemptors(p, plan, evicted, r.device_plan.get("evict", {}), solver)
    return None if evictions is None else plan.model_copy(update={"evictions": [*plan.evictions, *evictions]})


class _Trace(cp_model.CpSolverSolutionCallback):
    """Each solution's admitted value and the bound on it at that moment (seconds from the call's
    start): the benchmark's time to the first plan and to a gap (`benchmarks/milp.py`)."""

    def __init__(self, start: float, term: Any, weight: int, lower: float) -> None:
        super().__init__()
        self.start, self.term, self.weight, self.lower = start, term, weight, lower
        self.rows: list[tuple[float, float, float]] = []

    def on_solution_callback(self) -> None:
        # objective = w_v * V - (lower terms, below w_v in total), as for the model bound
        bound = math.floor((self.best_objective_bound + self.lower) / self.weight + 1e-9) / self.term.scale
        self.rows.append((round(time.perf_counter() - self.start, 4), self.value(self.term.expr) / self.term.scale,
                          bound))


def solve_cpsat(p: Problem, *, objective: ObjectiveSpec = None, time_limit: float = 1.0, seed: int = 0,
                num_workers: int = 2, max_candidates: int | None = None, started: float | None = None,
                hint: Plan | None = None, deterministic: bool = False, neighbourhoods: bool | None = None) -> Plan:
    """Solve the round with CP-SAT within `time_limit` seconds (counted from `started`).

    One model of the whole round when it can be built in 40% of the time limit, else (or when
    `neighbourhoods` is True) CP-SAT improves the greedy plan one neighbourhood at a time
    (`optsched.solvers.cpsat.neighbourhood`). The garbage collector is paused meanwhile
    (`optsched.latency`).
    """
    with gc_paused():
        return _solve_cpsat(p, objective=objective, time_limit=time_limit, seed=seed, num_workers=num_workers,
                            max_candidates=max_candidates, started=started, hint=hint,
                            deterministic=deterministic, neighbourhoods=neighbourhoods)


def _solve_cpsat(p: Problem, *, objective: ObjectiveSpec, time_limit: float, seed: int, num_workers: int,
                 max_candidates: int | None, started: float | None, hint: Plan | None, deterministic: bool,
                 neighbourhoods: bool | None) -> Plan:
    start = time.perf_counter() if started is None else started
    goal = Objective.parse(objective)
    if max_candidates is None:
        max_candidates = candidate_cap(p)
    per_group = max_candidates + (slot_candidates(max_candidates) if p.pool_max_nodes.sum() > 0 else 0)
    model_s = SECONDS_PER_CANDIDATE * per_group * sum(len(j.groups) for j in p.jobs)
    whole_model = model_s <= 0.4 * time_limit if neighbourhoods is None else not neighbourhoods
    begin = starting_plan(p, "cpsat", objective=objective, time_limit=time_limit, seed=seed, start=start,
                          hint=hint, share=0.5 if whole_model else 0.9)
    if begin.cut:  # no time left for a model
        return finish_early(p, "cpsat", begin.fallback, start, seed, "the greedy hint used the whole budget")
    extra = begin.extra
    if whole_model and neighbourhoods is None and begin.fallback.evictions and goal.tolerance > EXACT:
        # "as much value, then the least lost work": the eviction steps, not one model (on
        # mixed-cloud-10k the whole model found no plan better than Kueue's in 60 s; the steps cut
        # its lost work at equal value: benchmarks/results/tenancy.md)
        whole_model = False
        extra["route"] = "eviction steps: the hint evicts and the objective has a tolerance"
    begin.guide(time_limit, 0.5 if whole_model else 0.9)
    fallback, fallback_terms, finish, may_go = begin.fallback, begin.fallback_terms, begin.finish, begin.may_go
    build_left = start + 0.75 * time_limit - time.perf_counter()
    if whole_model and neighbourhoods is None and build_left < BUILD_MARGIN * model_s:
        whole_model = False  # the baselines left too little time to build the whole model: neighbourhoods
        extra["route"] = f"neighbourhoods: the baselines left less than {BUILD_MARGIN:g} x the model's {model_s:.1f} s"

    if not whole_model:
        if start + 0.9 * time_limit - time.perf_counter() < 0.1 * time_limit:
            return finish(fallback, "fallback", reason=f"a model would take about {model_s:.1f} s to build and "
                                                         "the baselines used the time")
        current, improved = fallback, 0
        rows: list[dict[str, Any]] = []
        if fallback.evictions:  # first re-decide the evictions, with half of the time left
            now = time.perf_counter()
            half = now + 0.5 * (start + 0.9 * time_limit - now)
            current, rows, improved = evictions.reconsider_all(p, fallback, goal, deadline=half, seed=seed,
                                                               num_workers=num_workers)
        better, log = neighbourhood.improve(
            p, current, goal, deadline=start + 0.9 * time_limit, seed=seed, num_workers=num_workers,
            seconds_per_group=SECONDS_PER_CANDIDATE * neighbourhood.MAX_CANDIDATES)
        extra["neighbourhoods"] = rows + log.rows
        extra["reason"] = f"a whole model would take about {model_s:.1f} s to build: neighbourhood search"
        if improved + log.improved == 0:
            return finish(fallback, "fallback")
        return finish(better, "feasible", improved=improved + log.improved)

    extra["max_candidates"] = max_candidates
    evictable = may_go[:MAX_EVICTABLE]
    extra["evictable"] = len(evictable)
    r = CpsatRound.whole_round(p, evictable, max_candidates=max_candidates, hint=fallback, wanted=goal.terms(),
                               provision=bool(p.pool_max_nodes.sum() > 0))
    t0 = time.perf_counter()
    try:
        r.build_variables(deadline=start + 0.75 * time_limit)
    except BuildTimeout as exc:
        return finish(fallback, "fallback", reason=f"time limit reached while building ({exc})")
    build: dict[str, float] = {"variables": time.perf_counter() - t0}
    for name, encode in ENCODINGS:
        slowest = max(build.values())  # the next encoding may take as long as the slowest so far
        if time.perf_counter() + slowest > start + 0.9 * time_limit:
            return finish(fallback, "fallback", reason=f"time limit reached while building ({name})", build=build)
        t0 = time.perf_counter()
        encode(r)
        build[name] = time.perf_counter() - t0
    extra["build"] = {k: round(v, 4) for k, v in build.items()}
    weights, unmodelled = _weights(r, goal)
    r.model.maximize(_objective(r, weights))
    t0 = time.perf_counter()
    left = start + 0.9 * time_limit - t0
    if left < 0.1 * time_limit:
        return finish(fallback, "fallback", reason="no time left to complete the hint and solve", build=build)
    hint_status, values = complete_hint(r, 0.4 * left, seed)
    extra["hint_status"], extra["hint_s"] = hint_status, time.perf_counter() - t0
    if values is None:
        return finish(fallback, "fallback", reason=f"hint completion {hint_status} (a model bug if INFEASIBLE)")
    extra["hinted_vars"] = _hint(r, values)
    extra["variables"] = len(r.model.proto.variables)
    extra["constraints"] = len(r.model.proto.constraints)
    extra["unmodelled_terms"] = unmodelled
    extra["build_s"] = time.perf_counter() - start
    # kept back for handing the model to CP-SAT and for decoding, checking and evaluating its plan
    reserve = max(0.05 * time_limit, FINISH_SECONDS_PER_JOB * (len(p.jobs) + len(p.running)))
    left = start + time_limit - time.perf_counter() - reserve
    if left <= 0:
        return finish(fallback, "fallback", reason="time limit spent before solving")

    def run(seconds: float, trace: _Trace | None = None) -> tuple[cp_model.CpSolver, Any]:
        s = cp_model.CpSolver()
        solver_parameters(s, time_limit=seconds, seed=seed, num_workers=num_workers, deterministic=deterministic,
                          n_variables=len(r.model.proto.variables))
        return s, s.solve(r.model, trace)

    ordered = [n for n in goal.order if n in r.terms] if goal.weights is None else []
    first_bound: float | None = None
    if goal.tolerance > EXACT and len(ordered) > 1:
        # tolerance lexicographic: optimise the first term, keep it within the tolerance, optimise the rest
        head = r.terms[ordered[0]]
        r.model.maximize(head.expr if head.maximise else -head.expr)
        at_hint = round(objective_at(r, values)) * (1 if head.maximise else -1)
        solver, status = run(left / 2)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return finish(fallback, "fallback", reason=f"CP-SAT status {solver.status_name(status)} (phase 1)")
        best = solver.value(head.expr)
        first_bound = abs(solver.best_objective_bound)
        slack = goal.tolerance * abs(best)  # within the tolerance of the best, never worse than the hint
        r.model.add(head.expr >= max(math.ceil(best - slack), at_hint) if head.maximise
                    else head.expr <= min(math.floor(best + slack), at_hint))
        _hint(r, list(solver.response_proto.solution))
        weights = {n: w for n, w in _weights(r, Objective(order=tuple(ordered[1:])))[0].items()}
        r.model.maximize(_objective(r, weights))
        second, status2 = run(start + time_limit - time.perf_counter() - reserve)
        if status2 in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            solver, status = second, (cp_model.FEASIBLE if status2 == cp_model.OPTIMAL else status2)
        extra["phases"] = 2
    else:
        trace = None
        if goal.weights is None and ordered and ordered[0] == "admitted_value":
            lower = sum(r.term_ub.get(n, 0) * w for n, w in weights.items() if n != "admitted_value")
            trace = _Trace(start, r.terms["admitted_value"], weights["admitted_value"], lower)
        solver, status = run(left, trace)
        if trace is not None:
            extra["trace"] = trace.rows
    extra["solve_s"] = time.perf_counter() - start - extra["build_s"]
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        invalid = r.model.validate() if status == cp_model.MODEL_INVALID else ""  # a model bug: say why
        return finish(fallback, "fallback", reason=f"CP-SAT status {solver.status_name(status)} {invalid}".strip())
    stats = SolverStats(name="cpsat")
    decoded = _decode(r, solver, stats)
    if decoded is None:
        return finish(fallback, "fallback", reason="decoding failed (a model bug)")
    plan = decoded
    violations = check_problem(p, plan)
    if violations:
        return finish(fallback, "fallback", reason="plan failed the check (a model bug)",
                      violations=[str(v) for v in violations[:10]])
    value_term = r.terms["admitted_value"]
    model_bound: float | None = None  # a bound of the model is one of the round only without truncation
    extra["truncated_groups"] = r.truncated
    if first_bound is not None and ordered[0] == "admitted_value":
        model_bound = first_bound / value_term.scale
    elif goal.weights is None and goal.order and goal.order[0] == "admitted_value":
        # objective = w_v * V - (lower terms, each below w_v in total): V* <= (bound + their ub) / w_v
        lower = sum(r.term_ub.get(n, 0) * w for n, w in weights.items() if n != "admitted_value")
        model_bound = math.floor((solver.best_objective_bound + lower) / weights["admitted_value"] + 1e-9) \
            / value_term.scale
    if model_bound is not None:  # per-replica values are rounded to 1/VALUE_SCALE in the model
        model_bound += sum(g.rmax for j in r.jobs for g in j.groups) * 0.5 / value.VALUE_SCALE
    if r.truncated and model_bound is not None:
        extra["candidate_bound"] = model_bound
        model_bound = None
    model_terms = {name: solver.value(t.expr) / t.scale for name, t in r.terms.items()}
    terms = evaluate_problem(p, plan).objective()
    if Objective.parse(objective).better(fallback_terms, terms):
        return finish(fallback, "fallback", reason="CP-SAT plan not better than the hint", model_bound=model_bound,
                      model_terms=model_terms)
    status_name = "optimal" if status == cp_model.OPTIMAL else "feasible"
    if status == cp_model.OPTIMAL and not r.truncated and model_bound is not None:
        model_bound = terms["admitted_value"]  # proven optimal: the rounding slack is not a gap
    if not Objective.parse(objective).better(terms, fallback_terms) and len(plan.evictions) >= len(fallback.evictions):
        # a tie: keep the hint's plan (on a multi-tenant round the Kueue plan, whose admission
        # order among equals is the documented one), with what CP-SAT proved about it
        return finish(fallback, status_name, model_bound=model_bound, tie="hint kept", model_terms=model_terms,
                      model_plan_terms=terms)  # the CP-SAT plan's model terms and its metrics
    return finish(plan.model_copy(update={"objective": terms}), status_name, model_bound=model_bound,
                  model_terms=model_terms)


__all__ = ["ENCODINGS", "solve_cpsat"]
