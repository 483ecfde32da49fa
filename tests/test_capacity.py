"""The capacity planner: tiny instances with a hand-computed optimum, and cost properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.capacity import Demand, Pools, plan_capacity
from optsched.errors import InputError


def h100(spot_price: float | None = 12.0, spot_nodes: float = 1.0, reserved: float = 25.0) -> Pools:
    return Pools.model_validate({"pools": [{
        "name": "h100", "model": "H100", "gpus_per_node": 8, "reserved_per_node_hour": reserved,
        "on_demand_per_node_hour": 40.0, "spot_per_node_hour": spot_price, "spot_available_nodes": spot_nodes}]})


def demand(series: list[float], tolerant: float = 0.0) -> Demand:
    return Demand.model_validate({"period_hours": 1.0, "scenarios": [
        {"name": "s", "probability": 1.0, "demand": {"H100": series}, "spot_tolerant": {"H100": tolerant}}]})


def test_reserve_one_node_and_buy_peaks_on_demand() -> None:
    """8-GPU nodes, 4 one-hour periods needing 16, 16, 8, 0 GPUs; reserved $25/node-h (paid for all
    4 h: $100 per node), on demand $40/node-h, no spot-tolerant demand.
    R=0: on demand 2+2+1 node-h = $200. R=1: $100 + (1+1) x $40 = $180. R=2: $200. Optimum: R=1,
    $180; reserved utilisation = (8+8+8+0) / (8 x 4) = 0.75."""
    plan = plan_capacity(demand([16, 16, 8, 0]), h100())
    assert plan.reserved == {"h100": 1}
    assert plan.cost.total == pytest.approx(180.0)
    assert (plan.cost.reserved, plan.cost.on_demand, plan.cost.spot) == pytest.approx((100.0, 80.0, 0.0))
    assert plan.reserved_utilisation == pytest.approx(0.75)
    assert plan.service_level == 1.0 and plan.status == "optimal"


def test_spot_takes_the_tolerant_share_within_availability() -> None:
    """As above, with half the demand spot-tolerant and 1 spot node at $12/node-h.
    R=0: peaks 1 spot + 1 on demand ($52) x 2, the 8-GPU hour 0.5 spot + 0.5 on demand ($26):
    $130. R=1: $100 + 1 spot node in each peak ($24) = $124. Optimum: R=1, $124, no on demand."""
    plan = plan_capacity(demand([16, 16, 8, 0], tolerant=0.5), h100())
    assert plan.reserved == {"h100": 1}
    assert (plan.cost.reserved, plan.cost.on_demand, plan.cost.spot) == pytest.approx((100.0, 0.0, 24.0))
    assert plan.spot_node_hours == {"h100": pytest.approx(2.0)}


def test_service_level_drops_the_costliest_period() -> None:
    """Service level 0.75 over 4 equally likely periods: one may go uncovered. R=0 and no spot:
    drop a 16-GPU hour, buy 2 + 1 on-demand node-hours = $120 (R=1 would cost $100 + $40)."""
    plan = plan_capacity(demand([16, 16, 8, 0]), h100(spot_price=None), service_level=0.75)
    assert plan.reserved == {"h100": 0}
    assert plan.cost.total == pytest.approx(120.0)
    assert plan.service_level == pytest.approx(0.75)


def test_demand_per_tenant_is_summed_and_charged_back_by_gpu_hours() -> None:
    """The first example's demand split between tenants a (8, 8, 8, 0 GPUs: 24 GPU-h) and b
    (8, 8, 0, 0: 16 GPU-h): the same plan ($180), charged $180 x 24/40 = $108 to a and $72 to b."""
    d = Demand.model_validate({"scenarios": [{"name": "s", "probability": 1.0, "demand": {
        "H100": {"a": [8, 8, 8, 0], "b": [8, 8, 0, 0]}}}]})
    plan = plan_capacity(d, h100())
    assert plan.reserved == {"h100": 1} and plan.cost.total == pytest.approx(180.0)
    assert plan.cost_by_tenant == {"a": pytest.approx(108.0), "b": pytest.approx(72.0)}
    assert plan_capacity(demand([16, 16, 8, 0]), h100()).cost_by_tenant == {"all": pytest.approx(180.0)}


def test_fixed_reserved_is_a_rule_of_thumb_to_compare() -> None:
    """Fixing R=2 (reserve the peak): $200, more than the optimum's $180."""
    plan = plan_capacity(demand([16, 16, 8, 0]), h100(), fixed_reserved={"h100": 2})
    assert plan.reserved == {"h100": 2} and plan.cost.total == pytest.approx(200.0)


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(InputError) as err:
        plan_capacity(Demand.model_validate({"scenarios": [{"name": "s", "probability": 1.0,
                                                             "demand": {"B200": [8.0]}}]}), h100())
    assert err.value.problems[0].path == "scenarios[0].demand.B200"
    with pytest.raises(InputError):
        plan_capacity(demand([8.0]), h100(), service_level=0.0)
    with pytest.raises(ValueError):
        Demand.model_validate({"scenarios": [{"name": "a", "probability": 0.5, "demand": {"H100": [1.0]}}]})


