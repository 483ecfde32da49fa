"""The `optsched` command: solve, check, evaluate, generate, capacity, pareto, prewarm, bench, schema, demo,
serve, slurm.

The documents, the validator and the solvers are imported by the commands that use them, so that
`optsched --help` and `optsched --version` start fast (benchmarks/results/startup.md).

Input errors print every problem with its field path and exit 2 (no traceback); `check` exits 1
when the plan breaks a rule. A cluster (or a capacity document) is a path or the name of a bundled
one (`optsched.bundled`). Text that comes from documents (ids, messages) is printed as text, never
read as rich markup.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from optsched import __version__
from optsched.bundled import names, resolve
from optsched.errors import InputError, InputIssue

if TYPE_CHECKING:
    from optsched.model import Cluster, Plan, Queue

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Schedule AI compute clusters by mathematical optimisation.")
console = Console()
err = Console(stderr=True)

ClusterArg = Annotated[str, typer.Argument(help=f"cluster document, or a bundled cluster: {names('cluster')}")]


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"optsched {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                               help="print the version and exit")] = False) -> None:
    """Schedule AI compute clusters by mathematical optimisation."""


def _fail_input(exc: InputError) -> None:
    err.print(f"[bold red]input error[/]: {len(exc.problems)} problem(s)")
    for p in exc.problems:
        err.print(f"  - [cyan]{escape(p.path)}[/]: [yellow]{escape(f'[{p.rule}]')}[/] {escape(p.message)}")
    raise typer.Exit(2)


def _cluster(name_or_path: str) -> Cluster:
    """A cluster document by path, or a bundled one by name."""
    from optsched.model import load_cluster

    return load_cluster(resolve("cluster", name_or_path))


def _percent(gap: float | None) -> str:
    return "n/a" if gap is None else f"{gap:.2%}"


def _summary(cluster: Cluster, queue: Queue, plan: Plan) -> Table:
    from optsched.model.stats import STATUS_MEANING

    jobs = {j.id: j for j in queue.jobs}
    admitted = {p.job for p in plan.placements if p.job in jobs}
    gpus = sum(p.share or len(p.devices) for p in plan.placements if p.devices)
    asked = sum(j.min_gpus for j in queue.jobs)
    reasons = Counter(d.reason for d in plan.deferred)
    t = Table(title=escape(f"plan by {plan.solver.name} ({plan.solver.status}, {plan.solver.wall_s:.3f} s)"))
    t.add_column("what")
    t.add_column("value", justify="right")
    t.caption = escape(f"{plan.solver.status}: {STATUS_MEANING.get(plan.solver.status, '')}"
                       + (f" ({plan.solver.reason})" if plan.solver.reason else ""))
    t.caption_justify = "left"
    t.add_row("queued jobs", str(len(queue.jobs)))
    t.add_row("admitted jobs", str(len(admitted)))
    t.add_row("placed replicas", str(len(plan.placements)))
    t.add_row("placed GPUs (min asked)", f"{gpus:g} ({asked:g})")
    t.add_row("deferred jobs", escape(str(len(plan.deferred)) +
              (" (" + ", ".join(f"{k} {v}" for k, v in reasons.most_common()) + ")" if reasons else "")))
    t.add_row("evictions", str(len(plan.evictions)))
    t.add_row("provisioned nodes", str(sum(p.count for p in plan.provisioning)))
    for k, v in plan.objective.items():
        t.add_row(escape(f"objective: {k}"), f"{v:,.3f}")
    if plan.solver.bound is not None:
        t.add_row("bound / gap", f"{plan.solver.bound:,.3f} / {_percent(plan.solver.gap)}")
    return t


@app.command()
def solve(cluster: ClusterArg, queue: Path,
          solver: Annotated[str, typer.Option(help="a solver name (`optsched solvers` lists them)")] = "auto",
          time_limit: Annotated[float, typer.Option(help="seconds for the whole call")] = 1.0,
          seed: int = 0,
          output: Annotated[Path | None, typer.Option("-o", "--output", help="write the plan (JSON/YAML)")] = None,
          as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
          deterministic: Annotated[bool, typer.Option(
              help="the same plan for the same inputs and seed (decisions on a work clock; may end past the "
                   "time limit)")] = False,
          ) -> None:
    """Solve one round and print the plan summary."""
    from optsched.model import dump, load_queue
    from optsched.model.summary import plan_summary
    from optsched.problem import compile_problem

    try:
        c = _cluster(cluster)
        q = load_queue(queue, c)
        p = compile_problem(c, q, validate=False)
        from optsched.solve import solve_problem  # loads the solver libraries: only commands that solve

        plan = solve_problem(p, solver=solver, time_limit=time_limit, seed=seed, deterministic=deterministic)
    except InputError as exc:
        _fail_input(exc)
        return
    if output is not None:
        dump(plan, output)
    if as_json:
        sys.stdout.write(json.dumps({**plan_summary(q, plan), "output": None if output is None else str(output)},
                                    indent=1) + "\n")
        return
    console.print(_summary(c, q, plan))
    if output is not None:
        console.print(escape(f"plan written to {output}"))


@app.command()
def check(cluster: ClusterArg, queue: Path, plan: Path,
          as_json: Annotated[bool, typer.Option("--json", help="print the violations as JSON")] = False) -> None:
    """Validate a plan: exit 0 when it breaks no rule, else print the violations and exit 1."""
    from optsched.check import check_problem
    from optsched.model import load_plan, load_queue
    from optsched.problem import compile_problem

    try:
        c = _cluster(cluster)
        q = load_queue(queue, c)
        pl = load_plan(plan)
        violations = check_problem(compile_problem(c, q, validate=False), pl)
    except InputError as exc:
        _fail_input(exc)
        return
    if as_json:
        sys.stdout.write(json.dumps({"valid": not violations, "violations": [asdict(v) for v in violations]},
                                    indent=1) + "\n")
        if violations:
            raise typer.Exit(1)
        return
    if not violations:
        console.print("[green]valid[/]: the plan breaks no rule")
        return
    t = Table(title=f"{len(violations)} violation(s)")
    for col in ("rule", "job", "group/replica", "node", "message"):
        t.add_column(col)
    for v in violations:
        gr = f"{v.group or ''}/{'' if v.replica is None else v.replica}".strip("/")
        t.add_row(*(escape(x) for x in (v.rule, v.job or "", gr, v.node or "", v.message)))
    console.print(t)
    raise typer.Exit(1)


@app.command()
def evaluate(cluster: ClusterArg, queue: Path, plan: Path,
             as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
             with_bound: Annotated[bool, typer.Option("--bound", help="also an upper bound on admitted value (the "
                                                                        "LP, or the round model's when cheap), the "
                                                                        "plan's gap to it, and the least disruption "
                                                                        "of any plan admitting as much")] = False,
             by_tenant: Annotated[bool, typer.Option("--by-tenant", help="also the $/h charged to each tenant "
                                                                          "per pool (chargeback)")] = False,
             ) -> None:
    """Print every objective term of a plan (with --bound: how far it is from optimal at most, and
    the least work any plan admitting as much value must lose: `disruption_floor`, GPU-h)."""
    from optsched.metrics import chargeback_problem, evaluate_problem
    from optsched.model import load_plan, load_queue
    from optsched.problem import compile_problem

    try:
        c = _cluster(cluster)
        q = load_queue(queue, c)
        p = compile_problem(c, q, validate=False)
        m = evaluate_problem(p, load_plan(plan))
        from optsched.bound import bound_problem, lost_work_bound_problem  # SciPy's LP, HiGHS: only when asked for

        b = bound_problem(p) if with_bound else None
        floor = lost_work_bound_problem(p, m.admitted_value) if with_bound else None
        bill = chargeback_problem(p, load_plan(plan)) if by_tenant else None
    except InputError as exc:
        _fail_input(exc)
        return
    extra: dict[str, float | str | None] = {}
    if b is not None:
        extra = {"bound_admitted_value": b.value, "gap": b.gap(m.admitted_value), "bound_seconds": b.seconds,
                 "bound_method": b.method}
    if floor is not None:  # the disruption term's side: what admitting this much costs at least
        extra |= {"disruption_floor": floor.value, "disruption_floor_status": floor.status}
    if as_json:
        sys.stdout.write(json.dumps({**m.model_dump(), **extra, **({"chargeback": bill} if bill is not None else {})},
                                    indent=1) + "\n")
        return
    t = Table(title="metrics")
    t.add_column("term")
    t.add_column("value", justify="right")
    for k, v in {**m.objective(), **m.details, **extra}.items():
        t.add_row(escape(k), "n/a" if v is None else escape(v) if isinstance(v, str)
                  else _percent(v) if k == "gap" else f"{v:,.4f}")
    console.print(t)
    if bill is not None:
        console.print(_chargeback_table(bill))


def _chargeback_table(bill: dict[str, dict[str, dict[str, float]]]) -> Table:
    """Tenants x pools: $/h used, $/h share of idle reserved nodes, and the total."""
    t = Table(title="chargeback ($/h)")
    for col in ("tenant", "pool", "used", "idle reserved share", "total"):
        t.add_column(col, justify="left" if col in ("tenant", "pool") else "right")
    for tenant, pools in sorted(bill.items()):
        for pool, row in sorted(pools.items()):
            t.add_row(escape(tenant), escape(pool), f"{row['used']:,.2f}", f"{row['idle_reserved']:,.2f}",
                      f"{row['used'] + row['idle_reserved']:,.2f}")
    total = sum(r["used"] + r["idle_reserved"] for pools in bill.values() for r in pools.values())
    t.add_row("all", "", "", "", f"{total:,.2f}")
    return t


@app.command()
def generate(cluster: Annotated[str, typer.Option("--cluster", help=f"cluster document, or a bundled cluster: "
                                                                     f"{names('cluster')}")],
             mix: Annotated[str, typer.Option(help=f"workload mix file, or a bundled mix: {names('mix')}")] = "mixed",
             jobs: Annotated[int | None, typer.Option(help="number of jobs")] = None,
             load: Annotated[float | None, typer.Option(help="GPU demand as a multiple of free GPUs")] = None,
             seed: int = 0,
             output: Annotated[Path, typer.Option("-o", "--output")] = Path("queue.yaml")) -> None:
    """Draw a synthetic queue for a cluster from a workload mix."""
    from optsched.generate import generate_queue
    from optsched.model import dump

    try:
        c = _cluster(cluster)
        q = generate_queue(c, mix, jobs=jobs, load=load, seed=seed)
    except InputError as exc:
        _fail_input(exc)
        return
    dump(q, output)
    gpus = sum(j.min_gpus for j in q.jobs)
    console.print(escape(f"{len(q.jobs)} jobs, {gpus:g} GPUs at minimum replicas, written to {output}"))


@app.command()
def capacity(paths: Annotated[list[str], typer.Argument(help=f"DEMAND POOLS, or POOLS with --from-trace (paths, or "
                                                             f"bundled examples: {names('capacity')})")],
             service_level: Annotated[float, typer.Option(help="share of period-scenarios covered, (0, 1]")] = 1.0,
             time_limit: Annotated[float, typer.Option(help="seconds for building and solving")] = 60.0,
             output: Annotated[Path | None, typer.Option("-o", "--output", help="write the plan as JSON")] = None,
             from_trace: Annotated[Path | None, typer.Option(help="derive the demand from this job trace")] = None,
             trace_format: Annotated[str, typer.Option(help="generic | philly | openb")] = "generic",
             model: Annotated[str, typer.Option(help="device model of trace jobs that name none")] = "GPU",
             weeks: Annotated[int, typer.Option(help="planning horizon (from a trace)")] = 4,
             scenarios: Annotated[int, typer.Option(help="scenarios drawn from the trace")] = 20,
             period_hours: Annotated[int, typer.Option(help="hours per period (from a trace)")] = 1,
             growth: Annotated[float, typer.Option(help="relative demand growth over the horizon")] = 0.0,
             spot_tolerant: Annotated[float, typer.Option(help="share of demand that may run on spot")] = 0.0,
             seed: int = 0,
             write_demand: Annotated[Path | None, typer.Option(help="save the derived demand (YAML)")] = None,
             ) -> None:
    """Plan reserved, on-demand and spot capacity for demand scenarios (Pyomo + HiGHS)."""
    from optsched.capacity import load_demand, load_pools, plan_capacity
    from optsched.capacity.trace import demand_from_trace
    from optsched.model import dump

    try:
        if len(paths) != (1 if from_trace else 2):
            raise InputError([InputIssue("arguments", "usage", "give DEMAND POOLS, or POOLS with --from-trace")])
        if from_trace is not None:
            d = demand_from_trace(from_trace, fmt=trace_format, model=model, weeks=weeks, scenarios=scenarios,
                                  period_hours=period_hours, growth=growth, spot_tolerant=spot_tolerant, seed=seed)
            if write_demand is not None:
                dump(d, write_demand)
        else:
            d = load_demand(resolve("capacity", paths[0], field="DEMAND"))
        p = load_pools(resolve("capacity", paths[-1], field="POOLS"))
        plan = plan_capacity(d, p, service_level=service_level, time_limit=time_limit)
    except InputError as exc:
        _fail_input(exc)
        return
    t = Table(title=f"capacity plan ({plan.status}, {plan.seconds:.2f} s, {d.periods} periods x "
                    f"{len(d.scenarios)} scenarios)")
    for col in ("pool", "model", "reserved nodes", "on-demand node-h", "spot node-h"):
        t.add_column(col, justify="right" if col != "pool" else "left")
    for pool in p.pools:
        t.add_row(pool.name, pool.model, str(plan.reserved[pool.name]), f"{plan.on_demand_node_hours[pool.name]:,.1f}",
                  f"{plan.spot_node_hours[pool.name]:,.1f}")
    console.print(t)
    cost = plan.cost
    console.print(f"expected cost ${cost.total:,.0f} = reserved ${cost.reserved:,.0f} + on demand "
                  f"${cost.on_demand:,.0f} + spot ${cost.spot:,.0f}; reserved utilisation "
                  f"{plan.reserved_utilisation:.1%}; service level {plan.service_level:.1%}")
    if set(plan.cost_by_tenant) - {"all"}:
        console.print("by tenant (each model's cost split by its demand GPU-hours): " + ", ".join(
            f"{t} ${c:,.0f}" for t, c in sorted(plan.cost_by_tenant.items())))
    if output is not None:
        output.write_text(plan.model_dump_json(indent=1) + "\n")


@app.command()
def pareto(cluster: ClusterArg, queue: Path,
           objectives: Annotated[str, typer.Option(help="comma-separated objective terms (2 or more)")] =
           "admitted_value,cost,fragmentation",
           select: Annotated[str, typer.Option(help="knee, or a JSON rule: {\"weights\": {...}}, "
                                                     "{\"lexicographic\": [...]}, {\"bounds\": {...}}")] = "knee",
           time_limit: Annotated[float, typer.Option(help="seconds for the whole call")] = 10.0,
           seed: int = 0,
           output: Annotated[Path | None, typer.Option("-o", "--output", help="write the front (JSON)")] = None,
           plot: Annotated[Path | None, typer.Option(help="draw the front (PNG)")] = None,
           ) -> None:
    """The trade-off between objectives: NSGA-II's set of non-dominated plans, and one selected."""
    from optsched.model import load_queue
    from optsched.pareto import pareto_problem
    from optsched.pareto.plot import plot_front
    from optsched.problem import compile_problem

    try:
        names = [n.strip() for n in objectives.split(",") if n.strip()]
        rule = select if select == "knee" else json.loads(select)
        c = _cluster(cluster)
        q = load_queue(queue, c)
        p = compile_problem(c, q, validate=False)
        front = pareto_problem(p, names, time_limit=time_limit, seed=seed)
        chosen = front.select_index(rule)
    except json.JSONDecodeError as exc:
        _fail_input(InputError([InputIssue("select", "bad_rule", f"not knee and not JSON: {exc}")]))
        return
    except InputError as exc:
        _fail_input(exc)
        return
    st = front.stats
    t = Table(title=f"Pareto set: {len(front)} plans, {st.get('evaluations', 0)} evaluations "
                    f"({st.get('evaluations_per_s', 0)}/s), {st.get('seconds', 0)} s")
    t.add_column("#", justify="right")
    t.add_column("from")
    for n in front.objectives:
        t.add_column(n, justify="right")
    for i, (pl, row) in enumerate(zip(front.plans, front.table(), strict=True)):
        mark = " *" if i == chosen else ""
        t.add_row(f"{i}{mark}", escape(pl.solver.name), *(f"{row[n]:,.2f}" for n in front.objectives))
    for name, terms in sorted(front.baselines.items()):
        t.add_row("-", f"baseline {name}", *(f"{terms[n]:,.2f}" for n in front.objectives), style="dim")
    console.print(t)
    console.print(escape(f"selected (*): plan {chosen} by {rule}"))
    if output is not None:
        output.write_text(json.dumps(front.to_dict(selected=chosen), indent=1) + "\n")
        console.print(escape(f"front written to {output}"))
    if plot is not None:
        plot_front(front, plot, title=f"{Path(cluster).stem}: {len(front)} plans")
        console.print(escape(f"plot written to {plot}"))


