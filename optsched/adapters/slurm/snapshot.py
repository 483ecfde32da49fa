"""Slurm's JSON (and topology.conf) -> one round's Cluster and Queue, and the way back to job ids."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from optsched.adapters.documents import Problems, split_unsatisfiable, validate_read_cluster, validate_read_queue
from optsched.adapters.slurm.config import EXCLUSIVE_RESOURCE, EXCLUSIVE_SHARES, SlurmConfig
from optsched.adapters.slurm.hostlists import expand
from optsched.adapters.slurm.jobs import Context, HeldJob, exclusive_shares, read_jobs
from optsched.adapters.slurm.limits import FLAVOR, GPU_KEY, quotas, read_limits
from optsched.adapters.slurm.nodes import NodesRead, read_nodes
from optsched.adapters.slurm.qos import read_qos
from optsched.adapters.slurm.topology import UNCONNECTED, Fabric, read_topology, unconnected_leaf
from optsched.adapters.slurm.values import flags, named, number, text
from optsched.model.cluster import Cluster
from optsched.model.queue import Job, Queue

CLUSTER_LEVEL = "cluster"
"""The one level (and domain) without a topology.conf."""


@dataclass
class SlurmSnapshot:
    """One round read from Slurm, and what `actions` needs to write its plan back."""

    cluster: Cluster
    queue: Queue
    held: list[HeldJob] = field(default_factory=list)
    """Pending jobs not offered to the solver, with the reason they stay pending."""
    tasks: dict[str, list[str]] = field(default_factory=dict)
    """Job id -> the Slurm job id of each replica, for an array job (`123_4`)."""
    preempt_mode: dict[str, str] = field(default_factory=dict)
    """Running job id -> how Slurm preempts it (`requeue` or `cancel`)."""
    components: dict[str, dict[str, str]] = field(default_factory=dict)
    """Heterogeneous job id -> its task groups' Slurm component ids (`c1` -> `123+1`)."""
    ignored: list[str] = field(default_factory=list)
    """What the input says that the round does not model or reads approximately (`Object.field: why`)."""
    config: SlurmConfig = field(default_factory=SlurmConfig)


def listing(given: Any, key: str, kind: str, problems: Problems) -> list[dict[str, Any]]:
    """The objects of a response (`{"nodes": [...]}`, as `scontrol show nodes --json` prints it) or
    of a plain list; its `errors` are problems."""
    if given is None:
        return []
    if isinstance(given, dict):
        for k, err in enumerate(given.get("errors") or []):
            problems.add(f"{kind}.errors[{k}]", "", "slurm_error", str(err.get("description", err)
                                                                      if isinstance(err, dict) else err))
        given = given.get(key, [])
    if not isinstance(given, list | tuple):
        problems.add(kind, "", "type", f"expected a list of {kind} objects or a response with {key!r}")
        return []
    out = []
    for i, obj in enumerate(given):
        if isinstance(obj, dict):
            out.append(obj)
        else:
            problems.add(f"{kind}[{i}]", "", "type", "expected a mapping")
    return out


def _partitions(objects: list[dict[str, Any]],
                problems: Problems) -> tuple[dict[str, list[str]], set[str], dict[str, int]]:
    """(partition -> its node names, partitions that are not UP, partition -> dense rank of its
    `PriorityTier`)."""
    nodes, down, tiers = {}, set(), {}
    for i, obj in enumerate(objects):
        ref, name = named(obj, "Partition", i, problems)
        if name is None:
            continue
        configured = obj.get("nodes")
        hosts = text(configured, "configured", ref, problems) if isinstance(configured, dict) else text(
            obj, "nodes", ref, problems)
        nodes[name] = expand(hosts, ref, "nodes.configured", problems)
        state = flags(obj, "partition.state", ref, problems) or flags(obj, "state", ref, problems)
        if state and "UP" not in state:
            down.add(name)
        tiers[name] = int(number(obj, "priority.tier", ref, problems) or 0)
    ranks = {t: r for r, t in enumerate(sorted(set(tiers.values())))}
    return nodes, down, {name: ranks[t] for name, t in tiers.items()}


