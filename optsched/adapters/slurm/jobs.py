"""Slurm jobs (`squeue --json`, slurmrestd `GET /slurm/v0.0.4x/jobs`) -> queued and running jobs.

A Slurm job asks for N nodes at once (`--nodes`, a range `-N 2-4` is elastic) and the same share
of each: a gang job with one task group `nodes` of N replicas, one per node. Per node it asks:
- cpu: the largest of its CPUs over its nodes (`cpus` / N, rounded up), `minimum_cpus_per_node`
  and `tasks_per_node` x `cpus_per_task`, in millicores;
- memory: `memory_per_node`, or `memory_per_cpu` x its CPUs per node, MiB;
- GPUs (`SlurmConfig.gpu_gres`): `tres_per_node`, or `tres_per_job` / N, `tres_per_task` x tasks
  per node, `tres_per_socket` x `sockets_per_node` (rounded up: Slurm may spread a per-job count
  unevenly, optsched asks the same of every node); a GRES type (`gres/gpu:h100:1`) allows that
  device model only; other GRES and `minimum_tmp_disk_per_node` as node resources;
- where: its partitions (one of them), `features` (`a&b` all, `a|b` one), `required_nodes` (when
  it names all N nodes), `excluded_nodes`, as node selectors; `--exclusive` (`shared: none`) a
  whole node (`config.EXCLUSIVE_RESOURCE`); `--switches=1` a preferred single leaf switch.
Its priority comes from its QOS (`optsched.adapters.slurm.qos`), its tenant from
`SlurmConfig.tenant_by`. A pending array job (`array_task_string`) of one-node tasks is one job
whose replicas are its tasks (not a gang: each task starts on its own).

A running job (RUNNING, COMPLETING, CONFIGURING, SUSPENDED) keeps what it holds per node
(`job_resources` cpus and memory, `gres_detail` device indices): one task group per distinct
per-node shape. It is preemptible when its QOS is one some QOS preempts, with a mode that frees
its resources (REQUEUE, CANCEL) and past `PreemptExemptTime`; its lost work is its run time.

A heterogeneous job (`het_job_id`, `het_job_offset`: `salloc ... : ...`) is one gang job whose
task groups are its components (`c0`, `c1`, ...), each with its own nodes and shares; running, the
same with each component's per-node shapes.

Pending jobs Slurm would not start now are held with their reason, not offered: held by a user
or admin, waiting on a dependency or a begin time, in a reservation, in partitions that are all
down (a heterogeneous job when one of its components is), or asking what is not modelled (a
`features` expression with brackets, counts or both `&` and `|`; `required_nodes` that name fewer
nodes than it needs; multi-node array tasks).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from optsched.adapters.documents import Problems, raw
from optsched.adapters.slurm.config import EXCLUSIVE_SHARES, FEATURE_LABEL, NODE_LABEL, PARTITION_LABEL, SlurmConfig
from optsched.adapters.slurm.hostlists import expand
from optsched.adapters.slurm.nodes import NodesRead, model_name
from optsched.adapters.slurm.qos import LEVEL_PRIORITY, QosRead
from optsched.adapters.slurm.values import (
    csv,
    flags,
    gres_entries,
    number,
    ranges,
    text,
    tres_gres,
)
from optsched.model.cluster import NODE_LEVEL

RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STAGE_OUT"})
"""Job states in which a job holds its nodes."""
GROUP = "nodes"
"""The task group of a queued job: one replica per node."""
TENANT = "slurm"
"""The one tenant when `SlurmConfig.tenant_by` is `cluster`."""


@dataclass(frozen=True)
class HeldJob:
    """A pending Slurm job not offered to the solver, and why it stays pending."""

    job_id: str
    reason: str
    """`held`, `dependency`, `begin_time`, `reservation`, `partition`, `not_modelled` or `capacity`."""
    detail: str


@dataclass
class JobsRead:
    """Queued and running job documents, and the way back from a job id to Slurm's job ids."""

    queued: list[dict[str, Any]] = field(default_factory=list)
    running: list[dict[str, Any]] = field(default_factory=list)
    held: list[HeldJob] = field(default_factory=list)
    tasks: dict[str, list[str]] = field(default_factory=dict)
    """Job id -> Slurm job id of each replica (an array's tasks, `123_4`); absent: the job id itself."""
    exclusive: set[str] = field(default_factory=set)
    """Ids of jobs that ask for whole nodes."""
    ref_of: dict[str, str] = field(default_factory=dict)
    """Job id -> `Job/<id>` (what errors name)."""
    mode_of: dict[str, str] = field(default_factory=dict)
    """Running job id -> how Slurm preempts it (`requeue`, `cancel`)."""
    components: dict[str, dict[str, str]] = field(default_factory=dict)
    """Heterogeneous job id -> its task groups' component ids (`c1` -> `123+1`)."""
    het_of: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Record id -> (heterogeneous job id, component offset), for the records of one."""
    ignored: list[str] = field(default_factory=list)


@dataclass
class Context:
    """What a job is read against."""

    config: SlurmConfig
    nodes: NodesRead
    qos: QosRead
    partitions_down: set[str]
    leaf_level: str | None
    now: float
    problems: Problems
    tier_rank: dict[str, int] = field(default_factory=dict)
    """Partition -> the dense rank of its `PriorityTier` (0 the lowest), for `preempt/partition_prio`."""

    def priority(self, obj: dict[str, Any], ref: str) -> int:
        """A job's optsched priority: 100 x its QOS's preemption level (`preempt/qos`), or 100 x
        the rank of its best partition's PriorityTier (`preempt/partition_prio`)."""
        if self.config.preempt_type == "partition_prio":
            parts = csv(obj, "partition", ref, self.problems)
            return LEVEL_PRIORITY * max((self.tier_rank.get(q, 0) for q in parts), default=0)
        return self.qos.priority(text(obj, "qos", ref, self.problems))

    def preemption(self, obj: dict[str, Any], ref: str) -> tuple[bool, str, float]:
        """(whether some job may preempt it, how Slurm would, after how long a run): by its QOS, or,
        under `partition_prio`, by its partition's tier (below the highest) and the cluster's mode."""
        if self.config.preempt_type == "partition_prio":
            parts = csv(obj, "partition", ref, self.problems)
            rank = min((self.tier_rank.get(q, 0) for q in parts), default=0)
            top = max(self.tier_rank.values(), default=0)
            mode = self.config.preempt_mode
            return rank < top and mode != "off", mode, self.config.preempt_exempt_s
        qos = text(obj, "qos", ref, self.problems)
        mode = self.qos.mode.get(qos, self.config.preempt_mode)
        return (qos in self.qos.preemptable and mode != "off", mode,
                self.qos.exempt_s.get(qos, self.config.preempt_exempt_s))