@app.command()
def solvers() -> None:
    """List the solvers `solve --solver` accepts, each with what it does."""
    from optsched.solvers.registry import lookup, solver_names

    t = Table(title="solvers")
    t.add_column("name")
    t.add_column("what it is")
    for name in solver_names():
        t.add_row(escape(name), "picks cpsat or milp by the round's size" if name == "auto"
                  else escape(lookup(name).summary))
    console.print(t)


@app.command()
def schema(document: Annotated[str, typer.Argument(help="cluster | queue | plan | all")] = "all") -> None:
    """Print the JSON Schema of the documents."""
    from pydantic import BaseModel

    from optsched.model import Cluster, Plan, Queue

    models: dict[str, type[BaseModel]] = {"cluster": Cluster, "queue": Queue, "plan": Plan}
    if document != "all" and document not in models:
        err.print(f"unknown document {document!r}; one of {[*models, 'all']}")
        raise typer.Exit(2)
    out = {k: m.model_json_schema() for k, m in models.items() if document in ("all", k)}
    sys.stdout.write(json.dumps(out if document == "all" else out[document], indent=1) + "\n")


@app.command()
def prewarm(cluster: ClusterArg, queue: Path, plan: Path,
            node_budget_gb: Annotated[float, typer.Option(help="bytes to pre-pull per node, GB")] = 20.0,
            total_budget_gb: Annotated[float | None, typer.Option(help="bytes to pre-pull in all, GB")] = None,
            top: Annotated[int, typer.Option(help="rows to print")] = 20,
            as_json: Annotated[bool, typer.Option("--json", help="the whole advice as JSON")] = False) -> None:
    """Which image layers to pull ahead onto which nodes for the plan's deferred jobs (docs/prewarm.md)."""
    from optsched.model import load_plan, load_queue
    from optsched.prewarm import GB
    from optsched.prewarm import prewarm as advise

    try:
        c = _cluster(cluster)
        q = load_queue(queue, c)
        advice = advise(c, q, load_plan(plan), node_budget_bytes=node_budget_gb * GB,
                        total_budget_bytes=None if total_budget_gb is None else total_budget_gb * GB)
    except InputError as exc:
        _fail_input(exc)
        return
    if as_json:
        sys.stdout.write(json.dumps({**asdict(advice), "bytes": advice.bytes}, indent=1) + "\n")
        return
    table = Table(title=f"pre-warm: {len(advice.pulls)} pulls, {advice.bytes / 1e9:,.0f} GB; expected start-up "
                        f"{advice.seconds_before:,.1f} s -> {advice.seconds_after:,.1f} s ({advice.status})")
    for col in ("node", "layer", "GB", "expected s saved"):
        table.add_column(col, justify="right")
    for pull in advice.pulls[:top]:
        table.add_row(escape(pull.node), escape(pull.layer), f"{pull.bytes / 1e9:,.1f}", f"{pull.seconds_saved:,.2f}")
    console.print(table)