def unlisted_usage(read: NodesRead, running: list[dict[str, Any]]) -> list[str]:
    """Take out of each node's capacity what Slurm says its jobs hold (`alloc_cpus`,
    `alloc_memory`, `gres_used` indices) beyond the running jobs given (a `squeue` filtered by
    user or partition lists only some): that room is not offered, and the devices held are
    marked unhealthy (nothing new goes there). Returns a note per node so reduced."""
    known: dict[str, tuple[float, float, set[int]]] = {}
    for r in running:
        request = {g["name"]: g["request"] for g in r["job"]["groups"]}
        for pl in r["placements"]:
            cpu, memory, devices = known.get(pl["node"], (0.0, 0.0, set()))
            req = request[pl["group"]]
            known[pl["node"]] = (cpu + req["cpu"], memory + req["memory"], devices | set(pl["devices"]))
    notes = []
    for name, (cpu, memory, used) in read.allocated.items():
        k_cpu, k_memory, k_devices = known.get(name, (0.0, 0.0, set()))
        extra_cpu, extra_memory, extra_devices = max(cpu - k_cpu, 0.0), max(memory - k_memory, 0.0), used - k_devices
        if extra_cpu < 1.0 and extra_memory < 1.0 and not extra_devices:
            continue
        doc = read.docs[name]
        capacity = doc["capacity"]
        capacity["cpu"] = max(capacity["cpu"] - extra_cpu, 0.0)
        capacity["memory"] = max(capacity["memory"] - extra_memory, 0.0)
        if extra_devices and "devices" in doc:
            devices = doc["devices"]
            held = {i for i in extra_devices if i < devices["count"]}
            devices["unhealthy"] = sorted(set(devices["unhealthy"]) | held)
        notes.append(f"Node/{name}: {extra_cpu / 1000:g} CPUs, {extra_memory:g} MiB and {len(extra_devices)} devices "
                     "are held by jobs not given; not offered")
    return notes


def _fabric(topology: str | None, config: SlurmConfig, problems: Problems) -> Fabric | None:
    if topology is None:
        return Fabric(levels=[CLUSTER_LEVEL], domains=[{"id": CLUSTER_LEVEL, "level": CLUSTER_LEVEL}], leaf_of={})
    return read_topology(topology, config.uplinks_gbps, problems)