def read_jobs(objects: list[dict[str, Any]], ctx: Context) -> JobsRead:
    """Read every job record; finished ones (COMPLETED, FAILED, ...) are skipped."""
    out = JobsRead()
    for i, obj in enumerate(objects):
        given = raw(obj, "job_id")
        if isinstance(given, bool) or not isinstance(given, int | str) or str(given) == "":
            ctx.problems.add(f"Job[{i}]", "job_id", "required", "a job needs a job_id")
            continue
        state = flags(obj, "job_state", f"Job/{given}", ctx.problems)
        het = number(obj, "het_job_id", f"Job/{given}", ctx.problems)
        if het and state and state[0] in ("PENDING", *RUNNING_STATES):
            out.het_of[str(given)] = (int(het), int(number(obj, "het_job_offset", f"Job/{given}", ctx.problems) or 0))
        if state and state[0] == "PENDING":
            _queued(obj, str(given), ctx, out)
        elif state and state[0] in RUNNING_STATES:
            _running(obj, str(given), ctx, out)
    if out.het_of:
        _merge_heterogeneous(out)
    return out


def _merge_heterogeneous(out: JobsRead) -> None:
    """The records of each heterogeneous job as one gang job whose task groups are its components
    (`c0`, `c1`, ...: each its own nodes and shares), queued or running; a component held holds them all."""
    why: dict[int, HeldJob] = {}
    for h in [h for h in out.held if h.job_id in out.het_of]:
        out.held.remove(h)
        why.setdefault(out.het_of[h.job_id][0], h)
    held = set(why)
    for het, h in sorted(why.items()):
        out.held.append(HeldJob(str(het), h.reason, f"component {h.job_id}: {h.detail}"))
    for kind in ("queued", "running"):
        docs: list[dict[str, Any]] = getattr(out, kind)
        parts: dict[int, list[tuple[int, dict[str, Any]]]] = {}
        keep = []
        for doc in docs:
            job = doc if kind == "queued" else doc["job"]
            if job["id"] in out.het_of:
                het, offset = out.het_of[job["id"]]
                if het not in held or kind == "running":
                    parts.setdefault(het, []).append((offset, doc))
            else:
                keep.append(doc)
        for het, members in sorted(parts.items()):
            members.sort(key=lambda m: m[0])
            merged = _merged(het, members, kind, out)
            keep.append(merged)
        docs[:] = keep