@st.composite
def instances(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    n_t = draw(st.integers(1, 5))
    n_s = draw(st.integers(1, 3))
    weights = [draw(st.integers(1, 4)) for _ in range(n_s)]
    scenarios = [{"name": f"s{i}", "probability": w / sum(weights),
                  "demand": {"H100": [float(draw(st.integers(0, 40))) for _ in range(n_t)]},
                  "spot_tolerant": {"H100": draw(st.sampled_from([0.0, 0.25, 0.5]))}} for i, w in enumerate(weights)]
    pools = [{"name": f"p{k}", "model": "H100", "gpus_per_node": draw(st.sampled_from([4, 8])),
              "reserved_per_node_hour": float(draw(st.integers(5, 30))),
              "on_demand_per_node_hour": float(draw(st.integers(20, 60))),
              "spot_per_node_hour": float(draw(st.integers(3, 15))),
              "spot_available_nodes": float(draw(st.integers(0, 3)))} for k in range(draw(st.integers(1, 2)))]
    return {"period_hours": 1.0, "scenarios": scenarios}, {"pools": pools}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=instances(), extra=st.integers(1, 16), level=st.sampled_from([0.5, 0.8]))
def test_cost_properties(data: tuple[dict[str, Any], dict[str, Any]], extra: int, level: float) -> None:
    """More demand never lowers cost; a higher service level never lowers cost; cheaper spot
    never raises cost."""
    d, p = data
    base = plan_capacity(Demand.model_validate(d), Pools.model_validate(p)).cost.total
    more = {**d, "scenarios": [{**s, "demand": {"H100": [x + extra for x in s["demand"]["H100"]]}}
                               for s in d["scenarios"]]}
    assert plan_capacity(Demand.model_validate(more), Pools.model_validate(p)).cost.total >= base - 1e-6 * (1 + base)
    lower = plan_capacity(Demand.model_validate(d), Pools.model_validate(p), service_level=level).cost.total
    assert lower <= base + 1e-6 * (1 + base)
    cheaper = {"pools": [{**q, "spot_per_node_hour": q["spot_per_node_hour"] / 2} for q in p["pools"]]}
    assert plan_capacity(Demand.model_validate(d), Pools.model_validate(cheaper)).cost.total <= base + 1e-6 * (1 + base)


# ---------------------------------------------------------------------------- demand from a trace
def test_hourly_occupancy_counts_every_hour_a_job_overlaps(tmp_path: Any) -> None:
    """Jobs (start 0 s, 2 h, 4 GPUs), (1 h, 1 h, 2 GPUs), (2.5 h, 0.25 h, 1 GPU): hour 0 holds 4
    GPUs, hour 1 holds 4 + 2, hour 2 holds 1 (a part-hour counts whole: guaranteed demand)."""
    from optsched.capacity.trace import hourly_occupancy, read_jobs

    trace = tmp_path / "t.csv"
    trace.write_text("start_s,duration_s,gpus\n0,7200,4\n3600,3600,2\n9000,900,1\n10,0,8\n")
    starts, ends, gpus, models = read_jobs(trace, "generic", "H100")
    assert models == ["H100"] * 3  # the zero-length job is dropped
    assert hourly_occupancy(starts, ends, gpus).tolist() == [4.0, 6.0, 1.0]


def test_demand_from_a_trace_resamples_days_and_round_trips(tmp_path: Any) -> None:
    """A one-day trace (shorter than a week) is resampled by whole days: every scenario repeats
    the day's hourly profile; with 6-hour periods the maximum of each block is kept. The derived
    document loads again and plans."""
    from optsched import dump
    from optsched.capacity import load_demand
    from optsched.capacity.trace import demand_from_trace

    trace = tmp_path / "day.csv"
    trace.write_text("start_s,duration_s,gpus,model\n" + "".join(
        f"{h * 3600},{3600},{8 * (1 + (h >= 12))},H100\n" for h in range(24)))
    d = demand_from_trace(trace, weeks=1, scenarios=3, period_hours=6, level_sigma=0.0)
    assert d.periods == 7 * 4 and d.models == ["H100"]
    assert all(s.demand["H100"] == [8.0, 8.0, 16.0, 16.0] * 7 for s in d.scenarios)
    path = tmp_path / "demand.yaml"
    dump(d, path)
    assert load_demand(path) == d
    assert plan_capacity(d, h100()).reserved["h100"] >= 1


def test_trace_readers_for_philly_and_openb(tmp_path: Any) -> None:
    """Philly summaries (timestamp, duration, num_gpus: one model given) and openb pods (creation /
    deletion times, num_gpu x gpu_milli / 1000 GPUs, first model of gpu_spec)."""
    from optsched.capacity.trace import read_jobs

    philly = tmp_path / "philly.csv"
    philly.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:00:00,3600,2,7200,a\n"
                      "2017-10-09 08:00:00,60,1,60,b\n")
    s, e, g, m = read_jobs(philly, "philly", "V100")
    assert s.tolist() == [0.0, 3600.0] and e.tolist() == [3600.0, 3660.0] and g.tolist() == [2.0, 1.0]
    assert m == ["V100", "V100"]
    openb = tmp_path / "openb.csv"
    openb.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                     "deletion_time,scheduled_time\np0,1000,1024,1,500,,LS,Running,100,3700,100\n"
                     "p1,1000,1024,2,1000,V100M32|V100M16,LS,Running,0,7200,0\np2,1000,1024,0,0,,BE,Running,0,10,0\n")
    s, e, g, m = read_jobs(openb, "openb", "any")
    assert g.tolist() == [0.5, 2.0] and m == ["any", "V100M32"] and s.tolist() == [100.0, 0.0]
    with pytest.raises(InputError):
        read_jobs(openb, "slurm", "any")
