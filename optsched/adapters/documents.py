"""Documents read from another scheduler (Kubernetes objects, Slurm's JSON), and the problems
found in them, each reported against the object and field it comes from, raised together as one
`InputError`. Shared by the adapters; nothing here imports a scheduler's client."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from optsched.errors import InputError, InputIssue

if TYPE_CHECKING:
    from optsched.model.cluster import Cluster
    from optsched.model.queue import Job, Queue

M = TypeVar("M", bound=BaseModel)


class Problems:
    """Every problem found while reading objects, raised together as one `InputError`."""

    def __init__(self) -> None:
        self.issues: list[InputIssue] = []

    def add(self, ref: str, field: str, rule: str, message: str) -> None:
        """Record that `field` of the object `ref` breaks `rule`."""
        self.issues.append(InputIssue(f"{ref}.{field}" if field else ref, rule, message))

    def raise_if_any(self) -> None:
        """Raise the `InputError` of every recorded problem, if any."""
        if self.issues:
            raise InputError(self.issues)

    def build(self, model: type[M], data: dict[str, Any], ref: str, field: str) -> M | None:
        """`model` validated from `data`; its validation errors recorded against `ref.field`."""
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            for e in exc.errors():
                where = ".".join(str(p) for p in e["loc"])
                self.add(ref, f"{field}.{where}" if where else field, e["type"], e["msg"])
            return None


def raw(obj: dict[str, Any], path: str) -> Any:
    """The value at the dotted `path` of `obj`, None when a step is absent (no type check)."""
    value: Any = obj
    for step in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def get(obj: dict[str, Any], path: str, kind: type | tuple[type, ...], ref: str, problems: Problems,
        default: Any = None) -> Any:
    """The value at the dotted `path` of `obj`, `default` when a step is absent or null; a value of
    another type than `kind` is recorded as a problem (and `default` returned)."""
    value = raw(obj, path)
    if value is None:
        return default
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        problems.add(ref, path, "type", f"expected {_names(kind)}, got {type(value).__name__}")
        return default
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _names(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _as_tuple(kind))


def items(value: Any, ref: str, field: str, problems: Problems) -> Iterable[tuple[str, dict[str, Any]]]:
    """(`field[i]`, item) for the mappings of a list; other entries are problems."""
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(ref, field, "type", "expected a list")
        return []
    out = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            out.append((f"{field}[{i}]", item))
        else:
            problems.add(ref, f"{field}[{i}]", "type", "expected a mapping")
    return out


def translate(error: InputError, names: Callable[[str], str | None]) -> InputError:
    """`error` with each path's leading document element (`jobs[3]`, `nodes[1]`) replaced by the
    object it was read from, where `names` knows it."""
    out = []
    for issue in error.problems:
        head, sep, rest = issue.path.partition("].")
        ref = names(head + "]") if sep else names(issue.path)
        if ref is None:
            out.append(issue)
        else:
            out.append(InputIssue(f"{ref}.{rest}" if sep else ref, issue.rule, issue.message))
    return InputError(out)


def indexed_names(refs: dict[str, list[str]]) -> Callable[[str], str | None]:
    """`translate`'s names for a document built from objects in order: `nodes[3]` -> `refs["nodes"][3]`."""

    def names(head: str) -> str | None:
        for prefix, items in refs.items():
            if head.startswith(f"{prefix}[") and head.endswith("]"):
                return items[int(head[len(prefix) + 1:-1])]
        return None

    return names


def validate_read_cluster(cluster: Cluster, refs: dict[str, list[str]]) -> None:
    """`validate_cluster`, its problems naming the objects each document element was read from."""
    from optsched.model.references import validate_cluster

    try:
        validate_cluster(cluster)
    except InputError as exc:
        raise translate(exc, indexed_names(refs)) from None


def validate_read_queue(queue: Queue, cluster: Cluster, job_refs: list[str]) -> None:
    """`validate_queue`, its problems naming the object each job was read from."""
    from optsched.model.references import validate_queue

    try:
        validate_queue(queue, cluster)
    except InputError as exc:
        raise translate(exc, indexed_names({"jobs": job_refs})) from None


def split_unsatisfiable(jobs: Iterable[Job], cluster: Cluster) -> tuple[list[Job], list[tuple[Job, str]]]:
    """(jobs some node could hold, [(job, why no node could ever hold one replica)]): a scheduler
    keeps the latter pending, so an adapter holds them with their reason rather than refusing the round."""
    from optsched.model.references import distinct_shapes, job_problems

    shapes = distinct_shapes(cluster)  # once: it is the cost of the can-it-ever-fit test
    ok, never = [], []
    for job in jobs:
        unsatisfiable = [i for i in job_problems(job, "job", cluster, shapes=shapes) if i.rule == "unsatisfiable"]
        if unsatisfiable:
            never.append((job, "no node could ever hold one replica: " + "; ".join(i.message for i in unsatisfiable)))
        else:
            ok.append(job)
    return ok, never
