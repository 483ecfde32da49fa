"""The discrete-event simulator: scenarios with known answers, trace readers, and its invariants
(conservation, capacity, determinism) on hypothesis-generated clusters and traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from optsched import InputError, Plan, check
from optsched.model import Cluster, Job, Queue
from optsched.model.plan import Placement
from optsched.sim import (
    PlanRejected,
    Rounds,
    SimConfig,
    SimResult,
    TraceJob,
    read_csv,
    read_openb,
    read_philly,
    simulate,
)
from optsched.sim.trace import philly_replicas
from tests.strategies import busy_rounds, contended_rounds


def _cluster(nodes: int = 1, gpus: int = 8, pool: str = "res", rate: float = 0.0) -> Cluster:
    return Cluster.model_validate({
        "topology": {"levels": ["leaf"], "domains": [{"id": "l0", "level": "leaf"}]},
        "device_models": {"A": {"speed": 1.0}},
        "pools": [{"name": "res", "pricing": "reserved", "price_per_hour": 10.0},
                  {"name": "spot", "pricing": "spot", "price_per_hour": 4.0, "interruption_rate_per_hour": rate}],
        "nodes": [{"id": f"n{i}", "domain": "l0", "pool": pool, "capacity": {"cpu": 64000, "memory": 512000},
                   "devices": {"model": "A", "count": gpus}} for i in range(nodes)],
    })


def _job(i: int, arrival: float, duration: float, gpus: float = 8, replicas: int = 1, **extra: Any) -> TraceJob:
    job = Job.model_validate({"id": f"j{i}", "submitted_at": arrival, **extra,
                              "groups": [{"name": "w", "replicas": {"min": replicas, "max": replicas},
                                          "request": {"gpu": gpus, "cpu": 1000}}]})
    return TraceJob(job, arrival, duration)


def test_fifo_on_one_node_gives_exact_completion_times() -> None:
    trace = [_job(i, 0.0, 100.0) for i in range(3)]
    res = simulate(_cluster(), trace, SimConfig(policy="first-fit", check_invariants=True))
    assert [res.jobs[f"j{i}"].finish_s for i in range(3)] == [100.0, 200.0, 300.0]
    assert [res.jobs[f"j{i}"].queue_delay_s for i in range(3)] == [0.0, 100.0, 200.0]
    assert res.states()["finished"] == 3
    assert res.utilisation() == pytest.approx(1.0)
    assert res.cost() == pytest.approx(10.0 * 300 / 3600)  # one reserved node at $10/h for 300 s
    summary = res.summary()
    assert summary["jct_p50_s"] == pytest.approx(200.0)
    assert summary["makespan_s"] == 300.0


def test_shares_pack_onto_one_device() -> None:
    """Four quarter-GPU jobs on a one-GPU node all run at once (GPU sharing is real)."""
    trace = [_job(i, 0.0, 50.0, gpus=0.25) for i in range(5)]
    res = simulate(_cluster(gpus=1), trace, SimConfig(policy="best-fit", check_invariants=True))
    assert _starts(res) == [0.0, 0.0, 0.0, 0.0, 50.0]
    assert max(res.samples.allocated_gpus) == pytest.approx(1.0)


def _starts(res: SimResult) -> list[float]:
    return sorted(-1.0 if r.first_start_s is None else r.first_start_s for r in res.jobs.values())


def test_periodic_and_batched_rounds() -> None:
    trace = [_job(i, 10.0 * i, 5.0, gpus=1) for i in range(6)]
    periodic = simulate(_cluster(), trace, SimConfig(rounds=Rounds("seconds", 30.0), check_invariants=True))
    # rounds at 0, 30 and 60 s: jobs wait for the next one
    assert _starts(periodic) == [0.0, 30.0, 30.0, 30.0, 60.0, 60.0]
    batched = simulate(_cluster(), trace, SimConfig(rounds=Rounds("arrivals", 3), check_invariants=True))
    assert _starts(batched) == [20.0, 20.0, 20.0, 50.0, 50.0, 50.0]
    with pytest.raises(InputError, match=r"rounds\.value"):
        Rounds("seconds", 0.0)


def test_spot_interruptions_evict_and_lose_work_since_the_checkpoint() -> None:
    trace = [_job(i, 0.0, 4 * 3600.0, gpus=8, checkpoint_interval_s=600.0) for i in range(4)]
    config = SimConfig(seed=3, spot_return_s=300.0, check_invariants=True)
    res = simulate(_cluster(nodes=4, pool="spot", rate=1.0), trace, config)
    assert res.states()["finished"] == 4
    evicted = [r for r in res.jobs.values() if r.evictions]
    assert evicted, "at one interruption per node-hour over 4 hours some job is interrupted"
    for r in evicted:
        assert 0 < r.lost_gpu_hours <= r.evictions * 8 * 600 / 3600 + 1e-9  # at most one interval each
        assert r.jct_s is not None and r.jct_s > r.duration_s
    again = simulate(_cluster(nodes=4, pool="spot", rate=1.0), trace, config)
    assert _fingerprint(again) == _fingerprint(res)


def test_a_job_that_can_never_fit_fails_and_the_run_ends() -> None:
    trace = [_job(0, 0.0, 10.0, gpus=8, replicas=2), _job(1, 5.0, 10.0, gpus=8)]
    res = simulate(_cluster(nodes=1), trace, SimConfig(check_invariants=True))
    assert res.jobs["j0"].state == "failed" and "unschedulable" in res.jobs["j0"].why_failed
    assert res.jobs["j1"].state == "finished"


def test_max_wait_and_horizon() -> None:
    trace = [_job(0, 0.0, 1000.0), _job(1, 1.0, 10.0)]
    res = simulate(_cluster(), trace, SimConfig(max_wait_s=60.0, rounds=Rounds("seconds", 100.0)))
    assert res.jobs["j1"].state == "failed" and "waited" in res.jobs["j1"].why_failed
    cut = simulate(_cluster(), [*trace, _job(2, 5000.0, 10.0)], SimConfig(horizon_s=500.0, check_invariants=True))
    assert cut.states() == {"future": 1, "queued": 1, "running": 1, "finished": 0, "failed": 0}
    assert cut.end_s == 500.0


def test_a_plan_that_breaks_a_rule_is_refused() -> None:
    def overbook(cluster: Cluster, queue: Queue) -> Plan:  # every job on node n0's devices 0-7
        return Plan(placements=[Placement(job=j.id, group="w", replica=0, node="n0", devices=list(range(8)))
                                for j in queue.jobs])

    with pytest.raises(PlanRejected, match=r"capacity|device"):
        simulate(_cluster(), [_job(0, 0.0, 10.0), _job(1, 0.0, 10.0)], SimConfig(policy=overbook))


def test_unknown_references_in_the_trace_are_input_errors() -> None:
    job = Job.model_validate({"id": "x", "groups": [{"name": "w", "request": {"gpu": 1}, "models": {"Z": 1.0}}]})
    with pytest.raises(InputError):
        simulate(_cluster(), [TraceJob(job, 0.0, 1.0)])


def test_readers(tmp_path: Path) -> None:
    generic = tmp_path / "jobs.csv"
    generic.write_text("id,arrival_s,duration_s,gpus,replicas,cpu,tenant,gpu_models\n"
                       "a,10,100,0.5,1,4000,t1,A|B\nb,0,50,8,2,,,\nc,oops,1,1,1,,,\n")
    tr = read_csv(generic)
    assert [j.job.id for j in tr.jobs] == ["b", "a"]
    assert tr.jobs[1].job.groups[0].request.gpu == 0.5 and tr.jobs[1].job.tenant == "t1"
    assert tr.jobs[1].job.groups[0].models == {"A": 1.0, "B": 1.0}
    assert tr.jobs[0].gpus == 16 and tr.skipped[0][0] == 4
    philly = tmp_path / "philly.csv"
    philly.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,v1\n"
                      "2017-10-09 06:13:03,2951.0,16,2951.0,v2\n2017-10-09 06:13:04,10.0,,0,v2\n")
    tr = read_philly(philly)
    assert [j.arrival_s for j in tr.jobs] == [0.0, 2932.0]
    assert tr.jobs[0].job.groups[0].replicas.min == 2 and tr.jobs[0].gpus == 16
    assert tr.jobs[0].job.tenant == "vc-v2" and len(tr.skipped) == 1
    assert philly_replicas(12) == (2, 6) and philly_replicas(128) == (16, 8) and philly_replicas(3) == (1, 3)
    openb = tmp_path / "pods.csv"
    openb.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                     "deletion_time,scheduled_time\np0,12000,16384,1,460,G2|T4,LS,Running,100,1100,200\n"
                     "p1,4000,1024,0,0,,BE,Running,0,50,0\n")
    tr = read_openb(openb)
    assert [j.job.id for j in tr.jobs] == ["p1", "p0"]
    assert tr.jobs[1].gpus == pytest.approx(0.46) and tr.jobs[1].duration_s == 900.0
    assert tr.jobs[1].job.groups[0].models == {"G2": 1.0, "T4": 1.0}
    assert tr.window(50.0).jobs[0].arrival_s == 0.0 and len(tr.window(50.0).jobs) == 1


def _fingerprint(res: SimResult) -> list[tuple[Any, ...]]:
    return [(r.id, r.state, r.first_start_s, r.finish_s, r.evictions, round(r.lost_gpu_hours, 9))
            for r in res.jobs.values()]


@st.composite
def traces(draw: st.DrawFn, contended: bool = False) -> tuple[Cluster, list[TraceJob]]:
    cluster, queue = draw(contended_rounds() if contended else busy_rounds())
    trace = [TraceJob(job.model_copy(update={"submitted_at": 0.0}), float(draw(st.integers(0, 4)) * 100),
                      float(draw(st.integers(1, 6)) * 100)) for job in queue.jobs]
    assume(trace)
    return cluster, trace


def _conserved(res: SimResult, trace: list[TraceJob]) -> None:
    assert set(res.jobs) == {t.job.id for t in trace}
    assert sum(res.states().values()) == len(trace)
    assert res.states()["future"] == res.states()["queued"] == res.states()["running"] == 0  # no horizon: all end
    for r in res.jobs.values():
        if r.state == "finished":
            assert r.jct_s is not None and r.jct_s >= r.duration_s - 1e-9
    assert all(a <= h + 1e-9 for a, h in zip(res.samples.allocated_gpus, res.samples.healthy_gpus, strict=True))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(traces(), st.sampled_from(["best-fit", "first-fit", "spread"]), st.integers(0, 3),
       st.sampled_from([Rounds(), Rounds("seconds", 150.0), Rounds("arrivals", 2)]))
def test_invariants_hold_on_generated_traces(case: tuple[Cluster, list[TraceJob]], policy: str, seed: int,
                                             rounds: Rounds) -> None:
    """Conservation and capacity after every event (check_invariants, validator on every plan),
    with node failures and spot interruptions; the same seed replays the same run."""
    cluster, trace = case
    config = SimConfig(policy=policy, rounds=rounds, seed=seed, node_failure_rate_per_hour=2.0, repair_s=200.0,
                       spot_return_s=100.0, check_invariants=True)
    res = simulate(cluster, trace, config)
    _conserved(res, trace)
    assert _fingerprint(simulate(cluster, trace, config)) == _fingerprint(res)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(traces(contended=True))
def test_invariants_hold_when_the_policy_preempts(case: tuple[Cluster, list[TraceJob]]) -> None:
    """Kueue's preemption evicts running jobs: they return to the queue and still end."""
    cluster, trace = case
    res = simulate(cluster, trace, SimConfig(policy="kueue", check_invariants=True))
    _conserved(res, trace)