@app.command()
def bench(suite: Annotated[str, typer.Argument(help="fgd | rounds | philly, or a suite YAML file")],
          seeds: Annotated[int | None, typer.Option(help="run this many seeds from the suite's first")] = None,
          executor: Annotated[str, typer.Option(help="local (process pool) | ray (the ray extra)")] = "local",
          workers: Annotated[int | None, typer.Option(help="parallel cases (default: CPUs)")] = None,
          solvers: Annotated[str | None, typer.Option(help="comma-separated subset of the suite's solvers")] = None,
          out: Annotated[Path, typer.Option(help="folder for <suite>.md, .csv and plots (make bench passes "
                                                 "benchmarks/results)")] = Path("optsched-results"),
          ) -> None:
    """Run a benchmark suite in parallel; write <out>/<suite>.md, <suite>.csv and its plots."""
    from optsched.bench import DataMissing, load_suite, run_suite

    try:
        s = load_suite(suite)
        if solvers:
            unknown = [x for x in solvers.split(",") if x not in s.solvers]
            if unknown:
                raise InputError([InputIssue("solvers", "not_in_suite", f"{unknown}; the suite has {s.solvers}")])
            s = s.model_copy(update={"solvers": solvers.split(",")})
        path, rows = run_suite(s, out=out, seeds=seeds, executor=executor, workers=workers)
    except InputError as exc:
        _fail_input(exc)
        return
    except DataMissing as exc:
        err.print(f"[yellow]skipped[/]: {escape(str(exc))}")
        raise typer.Exit(3) from exc
    console.print(escape(f"{len(rows)} cases; report: {path}"))


