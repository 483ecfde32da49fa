"""Request bodies of the service: read safely, validated strictly, every problem a field path.

A body is read as UTF-8 JSON with the documents' own protections (`optsched.model.io`: a key given
twice, nesting deeper than `MAX_DEPTH`), then validated as one of the models below in strict mode
(a number given as a string is refused). A problem is an `InputError`; the app answers it with
422 and the field paths (400 when the body is not JSON at all).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from optsched.errors import InputError, InputIssue
from optsched.model.base import Frozen
from optsched.model.io import problems_from_validation, read_document

MAX_TIME_LIMIT_S = 60.0
"""The longest `time_limit` a round request may ask for, seconds (`ServiceSettings` may change it)."""


class NotJson(ValueError):
    """The body is not a UTF-8 JSON object (400, not 422)."""


class StateListing(Frozen):
    """A cluster as Kubernetes objects (API dicts: `kubectl get -o json` items); `PUT /v1/state`
    replaces the state with one."""

    nodes: list[dict[str, Any]]
    """Node objects."""
    pods: list[dict[str, Any]] = Field(default_factory=list)
    """Pod objects, running and pending."""
    priority_classes: list[dict[str, Any]] = Field(default_factory=list)
    """PriorityClass objects (for pods that name a class without a resolved `spec.priority`)."""
    cluster_queues: list[dict[str, Any]] = Field(default_factory=list)
    """Kueue ClusterQueues (tenants, quotas, preemption); with them, LocalQueues name each pod's."""
    local_queues: list[dict[str, Any]] = Field(default_factory=list)
    resource_flavors: list[dict[str, Any]] = Field(default_factory=list)
    cohorts: list[dict[str, Any]] = Field(default_factory=list)
    workload_priority_classes: list[dict[str, Any]] = Field(default_factory=list)
    workloads: list[dict[str, Any]] = Field(default_factory=list)
    """Kueue Workloads (pending ones whose pods do not exist yet are read as jobs)."""
    pod_groups: list[dict[str, Any]] = Field(default_factory=list)
    """Volcano PodGroups (gang sizes, queue, priority)."""
    queues: list[dict[str, Any]] = Field(default_factory=list)
    """Volcano Queues (tenants); give Kueue's objects or Volcano's, not both."""


class KubernetesObjects(StateListing):
    """`POST /v1/rounds`' objects: a listing, and how to read it."""

    config: dict[str, Any] | None = None
    """A `KubeConfig` (topology labels, accelerators, pod-group keys, ...); None: its defaults."""
    now: float | None = None
    """The round's time, seconds since the epoch; None: the server's clock."""


class SlurmOutput(Frozen):
    """`POST /v1/rounds`' Slurm input: what Slurm's commands print with `--json` (each the whole
    response or its list) and the text of topology.conf (docs/slurm.md)."""

    nodes: Any
    """`scontrol show nodes --json`."""
    jobs: Any = None
    """`squeue --json`."""
    partitions: Any = None
    """`scontrol show partitions --json` (partitions that are down hold their jobs)."""
    qos: Any = None
    """`sacctmgr show qos --json` (who may preempt whom)."""
    associations: Any = None
    """`sacctmgr show associations --json` (GrpTRES limits, with `tenant_by: account`)."""
    topology: str | None = None
    """topology.conf (topology/tree or topology/block)."""
    config: dict[str, Any] | None = None
    """A `SlurmConfig` (GRES names and models, tenants, preempt mode); None: its defaults."""
    now: float | None = None
    """The round's time, seconds since the epoch; None: the server's clock."""


class RoundRequest(Frozen):
    """`POST /v1/rounds`: either `cluster` and `queue` documents, `kubernetes` objects, or `slurm` output."""

    cluster: dict[str, Any] | None = None
    """A Cluster document (docs/format.md)."""
    queue: dict[str, Any] | None = None
    """A Queue document."""
    kubernetes: KubernetesObjects | None = None
    """Kubernetes objects in place of the documents; the answer then also carries `actions`."""
    slurm: SlurmOutput | None = None
    """Slurm's JSON in place of the documents; the answer then also carries `actions` (Slurm commands)."""
    solver: str = "auto"
    """A solver name (`optsched solvers`)."""
    objective: Any = None
    """An objective (weights or a lexicographic order, docs/metrics.md); None: the default."""
    time_limit: float = 1.0
    """Seconds for reading the documents, compiling and solving; the answer (summary, actions) is built after."""
    seed: int = 0
    """The solver's seed."""


class StateEvents(Frozen):
    """`POST /v1/state/events`: watch events, applied in order."""

    events: list[dict[str, Any]]
    """`{"type": "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK", "object": {...}}` each."""


def read_body(body: bytes) -> dict[str, Any]:
    """The body as a JSON object; raises `NotJson` or `InputError`."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotJson(f"the body is not UTF-8: {exc}") from None
    if not text.lstrip().startswith("{"):  # never let read_document take the text for a file path
        raise NotJson("the body must be a JSON object")
    try:
        return read_document(text)  # JSON (it starts with "{"), duplicate keys and depth refused
    except InputError as exc:
        raise prefixed(exc, "<body>") from None


def parse(model: type[Frozen], data: dict[str, Any], prefix: str = "") -> Any:
    """`data` validated as `model` (strict JSON mode); problems with paths under `prefix`."""
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as err:
        raise InputError([InputIssue(f"{prefix}{i.path}" if i.path != "<document>" else prefix.rstrip(".")
                                     or "<body>", i.rule, i.message)
                          for i in problems_from_validation(err)]) from None


def prefixed(exc: InputError, prefix: str) -> InputError:
    """The same problems, their paths under `prefix` (`cluster.nodes[3]...`)."""
    return InputError([InputIssue(prefix if i.path == "<document>" else
                                  i.path if prefix == "<body>" else f"{prefix}.{i.path}", i.rule, i.message)
                       for i in exc.problems])