def test_every_round_plan_passes_the_validator_independently() -> None:
    """The validator's verdict on a recorded round (not just the simulator's own check)."""
    seen: list[bool] = []

    def policy(cluster: Cluster, queue: Queue) -> Plan:
        from optsched import solve

        plan = solve(cluster, queue, solver="best-fit")
        seen.append(not check(cluster, queue, plan))
        return plan

    simulate(_cluster(nodes=2), [_job(i, 10.0 * i, 30.0, gpus=4) for i in range(6)], SimConfig(policy=policy))
    assert seen and all(seen)


# ---------------------------------------------------------------------------- provisioning
def _provisionable(max_nodes: int = 2, startup_s: float = 60.0, pricing: str = "on_demand",
                   rate: float = 0.0) -> Cluster:
    """One reserved 8-GPU node ($10/h) and a pool of up to `max_nodes` new 8-GPU nodes ($30/h)."""
    doc = _cluster().model_dump()
    doc["node_templates"] = {"t": {"capacity": {"cpu": 64000, "memory": 512000}, "devices": {"model": "A", "count": 8}}}
    doc["pools"].append({"name": "new", "pricing": pricing, "price_per_hour": 30.0, "interruption_rate_per_hour": rate,
                         "provisionable": {"template": "t", "domain": "l0", "max_nodes": max_nodes,
                                           "startup_s": startup_s}})
    return Cluster.model_validate(doc)


