"""Fuzzing the doors: mutated documents through the loaders, `solve` (every solver, short limits)
and the command line. Nothing may escape but `InputError` (the CLI: exit 0, 1 or 2), every plan
of a document that loads passes the validator, and nothing blows up memory: the cases run in a
child pytest under an address-space limit (`MEMORY_LIMIT_BYTES`).

The child runs the `test_fuzz_*` cases below, which skip unless `OPTSCHED_FUZZ_CHILD` is set;
`test_fuzz_under_a_memory_limit` starts it.
"""

from __future__ import annotations

import copy
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from optsched import InputError, check, load_cluster, load_queue, solve, solver_names
from optsched.cli import app
from tests.conftest import EXAMPLES

CHILD = os.environ.get("OPTSCHED_FUZZ_CHILD") == "1"
MEMORY_LIMIT_BYTES = 4 * 2**30
"""Address space of the child (the examples' rounds need well under 1 GiB; a list of 10^9 slots
or devices needs more than this)."""

child_only = pytest.mark.skipif(not CHILD, reason="runs in the memory-limited child (test_fuzz_under_a_memory_limit)")

NASTY = st.one_of(
    st.none(), st.booleans(), st.just([]), st.just({}), st.just([[]]),
    st.integers(-3, 10), st.sampled_from([2**31, 2**63, 2**64, 10**9, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e9, 1e30, 1e308, 0.5, 1.5, 0.0001]),
    st.sampled_from(["8000", "yes", "", "[/x]", "[bold]", "leaf-0", "h100-0", "H100-SXM", "\x00", "é"]),
)
"""Replacement values: wrong types, strings that look like numbers or markup, ids that exist,
and numbers at and past every bound."""


def _paths(node: Any, out: list[tuple[Any, Any]]) -> None:
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for k, v in items:
        out.append((node, k))
        _paths(v, out)


def _mutate(doc: dict[str, Any], picks: list[tuple[str, int, Any]]) -> dict[str, Any]:
    """Apply each (operation, where, value): `set` the field to value; `scale` a number by value,
    keeping its type; `drop` the field or list item; `copy` a list item (a second node, running
    job, placement, group ... with the same ids)."""
    doc = copy.deepcopy(doc)
    for op, pick, value in picks:
        paths: list[tuple[Any, Any]] = []
        _paths(doc, paths)
        if not paths:  # everything dropped
            break
        parent, key = paths[pick % len(paths)]
        old = parent[key]
        if op == "set":
            parent[key] = copy.deepcopy(value)
        elif op == "scale" and isinstance(old, int | float) and not isinstance(old, bool):
            scaled = old * value
            parent[key] = int(scaled) if isinstance(old, int) and abs(scaled) < 2**70 else scaled
        elif op == "drop":
            del parent[key]
        elif op == "copy" and isinstance(parent, list):
            parent.append(copy.deepcopy(old))
    return doc


OPS = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 10**6), NASTY),
    st.tuples(st.just("scale"), st.integers(0, 10**6), st.sampled_from([0, 0.5, 2, 3, 1000, 10**7, -1])),
    st.tuples(st.sampled_from(["drop", "copy"]), st.integers(0, 10**6), st.none()),
)
PICKS = st.lists(OPS, min_size=0, max_size=3)
DOCS = (yaml.safe_load((EXAMPLES / "cluster.yaml").read_text()), yaml.safe_load((EXAMPLES / "queue.yaml").read_text()))
FUZZ = settings(max_examples=int(os.environ.get("OPTSCHED_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
"""150 cases per test in `make test`; OPTSCHED_FUZZ_EXAMPLES=N runs N (a longer campaign)."""


@child_only
@FUZZ
@given(cluster_picks=PICKS, queue_picks=PICKS, solver=st.sampled_from(solver_names()))
def test_fuzz_solve(cluster_picks: list[tuple[str, int, Any]], queue_picks: list[tuple[str, int, Any]],
                    solver: str) -> None:
    """A mutated document loads or raises InputError; what loads is solved by `solver` into a plan
    the validator accepts."""
    try:
        cluster = load_cluster(_mutate(DOCS[0], cluster_picks))
        queue = load_queue(_mutate(DOCS[1], queue_picks), cluster)
    except InputError as exc:
        assert exc.problems
        return
    plan = solve(cluster, queue, solver=solver, time_limit=0.5)
    assert check(cluster, queue, plan) == []


@child_only
@FUZZ
@given(cluster_picks=PICKS, queue_picks=PICKS, solver=st.sampled_from(["best-fit", "kueue", "cpsat"]),
       garble=st.one_of(st.none(), st.binary(min_size=1, max_size=8)))
def test_fuzz_cli(tmp_path_factory: pytest.TempPathFactory, cluster_picks: list[tuple[str, int, Any]],
                  queue_picks: list[tuple[str, int, Any]], solver: str, garble: bytes | None) -> None:
    """The command line on mutated (and sometimes garbled) files: exit 0, 1 or 2 and no exception;
    a plan it writes passes `optsched check`."""
    d = tmp_path_factory.mktemp("fuzz")
    c, q, plan = d / "c.yaml", d / "q.json", d / "plan.json"
    c.write_text(yaml.safe_dump(_mutate(DOCS[0], cluster_picks), allow_unicode=True))
    q.write_text(json.dumps(_mutate(DOCS[1], queue_picks)))
    if garble is not None:
        c.write_bytes(c.read_bytes()[:200] + garble + c.read_bytes()[200:])
    runner = CliRunner()
    res = runner.invoke(app, ["solve", str(c), str(q), "--solver", solver, "--time-limit", "0.5", "-o", str(plan)])
    assert res.exit_code in (0, 2), res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    if res.exit_code == 0:
        assert runner.invoke(app, ["check", str(c), str(q), str(plan)]).exit_code == 0
        assert runner.invoke(app, ["evaluate", str(c), str(q), str(plan), "--json"]).exit_code == 0


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def test_fuzz_under_a_memory_limit() -> None:
    """The fuzz cases above, in a child pytest whose address space is limited."""
    if CHILD:
        pytest.skip("this is the child")
    root = Path(__file__).resolve().parents[1]
    res = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-k", "fuzz_solve or fuzz_cli",
                          str(Path(__file__))], cwd=root, env={**os.environ, "OPTSCHED_FUZZ_CHILD": "1"},
                         capture_output=True, text=True, preexec_fn=_limit_memory, check=False, timeout=600)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
    assert "2 passed" in res.stdout, res.stdout[-2000:]