@app.command()
def demo(cluster: Annotated[str, typer.Option(help=f"a bundled cluster {names('cluster')}, or a cluster document")]
         = "mixed-cloud-10k",
         jobs: int = 1000, load: float = 2.0, seed: int = 0, solver: str = "auto",
         time_limit: float = 2.0) -> None:
    """Run a real round on a bundled reference cluster and print the plan summary."""
    from optsched.check import check_problem
    from optsched.generate import generate_queue
    from optsched.problem import compile_problem

    t0 = time.perf_counter()
    try:
        c = _cluster(cluster)
        t1 = time.perf_counter()
        q = generate_queue(c, "mixed", jobs=jobs, load=load, seed=seed)
        p = compile_problem(c, q)
        t2 = time.perf_counter()
        from optsched.solve import solve_problem  # loads the solver libraries: only commands that solve

        plan = solve_problem(p, solver=solver, time_limit=time_limit, seed=seed)
        t3 = time.perf_counter()
        violations = check_problem(p, plan)
    except InputError as exc:
        _fail_input(exc)
        return
    gpus = int(p.node_dev_count[: p.n_real].sum())
    console.print(f"cluster [bold]{escape(cluster)}[/]: {p.n_real} nodes, {gpus} GPUs, "
                  f"{len(c.running)} running jobs; queue: {len(q.jobs)} jobs from the 'mixed' mix")
    console.print(f"load {t1 - t0:.2f} s, generate + compile {t2 - t1:.2f} s, solve {t3 - t2:.2f} s")
    console.print(_summary(c, q, plan))
    if violations:
        err.print(f"[bold red]{len(violations)} violations[/] (a bug: please report)")
        raise typer.Exit(1)
    console.print("[green]check: the plan breaks no rule[/]")


