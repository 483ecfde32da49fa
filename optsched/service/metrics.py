"""The service's Prometheus metrics (`GET /metrics`), in one registry per service instance.

- `optsched_round_seconds` (histogram, `source`: `request` or `state`): a round's wall time
  (read, compile, solve, actions);
- `optsched_rounds_total` (counter, `source`, `status`): rounds by the plan's status (`optimal`,
  `feasible`, `fallback`, `heuristic`), or `input` / `error` when no plan came;
- `optsched_round_gap` (gauge, `source`): the latest plan's relative gap to its bound (NaN: unknown);
- `optsched_admitted_value` (gauge, `source`): the latest plan's admitted value (docs/metrics.md);
- `optsched_deferred_jobs` (gauge, `source`, `reason`): jobs the latest plan defers, by reason;
- `optsched_evictions_total` (counter, `source`): running jobs evicted by published plans;
- `optsched_extender_seconds` (histogram, `verb`): time to answer a kube-scheduler extender call;
- `optsched_extender_requests_total` (counter, `verb`, `outcome`): extender calls by outcome
  (`planned`, `planned_elsewhere`, `wait`, `unknown`, `bound`, `victims`, `error`, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optsched.model.plan import Plan

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

ROUND_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)
"""Round latency buckets, seconds (a scheduling cycle has a few)."""
CALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
"""Extender call latency buckets, seconds (a lookup, not a solve)."""


class ServiceMetrics:
    """The metric objects of one service, registered in their own `CollectorRegistry` (so two
    services in one process, as tests make them, do not collide)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry: CollectorRegistry = CollectorRegistry()
        r = self.registry
        self.round_seconds = Histogram("optsched_round_seconds", "Wall time of a round, seconds", ["source"],
                                       buckets=ROUND_BUCKETS, registry=r)
        self.rounds = Counter("optsched_rounds", "Rounds by plan status", ["source", "status"], registry=r)
        self.gap = Gauge("optsched_round_gap", "Relative gap of the latest plan to its bound", ["source"], registry=r)
        self.admitted_value = Gauge("optsched_admitted_value", "Admitted value of the latest plan", ["source"],
                                    registry=r)
        self.deferred = Gauge("optsched_deferred_jobs", "Jobs the latest plan defers, by reason",
                              ["source", "reason"], registry=r)
        self.evictions = Counter("optsched_evictions", "Running jobs evicted by published plans", ["source"],
                                 registry=r)
        self.extender_seconds = Histogram("optsched_extender_seconds", "Time to answer an extender call, seconds",
                                          ["verb"], buckets=CALL_BUCKETS, registry=r)
        self.extender_calls = Counter("optsched_extender_requests", "Extender calls by outcome", ["verb", "outcome"],
                                      registry=r)
        self._reasons: dict[str, set[str]] = {}

    def observe_round(self, plan: Plan, seconds: float, source: str) -> None:
        """Record a published plan."""
        self.round_seconds.labels(source).observe(seconds)
        self.rounds.labels(source, plan.solver.status).inc()
        gap = plan.solver.gap
        self.gap.labels(source).set(float("nan") if gap is None else gap)
        self.admitted_value.labels(source).set(plan.objective.get("admitted_value", 0.0))
        counts: dict[str, int] = {}
        for d in plan.deferred:
            counts[d.reason] = counts.get(d.reason, 0) + 1
        for reason in self._reasons.get(source, set()) - set(counts):
            self.deferred.labels(source, reason).set(0)
        for reason, n in counts.items():
            self.deferred.labels(source, reason).set(n)
        self._reasons[source] = self._reasons.get(source, set()) | set(counts)
        self.evictions.labels(source).inc(len(plan.evictions))

    def observe_failure(self, status: str, seconds: float, source: str) -> None:
        """Record a round that produced no plan (`input`: the objects were refused; `error`: a bug)."""
        self.round_seconds.labels(source).observe(seconds)
        self.rounds.labels(source, status).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition format and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
