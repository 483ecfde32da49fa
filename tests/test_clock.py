"""Deterministic mode (`solve(..., deterministic=True)`, optsched.clock): the work clock, and the
same plan for the same inputs and seed, in one process and across processes with other hash seeds,
on rounds where the wall clock decides differently from run to run."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from optsched import check, clock, load_cluster, solve
from optsched.bundled import DATA_DIR
from optsched.generate import generate_queue
from optsched.model import Cluster, Plan, Queue

ROOT = Path(__file__).resolve().parents[1]


def fingerprint(plan: Plan) -> str:
    """The plan document without its solver statistics, hashed."""
    doc = plan.model_dump(mode="json")
    doc["solver"] = None
    return hashlib.sha1(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def test_the_work_clock_moves_only_by_charges() -> None:
    """Inside `work_clock` the time is the start plus the charged work, whatever the wall clock
    does; outside it (and inside `wall_clock`) it is perf_counter; external solvers get a safety cap."""
    assert not clock.deterministic()
    before = clock.now()
    clock.charge(100.0)  # no effect on the wall clock
    assert clock.now() - before < 1.0
    with clock.work_clock(5.0) as work:
        assert clock.deterministic() and clock.now() == 5.0
        sum(range(100_000))
        assert clock.now() == 5.0
        clock.charge(0.25)
        assert clock.now() == 5.25 == work.t
        assert clock.wall_limit(2.0) == clock.SAFETY_FACTOR * 2.0 + clock.SAFETY_S
        with clock.wall_clock():
            assert not clock.deterministic() and clock.now() > 5.25
    assert not clock.deterministic() and clock.wall_limit(2.0) == 2.0


def _round(name: str, jobs: int) -> tuple[Cluster, Queue]:
    cluster = load_cluster(DATA_DIR / "clusters" / f"{name}.yaml")
    return cluster, generate_queue(cluster, "mixed", jobs=jobs, load=2.0, seed=0)


@pytest.mark.parametrize(("name", "jobs", "solver"), [
    ("mixed-cloud-10k", 300, "cpsat"),  # tenants, evictions, the domain path, neighbourhoods
    ("dgx-h100-1k", 150, "milp"),
    ("ascend-910b-4k", 200, "auto"),
    ("mixed-cloud-10k", 300, "kueue"),
])
def test_deterministic_mode_gives_the_same_plan_twice(name: str, jobs: int, solver: str) -> None:
    """Two calls with the same inputs and seed return the same plan (valid), at a limit short
    enough that the wall clock cuts the start plan and the searches."""
    cluster, queue = _round(name, jobs)
    a = solve(cluster, queue, solver=solver, time_limit=0.5, seed=3, deterministic=True)
    b = solve(cluster, queue, solver=solver, time_limit=0.5, seed=3, deterministic=True)
    assert check(cluster, queue, a) == []
    assert fingerprint(a) == fingerprint(b)


def test_deterministic_mode_gives_the_same_plan_in_another_process() -> None:
    """The plan does not depend on the process: another interpreter with another hash seed
    (string hashing, set order) returns the same plan."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from tests.test_clock import _round, fingerprint; "
            "from optsched import solve; c, q = _round('mixed-cloud-10k', 300); "
            "print(fingerprint(solve(c, q, solver='cpsat', time_limit=0.5, seed=3, deterministic=True)))")
    prints = {subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip() for seed in ("1", "2")}
    cluster, queue = _round("mixed-cloud-10k", 300)
    here = fingerprint(solve(cluster, queue, solver="cpsat", time_limit=0.5, seed=3, deterministic=True))
    assert prints == {here}