@app.command()
def serve(host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
          port: Annotated[int, typer.Option(help="TCP port")] = 8000,
          solver: Annotated[str, typer.Option(help="the solver of state rounds")] = "auto",
          time_limit: Annotated[float, typer.Option(help="seconds per state round")] = 1.0,
          interval: Annotated[float, typer.Option(help="seconds between state rounds when nothing changes")] = 10.0,
          config: Annotated[Path | None, typer.Option(
              help="how to read the cluster: a KubeConfig YAML/JSON (topology labels, accelerators, pod groups; "
                   "docs/integration.md)")] = None,
          kubeconfig: Annotated[Path | None, typer.Option(
              help="list the cluster from this API server kubeconfig (else the state is pushed to PUT /v1/state)")]
          = None,
          in_cluster: Annotated[bool, typer.Option(help="list the cluster with the pod's service account")] = False,
          watch: Annotated[bool, typer.Option(
              help="follow the API server with watches (list once, then its events); --no-watch lists the "
                   "whole cluster every --poll seconds")] = True,
          poll: Annotated[float, typer.Option(help="with --no-watch: seconds between listings of the API server")]
          = 5.0,
          bind: Annotated[bool, typer.Option(help="answer the extender bind verb by creating Bindings")] = False,
          worker: Annotated[bool, typer.Option(
              help="solve state rounds in a worker process (the round does not hold the GIL extender calls need)")]
          = True,
          log_level: Annotated[str, typer.Option(help="debug | info | warning | error")] = "info") -> None:
    """Serve rounds over HTTP, kube-scheduler's extender verbs and Prometheus metrics (needs the
    `server` extra; Kubernetes objects need the `k8s` extra too)."""
    import logging

    try:
        import uvicorn

        from optsched.adapters.kube.config import KubeConfig
        from optsched.model.io import parse_document
        from optsched.service import RoundSettings, ServiceSettings, create_app
        from optsched.service.source import api_binder, clients, poller
        from optsched.service.watch import watcher
    except ImportError as exc:
        err.print(f"[bold red]missing[/]: {escape(str(exc))}; install it with pip install 'optsched[server,k8s]'")
        raise typer.Exit(2) from exc
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        kube = parse_document(KubeConfig, config) if config is not None else KubeConfig()
        rounds = RoundSettings(solver=solver, time_limit=time_limit, kube=kube, process=worker)
    except InputError as exc:
        _fail_input(exc)
        return
    source = binder = None
    if kubeconfig is not None or in_cluster:
        core, scheduling, custom = clients(None if kubeconfig is None else str(kubeconfig), in_cluster)
        source = watcher(core, scheduling, custom) if watch else poller(core, scheduling, poll, custom)
        binder = api_binder(core) if bind else None
    elif bind:
        err.print("[bold red]--bind needs API access[/]: give --kubeconfig or --in-cluster")
        raise typer.Exit(2)
    service = create_app(ServiceSettings(rounds=rounds, interval_s=interval), binder=binder, source=source)
    uvicorn.run(service, host=host, port=port, log_level=log_level.lower())


