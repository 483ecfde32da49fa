"""Kubernetes objects as plain API dicts, their quantities in optsched's units, and problems
reported against the object and field they come from.

Objects arrive either as the official client's models (`kubernetes.client.V1Node`, ...) or as the
dicts `kubectl get -o json` and `CustomObjectsApi` return. Models are turned into the same
camelCase dicts by the client's own serializer, so one reader serves both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from optsched.errors import InputError, InputIssue

M = TypeVar("M", bound=BaseModel)

MIB = Decimal(2**20)
MAX_QUANTITY = Decimal("1e18")
"""The largest quantity read (an exabyte of memory, 10^15 cores): beyond it a value is an error
rather than a float that overflows."""
BYTE_RESOURCES = ("memory", "ephemeral-storage")
"""Resources counted in bytes by Kubernetes; optsched holds them in MiB (so do `hugepages-*`)."""


def as_dict(obj: Any) -> dict[str, Any]:
    """The API dict of a Kubernetes object: a dict as given, a client model through the client's
    serializer (camelCase keys, timestamps as ISO strings)."""
    if isinstance(obj, dict):
        return obj
    if hasattr(obj, "openapi_types") and hasattr(obj, "attribute_map"):
        from kubernetes.client import ApiClient

        out = ApiClient().sanitize_for_serialization(obj)
        if isinstance(out, dict):
            return out
    raise TypeError(f"not a Kubernetes object (a client model or a dict): {type(obj).__name__}")


def reference(obj: dict[str, Any], kind: str) -> str:
    """`Kind/namespace/name` (`Kind/name` for a cluster-scoped object), as errors name it."""
    given = obj.get("metadata")
    meta: dict[str, Any] = given if isinstance(given, dict) else {}
    name = meta.get("name") or meta.get("generateName") or "?"
    namespace = meta.get("namespace")
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def named(obj: dict[str, Any], kind: str, problems: Problems) -> tuple[str, str | None]:
    """(`Kind/namespace/name` as errors name it, the object's name); a missing name is recorded
    as a problem (`metadata.name`, rule `required`) and comes back as None."""
    ref = reference(obj, kind)
    name = get(obj, "metadata.name", str, ref, problems)
    if not name:
        problems.add(ref, "metadata.name", "required", f"a {kind} needs a name")
        return ref, None
    return ref, name


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


def string_map(value: Any, ref: str, field: str, problems: Problems) -> dict[str, str]:
    """A map of strings to strings (labels, annotations, a node selector)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        problems.add(ref, field, "type", "expected a map of strings to strings")
        return {}
    return value


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


def quantity(value: Any, ref: str, field: str, problems: Problems) -> Decimal | None:
    """A resource quantity (`500m`, `64Gi`, `8`) as Kubernetes parses it (`parse_quantity`)."""
    from kubernetes.utils import parse_quantity

    if isinstance(value, bool) or not isinstance(value, str | int | float):
        problems.add(ref, field, "type", f"expected a quantity, got {type(value).__name__}")
        return None
    try:
        amount = parse_quantity(value)
    except (ValueError, ArithmeticError) as exc:
        problems.add(ref, field, "quantity", f"{value!r} is not a Kubernetes quantity ({exc})")
        return None
    if not amount.is_finite() or amount < 0:
        problems.add(ref, field, "quantity", f"{value!r} is not a non-negative quantity")
        return None
    if amount > MAX_QUANTITY:
        problems.add(ref, field, "out_of_range", f"{value!r} is more than {MAX_QUANTITY:.0E}")
        return None
    return Decimal(amount)


def in_units(resource: str, amount: Decimal) -> float:
    """A Kubernetes amount in optsched's unit: cpu in millicores, memory, ephemeral storage and
    hugepages in MiB, every other resource as counted."""
    if resource == "cpu":
        return float(amount * 1000)
    if resource in BYTE_RESOURCES or resource.startswith("hugepages-"):
        return float(amount / MIB)
    return float(amount)


def timestamp(value: Any, ref: str, field: str, problems: Problems) -> float | None:
    """An RFC 3339 timestamp (`2024-05-01T10:00:00Z`) or a datetime, as seconds since the epoch."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    problems.add(ref, field, "timestamp", f"{value!r} is not an RFC 3339 time")
    return None


def first_key(keys: Iterable[str], *maps: dict[str, str]) -> str | None:
    """The value of the first of `keys` found in any of `maps` (labels, then annotations)."""
    for key in keys:
        for m in maps:
            if m.get(key):
                return m[key]
    return None


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
