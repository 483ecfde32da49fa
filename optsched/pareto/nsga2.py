"""NSGA-II (pymoo) over the random-key genome of `optsched.pareto.genome` (docs/pareto.md).

pymoo's NSGA-II keeps the population, the non-dominated sorting and the crowding distance; the
operators fit random keys: uniform crossover (each key from either parent, as in biased random-key
GAs: the child keeps each job's order position, rule and choices from one parent), and a mutation
that redraws single keys and swaps the order keys of two jobs. Every genome decodes to a feasible
plan, so no constraint handling is needed. Evaluation decodes the genome with the greedy engine
and computes the plan's terms with `optsched.metrics` (numpy over nodes and devices); decoded
plans are cached by genome, and every evaluated plan that no other beats is kept in an archive, so
the returned set is never worse than any plan the search saw, seeds included.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.mutation import Mutation
from pymoo.core.problem import Problem as PymooProblem
from pymoo.operators.crossover.ux import UniformCrossover
from pymoo.termination.default import DefaultMultiObjectiveTermination

from optsched.metrics import evaluate_problem
from optsched.model.plan import Plan
from optsched.pareto.front import minimised
from optsched.pareto.genome import decode, genome_length
from optsched.problem import FArray, Problem


class RandomKeyMutation(Mutation):
    """Redraw each key with probability `rate` (default 1/keys, at least one per genome), and swap
    the order keys of two random jobs (moves one job ahead of another)."""

    def __init__(self, jobs: int, rate: float | None = None) -> None:
        super().__init__(prob=1.0)
        self.jobs = jobs
        self.rate = rate

    def _do(self, problem: Any, X: FArray, *args: Any, random_state: Any = None, **kwargs: Any) -> FArray:
        rng = random_state
        out = np.array(X, dtype=float, copy=True)
        rows, n_var = out.shape
        rate = self.rate if self.rate is not None else 1.0 / n_var
        redraw = rng.random((rows, n_var)) < rate
        redraw[np.arange(rows), rng.integers(0, n_var, rows)] = True
        out[redraw] = rng.random(int(redraw.sum()))
        jobs = self.jobs
        if jobs > 1:
            a, b = rng.integers(0, jobs, rows), rng.integers(0, jobs, rows)
            r = np.arange(rows)
            out[r, a], out[r, b] = out[r, b], out[r, a]
        return out


class _Keys(PymooProblem):
    """The pymoo problem: genomes in [0, 1)^(4n + N), objectives evaluated outside (ask/tell)."""

    def __init__(self, n_var: int, n_obj: int) -> None:
        super().__init__(n_var=n_var, n_obj=n_obj, xl=0.0, xu=1.0 - 1e-9)


@dataclass
class Archive:
    """Every evaluated plan that no other evaluated plan dominates (minimisation form), one per
    objective vector: `add` keeps `plans` non-dominated as it goes."""

    objectives: tuple[str, ...]
    plans: list[Plan] = field(default_factory=list)
    points: list[FArray] = field(default_factory=list)

    def add(self, plan: Plan) -> None:
        """Offer one plan with its objective terms."""
        f = minimised(plan.objective, self.objectives)
        if self.points:
            pts = np.array(self.points)
            if np.any(np.all(pts <= f, axis=1)):  # dominated by, or equal to, a plan already kept
                return
            keep = ~(np.all(f <= pts, axis=1) & np.any(f < pts, axis=1))
            self.plans = [pl for pl, k in zip(self.plans, keep, strict=True) if k]
            self.points = [pt for pt, k in zip(self.points, keep, strict=True) if k]
        self.plans.append(plan)
        self.points.append(f)


@dataclass
class SearchResult:
    """What the search found and what it took."""

    archive: Archive
    evaluations: int
    generations: int
    seconds: float
    population: int
    workers: int

    @property
    def per_second(self) -> float:
        """Genomes decoded and evaluated per second."""
        return self.evaluations / self.seconds if self.seconds > 0 else math.inf


def evaluate_genome(p: Problem, keys: FArray, seed: int) -> Plan:
    """Decode one genome and stamp the plan with every objective term."""
    plan = decode(p, keys, seed=seed)
    return plan.model_copy(update={"objective": evaluate_problem(p, plan).objective()})


_WORKER: tuple[Problem, int] | None = None
"""The round and seed a forked evaluation process decodes for (set before the fork)."""


def _evaluate_in_worker(keys: FArray) -> Plan:
    assert _WORKER is not None
    return evaluate_genome(_WORKER[0], keys, _WORKER[1])


def _pool(p: Problem, seed: int, workers: int) -> ProcessPoolExecutor | None:
    """Forked processes that share the compiled round (none where fork is not available)."""
    global _WORKER
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    _WORKER = (p, seed)
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))


def _evaluate_all(p: Problem, xs: list[FArray], seed: int, pool: ProcessPoolExecutor | None,
                  deadline: float) -> list[Plan]:
    """Plans of `xs` in order, up to the first one not done by `deadline` (at least one)."""
    out: list[Plan] = []
    if pool is None:
        for x in xs:
            if out and time.perf_counter() >= deadline:
                break
            out.append(evaluate_genome(p, x, seed))
        return out
    futures = [pool.submit(_evaluate_in_worker, x) for x in xs]
    for f in futures:
        if out and time.perf_counter() >= deadline:
            break
        out.append(f.result())
    for f in futures[len(out):]:
        f.cancel()
    return out


def search(p: Problem, objectives: Sequence[str], seeds: FArray, *, deadline: float, seed: int,
           population: int, generations: int | None = None, archive: Archive | None = None,
           workers: int = 1) -> SearchResult:
    """NSGA-II from the `seeds` genomes (first rows of the first population; random rows fill
    it) until `deadline` (perf_counter seconds) or after `generations` generations.

    A generation cut by the deadline is told to the algorithm with the genomes evaluated so far.
    With `workers` > 1 each generation's new genomes are decoded by that many forked processes
    (the plans come back in genome order: the same set as with one).
    """
    names = tuple(objectives)
    start = time.perf_counter()
    arch = archive if archive is not None else Archive(names)
    rng = np.random.default_rng(seed)
    n_var = genome_length(p)
    pop_size = max(population, 4)
    first = np.asarray(seeds, dtype=float).reshape(-1, n_var)[:pop_size]
    fill = rng.random((pop_size - len(first), n_var))
    algorithm = NSGA2(pop_size=pop_size, sampling=np.vstack([first, fill]) if len(first) else fill,
                      crossover=UniformCrossover(prob=0.9), mutation=RandomKeyMutation(len(p.jobs)),
                      eliminate_duplicates=True)
    algorithm.setup(_Keys(n_var, len(names)), termination=DefaultMultiObjectiveTermination(n_max_gen=10**9),
                    seed=seed, verbose=False)
    cache: dict[bytes, Plan] = {}
    evaluations = done_generations = 0
    pool = _pool(p, seed, workers)
    try:
        while generations is None or done_generations <= generations:  # generation 0: the first population
            if time.perf_counter() >= deadline:
                break
            pop = algorithm.ask()
            xs = [np.asarray(x, dtype=float) for x in pop.get("X")]
            fresh = list(dict.fromkeys(x.tobytes() for x in xs if x.tobytes() not in cache))
            by_key = {x.tobytes(): x for x in xs}
            plans = _evaluate_all(p, [by_key[k] for k in fresh], seed, pool, deadline)
            for k, new in zip(fresh, plans, strict=False):
                cache[k] = new
                arch.add(new)
            evaluations += len(plans)
            fs = []
            for x in xs:  # the genomes evaluated, in order, up to the first one the deadline cut
                seen = cache.get(x.tobytes())
                if seen is None:
                    break
                fs.append(minimised(seen.objective, names))
            if not fs:
                break
            told = pop[: len(fs)]
            told.set("F", np.array(fs))
            algorithm.tell(infills=told)
            done_generations += 1
            if len(fs) < len(xs):
                break
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return SearchResult(arch, evaluations, max(done_generations - 1, 0), time.perf_counter() - start, pop_size,
                        1 if pool is None else workers)
