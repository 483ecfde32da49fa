"""Pareto sets: valid and mutually non-dominated plans, selection rules, reproducibility, and the
exact front as the yardstick."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import optsched
from optsched.check import check_problem
from optsched.cli import app
from optsched.errors import InputError
from optsched.model import Cluster, Plan, Queue
from optsched.objective import MAXIMISED
from optsched.pareto import ParetoSet, exact_front, pareto_problem
from optsched.pareto.front import dominated_mask, hypervolume, minimised
from optsched.pareto.genome import baseline_genome, decode, random_genomes
from optsched.problem import compile_problem
from optsched.solvers.greedy import STRATEGIES, solve_greedy
from tests.conftest import EXAMPLES
from tests.strategies import busy_rounds, rounds

OBJECTIVES = ("admitted_value", "cost", "fragmentation")


def _dominates(a: np.ndarray, b: np.ndarray, rel: float = 0.0) -> bool:
    """a dominates b (minimisation form), with a relative tolerance on "no worse"."""
    slack = rel * np.maximum(1.0, np.abs(b))
    return bool(np.all(a <= b + slack) and np.any(a < b - slack))


# --------------------------------------------------------------------------- the genome
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(max_nodes=8, max_jobs=8), st.integers(0, 2**31 - 1))
def test_every_genome_decodes_to_a_valid_plan(round_: tuple[Cluster, Queue], seed: int) -> None:
    cluster, queue = round_
    p = compile_problem(cluster, queue)
    for keys in random_genomes(p, 4, np.random.default_rng(seed)):
        plan = decode(p, keys)
        assert check_problem(p, plan) == []
        assert {pl.job for pl in plan.placements} | {d.job for d in plan.deferred} == {j.id for j in queue.jobs}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_rounds(max_nodes=6, max_jobs=6))
def test_a_baseline_genome_decodes_to_that_baselines_plan(round_: tuple[Cluster, Queue]) -> None:
    """Seeding with the baselines' genomes starts the search at their plans (Volcano's dynamic
    DRF order is the exception: its genome uses kube order)."""
    cluster, queue = round_
    p = compile_problem(cluster, queue)
    for name in STRATEGIES:
        if name == "volcano":
            continue
        assert decode(p, baseline_genome(p, name)).placements == solve_greedy(p, name).placements, name


# --------------------------------------------------------------------------- sets and rules
def _plan(terms: dict[str, float]) -> Plan:
    full = {"admitted_value": 0.0, "disruption": 0.0, "topology": 0.0, "cost": 0.0, "locality": 0.0,
            "fragmentation": 0.0, "fairness": 0.0, "queue_delay": 0.0, **terms}
    return Plan(objective=full)


points3 = st.lists(st.tuples(*(st.integers(0, 20) for _ in range(3))), min_size=1, max_size=25)


@given(points3)
def test_a_set_keeps_exactly_the_non_dominated_vectors(rows: list[tuple[int, int, int]]) -> None:
    plans = [_plan(dict(zip(OBJECTIVES, map(float, r), strict=True))) for r in rows]
    front = ParetoSet.of(OBJECTIVES, plans)
    f = front.minimised
    for i in range(len(f)):
        for k in range(len(f)):
            assert i == k or not _dominates(f[i], f[k])
    assert len({tuple(x) for x in f}) == len(f)  # one plan per vector
    for r in rows:  # every offered vector is in the set or dominated by one in it
        v = minimised(dict(zip(OBJECTIVES, map(float, r), strict=True)), OBJECTIVES)
        assert any(np.array_equal(v, x) or _dominates(x, v) for x in f)


@given(points3, st.tuples(*(st.floats(0.01, 10) for _ in range(3))))
def test_select_rules_do_what_they_say(rows: list[tuple[int, int, int]], w: tuple[float, float, float]) -> None:
    front = ParetoSet.of(OBJECTIVES, [_plan(dict(zip(OBJECTIVES, map(float, r), strict=True))) for r in rows])
    pts = front.points
    weights = dict(zip(OBJECTIVES, w, strict=True))
    signed = np.array([-1.0 if n in MAXIMISED else 1.0 for n in OBJECTIVES])
    chosen = front.select({"weights": weights})
    ws = (pts * signed) @ np.array(w)
    assert np.dot(minimised(chosen.objective, OBJECTIVES), w) <= ws.min() + 1e-9
    order = ["cost", "admitted_value", "fragmentation"]
    lex = front.select({"lexicographic": order})
    best = min(front.plans, key=lambda pl: (pl.objective["cost"], -pl.objective["admitted_value"],
                                             pl.objective["fragmentation"]))
    assert [lex.objective[n] for n in order] == [best.objective[n] for n in order]
    limit = float(np.median(pts[:, 1]))
    within = front.select({"bounds": {"cost": limit}, "then": {"weights": weights}})
    assert within.objective["cost"] <= limit
    inside = [pl for pl in front.plans if pl.objective["cost"] <= limit]
    assert np.dot(minimised(within.objective, OBJECTIVES), w) <= min(
        np.dot(minimised(pl.objective, OBJECTIVES), w) for pl in inside) + 1e-9
    with pytest.raises(InputError, match="no_plan_within"):
        front.select({"bounds": {"cost": -1.0}})


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=3, max_size=25))
def test_the_knee_is_farthest_below_the_line_through_the_extremes(rows: list[tuple[int, int]]) -> None:
    names = ("admitted_value", "cost")
    front = ParetoSet.of(names, [_plan({"admitted_value": float(a), "cost": float(c)}) for a, c in rows])
    f = front.minimised
    lo, hi = f.min(axis=0), f.max(axis=0)
    g = (f - lo) / np.where(hi > lo, hi - lo, 1.0)
    a, b = g[np.argmin(g[:, 0])], g[np.argmin(g[:, 1])]
    knee = g[front.select_index("knee")]
    if np.allclose(a, b):
        return
    normal = np.array([b[1] - a[1], a[0] - b[0]])  # the line through the extremes
    normal *= np.sign(normal @ (np.zeros(2) - a)) or 1.0  # pointing to the ideal point
    dist = (g - a) @ normal
    assert (knee - a) @ normal >= dist.max() - 1e-9


def test_hypervolume_of_a_known_set() -> None:
    pts = np.array([[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]])
    assert hypervolume(pts, np.array([1.0, 1.0])) == pytest.approx(0.25)
    assert hypervolume(pts, np.array([2.0, 2.0]), ideal=np.zeros(2)) == pytest.approx(3.25 / 4)


# --------------------------------------------------------------------------- the search
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(max_nodes=6, max_jobs=8), st.sampled_from([OBJECTIVES, ("admitted_value", "cost"),
                                                         ("admitted_value", "topology", "fairness")]))
def test_pareto_sets_are_valid_non_dominated_and_beat_the_baselines(round_: tuple[Cluster, Queue],
                                                                    names: tuple[str, ...]) -> None:
    cluster, queue = round_
    p = compile_problem(cluster, queue)
    front = pareto_problem(p, names, time_limit=30, generations=3, population=8, cpsat_seeds=False)
    assert len(front) >= 1 and front.stats["failed_check"] == 0
    for plan in front.plans:
        assert check_problem(p, plan) == []
        assert plan.objective == optsched.evaluate(cluster, queue, plan).objective()
    f = front.minimised
    assert not dominated_mask(f).any()
    for name, terms in front.baselines.items():  # no baseline beats every plan of the set
        b = minimised(terms, names)
        assert not any(_dominates(b, x) for x in f), name
        assert any(np.array_equal(x, b) or _dominates(x, b) for x in f), name


def test_a_fixed_seed_gives_the_same_set() -> None:
    c, q = optsched.load_cluster(EXAMPLES / "cluster.yaml"), None
    q = optsched.load_queue(EXAMPLES / "queue.yaml", c)
    runs = [optsched.pareto(c, q, OBJECTIVES, time_limit=60, seed=7, generations=4, population=8) for _ in range(2)]
    assert [pl.objective for pl in runs[0].plans] == [pl.objective for pl in runs[1].plans]
    assert [pl.placements for pl in runs[0].plans] == [pl.placements for pl in runs[1].plans]


def test_worker_processes_do_not_change_the_set() -> None:
    c = optsched.load_cluster(EXAMPLES / "cluster.yaml")
    q = optsched.load_queue(EXAMPLES / "queue.yaml", c)
    p = compile_problem(c, q)
    one, two = (pareto_problem(p, OBJECTIVES, time_limit=60, seed=3, generations=3, population=8, cpsat_seeds=False,
                               workers=w) for w in (1, 2))
    assert two.stats["workers"] == 2 and one.stats["workers"] == 1
    assert [pl.objective for pl in one.plans] == [pl.objective for pl in two.plans]


def test_solve_nsga2_returns_the_plan_the_objective_selects() -> None:
    c = optsched.load_cluster(EXAMPLES / "cluster.yaml")
    q = optsched.load_queue(EXAMPLES / "queue.yaml", c)
    weights = {"admitted_value": 1.0, "cost": 0.5}
    plan = optsched.solve(c, q, solver="nsga2", objective=weights, time_limit=3, seed=1)
    assert optsched.check(c, q, plan) == []
    assert plan.solver.name == "nsga2" and plan.solver.pareto is not None \
        and plan.solver.pareto.objectives == ["admitted_value", "cost"]
    best = optsched.solve(c, q, solver="greedy", time_limit=3)
    score = plan.objective["admitted_value"] - 0.5 * plan.objective["cost"]
    assert score >= best.objective["admitted_value"] - 0.5 * best.objective["cost"] - 1e-9


def test_unknown_or_too_few_objectives_are_input_errors() -> None:
    c = optsched.load_cluster(EXAMPLES / "cluster.yaml")
    q = optsched.load_queue(EXAMPLES / "queue.yaml", c)
    with pytest.raises(InputError, match="unknown_term"):
        optsched.pareto(c, q, ["admitted_value", "speed"])
    with pytest.raises(InputError, match="bad_objectives"):
        optsched.pareto(c, q, ["cost"])


# --------------------------------------------------------------------------- the exact front
def _tiny() -> tuple[Cluster, Queue]:
    """Two priced on-demand nodes and a free reserved one; four jobs that cannot all run on the
    reserved node: admitting more costs more."""
    node: dict[str, Any] = {"domain": "leaf-0", "capacity": {"cpu": 64000, "memory": 512000},
                            "devices": {"model": "H100", "count": 4}}
    cluster = Cluster.model_validate({
        "device_models": {"H100": {"memory_gib": 80}},
        "topology": {"levels": ["leaf"], "domains": [{"id": "leaf-0", "level": "leaf"}]},
        "pools": [{"name": "res", "pricing": "reserved", "price_per_hour": 10.0},
                  {"name": "od", "pricing": "on_demand", "price_per_hour": 4.0},
                  {"name": "od2", "pricing": "on_demand", "price_per_hour": 7.0}],
        "nodes": [{"id": "r0", "pool": "res", **node}, {"id": "o0", "pool": "od", **node},
                  {"id": "o1", "pool": "od2", **node}],
    })
    jobs = [{"id": f"j{i}", "priority": pr, "groups": [{"name": "w", "replicas": {"min": 1, "max": 1},
                                                         "request": {"gpu": g, "cpu": 1000}}]}
            for i, (g, pr) in enumerate([(4, 100), (2, 50), (3, 10), (2, 10)])]
    return cluster, Queue.model_validate({"jobs": jobs})


def test_the_exact_front_is_complete_and_no_plan_beats_it() -> None:
    c, q = _tiny()
    p = compile_problem(c, q)
    names = ("admitted_value", "cost")
    ex = exact_front(p, names, time_limit=60)
    assert ex.stats["complete"]
    costs = sorted(round(pl.objective["cost"], 6) for pl in ex.plans)
    assert costs[0] == 0.0 and len(costs) >= 3  # from the reserved node alone to all three nodes
    for plan in ex.plans:
        assert check_problem(p, plan) == []
    f = ex.minimised
    searched = pareto_problem(p, names, time_limit=30, generations=10, population=12, cpsat_seeds=False)
    for x in searched.minimised:  # a feasible plan never dominates an exact point
        assert not any(_dominates(x, e, rel=1e-6) for e in f)
        assert any(np.allclose(x, e) or _dominates(e, x) for e in f)
    three = exact_front(p, ("admitted_value", "cost", "topology"), time_limit=60)
    assert three.stats["complete"] and not dominated_mask(three.minimised).any()


def test_the_exact_front_refuses_unmodelled_terms() -> None:
    c, q = _tiny()
    with pytest.raises(InputError, match="not_modelled"):
        exact_front(compile_problem(c, q), ("admitted_value", "fragmentation"))


def test_cpsat_models_every_term_it_claims_and_its_cost_is_the_metric() -> None:
    from optsched.roundmodel.build import ENCODINGS, MODELLED_TERMS
    from optsched.roundmodel.variables import RoundModel

    c, q = _tiny()
    p = compile_problem(c, q)
    r = RoundModel.whole_round(p, [], max_candidates=p.n_nodes, wanted=frozenset(MODELLED_TERMS))
    r.build_variables()
    for _name, encode in ENCODINGS:
        encode(r)
    assert set(r.terms) - {"evictions"} == MODELLED_TERMS - {"fairness"}  # fairness: two tenants or more
    plan = optsched.solve(c, q, solver="cpsat", objective=["admitted_value", "cost"], time_limit=10)
    assert plan.solver.model is not None and plan.solver.model.terms["cost"] == pytest.approx(plan.objective["cost"])
    assert plan.objective["cost"] == pytest.approx(11.0)  # j0 on the reserved node, the rest on both others


# --------------------------------------------------------------------------- the CLI
def test_cli_pareto_prints_writes_and_draws(tmp_path: Path) -> None:
    out, png = tmp_path / "front.json", tmp_path / "front.png"
    res = CliRunner().invoke(app, ["pareto", str(EXAMPLES / "cluster.yaml"), str(EXAMPLES / "queue.yaml"),
                                   "--objectives", "admitted_value,cost", "--time-limit", "3",
                                   "--select", '{"weights": {"admitted_value": 1, "cost": 0.1}}',
                                   "-o", str(out), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["objectives"] == ["admitted_value", "cost"] and len(doc["plans"]) == len(doc["points"]) >= 1
    assert 0 <= doc["selected"] < len(doc["plans"]) and png.stat().st_size > 1000
    bad = CliRunner().invoke(app, ["pareto", str(EXAMPLES / "cluster.yaml"), str(EXAMPLES / "queue.yaml"),
                                   "--objectives", "admitted_value,nope"])
    assert bad.exit_code != 0 and "unknown_term" in bad.output
