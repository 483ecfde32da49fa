"""Compile a validated Cluster (+ Queue) once into immutable numpy arrays.

Solvers, the validator and the metrics all read the same `Problem`: struct-of-arrays with integer
ids, so that hot paths are vectorised over nodes and devices instead of walking pydantic objects.
Arrays are made read-only; the compiled problem is never mutated (mutable search state lives in
`optsched.ledger.Ledger`).

Indexing
--------
- nodes ``n`` in ``0..N-1``: the real nodes in document order, then one virtual node per slot of
  every provisionable pool (``<pool>/new-<i>``, ``node_provisioned[n]`` true).
- resources ``r``: ``cpu`` (millicores), ``memory`` (MiB), ``rdma_nics``, then other names sorted.
- devices ``g`` (flat over nodes): ``dev_node[g]``, ``dev_local[g]`` (index on its node),
  ``dev_group[g]`` (interconnect group id), ``dev_model[g]``, ``dev_healthy[g]``.
- levels ``l`` in ``0..L-1`` top to bottom, plus ``L`` = the per-node pseudo-level.
  ``node_dom[n, l]`` is the global domain id of node ``n`` at level ``l < L``.
- tenants ``t``; quota flavors ``f`` (device model names or resource names).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from optsched.latency import without_gc
from optsched.model.cluster import NODE_LEVEL, Cluster, NodeShape
from optsched.model.queue import Job, Queue, TaskGroup, Toleration
from optsched.model.references import validate_cluster, validate_queue

FArray = npt.NDArray[np.float64]
IArray = npt.NDArray[np.int64]
BArray = npt.NDArray[np.bool_]

BASE_RESOURCES = ("cpu", "memory", "rdma_nics")
PRICING_CODES = {"reserved": 0, "on_demand": 1, "spot": 2}
CPU_PER_GPU_EQUIVALENT = 32_000.0
"""Millicores counted as one GPU-equivalent when valuing CPU-only replicas (32 cores)."""
ELASTIC_WEIGHT = 0.5
"""Value of an elastic replica (beyond `min`) relative to a minimum replica."""


T = TypeVar("T")


class Derived(Generic[T]):
    """A named quantity derived from a compiled problem alone (a mask, a table, a per-node
    array), owned by the module that declares it: ``LABEL_MASK = Derived("eligibility.label_mask",
    compute)``, read with ``p.derived(LABEL_MASK, key, value)``. The problem computes it once per
    argument tuple and keeps it; `compute(problem, *args)` must not mutate anything. `key`
    (optional) maps the arguments to what the value depends on, where they are not hashable
    themselves or several of them give one value (a group's eligibility depends on its shape)."""

    def __init__(self, name: str, compute: Callable[..., T], key: Callable[..., Hashable] | None = None) -> None:
        self.name = name
        self.compute = compute
        self.key = key

    def __repr__(self) -> str:
        return f"Derived({self.name!r})"


PRIORITY_WEIGHT_SPAN = 2000
"""Priorities beyond +-2,000 weigh as +-2,000 (a weight of 2^+-20, about 1e6): Kubernetes priority
classes go up to 2e9 (system-cluster-critical), where 2^(priority/100) overflows a float."""


def priority_weight(priority: int) -> float:
    """Weight of a job's priority in admitted value: 1 at priority 0, doubling every 100 levels,
    saturating at +-PRIORITY_WEIGHT_SPAN."""
    return float(2.0 ** (max(-PRIORITY_WEIGHT_SPAN, min(PRIORITY_WEIGHT_SPAN, priority)) / 100.0))


def _ro(a: np.ndarray) -> Any:
    a.setflags(write=False)
    return a


NONZERO_CPU = 100.0
"""Millicores kube-scheduler's scores count for a container without a cpu request
(`GetNonzeroRequestForResource`, pkg/scheduler/framework/plugins/noderesources/resource_allocation.go;
DefaultMilliCPURequest)."""
NONZERO_MEMORY = 200.0
"""MiB counted for a container without a memory request (DefaultMemoryRequest, 200 MiB)."""


def _nonzero_pad(g: TaskGroup) -> tuple[float, float]:
    """kube-scheduler's default requests for a replica whose cpu or memory request is unset (not
    when set to 0: "Override if un-set, but not if explicitly set to zero")."""
    given = g.request.model_fields_set
    return (NONZERO_CPU if "cpu" not in given else 0.0, NONZERO_MEMORY if "memory" not in given else 0.0)


@dataclass(frozen=True)
class GroupSpec:
    """A compiled task group (one role of a job)."""

    job: int
    index: int
    name: str
    rmin: int
    rmax: int
    req: FArray
    """Per-replica request per resource (R,); GPUs are in `whole`/`share`."""
    gpu: float
    whole: int
    share: float
    model_speed: FArray
    """Speed per device model (M,); 0 = not allowed. CPU-only groups: all 1."""
    affinity: str
    spec: TaskGroup
    nonzero_pad: tuple[float, float] = (0.0, 0.0)
    """What kube-scheduler's scores add to a replica's cpu (millicores) and memory (MiB) request:
    100 and 200 where the request is unset (`NONZERO_CPU`, `NONZERO_MEMORY`)."""

    @property
    def uses_devices(self) -> bool:
        """True when each replica takes whole devices or a share of one."""
        return self.gpu > 0

    @cached_property
    def req_row(self) -> tuple[float, ...]:
        """`req` as Python floats (the one-node checks of the greedy engine read it per node)."""
        return tuple(self.req.tolist())


@dataclass(frozen=True)
class RunningPlacement:
    """A replica of a running job: node index, flat device indices, share per device."""

    group: int
    replica: int
    node: int
    devices: tuple[int, ...]
    share: float


@dataclass(frozen=True)
class JobSpec:
    """A compiled job (queued or running)."""

    index: int
    id: str
    tenant: int
    priority: int
    submitted_at: float
    gang: bool
    topo_level: int | None
    topo_required: bool
    bandwidth: float
    spot: str
    preemptible: bool
    groups: tuple[GroupSpec, ...]
    ratios: tuple[tuple[int, int, float, float], ...]
    """(group, per, min, max) with max = inf when unbounded."""
    colocate: tuple[tuple[tuple[int, ...], int], ...]
    """(group indices, level) pairs."""
    running: bool
    spec: Job
    placements: tuple[RunningPlacement, ...] = ()
    checkpoint_age_s: float = 0.0
    restart_s: float = 0.0
    migratable: bool = False
    started_at: float = 0.0

    @cached_property
    def group_index(self) -> dict[str, int]:
        """Group name -> index (built once; the view and hints look it up per placement)."""
        return {g.name: g.index for g in self.groups}


@dataclass(frozen=True)
class Problem:
    """The compiled round. Build with `compile_problem`."""

    cluster: Cluster
    queue: Queue
    # resources and nodes
    resources: tuple[str, ...]
    node_ids: tuple[str, ...]
    node_index: dict[str, int]
    n_real: int
    cap: FArray
    node_healthy: BArray
    node_provisioned: BArray
    node_pool: IArray
    node_spot: BArray
    node_price: FArray
    node_model: IArray
    node_dev_start: IArray
    node_dev_count: IArray
    node_max_group: IArray
    # devices
    models: tuple[str, ...]
    model_speed: FArray
    dev_node: IArray
    dev_local: IArray
    dev_group: IArray
    dev_model: IArray
    dev_healthy: BArray
    group_node: IArray
    group_size: IArray
    # topology
    levels: tuple[str, ...]
    domain_ids: tuple[str, ...]
    domain_index: dict[str, int]
    dom_level: IArray
    dom_parent: IArray
    uplink: FArray
    node_dom: IArray
    # pools
    pool_names: tuple[str, ...]
    pool_pricing: IArray
    pool_price: FArray
    pool_rate: FArray
    pool_max_nodes: IArray
    # tenants and quota
    tenant_names: tuple[str, ...]
    tenant_index: dict[str, int]
    tenant_cohort: IArray
    tenant_weight: FArray
    flavors: tuple[str, ...]
    flavor_is_model: IArray
    """Per flavor: model index for flavors named after a device model, else -1."""
    flavor_resource: IArray
    """Per flavor: the resource index it counts, -1 for flavors that count GPUs."""
    flavor_nodes: BArray
    """(flavors, nodes): where each flavor counts (a device model's nodes, every node for a
    resource, a ResourceFlavor's nodes for ``<flavor>/<resource>``; slots as their template)."""
    nominal: FArray
    borrow_limit: FArray
    lend_limit: FArray
    cohort_names: tuple[str, ...]
    """Cohorts: the ones tenants name (their `tenant_cohort` index), then other Cohort objects."""
    cohort_parent: IArray
    """Per cohort: its parent cohort, -1 for a root."""
    cohort_nominal: FArray
    """(cohorts, flavors): a Cohort object's own quota, shared by its subtree."""
    cohort_borrow: FArray
    """(cohorts, flavors): its borrowing limit from its parent (inf: none)."""
    cohort_lend: FArray
    """(cohorts, flavors): its lending limit to its parent (inf: none)."""
    tenant_root: IArray
    """Per tenant: the root of its cohort tree (-1 without a cohort); reclaim works within a tree."""
    cohort_root: IArray
    """Per cohort: the root of its tree."""
    cohort_order: IArray
    """The cohorts, children before their parents (deepest first)."""
    hierarchical: bool
    """Whether the cluster defines Cohort objects (then quota follows the trees: `quota.tree_problems`)."""
    # jobs
    jobs: tuple[JobSpec, ...]
    running: tuple[JobSpec, ...]
    job_index: dict[str, int]
    running_index: dict[str, int]
    node_shapes: tuple[NodeShape, ...] = ()
    """Per node: the document object it was built from (a Node, or a template for slots)."""
    _derived: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    """Values derived from the problem alone, by `Derived` key (see `derived`)."""

    def derived(self, spec: Derived[T], *args: Any) -> T:
        """`spec`'s value for this problem and `args`, computed on first use and kept for the
        problem's life (the problem never changes, so neither does the value)."""
        if not args and spec.key is None:  # per-node tables asked per replica: keyed by the spec itself
            try:
                known: T = self._derived[spec]
                return known
            except KeyError:
                value_of: T = spec.compute(self)
                self._derived[spec] = value_of
                return value_of
        key = (spec, *args) if spec.key is None else (spec, spec.key(self, *args))
        try:
            value: T = self._derived[key]
        except KeyError:
            value = self._derived[key] = spec.compute(self, *args)
        return value

    @property
    def n_nodes(self) -> int:
        """Nodes including virtual provisioning slots."""
        return len(self.node_ids)

    @property
    def n_levels(self) -> int:
        """Topology levels, not counting the per-node pseudo-level."""
        return len(self.levels)

    def level_index(self, name: str) -> int:
        """Index of a level name; the per-node pseudo-level is `n_levels`."""
        return self.n_levels if name == NODE_LEVEL else self.levels.index(name)

    def node_domain_at(self, level: int) -> IArray:
        """Domain id of every node at `level` (node index itself for the node pseudo-level)."""
        if level >= self.n_levels:
            return self._node_range
        return self.node_dom[:, level]

    @cached_property
    def _node_range(self) -> IArray:
        """0 .. n_nodes - 1, read-only (the node pseudo-level's domain ids, asked per replica)."""
        out: IArray = _ro(np.arange(self.n_nodes, dtype=np.int64))
        return out

    def gpus_of(self, placements: tuple[RunningPlacement, ...] | list[RunningPlacement]) -> float:
        """GPUs held by a list of placements (shares counted as fractions)."""
        return math.fsum(len(p.devices) * p.share for p in placements)


def _node_shape_arrays(shape: NodeShape, resources: dict[str, int]) -> FArray:
    row = np.zeros(len(resources))
    for k, v in shape.capacity.items():
        row[resources[k]] = v
    return row


def _resource_names(cluster: Cluster, queue: Queue) -> tuple[str, ...]:
    extra: set[str] = set()
    for shape in [*cluster.nodes, *cluster.node_templates.values()]:
        extra |= set(shape.capacity)
    for job in [*queue.jobs, *(r.job for r in cluster.running)]:
        for g in job.groups:
            extra |= set(g.request.resources)
    extra -= set(BASE_RESOURCES)
    return (*BASE_RESOURCES, *sorted(extra))


def _request_vector(g: TaskGroup, resources: dict[str, int]) -> FArray:
    v = np.zeros(len(resources))
    v[0], v[1], v[2] = g.request.cpu, g.request.memory, g.request.rdma_nics
    for k, x in g.request.resources.items():
        v[resources[k]] = x
    return v


def _compile_job(job: Job, index: int, p_models: dict[str, int], model_speed: FArray,
                 resources: dict[str, int], tenant_index: dict[str, int],
                 level_of: dict[str, int], running: bool) -> JobSpec:
    groups = []
    for gi, g in enumerate(job.groups):
        if g.request.gpu > 0:
            speed = np.zeros(len(p_models))
            if g.models is None:
                speed[:] = model_speed
            else:
                for m, s in g.models.items():
                    speed[p_models[m]] = s
        else:
            speed = np.ones(len(p_models))
        groups.append(GroupSpec(
            job=index, index=gi, name=g.name, rmin=g.replicas.min, rmax=g.replicas.max,
            req=_ro(_request_vector(g, resources)), gpu=g.request.gpu,
            whole=g.request.whole_gpus, share=g.request.gpu if g.request.is_fractional else 0.0,
            model_speed=_ro(speed), affinity=g.device_affinity, spec=g,
            nonzero_pad=_nonzero_pad(g)))
    gidx = {g.name: g.index for g in groups}
    ratios = tuple((gidx[r.group], gidx[r.per], r.min, math.inf if r.max is None else r.max)
                   for r in job.ratios)
    coloc = tuple((tuple(gidx[x] for x in c.groups), level_of[c.level]) for c in job.colocate)
    return JobSpec(
        index=index, id=job.id, tenant=tenant_index[job.tenant], priority=job.priority,
        submitted_at=job.submitted_at, gang=job.is_gang,
        topo_level=None if job.topology is None else level_of[job.topology.level],
        topo_required=job.topology is not None and job.topology.mode == "required",
        bandwidth=job.bandwidth_gbps, spot=job.spot, preemptible=job.preemptible,
        groups=tuple(groups), ratios=ratios, colocate=coloc, running=running, spec=job)


@without_gc  # compiling makes no cyclic garbage (optsched.latency)
def compile_problem(cluster: Cluster, queue: Queue | None = None, *, validate: bool = True) -> Problem:
    """Compile a cluster and queue into a `Problem`.

    With `validate` (default) the cross-references are checked first and an `InputError` lists
    every problem; pass ``validate=False`` only for documents that came through `load_*`. The
    parts are compiled in dependency order: resources and device models, pools, nodes (real, then
    provisioning slots), topology, per-node capacity and devices, tenants and flavors, jobs.
    """
    queue = queue if queue is not None else Queue()
    if validate:
        validate_cluster(cluster)
        validate_queue(queue, cluster)
    resources = _resource_names(cluster, queue)
    r_index = {r: i for i, r in enumerate(resources)}
    model_names, m_index, m_speed = _device_models(cluster)
    pools = _pool_fields(cluster)
    shapes = _node_shapes(cluster)
    node_ids = tuple(s[0] for s in shapes)
    node_index = {nid: i for i, nid in enumerate(node_ids)}
    topology, level_of = _topology_fields(cluster, shapes)
    devices = _device_fields(shapes, r_index, m_index, len(resources))
    tenants = _tenant_fields(cluster, queue, r_index, m_index, shapes)
    jobs = tuple(_compile_job(j, i, m_index, m_speed, r_index, tenants["tenant_index"], level_of, False)
                 for i, j in enumerate(queue.jobs))
    running = _compile_running(cluster, m_index, m_speed, r_index, tenants["tenant_index"], level_of, node_index,
                               devices["node_dev_start"])
    node_pool = np.array([pools["pool_index"][s[2]] if s[2] is not None else -1 for s in shapes], dtype=np.int64)
    node_spot = np.zeros(len(shapes), dtype=bool)
    node_price = np.zeros(len(shapes))
    has_pool = node_pool >= 0
    if len(pools["pool_names"]):
        node_spot[has_pool] = pools["pool_pricing"][node_pool[has_pool]] == PRICING_CODES["spot"]
        node_price[has_pool] = pools["pool_price"][node_pool[has_pool]]
    del pools["pool_index"]
    return Problem(
        cluster=cluster, queue=queue, resources=resources, node_ids=node_ids, node_index=node_index,
        n_real=len(cluster.nodes), node_healthy=_ro(np.array([s[4] for s in shapes], dtype=bool)),
        node_provisioned=_ro(np.array([s[5] for s in shapes], dtype=bool)), node_pool=_ro(node_pool),
        node_spot=_ro(node_spot), node_price=_ro(node_price), models=tuple(model_names), model_speed=_ro(m_speed),
        **devices, **topology, **pools, **tenants,
        jobs=jobs, running=running, job_index={j.id: j.index for j in jobs},
        running_index={j.id: j.index for j in running},
        node_shapes=tuple(s[3] for s in shapes),
    )


NodeRow = tuple[str, str, str | None, NodeShape, bool, bool]
"""(id, leaf domain, pool, shape, healthy, provisioning slot) of one node."""


def _device_models(cluster: Cluster) -> tuple[list[str], dict[str, int], FArray]:
    """Device model names (the catalogue's, then any a node names), their index and speed."""
    model_names = list(cluster.device_models)
    for shape in [*cluster.nodes, *cluster.node_templates.values()]:
        if shape.devices and shape.devices.model not in model_names:
            model_names.append(shape.devices.model)
    m_index = {m: i for i, m in enumerate(model_names)}
    m_speed = np.array([cluster.device_models[m].speed if m in cluster.device_models else 1.0
                        for m in model_names])
    return model_names, m_index, m_speed


def _pool_fields(cluster: Cluster) -> dict[str, Any]:
    """The pools' arrays (and `pool_index`, name -> index, for the caller)."""
    pool_names = tuple(p.name for p in cluster.pools)
    return {
        "pool_names": pool_names, "pool_index": {p: i for i, p in enumerate(pool_names)},
        "pool_pricing": _ro(np.array([PRICING_CODES[p.pricing] for p in cluster.pools], dtype=np.int64)),
        "pool_price": _ro(np.array([p.price_per_hour for p in cluster.pools], dtype=float)),
        "pool_rate": _ro(np.array([p.interruption_rate_per_hour for p in cluster.pools], dtype=float)),
        "pool_max_nodes": _ro(np.array([p.provisionable.max_nodes if p.provisionable else 0 for p in cluster.pools],
                                       dtype=np.int64)),
    }


def _node_shapes(cluster: Cluster) -> list[NodeRow]:
    """Every node: the real ones in document order, then one slot per provisionable node."""
    shapes: list[NodeRow] = [(n.id, n.domain, n.pool, n, n.healthy, False) for n in cluster.nodes]
    for p in cluster.pools:
        if p.provisionable:
            tmpl = cluster.node_templates[p.provisionable.template]
            shapes.extend((f"{p.name}/new-{i}", p.provisionable.domain, p.name, tmpl, True, True)
                          for i in range(p.provisionable.max_nodes))
    return shapes


def _topology_fields(cluster: Cluster, shapes: list[NodeRow]) -> tuple[dict[str, Any], dict[str, int]]:
    """The domains' arrays and every node's domain per level; and level name -> index."""
    levels = tuple(cluster.topology.levels)
    level_of = {name: i for i, name in enumerate(levels)}
    level_of[NODE_LEVEL] = len(levels)
    dom_ids = tuple(d.id for d in cluster.topology.domains)
    d_index = {d: i for i, d in enumerate(dom_ids)}
    dom_level = np.array([level_of[d.level] for d in cluster.topology.domains], dtype=np.int64)
    dom_parent = np.array([d_index[d.parent] if d.parent else -1 for d in cluster.topology.domains],
                          dtype=np.int64)
    uplink = np.array([math.inf if d.uplink_gbps is None else d.uplink_gbps
                       for d in cluster.topology.domains])
    n_levels = len(levels)
    # path from each leaf domain to the top
    leaf_path: dict[int, list[int]] = {}
    for d in np.flatnonzero(dom_level == n_levels - 1):
        path = [int(d)]
        while dom_parent[path[-1]] >= 0:
            path.append(int(dom_parent[path[-1]]))
        leaf_path[int(d)] = path[::-1]
    leaf_of_node = np.array([d_index[s[1]] for s in shapes], dtype=np.int64)
    node_dom = np.empty((len(shapes), n_levels), dtype=np.int64)
    for leaf, path in leaf_path.items():
        node_dom[leaf_of_node == leaf] = path
    return {"levels": levels, "domain_ids": dom_ids, "domain_index": d_index, "dom_level": _ro(dom_level),
            "dom_parent": _ro(dom_parent), "uplink": _ro(uplink), "node_dom": _ro(node_dom)}, level_of


def _shape_key(shape: NodeShape) -> tuple[object, ...]:
    """What `_device_fields` reads of a node or template: nodes of equal keys compile alike."""
    dev = shape.devices
    return (tuple(shape.capacity.items()),
            None if dev is None else (dev.model, dev.count, tuple(dev.unhealthy)),
            None if shape.interconnect is None else tuple(tuple(g) for g in shape.interconnect))


@dataclass(frozen=True)
class _ShapeFields:
    """`_device_fields` of one distinct node shape (`_shape_key`)."""

    row: FArray
    count: int
    model: int
    group_sizes: IArray
    """Size of each interconnect group (the listed ones, then a group per device no group names)."""
    local_group: IArray
    """Per device: its group's position among the node's groups."""
    healthy: BArray


def _shape_fields(shape: NodeShape, r_index: dict[str, int], m_index: dict[str, int]) -> _ShapeFields:
    dev = shape.devices
    count = dev.count if dev else 0
    inter = shape.interconnect if shape.interconnect is not None else [list(range(count))]
    covered = {x for grp in inter for x in grp}
    groups = [list(g) for g in inter if g] + [[x] for x in range(count) if x not in covered]
    local_group = np.empty(count, dtype=np.int64)
    for k, grp in enumerate(groups):
        local_group[grp] = k
    healthy = np.ones(count, dtype=bool)
    if dev is not None and dev.unhealthy:
        healthy[sorted(set(dev.unhealthy))] = False
    return _ShapeFields(_node_shape_arrays(shape, r_index), count, m_index[dev.model] if dev else -1,
                        np.array([len(g) for g in groups], dtype=np.int64), local_group, healthy)


def _device_fields(shapes: list[NodeRow], r_index: dict[str, int], m_index: dict[str, int],
                   n_resources: int) -> dict[str, Any]:
    """Per node: capacity, device model and count, largest interconnect group; per device (flat):
    node, local index, group, model, health; per interconnect group: node and size. Computed once
    per distinct shape (`_shape_key`: a cluster has few) and spread over the nodes in bulk."""
    n_nodes = len(shapes)
    kinds: dict[tuple[object, ...], int] = {}
    fields: list[_ShapeFields] = []
    kind_l: list[int] = []
    for (_, _, _, shape, _, _) in shapes:
        key = _shape_key(shape)
        k = kinds.get(key)
        if k is None:
            k = kinds[key] = len(fields)
            fields.append(_shape_fields(shape, r_index, m_index))
        kind_l.append(k)
    kind = np.array(kind_l, dtype=np.int64)

    def per_node(values: list[int]) -> IArray:
        out: IArray = np.array(values, dtype=np.int64)[kind]
        return out

    cap = np.stack([f.row for f in fields])[kind] if fields else np.zeros((0, n_resources))
    node_model = per_node([f.model for f in fields])
    node_dev_count = per_node([f.count for f in fields])
    n_groups = per_node([len(f.group_sizes) for f in fields])
    node_max_group = per_node([max(f.group_sizes.tolist(), default=0) for f in fields])
    group_start = np.concatenate([[0], np.cumsum(n_groups)[:-1]]).astype(np.int64)
    group_node = np.repeat(np.arange(n_nodes, dtype=np.int64), n_groups)
    group_size = np.concatenate([fields[k].group_sizes for k in kind_l]) if kind_l else np.zeros(0, np.int64)
    node_dev_start = np.concatenate([[0], np.cumsum(node_dev_count)[:-1]]).astype(np.int64)
    dev_node = np.repeat(np.arange(n_nodes, dtype=np.int64), node_dev_count)
    dev_local = (np.arange(len(dev_node), dtype=np.int64) - node_dev_start[dev_node]).astype(np.int64)
    local = np.concatenate([fields[k].local_group for k in kind_l]) if kind_l else np.zeros(0, np.int64)
    dev_group = (local + group_start[dev_node]).astype(np.int64)
    dev_healthy = np.concatenate([fields[k].healthy for k in kind_l]) if kind_l else np.zeros(0, dtype=bool)
    return {"cap": _ro(cap), "node_model": _ro(node_model), "node_dev_start": _ro(node_dev_start),
            "node_dev_count": _ro(node_dev_count), "node_max_group": _ro(node_max_group),
            "dev_node": _ro(dev_node), "dev_local": _ro(dev_local), "dev_group": _ro(dev_group),
            "dev_model": _ro(node_model[dev_node]), "dev_healthy": _ro(dev_healthy),
            "group_node": _ro(group_node), "group_size": _ro(group_size)}


def _tenant_fields(cluster: Cluster, queue: Queue, r_index: dict[str, int], m_index: dict[str, int],
                   shapes: list[NodeRow]) -> dict[str, Any]:
    """Tenants (cohort, weight) and quota flavors (nominal, borrowing and lending limits, the
    nodes each counts on)."""
    tenant_names = [t.name for t in cluster.tenants]
    for job in [*queue.jobs, *(r.job for r in cluster.running)]:
        if job.tenant not in tenant_names:
            tenant_names.append(job.tenant)  # only when the cluster defines no tenants
    t_index = {t: i for i, t in enumerate(tenant_names)}
    t_by_name = {t.name: t for t in cluster.tenants}
    cohorts: dict[str, int] = {}
    tenant_cohort = np.full(len(tenant_names), -1, dtype=np.int64)
    tenant_weight = np.ones(len(tenant_names))
    for i, name in enumerate(tenant_names):
        t = t_by_name.get(name)
        if t is not None:
            tenant_weight[i] = t.weight
            if t.cohort is not None:
                tenant_cohort[i] = cohorts.setdefault(t.cohort, len(cohorts))
    for c in cluster.cohorts:  # Cohort objects no tenant names directly: inner nodes of a tree
        cohorts.setdefault(c.name, len(cohorts))
    flavors: list[str] = []
    for t in cluster.tenants:
        flavors.extend(f for f in t.quotas if f not in flavors)
    for c in cluster.cohorts:
        flavors.extend(f for f in c.quotas if f not in flavors)
    n_t, n_f = len(tenant_names), len(flavors)
    nominal = np.zeros((n_t, n_f))
    borrow = np.full((n_t, n_f), math.inf)
    lend = np.zeros((n_t, n_f))
    for i, name in enumerate(tenant_names):
        t = t_by_name.get(name)
        for f, fl in enumerate(flavors):
            q = t.quotas.get(fl) if t is not None else None
            if q is None:
                continue
            nominal[i, f] = q.nominal
            if q.borrowing_limit is not None:
                borrow[i, f] = q.borrowing_limit
            lend[i, f] = q.nominal if q.lending_limit is None else min(q.lending_limit, q.nominal)
    no_cohort = tenant_cohort < 0
    borrow[no_cohort] = 0.0
    lend[no_cohort] = 0.0
    cohort_parent = np.full(len(cohorts), -1, dtype=np.int64)
    cohort_nominal = np.zeros((len(cohorts), n_f))
    cohort_borrow = np.full((len(cohorts), n_f), math.inf)
    cohort_lend = np.full((len(cohorts), n_f), math.inf)
    for c in cluster.cohorts:
        k = cohorts[c.name]
        if c.parent is not None:
            cohort_parent[k] = cohorts[c.parent]
        for f, fl in enumerate(flavors):
            q = c.quotas.get(fl)
            if q is not None:
                cohort_nominal[k, f] = q.nominal
                if q.borrowing_limit is not None:
                    cohort_borrow[k, f] = q.borrowing_limit
                if q.lending_limit is not None:
                    cohort_lend[k, f] = q.lending_limit
    cohort_root = np.arange(len(cohorts), dtype=np.int64)
    depth = np.zeros(len(cohorts), dtype=np.int64)
    for k in range(len(cohorts)):
        while cohort_parent[cohort_root[k]] >= 0:
            cohort_root[k] = cohort_parent[cohort_root[k]]
            depth[k] += 1
    cohort_order = np.array(sorted(range(len(cohorts)), key=lambda k: -depth[k]), dtype=np.int64)
    tenant_root = np.where(tenant_cohort >= 0, cohort_root[np.maximum(tenant_cohort, 0)] if len(cohorts) else -1, -1)
    flavor_is_model = np.array([m_index.get(f, -1) for f in flavors], dtype=np.int64)
    counted = [f.split("/", 1)[1] if "/" in f else f for f in flavors]
    flavor_resource = np.array([r_index[c] if m_index.get(f, -1) < 0 and c in r_index else -1
                                for f, c in zip(flavors, counted, strict=True)], dtype=np.int64)
    by_name = {rf.name: rf for rf in cluster.resource_flavors}
    flavor_nodes = np.zeros((len(flavors), len(shapes)), dtype=bool)
    for f, name in enumerate(flavors):
        if "/" in name:
            rf = by_name[name.split("/", 1)[0]]
            flavor_nodes[f] = [all(row[3].labels.get(k) == v for k, v in rf.node_labels.items()) for row in shapes]
        elif flavor_is_model[f] >= 0:
            flavor_nodes[f] = [row[3].devices is not None and row[3].devices.model == name for row in shapes]
        else:
            flavor_nodes[f] = True
    return {"tenant_names": tuple(tenant_names), "tenant_index": t_index, "tenant_cohort": _ro(tenant_cohort),
            "tenant_weight": _ro(tenant_weight), "flavors": tuple(flavors),
            "flavor_is_model": _ro(flavor_is_model), "flavor_resource": _ro(flavor_resource),
            "flavor_nodes": _ro(flavor_nodes),
            "nominal": _ro(nominal), "borrow_limit": _ro(borrow), "lend_limit": _ro(lend),
            "cohort_names": tuple(cohorts), "cohort_parent": _ro(cohort_parent), "cohort_nominal": _ro(cohort_nominal),
            "cohort_borrow": _ro(cohort_borrow), "cohort_lend": _ro(cohort_lend),
            "tenant_root": _ro(np.asarray(tenant_root, dtype=np.int64)), "cohort_root": _ro(cohort_root),
            "cohort_order": _ro(cohort_order),
            "hierarchical": bool(len(cluster.cohorts))}


def _compile_running(cluster: Cluster, m_index: dict[str, int], m_speed: FArray, r_index: dict[str, int],
                     t_index: dict[str, int], level_of: dict[str, int], node_index: dict[str, int],
                     node_dev_start: IArray) -> tuple[JobSpec, ...]:
    """The running jobs, with their placements as node and flat device indices."""
    running: list[JobSpec] = []
    for i, r in enumerate(cluster.running):
        spec = _compile_job(r.job, i, m_index, m_speed, r_index, t_index, level_of, True)
        gidx = spec.group_index
        places = []
        for rp in r.placements:
            n = node_index[rp.node]
            g = spec.groups[gidx[rp.group]]
            share = rp.share if rp.share is not None else (g.share if g.share > 0 else 1.0)
            places.append(RunningPlacement(gidx[rp.group], rp.replica, n,
                                           tuple(int(node_dev_start[n] + d) for d in rp.devices), share))
        running.append(replace(spec, placements=tuple(places), checkpoint_age_s=r.checkpoint_age_s,
                               restart_s=r.restart_s, migratable=r.migratable, started_at=r.started_at))
    return tuple(running)


def tolerates(tolerations: list[Toleration], key: str, value: str | None, effect: str) -> bool:
    """Kubernetes toleration matching for one taint."""
    for t in tolerations:
        if t.effect is not None and t.effect != effect:
            continue
        if t.key is None:
            return True
        if t.key != key:
            continue
        if t.operator == "Exists" or t.value == value:
            return True
    return False
