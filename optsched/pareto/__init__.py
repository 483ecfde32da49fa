"""Multi-objective rounds: the trade-off between objective terms as a set of plans (docs/pareto.md).

`pareto(cluster, queue, objectives=[...])` returns a `ParetoSet`: validated plans, none
dominated by another, found by NSGA-II (pymoo) over a random-key genome that the greedy engine
decodes into feasible plans (`genome`, `nsga2`). The first population holds the greedy baselines'
genomes and genomes of CP-SAT optima (each modelled objective first, and a normalised weighted
sum), and every plan evaluated, those seeds included, enters an archive of non-dominated plans:
the set is never dominated by a baseline's or seed's point. `ParetoSet.select` picks one plan by a
stated rule; `solve(..., solver="nsga2", objective=...)` returns the plan the objective selects.
`exact_front` gives the exact front of a small round with CP-SAT, the yardstick of the benchmark.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from optsched.arguments import require_seed, require_time_limit
from optsched.budget import (
    PARETO_CHECK_PER_EVALUATION,
    PARETO_CHECK_SHARE,
    PARETO_CPSAT_SHARE,
    PARETO_MIN_SEED_S,
    WHOLE_MODEL_SHARE,
    estimate_build_s,
)
from optsched.check import check_problem
from optsched.metrics import evaluate_problem
from optsched.model.cluster import Cluster
from optsched.model.plan import Plan
from optsched.model.queue import Queue
from optsched.objective import Objective, ObjectiveSpec
from optsched.pareto.exact import exact_front
from optsched.pareto.front import ParetoSet, SelectRule, check_objectives, hypervolume, minimised
from optsched.pareto.genome import baseline_genome, plan_genome
from optsched.pareto.nsga2 import Archive, search
from optsched.problem import Problem, compile_problem
from optsched.solvers.greedy import STRATEGIES, solve_greedy

DEFAULT_OBJECTIVES = ("admitted_value", "cost", "fragmentation")

GENERATIONS = 10
"""The default population is what this many generations of measured evaluations fit in the time."""

MAX_PLANS = 64
"""Most plans a set returns: a larger front is thinned by crowding distance, extremes kept."""


def pareto(cluster: Cluster, queue: Queue, objectives: Sequence[str] = DEFAULT_OBJECTIVES, *,
           time_limit: float = 10.0, seed: int = 0, population: int | None = None,
           generations: int | None = None, cpsat_seeds: bool = True, workers: int | None = None) -> ParetoSet:
    """The trade-off between `objectives` on one round: a set of validated, mutually
    non-dominated plans (see module docstring), within `time_limit` seconds.

    `population` (default: from the measured cost of one evaluation) and `generations` (default:
    until the time is spent) tune NSGA-II; with `generations` set and enough time the set is
    reproducible under `seed`. `workers` processes decode genomes (default: up to 2, where the
    measured evaluation is slow enough to gain from them; the set does not depend on it).
    """
    start = time.perf_counter()
    return pareto_problem(compile_problem(cluster, queue), objectives, time_limit=time_limit, seed=seed,
                          population=population, generations=generations, cpsat_seeds=cpsat_seeds, workers=workers,
                          started=start)


def pareto_problem(p: Problem, objectives: Sequence[str], *, time_limit: float = 10.0, seed: int = 0,
                   population: int | None = None, generations: int | None = None, cpsat_seeds: bool = True,
                   workers: int | None = None, started: float | None = None) -> ParetoSet:
    """`pareto` on an already compiled problem; `started` is when the call began."""
    start = time.perf_counter() if started is None else started
    names = check_objectives(objectives)
    time_limit, seed = require_time_limit(time_limit), require_seed(seed)
    end = start + time_limit
    archive = Archive(names)
    baselines: dict[str, dict[str, float]] = {}
    genomes: list[np.ndarray] = []
    seconds: list[float] = []
    for name in STRATEGIES:
        t0 = time.perf_counter()
        plan = solve_greedy(p, name, seed=seed)
        plan = plan.model_copy(update={"objective": evaluate_problem(p, plan).objective()})
        seconds.append(time.perf_counter() - t0)
        baselines[name] = dict(plan.objective)
        archive.add(plan)
        genomes.append(baseline_genome(p, name))
    genomes += [baseline_genome(p, "cheapest"), baseline_genome(p, "fastest")]
    per_eval = float(np.mean(seconds))
    stats: dict[str, Any] = {"method": "nsga2", "seconds_per_evaluation_baselines": round(per_eval, 4)}
    if cpsat_seeds and p.jobs:
        seeds, rows = _cpsat_seeds(p, names, baselines, deadline=start + PARETO_CPSAT_SHARE * time_limit, seed=seed)
        stats["cpsat_seeds"] = rows
        for plan in seeds:
            archive.add(plan)
            genomes.append(plan_genome(p, plan))
    reserve = min(PARETO_CHECK_SHARE * time_limit, PARETO_CHECK_PER_EVALUATION * per_eval * MAX_PLANS)
    if population is None:
        affordable = max(end - reserve - time.perf_counter(), 0.0) / max(per_eval, 1e-4)
        population = int(np.clip(affordable // GENERATIONS, 8, 40))
        population += population % 2
    # the search stops when one more evaluation would not end before the check's reserve
    found = search(p, names, np.array(genomes), deadline=end - reserve - per_eval, seed=seed, population=population,
                   generations=generations, archive=archive,
                   workers=_workers(workers, per_eval)) if p.jobs else None
    front = _thin(archive.plans, names, MAX_PLANS)
    failed = 0
    checked = []
    t_check = time.perf_counter()
    for plan in front:  # the validator is the ground truth: a plan that fails it is a bug, never returned
        if check_problem(p, plan):
            failed += 1
        else:
            checked.append(plan)
    if found is not None:
        stats.update(workers=found.workers, evaluations=found.evaluations, generations=found.generations,
                     population=found.population, search_s=round(found.seconds, 3),
                     evaluations_per_s=round(found.per_second, 2))
    stats.update(check_s=round(time.perf_counter() - t_check, 3), seconds=round(time.perf_counter() - start, 3),
                 failed_check=failed, seed=seed)
    return ParetoSet(names, checked, baselines=baselines, stats=stats)


def _cpsat_seeds(p: Problem, names: tuple[str, ...], baselines: dict[str, dict[str, float]], *,
                 deadline: float, seed: int) -> tuple[list[Plan], list[dict[str, Any]]]:
    """CP-SAT optima that seed the search: each modelled objective first (the others after it: the
    front's extremes), then weighted sums over a simplex lattice, the most balanced first, each
    objective scaled by its range over the baselines' and the extremes' points; as many as get
    `PARETO_MIN_SEED_S` each, in equal slices of the time left, none when the whole model would not fit
    its slice (docs/pareto.md)."""
    from optsched.roundmodel.build import MODELLED_TERMS
    from optsched.solvers.cpsat import solve_cpsat

    modelled = [n for n in names if n in MODELLED_TERMS]
    if not modelled:
        return [], []
    extremes: list[ObjectiveSpec] = [[n, *[m for m in modelled if m != n]] for n in modelled]
    lattice = sorted(_compositions(len(modelled) + 2, len(modelled)), key=lambda c: (np.ptp(c), c)) \
        if len(modelled) > 1 else []
    count = max(1, min(len(extremes) + len(lattice), int((deadline - time.perf_counter()) / PARETO_MIN_SEED_S)))
    model_s = estimate_build_s(p)
    plans: list[Plan] = []
    rows: list[dict[str, Any]] = []
    for i in range(count):
        if i < len(extremes):
            spec = extremes[i]
        else:  # ranges known once the extremes are in
            points = [*baselines.values(), *(pl.objective for pl in plans)]
            span = {n: max(float(np.ptp([t[n] for t in points])), 1e-6 * max(1.0, abs(points[0][n])))
                    for n in modelled}
            parts = lattice[i - len(extremes)]
            spec = {n: float(c / span[n]) for n, c in zip(modelled, parts, strict=True)}
        slice_s = (deadline - time.perf_counter()) / (count - i)
        if slice_s <= 0 or model_s > WHOLE_MODEL_SHARE * slice_s:
            rows.append({"objective": spec, "skipped": f"a model needs about {model_s:.2f} s of {slice_s:.2f} s"})
            continue
        plan = solve_cpsat(p, objective=spec, time_limit=slice_s, seed=seed, deterministic=True)
        rows.append({"objective": spec, "status": plan.solver.status, "s": round(plan.solver.wall_s, 3)})
        plans.append(plan)
    return plans, rows


PARALLEL_FROM_S = 0.05
"""Evaluations at least this slow (measured on the baselines) are decoded by worker processes:
forking and returning plans costs a few milliseconds per generation."""


def _workers(asked: int | None, per_eval: float) -> int:
    if asked is not None:
        return max(1, asked)
    return min(2, os.cpu_count() or 1) if per_eval >= PARALLEL_FROM_S else 1


def _compositions(total: int, parts: int) -> list[tuple[int, ...]]:
    """Every way to write `total` as `parts` positive integers in order (a simplex lattice's
    interior: the weight vectors of the CP-SAT seeds)."""
    if parts == 1:
        return [(total,)]
    return [(first, *rest) for first in range(1, total - parts + 2) for rest in _compositions(total - first, parts - 1)]


def _thin(plans: list[Plan], names: tuple[str, ...], limit: int) -> list[Plan]:
    """At most `limit` plans: the extremes of each objective, then the largest crowding distance."""
    if len(plans) <= limit:
        return plans
    from pymoo.operators.survival.rank_and_crowding.metrics import calc_crowding_distance

    f = np.array([minimised(pl.objective, names) for pl in plans])
    keep = list(dict.fromkeys(int(i) for i in np.argmin(f, axis=0)))
    crowd = calc_crowding_distance(f)
    for i in np.argsort(-crowd, kind="stable"):
        if len(keep) >= limit:
            break
        if int(i) not in keep:
            keep.append(int(i))
    return [plans[i] for i in sorted(keep)]


def select_for(objective: ObjectiveSpec) -> tuple[tuple[str, ...], SelectRule]:
    """The objectives and selection rule `solve(..., solver="nsga2", objective=...)` uses: the
    objective's terms (admitted value added when it names one term only), and its weighted sum or
    lexicographic order as the rule."""
    goal = Objective.parse(objective)
    if goal.weights is not None:
        names = tuple(goal.weights)
        rule: SelectRule = {"weights": dict(goal.weights)}
    else:
        names = goal.order
        rule = {"lexicographic": list(goal.order), "tolerance": goal.tolerance}
    if len(names) < 2:
        names = tuple(dict.fromkeys(("admitted_value", *names)))
        if len(names) < 2:
            names = ("admitted_value", "cost")
    return names, rule


__all__ = ["DEFAULT_OBJECTIVES", "ParetoSet", "exact_front", "hypervolume", "pareto", "pareto_problem",
           "select_for"]
