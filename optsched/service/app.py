"""The scheduling service: `create_app(settings) -> FastAPI` (`optsched serve` runs it with uvicorn).

Routes (docs/integration.md has the request and answer shapes):
- `POST /v1/rounds`: one round on the documents (or Kubernetes objects) in the body; answers the
  plan, its summary and, for objects, the actions. Stateless: it does not touch the state.
- `PUT /v1/state`, `POST /v1/state/events`, `GET /v1/state`: the cluster the extender answers for
  (a whole listing, or watch events), and where its rounds stand.
- `GET /v1/plan`: the current round's plan and actions.
- `POST /v1/extender/{filter,prioritize,preempt,bind}`: kube-scheduler's extender verbs, answered
  from the current round (`optsched.service.extender`).
- `GET /metrics` (Prometheus), `GET /healthz` (the process answers), `GET /readyz` (the solver
  libraries are loaded and, once a state was given, a round has been published).

Reliability: bodies over `max_body_bytes` get 413 before they are read whole; a body that is not a
JSON object gets 400, one that breaks a rule 422 with the field paths (the library's own
`InputError`), never 500; round requests run at most `max_concurrent_rounds` at a time, and one
that waits longer than `round_wait_s` for its turn gets 503 with `Retry-After`; a round that
fails inside the solver answers 500 with the error, counted in the metrics, and the service goes
on. Extender calls never wait for a round: they read the last published one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from optsched import __version__
from optsched.errors import InputError, InputIssue
from optsched.service import extender
from optsched.service.metrics import ServiceMetrics
from optsched.service.requests import (
    MAX_TIME_LIMIT_S,
    NotJson,
    RoundRequest,
    StateEvents,
    StateListing,
    parse,
    prefixed,
    read_body,
)
from optsched.service.rounds import RoundLoop, RoundRunner, RoundSettings
from optsched.service.state import ClusterState

LOG = logging.getLogger("optsched.service")

MAX_BODY_BYTES = 64 * 2**20
"""Largest request body, bytes (a 10,000-node listing is about 40 MiB of JSON)."""


@dataclass(frozen=True)
class ServiceSettings:
    """How the service runs."""

    rounds: RoundSettings = field(default_factory=RoundSettings)
    """How state rounds are solved (solver, time limit, objective, seed, the KubeConfig)."""
    interval_s: float = 10.0
    """Seconds between state rounds when nothing changes."""
    min_gap_s: float = 0.5
    """Fewest seconds between two state rounds."""
    loop: bool = True
    """Run state rounds in a background thread (False: only when asked, as tests do)."""
    max_body_bytes: int = MAX_BODY_BYTES
    max_time_limit_s: float = MAX_TIME_LIMIT_S
    """Longest `time_limit` a round request may ask for."""
    max_concurrent_rounds: int = 1
    """Round requests solved at once (each uses the solver's workers)."""
    round_wait_s: float = 30.0
    """Longest a round request waits for its turn before 503."""


@dataclass
class Service:
    """What the routes share: the state, its rounds, the metrics, the binder."""

    settings: ServiceSettings
    state: ClusterState
    metrics: ServiceMetrics
    runner: RoundRunner
    loop: RoundLoop
    binder: extender.Binder | None
    slots: threading.BoundedSemaphore
    preloaded: bool = False


def _issues(exc: InputError) -> list[dict[str, str]]:
    return [{"loc": i.path, "rule": i.rule, "msg": i.message} for i in exc.problems]


def _refused(exc: InputError) -> JSONResponse:
    return JSONResponse({"error": f"{len(exc.problems)} input problem(s)", "detail": _issues(exc)}, status_code=422)


class BodyLimit:
    """ASGI middleware: 413 for a body over `limit` bytes, by its Content-Length or as it streams."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._too_large(send)
            return
        seen = 0
        sent = False

        async def limited() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal sent
            sent = sent or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, tracked)
        except _TooLarge:
            if not sent:
                await self._too_large(send)

    async def _too_large(self, send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        resp = JSONResponse({"error": "request body too large",
                             "detail": [{"loc": "<body>", "rule": "too_large", "msg": f"over {self.limit} bytes"}]},
                            status_code=413)
        await send({"type": "http.response.start", "status": 413, "headers": resp.raw_headers})
        await send({"type": "http.response.body", "body": resp.body})


class _TooLarge(Exception):
    """The streamed body passed the limit."""


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """A JSON schema with its `#/$defs/...` references replaced by what they name."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _schema(model: Any) -> dict[str, Any]:
    """An OpenAPI request body for a pydantic model (the body is read by hand, see `read_body`)."""
    schema = model.model_json_schema()
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": _inline(schema, schema.get("$defs", {}))}}}}


def create_app(settings: ServiceSettings | None = None, *, state: ClusterState | None = None,
               binder: extender.Binder | None = None,
               source: Callable[[ClusterState], None] | None = None) -> FastAPI:
    """The service (module docstring). `state` is where the extender's cluster lives (a fresh
    one by default); `binder` creates Bindings on the API server (None: the bind verb refuses);
    `source`, when given, is started with the app in a thread and fills the state (a poller of
    the API server, `optsched.service.source`)."""
    settings = settings or ServiceSettings()
    state = state or ClusterState()
    metrics = ServiceMetrics()
    runner = RoundRunner(state, settings.rounds, metrics)
    svc = Service(settings=settings, state=state, metrics=metrics, runner=runner,
                  loop=RoundLoop(runner, settings.interval_s, settings.min_gap_s), binder=binder,
                  slots=threading.BoundedSemaphore(settings.max_concurrent_rounds))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        import optsched.solve  # noqa: F401  (the solver libraries load now, not in the first round)

        svc.preloaded = True
        if source is not None:
            threading.Thread(target=source, args=(state,), name="optsched-source", daemon=True).start()
        if settings.loop:
            svc.loop.start()
        yield
        svc.loop.stop()
        runner.close()

    app = FastAPI(title="optsched", version=__version__, lifespan=lifespan,
                  description="Rounds of optsched as a service, and kube-scheduler's extender verbs.")
    app.state.service = svc
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)

    async def body_of(request: Request) -> dict[str, Any]:
        return read_body(await request.body())

    @app.exception_handler(InputError)
    async def input_error(request: Request, exc: InputError) -> JSONResponse:
        return _refused(exc)

    @app.exception_handler(NotJson)
    async def not_json(request: Request, exc: NotJson) -> JSONResponse:
        return JSONResponse({"error": str(exc), "detail": [{"loc": "<body>", "rule": "syntax", "msg": str(exc)}]},
                            status_code=400)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        """The process answers."""
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        """Ready when the solver libraries are loaded and, once a state was given, a round exists."""
        current = svc.runner.current
        ready = svc.preloaded and (not state.loaded or current is not None)
        return JSONResponse({"ready": ready, "round": None if current is None else current.number},
                            status_code=200 if ready else 503)

    @app.get("/metrics")
    def prometheus() -> Response:
        """Prometheus text exposition (optsched.service.metrics lists the metrics)."""
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    @app.post("/v1/rounds", openapi_extra=_schema(RoundRequest))
    async def rounds(request: Request) -> JSONResponse:
        """Solve one round on the body's documents or Kubernetes objects; the plan and its summary."""
        from starlette.concurrency import run_in_threadpool

        data = await body_of(request)
        req: RoundRequest = parse(RoundRequest, data)
        return await run_in_threadpool(_round, svc, req)

    @app.put("/v1/state", openapi_extra=_schema(StateListing))
    async def put_state(request: Request) -> dict[str, Any]:
        """Replace the cluster the extender answers for with a listing."""
        listing: StateListing = parse(StateListing, await body_of(request))
        state.replace(**listing.model_dump())
        svc.loop.wake()
        return {"generation": state.generation, **state.counts()}

    @app.post("/v1/state/events", openapi_extra=_schema(StateEvents))
    async def post_events(request: Request) -> dict[str, Any]:
        """Apply watch events to the cluster the extender answers for."""
        events: StateEvents = parse(StateEvents, await body_of(request))
        changed = state.apply(events.events)
        if changed:
            svc.loop.wake()
        return {"changed": changed, "generation": state.generation, **state.counts()}

    @app.get("/v1/state")
    def get_state() -> dict[str, Any]:
        """The state's counts and where its rounds stand."""
        current = svc.runner.current
        return {"generation": state.generation, "pending_generation": state.pending_generation, **state.counts(),
                "round": None if current is None else {
                    "number": current.number, "generation": current.generation, "seconds": current.seconds,
                    "snapshot_s": current.snapshot_s, "nodes_reused": current.reused[0],
                    "pods_reused": current.reused[1], "finished_at": current.finished_at,
                    "bindings": len(current.actions["bindings"]), "evictions": len(current.actions["evictions"]),
                    "pending": len(current.actions["pending"]), "solver": current.plan.solver.name,
                    "status": current.plan.solver.status},
                "last_error": svc.runner.last_error}

    @app.post("/v1/state/round")
    def run_round() -> JSONResponse:
        """Run a state round now and wait for it; 500 with the error when it failed."""
        rnd = svc.runner.run()
        if rnd is None:
            refused = svc.runner.last_input_error
            if refused is not None:  # the state's objects break a rule: say which
                return _refused(refused)
            return JSONResponse({"error": svc.runner.last_error}, status_code=500)
        return JSONResponse({"number": rnd.number, "seconds": rnd.seconds, "bindings": len(rnd.actions["bindings"]),
                             "evictions": len(rnd.actions["evictions"]), "pending": len(rnd.actions["pending"])})

    @app.get("/v1/plan")
    def get_plan() -> JSONResponse:
        """The current round's plan and the actions that carry it out; 404 before the first round."""
        current = svc.runner.current
        if current is None:
            return JSONResponse({"error": "no round has been published yet", "last_error": svc.runner.last_error},
                                status_code=404)
        return JSONResponse({"number": current.number, "plan": current.plan.model_dump(mode="json"),
                             "actions": current.actions})

    def verb(name: str, answer: Callable[[dict[str, Any]], tuple[Any, str]]) -> None:
        async def call(request: Request) -> JSONResponse:
            start = time.perf_counter()
            outcome = "error"
            try:
                result, outcome = answer(await body_of(request))
                if outcome == "unknown" and name == "filter":
                    svc.loop.wake()
                return JSONResponse(result)
            finally:
                metrics.extender_seconds.labels(name).observe(time.perf_counter() - start)
                metrics.extender_calls.labels(name, outcome).inc()

        call.__name__ = f"extender_{name}"
        call.__doc__ = f"kube-scheduler's extender `{name}` verb, answered from the current round."
        app.post(f"/v1/extender/{name}", openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": {"type": "object"}}}}})(call)

    verb("filter", lambda a: extender.filter_nodes(a, svc.runner.current, state))
    verb("prioritize", lambda a: extender.prioritize(a, svc.runner.current, state))
    verb("preempt", lambda a: extender.preempt(a, svc.runner.current, state))
    verb("bind", lambda a: extender.bind(a, svc.runner.current, state, svc.binder))
    return app


def _round(svc: Service, req: RoundRequest) -> JSONResponse:
    """Solve a round request (in a worker thread, one of `max_concurrent_rounds`)."""
    from optsched.model.io import load_cluster, load_queue
    from optsched.model.summary import plan_summary
    from optsched.problem import compile_problem
    from optsched.solve import solve_problem

    start = time.perf_counter()
    settings = svc.settings
    if not (isinstance(req.time_limit, float | int) and 0 < req.time_limit <= settings.max_time_limit_s):
        raise InputError([InputIssue("time_limit", "out_of_range",
                                     f"{req.time_limit!r}: more than 0 and at most {settings.max_time_limit_s} s")])
    snap: Any = None
    given = [name for name in ("kubernetes", "slurm") if getattr(req, name) is not None]
    if given and (len(given) > 1 or req.cluster is not None or req.queue is not None):
        raise InputError([InputIssue(given[-1], "exclusive", "give `kubernetes`, `slurm`, or `cluster` and `queue`")])
    if req.slurm is not None:
        try:
            import hostlist  # noqa: F401 (the slurm extra)

            from optsched.adapters.slurm import SlurmConfig
            from optsched.adapters.slurm import snapshot as slurm_snapshot
        except ImportError as exc:  # the slurm extra is not installed
            raise InputError([InputIssue("slurm", "unsupported", f"needs the slurm extra: {exc}")]) from None
        s = req.slurm
        config = parse(SlurmConfig, s.config, "slurm.config.") if s.config is not None else SlurmConfig()
        try:
            snap = slurm_snapshot(s.nodes, s.jobs or (), partitions=s.partitions or (), qos=s.qos or (),
                                  associations=s.associations or (), topology=s.topology, config=config, now=s.now)
        except InputError as exc:
            raise prefixed(exc, "slurm") from None
        cluster, queue = snap.cluster, snap.queue
    elif req.kubernetes is not None:
        from optsched.adapters.kube.config import KubeConfig
        from optsched.adapters.kube.snapshot import snapshot

        k = req.kubernetes
        config = parse(KubeConfig, k.config, "kubernetes.config.") if k.config is not None else KubeConfig()
        try:
            objects: dict[str, Any] = k.model_dump(exclude={"config", "now"})  # snapshot's argument names
            snap = snapshot(**objects, config=config, now=k.now)
        except InputError as exc:
            raise prefixed(exc, "kubernetes") from None
        cluster, queue = snap.cluster, snap.queue
    else:
        missing = [InputIssue(name, "required", f"give `{name}` (a document), `kubernetes` (objects) or `slurm`")
                   for name in ("cluster", "queue") if getattr(req, name) is None]
        if missing:
            raise InputError(missing)
        assert req.cluster is not None and req.queue is not None
        try:
            cluster = load_cluster(req.cluster)
        except InputError as exc:
            raise prefixed(exc, "cluster") from None
        try:
            queue = load_queue(req.queue, cluster)
        except InputError as exc:
            raise prefixed(exc, "queue") from None
    if not svc.slots.acquire(timeout=settings.round_wait_s):
        return JSONResponse({"error": f"busy: {settings.max_concurrent_rounds} round(s) running"}, status_code=503,
                            headers={"Retry-After": "1"})
    try:
        p = compile_problem(cluster, queue, validate=False)
        plan = solve_problem(p, solver=req.solver, objective=req.objective, time_limit=req.time_limit,
                             seed=req.seed, started=start)
        out: dict[str, Any] = {"plan": plan.model_dump(mode="json"), "summary": plan_summary(queue, plan)}
        if req.slurm is not None:
            from optsched.adapters.slurm import actions as slurm_actions

            out["actions"] = slurm_actions(plan, snap).to_dict()
        elif snap is not None:
            from optsched.adapters.kube.actions import actions

            out["actions"] = actions(plan, snap).to_dict()
    except InputError:
        svc.metrics.observe_failure("input", time.perf_counter() - start, source="request")
        raise
    except Exception as exc:  # a solver bug: answer it, count it, keep serving
        LOG.exception("round request failed")
        svc.metrics.observe_failure("error", time.perf_counter() - start, source="request")
        return JSONResponse({"error": f"the round failed: {type(exc).__name__}: {exc}"}, status_code=500)
    finally:
        svc.slots.release()
    svc.metrics.observe_round(plan, time.perf_counter() - start, source="request")
    return JSONResponse(out)