def test_provisioned_nodes_start_late_are_paid_while_they_live_and_are_released_when_empty() -> None:
    """Three 8-GPU jobs of 600 s at t=0 under karpenter: j0 on the reserved node, j1 and j2 on two
    new nodes that start after 60 s (they finish at 660 s), paid $30/h each from 0 to 660 s, then
    released (release_empty_s = 0). Total: $10/h x 660 s + 2 x $30/h x 660 s."""
    trace = [_job(i, 0.0, 600.0) for i in range(3)]
    res = simulate(_provisionable(), trace, SimConfig(policy="karpenter", check_invariants=True))
    assert sorted(r.finish_s or 0.0 for r in res.jobs.values()) == [600.0, 660.0, 660.0]
    assert sorted(r.first_start_s or 0.0 for r in res.jobs.values()) == [0.0, 60.0, 60.0]
    assert res.end_s == 660.0 and res.cost() == pytest.approx((10.0 + 2 * 30.0) * 660 / 3600)
    assert res.provisioned_node_hours() == pytest.approx(2 * 660 / 3600)
    assert res.cost(0.0, 600.0) == pytest.approx((10.0 + 2 * 30.0) * 600 / 3600)
    assert max(res.samples.healthy_gpus) == 24.0 and res.samples.healthy_gpus[-1] == 8.0