def _merged(het: int, members: list[tuple[int, dict[str, Any]]], kind: str, out: JobsRead) -> dict[str, Any]:
    jobs = [doc if kind == "queued" else doc["job"] for _, doc in members]
    groups, names = [], {}
    for (offset, _), job in zip(members, jobs, strict=True):
        for g in job["groups"]:
            name = f"c{offset}" if len(job["groups"]) == 1 else f"c{offset}-{g['name']}"
            names[(offset, g["name"])] = name
            groups.append({**g, "name": name})
        out.components.setdefault(str(het), {})[f"c{offset}"] = f"{het}+{offset}"
    lead = jobs[0]
    job = {**lead, "id": str(het), "gang": True, "groups": groups,
           "priority": max(j["priority"] for j in jobs), "submitted_at": min(j["submitted_at"] for j in jobs)}
    exclusive = False
    for j in jobs:
        out.ref_of.pop(j["id"], None)
        if j["id"] in out.exclusive:
            out.exclusive.discard(j["id"])
            exclusive = True
    out.ref_of[str(het)] = f"Job/{het}"
    if exclusive:
        out.exclusive.add(str(het))
    if kind == "queued":
        return job
    lead_doc = members[0][1]
    out.mode_of[str(het)] = out.mode_of.get(lead["id"], "requeue")
    placements = [{**pl, "group": names[(offset, pl["group"])]} for offset, doc in members for pl in doc["placements"]]
    return {**lead_doc, "job": job, "placements": placements,
            "started_at": min(d["started_at"] for _, d in members)}


def _tenant(obj: dict[str, Any], ref: str, ctx: Context) -> str:
    if ctx.config.tenant_by == "cluster":
        return TENANT
    value = text(obj, ctx.config.tenant_by, ref, ctx.problems).split(",")[0]
    return value or TENANT


def _hold_reason(obj: dict[str, Any], ref: str, ctx: Context) -> tuple[str, str] | None:
    """Why Slurm would not start this pending job now, if it would not."""
    p = ctx.problems
    reason = text(obj, "state_reason", ref, p)
    if raw(obj, "hold") is True or reason.startswith("JobHeld"):
        return "held", reason or "held"
    if text(obj, "dependency", ref, p) and reason.startswith("Dependency"):
        return "dependency", text(obj, "dependency", ref, p)
    eligible = number(obj, "eligible_time", ref, p)
    if reason == "BeginTime" and (eligible is None or eligible > ctx.now):
        return "begin_time", "waiting for its begin time"
    if text(obj, "resv_name", ref, p):
        return "reservation", f"runs in reservation {text(obj, 'resv_name', ref, p)!r} (reservations are not modelled)"
    parts = csv(obj, "partition", ref, p)
    if parts and all(q in ctx.partitions_down for q in parts):
        return "partition", f"partition {', '.join(parts)} is not up"
    return None