def snapshot(nodes: Any, jobs: Any = (), *, partitions: Any = (), qos: Any = (), associations: Any = (),
             topology: str | None = None, config: SlurmConfig | None = None, now: float | None = None) -> SlurmSnapshot:
    """Read Slurm's nodes (`scontrol show nodes --json`), jobs (`squeue --json`), optionally its
    partitions (`scontrol show partitions --json`), QOS (`sacctmgr show qos --json`), associations
    (`sacctmgr show associations --json`: GrpTRES limits, with `tenant_by: account`;
    `optsched.adapters.slurm.limits`) and the text of its topology.conf into a round. Each may be
    the command's whole JSON response or its list.

    `now` is the round's time, seconds since the epoch (default: the clock). Raises one
    `InputError` listing every problem, each naming its object (`Node/<name>`, `Job/<id>`,
    `QOS/<name>`, `topology.conf:<line>`) and field. A pending job that no node could ever hold
    is not an error (Slurm keeps it pending): it is held, with its reason.
    """
    config = config or SlurmConfig()
    now = time.time() if now is None else now
    problems = Problems()
    part_docs = listing(partitions, "partitions", "Partition", problems)
    part_nodes, down, tier_rank = _partitions(part_docs, problems)
    if config.preempt_type == "partition_prio" and not part_docs:
        problems.add("Partition", "", "required",
                     "preempt_type partition_prio needs the partitions (their PriorityTier)")
    read = read_nodes(listing(nodes, "nodes", "Node", problems), part_nodes, config, problems)
    fabric = _fabric(topology, config, problems)
    qos_docs = listing(qos, "qos", "QOS", problems)
    qos_read = read_qos(qos_docs, config, problems)
    limits = read_limits(listing(associations, "associations", "Association", problems), qos_docs, config, problems)
    problems.raise_if_any()
    assert fabric is not None
    if not read.docs:
        problems.add("Node", "", "required", "no node was given: a cluster needs at least one")
        problems.raise_if_any()
    ignored = qos_read.ignored + limits.ignored
    domains = list(fabric.domains)
    unconnected = []
    for name, doc in read.docs.items():
        leaf = fabric.leaf_of.get(name, CLUSTER_LEVEL if topology is None else None)
        if leaf is None:
            unconnected.append(name)
            leaf = UNCONNECTED
        doc["domain"] = leaf
    if unconnected:
        domains += unconnected_leaf(fabric)
        ignored.append(f"{', '.join(unconnected[:5])}{' ...' if len(unconnected) > 5 else ''}: not in topology.conf, "
                       f"under the leaf {UNCONNECTED!r}")
    leaf_level = fabric.levels[-1] if topology is not None else None
    ctx = Context(config=config, nodes=read, qos=qos_read, partitions_down=down, leaf_level=leaf_level, now=now,
                  problems=problems, tier_rank=tier_rank)
    jobs_read = read_jobs(listing(jobs, "jobs", "Job", problems), ctx)
    problems.raise_if_any()
    ignored += jobs_read.ignored + unlisted_usage(read, jobs_read.running)
    if jobs_read.exclusive:
        for doc in read.docs.values():
            doc["capacity"][EXCLUSIVE_RESOURCE] = float(EXCLUSIVE_SHARES)
        for job in [*jobs_read.queued, *(r["job"] for r in jobs_read.running)]:
            exclusive_shares(job, job["id"] in jobs_read.exclusive)
    tenant_names = sorted({j["tenant"] for j in jobs_read.queued} | {r["job"]["tenant"] for r in jobs_read.running})
    totals = {GPU_KEY: float(sum(d.get("devices", {}).get("count", 0) for d in read.docs.values())),
              "cpu": sum(d["capacity"]["cpu"] for d in read.docs.values()),
              "memory": sum(d["capacity"]["memory"] for d in read.docs.values())}
    caps, flavored = quotas(tenant_names, limits, totals)
    tenants = [{"name": t, "preemption": {"within_tenant": "lower_priority"}, "quotas": caps[t]} for t in tenant_names]
    node_names = list(read.docs)
    running_ids = [r["job"]["id"] for r in jobs_read.running]
    cluster = problems.build(Cluster, {
        "topology": {"levels": fabric.levels, "domains": domains}, "device_models": read.device_models,
        "nodes": list(read.docs.values()), "tenants": tenants, "running": jobs_read.running,
        "resource_flavors": [{"name": FLAVOR}] if flavored else []}, "Cluster", "")
    problems.raise_if_any()
    assert cluster is not None

    validate_read_cluster(cluster, {"nodes": [read.ref_of[n] for n in node_names],
                                    "running": [jobs_read.ref_of[j] for j in running_ids],
                                    "tenants": [f"Tenant/{t}" for t in tenant_names]})
    built = [problems.build(Job, doc, jobs_read.ref_of[doc["id"]], "") for doc in jobs_read.queued]
    problems.raise_if_any()
    queue_jobs, never = split_unsatisfiable([j for j in built if j is not None], cluster)
    held = list(jobs_read.held) + [HeldJob(job.id, "capacity", why) for job, why in never]
    queue = Queue(now=now, jobs=queue_jobs)
    validate_read_queue(queue, cluster, [jobs_read.ref_of[j.id] for j in queue_jobs])
    return SlurmSnapshot(cluster=cluster, queue=queue, held=held, tasks=jobs_read.tasks,
                         preempt_mode=jobs_read.mode_of, components=jobs_read.components, ignored=ignored,
                         config=config)

