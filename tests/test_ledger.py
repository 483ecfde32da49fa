"""The ledger's bulk release of running jobs (the `kueue` baseline's trial placements) equals
releasing them one by one, and restoring them gives the ledger back."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.ledger import Ledger
from optsched.model import Cluster, Queue
from optsched.problem import compile_problem
from tests.strategies import busy_rounds, contended_rounds


def _same(a: Ledger, b: Ledger) -> None:
    for name in ("used", "score_pad", "dev_used", "quota_used", "uplink_load", "max_share_free"):
        assert np.allclose(getattr(a, name), getattr(b, name), atol=1e-9), name
    for name in ("free_whole", "max_group_free"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(busy_rounds(), contended_rounds()), picks=st.lists(st.integers(0, 63), max_size=12))
def test_bulk_release_equals_one_by_one(data: tuple[Cluster, Queue], picks: list[int]) -> None:
    p = compile_problem(*data)
    if not p.running:
        return
    victims = [p.running[k % len(p.running)] for k in picks]  # repeats count twice, as one by one
    bulk, single, untouched = Ledger.with_running(p), Ledger.with_running(p), Ledger.with_running(p)
    nodes = bulk.add_running_many(victims, sign=-1.0)
    for v in victims:
        single.add_running(v, sign=-1.0)
    _same(bulk, single)
    assert set(nodes.tolist()) == {pl.node for v in victims for pl in v.placements}
    bulk.add_running_many(victims, sign=1.0)
    _same(bulk, untouched)


def test_bulk_release_on_a_reference_cluster() -> None:
    """Hundreds of running jobs at once (the vectorised device refresh, past 16 touched nodes)."""
    from optsched import load_cluster
    from optsched.bundled import DATA_DIR
    from optsched.generate import generate_queue

    cluster = load_cluster(DATA_DIR / "clusters" / "mixed-cloud-10k.yaml")
    p = compile_problem(cluster, generate_queue(cluster, "mixed", jobs=10, load=1.0, seed=0))
    victims = [j for j in p.running if j.preemptible]
    assert len(victims) > 100
    bulk, single = Ledger.with_running(p), Ledger.with_running(p)
    bulk.add_running_many(victims, sign=-1.0)
    for v in victims:
        single.add_running(v, sign=-1.0)
    _same(bulk, single)
    assert (bulk.free_whole > Ledger.with_running(p).free_whole).sum() > 16


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(busy_rounds(), contended_rounds()), first=st.sets(st.integers(0, 63), max_size=10),
       second=st.sets(st.integers(0, 63), max_size=10))
def test_moving_from_one_released_set_to_another(data: tuple[Cluster, Queue], first: set[int],
                                                  second: set[int]) -> None:
    """The `kueue` baseline's trials move from one victim set to the next in one weighted call:
    the same ledger as restoring the first set and releasing the second one by one."""
    p = compile_problem(*data)
    if not p.running:
        return
    a = sorted({k % len(p.running) for k in first})
    b = sorted({k % len(p.running) for k in second})
    moved, single = Ledger.with_running(p), Ledger.with_running(p)
    moved.add_running_weighted(np.array(a, dtype=np.int64), -np.ones(len(a)))
    go, back = sorted(set(b) - set(a)), sorted(set(a) - set(b))
    jobs = np.array(go + back, dtype=np.int64)
    weights = np.array([-1.0] * len(go) + [1.0] * len(back))
    order = np.argsort(jobs)
    nodes = moved.add_running_weighted(jobs[order], weights[order])
    for k in b:
        single.add_running(p.running[k], sign=-1.0)
    _same(moved, single)
    assert set(nodes.tolist()) == {pl.node for k in go + back for pl in p.running[k].placements}