def _per_node_gres(obj: dict[str, Any], n: int, ref: str, ctx: Context,
                   notes: list[str] | None = None) -> tuple[float, str | None, dict[str, float]]:
    """(GPUs per node, the GRES type asked or None, other GRES per node); an uneven per-job count
    rounded up is noted in `notes`."""
    p, gpu = ctx.problems, ctx.config.gpu_gres
    tasks = number(obj, "tasks", ref, p) or float(n)
    sockets = number(obj, "sockets_per_node", ref, p) or 1.0
    per = {"tres_per_node": 1.0, "tres_per_job": 1.0 / n, "tres_per_task": math.ceil(tasks / n),
           "tres_per_socket": sockets}
    gpus, kind, other = 0.0, None, dict[str, float]()
    for key, factor in per.items():
        for g in tres_gres(text(obj, key, ref, p), ref, key, p):
            amount = float(math.ceil(g.count * factor - 1e-9))
            if g.name == gpu:
                gpus, kind = max(gpus, amount), g.type or kind
                if amount != g.count * factor and notes is not None:
                    notes.append(f"{ref}.{key}: {g.count:g} over {n} nodes read as {amount:g} per node")
            else:
                other[g.name] = max(other.get(g.name, 0.0), amount)
    return gpus, kind, other


def _where(obj: dict[str, Any], n: int, ref: str, ctx: Context) -> tuple[list[list[dict[str, Any]]], str | None]:
    """Node affinity terms (an OR of ANDs) from partitions, features, required and excluded nodes;
    or why the job's placement rule is not modelled."""
    p = ctx.problems
    features = text(obj, "features", ref, p)
    if any(c in features for c in "[]*!()") or ("&" in features and "|" in features):
        return [], f"features {features!r} (brackets, counts, negation or both & and | are not modelled)"
    alternatives = [[f] for f in features.split("|") if f] if "|" in features else [
        [f for f in re.split("[&,]", features) if f]]
    required = expand(text(obj, "required_nodes", ref, p), ref, "required_nodes", p)
    if required and len(required) < n:
        return [], f"required_nodes names {len(required)} of its {n} nodes (a subset is not modelled)"
    excluded = expand(text(obj, "excluded_nodes", ref, p), ref, "excluded_nodes", p)
    common: list[dict[str, Any]] = []
    if required:
        common.append({"key": NODE_LABEL, "operator": "In", "values": required})
    if excluded:
        common.append({"key": NODE_LABEL, "operator": "NotIn", "values": excluded})
    terms = []
    for part in csv(obj, "partition", ref, p) or [""]:
        for alt in alternatives:
            term = common + ([{"key": PARTITION_LABEL + part, "operator": "Exists"}] if part else [])
            term += [{"key": FEATURE_LABEL + f, "operator": "Exists"} for f in alt]
            if term:
                terms.append(term)
    return terms, None


def _exclusive(obj: dict[str, Any], ref: str, ctx: Context) -> bool:
    """`--exclusive`: `shared: [none]` (v0.0.40 on) or `exclusive: [true]` (v0.0.39)."""
    return ("NONE" in flags(obj, "shared", ref, ctx.problems)
            or "TRUE" in flags(obj, "exclusive", ref, ctx.problems))