@app.command()
def slurm(nodes: Annotated[Path, typer.Option(help="`scontrol show nodes --json` output")],
          jobs: Annotated[Path, typer.Option(help="`squeue --json` output")],
          partitions: Annotated[Path | None, typer.Option(help="`scontrol show partitions --json` output")] = None,
          qos: Annotated[Path | None, typer.Option(help="`sacctmgr show qos --json` output (preemption)")] = None,
          associations: Annotated[Path | None, typer.Option(
              help="`sacctmgr show associations --json` output (GrpTRES limits, with tenant_by: account)")] = None,
          topology: Annotated[Path | None, typer.Option(help="topology.conf (topology/tree or topology/block)")]
          = None,
          config: Annotated[Path | None, typer.Option(
              help="a SlurmConfig YAML/JSON (GRES names and models, tenants, preempt mode; docs/integration.md)")]
          = None,
          solver: Annotated[str, typer.Option(help="a solver name (`optsched solvers` lists them)")] = "auto",
          time_limit: Annotated[float, typer.Option(help="seconds for the solve")] = 1.0,
          as_json: Annotated[bool, typer.Option("--json", help="print the actions as JSON")] = False) -> None:
    """One round from Slurm's JSON: prints the commands that carry out the plan (`scontrol requeue`
    / `scancel`, then `scontrol update JobId=... ReqNodeList=...`) and why the other jobs wait.
    Needs the `slurm` extra. Nothing is run: pipe the commands to a shell to apply them."""
    try:
        from optsched.adapters.slurm import SlurmConfig, actions, snapshot
        from optsched.model.io import parse_document, read_document
    except ImportError as exc:
        err.print(f"[bold red]missing[/]: {escape(str(exc))}; install it with pip install 'optsched[slurm]'")
        raise typer.Exit(2) from exc
    from optsched.solve import solve as run_solve

    def text_of(path: Path) -> str:
        try:
            return path.read_bytes().decode("utf-8")
        except OSError as exc:
            raise InputError([InputIssue(str(path), "unreadable", str(exc))]) from None
        except UnicodeDecodeError as exc:
            raise InputError([InputIssue(str(path), "encoding", f"not UTF-8 text: {exc}")]) from None

    try:
        cfg = parse_document(SlurmConfig, config) if config is not None else SlurmConfig()
        snap = snapshot(read_document(nodes), read_document(jobs),
                        partitions=read_document(partitions) if partitions else (),
                        qos=read_document(qos) if qos else (),
                        associations=read_document(associations) if associations else (),
                        topology=text_of(topology) if topology else None, config=cfg)
        plan = run_solve(snap.cluster, snap.queue, solver=solver, time_limit=time_limit)
        todo = actions(plan, snap)
    except InputError as exc:
        _fail_input(exc)
        return
    if as_json:
        sys.stdout.write(json.dumps({**todo.to_dict(), "ignored": snap.ignored,
                                     "solver": plan.solver.model_dump(mode="json")}, indent=2) + "\n")
        return
    err.print(_summary(snap.cluster, snap.queue, plan))
    for note in snap.ignored:
        err.print(f"  note: {escape(note)}")
    for w in todo.waiting:
        err.print(f"  waits: {escape(w.job_id)}: {escape(w.reason)}" + (f" ({escape(w.detail)})" if w.detail else ""))
    for command in todo.commands():
        sys.stdout.write(" ".join(command) + "\n")


if __name__ == "__main__":
    app()
