"""The pre-warm advisor: a small MILP that picks layers to pull ahead onto nodes (optsched/prewarm.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched import InputError, Plan
from optsched.model.plan import Deferred, Placement
from optsched.prewarm import GB, prewarm
from tests.test_locality import _cluster, _queue

TORCH_S = 8 * 4 * GB / 10e9  # 4 GB from the registry at 10 Gbps: 3.2 s
TORCH_P2P_S = 8 * 4 * GB / 100e9


def _deferred(jobs: int = 1) -> Plan:
    return Plan(deferred=[Deferred(job=f"j{i}", reason="capacity") for i in range(jobs)])


def test_one_pull_fits_the_budget_and_seeds_its_leaf() -> None:
    """Four empty nodes in two leaves; one deferred 8-GPU job that may land on any (1/4 each).
    Every byte saves the same time, so with 4 GB to spend the advisor fills the budget with layers
    each pulled into a leaf once: a pulled node saves the registry pull, its leaf peer the
    registry-minus-P2P difference (for 4 GB: 0.25 x 3.2 s + 0.25 x 2.88 s)."""
    cluster = _cluster([[], [], [], []], leaves=2)
    advice = prewarm(cluster, _queue(), _deferred(), node_budget_bytes=4 * GB, total_budget_bytes=4 * GB)
    assert advice.bytes == 4 * GB
    leaf_of = {n.id: n.domain for n in cluster.nodes}
    assert len({(leaf_of[p.node], p.layer) for p in advice.pulls}) == len(advice.pulls)
    saved = 0.25 * TORCH_S + 0.25 * (TORCH_S - TORCH_P2P_S)
    assert advice.seconds_before - advice.seconds_after == pytest.approx(saved)
    assert sum(p.seconds_saved for p in advice.pulls) == pytest.approx(saved)
    assert advice.status == "optimal" and advice.upcoming_jobs == ["j0"]


def test_layers_the_plan_pulls_or_the_nodes_hold_are_never_advised() -> None:
    """n0 holds torch; the plan starts j1 (same image) on n1: both hold every layer of it after
    the plan, so no pull goes there; the rest goes to one node per leaf at most per layer."""
    cluster = _cluster([["torch"], [], [], []], leaves=2)
    queue = _queue(jobs=2)
    plan = Plan(placements=[Placement(job="j1", group="w", replica=0, node="n1", devices=list(range(8)))],
                deferred=[Deferred(job="j0", reason="capacity")])
    advice = prewarm(cluster, queue, plan, node_budget_bytes=100 * GB)
    assert advice.upcoming_jobs == ["j0"]
    assert all(p.node not in ("n1",) for p in advice.pulls)
    assert all(not (p.node == "n0" and p.layer == "torch") for p in advice.pulls)
    assert advice.seconds_after == pytest.approx(0.0)  # budget enough: every node holds everything
    saved = [p.seconds_saved for p in advice.pulls]
    assert all(a >= b - 1e-9 for a, b in itertools.pairwise(saved))  # ranked, most saved first


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["base", "cuda", "torch", "app"]), unique=True), min_size=1, max_size=5),
       st.integers(1, 3), st.sampled_from([0, 1, 3, 5]), st.sampled_from([None, 2, 6]))
def test_budgets_hold_and_the_advice_never_slows_start_up(cached: list[list[str]], leaves: int, node_gb: int,
                                                         total_gb: int | None) -> None:
    cluster = _cluster(cached, leaves=min(leaves, len(cached)))
    advice = prewarm(cluster, _queue(jobs=2), _deferred(2), node_budget_bytes=node_gb * GB,
                     total_budget_bytes=None if total_gb is None else total_gb * GB)
    per_node: dict[str, int] = {}
    for p in advice.pulls:
        per_node[p.node] = per_node.get(p.node, 0) + p.bytes
        assert p.layer not in cluster.nodes[int(p.node[1:])].images and p.seconds_saved > 0
    assert all(b <= node_gb * GB for b in per_node.values())
    assert total_gb is None or advice.bytes <= total_gb * GB
    assert advice.seconds_after <= advice.seconds_before + 1e-9
    assert advice.seconds_before - advice.seconds_after == pytest.approx(sum(p.seconds_saved for p in advice.pulls))


def test_negative_budgets_are_input_errors() -> None:
    with pytest.raises(InputError, match="budget"):
        prewarm(_cluster([[]]), _queue(), _deferred(), node_budget_bytes=-1)


def test_cli_prewarm(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from optsched import dump
    from optsched.cli import app

    cluster = _cluster([[], [], [], []], leaves=2)
    paths = [tmp_path / "c.yaml", tmp_path / "q.yaml", tmp_path / "p.json"]
    for doc, path in zip((cluster, _queue(), _deferred()), paths, strict=True):
        dump(doc, path)
    result = CliRunner().invoke(app, ["prewarm", *map(str, paths), "--node-budget-gb", "4", "--total-budget-gb", "4"])
    assert result.exit_code == 0, result.output
    assert "pre-warm" in result.output and "GB" in result.output
    result = CliRunner().invoke(app, ["prewarm", *map(str, paths), "--json"])
    assert result.exit_code == 0 and '"seconds_after"' in result.output