def _queued(obj: dict[str, Any], job_id: str, ctx: Context, out: JobsRead) -> None:
    p, ref = ctx.problems, f"Job/{job_id}"
    tasks = text(obj, "array_task_string", ref, p)
    array_id = number(obj, "array_job_id", ref, p)
    if tasks and array_id:
        job_id, ref = f"{int(array_id)}_[{tasks}]", f"Job/{int(array_id)}_[{tasks}]"
    out.ref_of[job_id] = ref
    held = _hold_reason(obj, ref, ctx)
    if held is not None:
        out.held.append(HeldJob(job_id, *held))
        return
    n = max(int(number(obj, "node_count", ref, p) or 1), 1)
    most = number(obj, "max_nodes", ref, p)
    n_max = max(int(most), n) if most else n
    task_ids: list[str] = []
    if tasks:
        ids = ranges(tasks.split("%")[0])
        if ids is None or n > 1 or n_max > 1:
            out.held.append(HeldJob(job_id, "not_modelled", f"array tasks {tasks!r} "
                                    + ("of several nodes each" if ids is not None else "not a task list")))
            return
        throttle = number(obj, "array_max_tasks", ref, p)
        task_ids = [f"{int(array_id or 0)}_{t}" for t in ids]
        n_max = len(task_ids) if not throttle else min(len(task_ids), int(throttle))
        if throttle and throttle < len(task_ids):
            out.ignored.append(f"{ref}.array_max_tasks: at most {int(throttle)} of its tasks are offered")
        task_ids = task_ids[:n_max]
        n = 1
    terms, not_modelled = _where(obj, n, ref, ctx)
    if not_modelled is not None:
        out.held.append(HeldJob(job_id, "not_modelled", not_modelled))
        return
    group = _group(obj, n, ref, ctx, out)
    group["replicas"] = {"min": n, "max": n_max}
    if n_max > 1 and not task_ids:
        group["spread"] = {"level": NODE_LEVEL, "max_skew": 1}  # one replica per node, as Slurm counts nodes
    if terms:
        group["node_affinity"] = [{"match_expressions": t} for t in terms]
    doc: dict[str, Any] = {
        "id": job_id, "tenant": _tenant(obj, ref, ctx), "priority": ctx.priority(obj, ref),
        "submitted_at": number(obj, "submit_time", ref, p) or 0.0, "preemptible": ctx.preemption(obj, ref)[0],
        "gang": False if task_ids else (True if n_max > 1 else None), "groups": [group]}
    if ctx.leaf_level is not None and number(obj, "required_switches", ref, p) == 1 and n > 1:
        doc["topology"] = {"level": ctx.leaf_level, "mode": "preferred"}
    if _exclusive(obj, ref, ctx):
        out.exclusive.add(job_id)
    if task_ids:
        out.tasks[job_id] = task_ids
    out.queued.append(doc)


def _group(obj: dict[str, Any], n: int, ref: str, ctx: Context, out: JobsRead) -> dict[str, Any]:
    """The task group of one node's share of a pending job."""
    p = ctx.problems
    cpus = number(obj, "cpus", ref, p) or 1.0
    per_task = number(obj, "cpus_per_task", ref, p) or 1.0
    tasks_per_node = number(obj, "tasks_per_node", ref, p) or 0.0
    cpu = max(math.ceil(cpus / n), number(obj, "minimum_cpus_per_node", ref, p) or 0.0, tasks_per_node * per_task)
    memory = number(obj, "memory_per_node", ref, p)
    if memory is None:
        memory = (number(obj, "memory_per_cpu", ref, p) or 0.0) * cpu
    gpus, kind, other = _per_node_gres(obj, n, ref, ctx, out.ignored)
    disk = number(obj, "minimum_tmp_disk_per_node", ref, p)
    if disk:
        other["tmp_disk"] = disk
    request: dict[str, Any] = {"cpu": cpu * 1000.0, "memory": memory, "gpu": gpus}
    if other:
        request["resources"] = other
    group: dict[str, Any] = {"name": GROUP, "request": request}
    if kind is not None and gpus:
        group["models"] = {model_name(kind, ctx.config): 1.0}
    return group


def _allocation(obj: dict[str, Any], ref: str, ctx: Context) -> list[tuple[str, float, float]]:
    """(node, CPUs, memory MiB) per allocated node: `job_resources.nodes.allocation` (v0.0.40 on),
    `job_resources.allocated_nodes` (v0.0.39), else the `nodes` hostlist with an even share."""
    p = ctx.problems
    rows = raw(obj, "job_resources.nodes.allocation")
    if not isinstance(rows, list):
        rows = raw(obj, "job_resources.allocated_nodes")
    out = []
    if isinstance(rows, list) and rows:
        for k, row in enumerate(rows):
            where = f"job_resources.nodes.allocation[{k}]"
            if not isinstance(row, dict):
                p.add(ref, where, "type", "expected a mapping")
                continue
            name = text(row, "name", ref, p) or text(row, "nodename", ref, p)
            cpus = (number(row, "cpus.count", ref, p) if isinstance(row.get("cpus"), dict)
                    else number(row, "cpus", ref, p))
            memory = (number(row, "memory.allocated", ref, p) if isinstance(row.get("memory"), dict)
                      else number(row, "memory_allocated", ref, p))
            share = (number(obj, "cpus", ref, p) or 0.0) / len(rows)  # v0.0.39 rows carry no cpus
            out.append((name, share if cpus is None else cpus, memory or 0.0))
        return out
    names = expand(text(obj, "nodes", ref, p), ref, "nodes", p)
    cpus = (number(obj, "cpus", ref, p) or 0.0) / max(len(names), 1)
    per_node = number(obj, "memory_per_node", ref, p)
    memory = per_node if per_node is not None else (number(obj, "memory_per_cpu", ref, p) or 0.0) * cpus
    return [(name, cpus, memory) for name in names]