def test_provisioning_stays_within_max_nodes_across_rounds() -> None:
    """Five jobs arriving 100 s apart, each longer than the run of arrivals: with max_nodes 2
    only two new nodes ever live at once (the invariant checks it after every event); the rest
    wait for a node to free up; a node kept busy is not released between its jobs."""
    trace = [_job(i, 100.0 * i, 1000.0) for i in range(5)]
    res = simulate(_provisionable(max_nodes=2, startup_s=0.0), trace,
                   SimConfig(policy="karpenter", check_invariants=True, release_empty_s=300.0))
    assert res.states()["finished"] == 5
    assert max(res.samples.healthy_gpus) == 24.0
    starts = _starts(res)
    assert starts[:3] == [0.0, 100.0, 200.0] and starts[3] >= 1000.0


def test_a_reclaimed_provisioned_spot_node_is_gone_and_its_job_waits_again() -> None:
    """A provisioned spot pool at 4 interruptions per hour: jobs on its nodes are evicted and
    the node released; every job still ends, and the pool never holds more than max_nodes."""
    trace = [_job(i, 0.0, 3600.0, checkpoint_interval_s=600.0) for i in range(3)]
    config = SimConfig(policy="karpenter", check_invariants=True, seed=1)
    res = simulate(_provisionable(pricing="spot", rate=4.0, startup_s=0.0), trace, config)
    assert res.states()["finished"] == 3
    assert any(r.evictions for r in res.jobs.values())
    assert _fingerprint(simulate(_provisionable(pricing="spot", rate=4.0, startup_s=0.0), trace, config)) \
        == _fingerprint(res)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(traces(), st.sampled_from(["karpenter", "cpsat"]), st.integers(0, 2))
def test_invariants_hold_when_plans_provision(case: tuple[Cluster, list[TraceJob]], policy: str, seed: int) -> None:
    """Generated traces on clusters with a provisionable pool (the template fits every drawn
    GPU request): plans that create nodes pass the validator, nodes come and go, and
    conservation, capacity, max_nodes and the $/h counter hold after every event."""
    cluster, trace = case
    leaf = next(d.id for d in cluster.topology.domains if d.level == "leaf")
    doc = cluster.model_dump()
    doc["node_templates"] = {"t": {"capacity": {"cpu": 128000, "memory": 1048576, "rdma_nics": 8},
                                   "devices": {"model": "GPU-A", "count": 8}, "labels": {"zone": "a"}}}
    doc["pools"].append({"name": "od", "pricing": "on_demand", "price_per_hour": 40.0,
                         "provisionable": {"template": "t", "domain": leaf, "max_nodes": 2, "startup_s": 50.0}})
    cluster = Cluster.model_validate(doc)
    config = SimConfig(policy=policy, seed=seed, time_limit=0.5, node_failure_rate_per_hour=1.0, repair_s=200.0,
                       check_invariants=True, objective=["admitted_value", "cost"] if policy == "cpsat" else None)
    res = simulate(cluster, trace, config)
    _conserved(res, trace)