def _running(obj: dict[str, Any], job_id: str, ctx: Context, out: JobsRead) -> None:
    p, ref = ctx.problems, f"Job/{job_id}"
    out.ref_of[job_id] = ref
    allocation = _allocation(obj, ref, ctx)
    if not allocation:
        p.add(ref, "nodes", "required", "a running job needs its nodes")
        return
    detail = raw(obj, "gres_detail")
    details = detail if isinstance(detail, list) and all(isinstance(d, str) for d in detail) else []
    shapes: dict[tuple[float, float, int], list[tuple[str, list[int]]]] = {}
    for k, (node, cpus, memory) in enumerate(allocation):
        if node not in ctx.nodes.docs:
            p.add(ref, "nodes", "unknown_reference", f"runs on node {node!r}, which was not given")
            continue
        devices: list[int] = []
        if k < len(details):
            for g in gres_entries(details[k], ref, f"gres_detail[{k}]", p):
                if g.name == ctx.config.gpu_gres:
                    idx = g.indices()
                    if idx is None or len(idx) != int(g.count):
                        p.add(ref, f"gres_detail[{k}]", "gres", f"{details[k]!r} does not list its {g.count:g} devices")
                    devices += idx or []
        shapes.setdefault((cpus, memory, len(devices)), []).append((node, sorted(devices)))
    if p.issues:
        return
    if not details and _per_node_gres(obj, len(allocation), ref, ctx)[0] > 0:
        p.add(ref, "gres_detail", "required", "a running job with GPUs needs gres_detail (its device indices)")
        return
    groups, placements = [], []
    for k, ((cpus, memory, gpus), members) in enumerate(shapes.items()):
        name = GROUP if len(shapes) == 1 else f"{GROUP}{k}"
        groups.append({"name": name, "replicas": {"min": len(members), "max": len(members)},
                       "request": {"cpu": cpus * 1000.0, "memory": memory, "gpu": float(gpus)}})
        placements += [{"group": name, "replica": r, "node": node, "devices": devices}
                       for r, (node, devices) in enumerate(members)]
    started = number(obj, "start_time", ref, p) or ctx.now
    ran = max(ctx.now - started, 0.0)
    may, mode, exempt = ctx.preemption(obj, ref)
    job = {"id": job_id, "tenant": _tenant(obj, ref, ctx), "priority": ctx.priority(obj, ref),
           "submitted_at": number(obj, "submit_time", ref, p) or 0.0, "preemptible": may and ran >= exempt,
           "gang": len(placements) > 1 or None, "groups": groups}
    if _exclusive(obj, ref, ctx):
        out.exclusive.add(job_id)
    out.mode_of[job_id] = "cancel" if mode == "requeue" and raw(obj, "requeue") is False else mode
    out.running.append({"job": job, "started_at": started, "checkpoint_age_s": ran,
                        "restart_s": ctx.config.restart_s, "placements": placements})


def exclusive_shares(doc: dict[str, Any], exclusive: bool) -> None:
    """Make a job document's replicas take `EXCLUSIVE_SHARES` (whole node) or one share of
    `config.EXCLUSIVE_RESOURCE` each."""
    from optsched.adapters.slurm.config import EXCLUSIVE_RESOURCE

    for g in doc["groups"]:
        g["request"].setdefault("resources", {})[EXCLUSIVE_RESOURCE] = float(EXCLUSIVE_SHARES if exclusive else 1)
