"""Kubernetes objects as plain API dicts, their quantities in optsched's units, and problems
reported against the object and field they come from.

Objects arrive either as the official client's models (`kubernetes.client.V1Node`, ...) or as the
dicts `kubectl get -o json` and `CustomObjectsApi` return. Models are turned into the same
camelCase dicts by the client's own serializer, so one reader serves both.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from optsched.adapters.documents import Problems, get

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


def object_version(obj: Any) -> tuple[Any, Any, Any, str] | None:
    """(namespace, name, uid, `metadata.resourceVersion`) of an API dict: what identifies this
    version of the object (the API server makes a new resourceVersion for every change); None
    without a resourceVersion."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not isinstance(rv, str) or not rv:
        return None
    return meta.get("namespace"), meta.get("name"), meta.get("uid"), rv


def string_map(value: Any, ref: str, field: str, problems: Problems) -> dict[str, str]:
    """A map of strings to strings (labels, annotations, a node selector)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        problems.add(ref, field, "type", "expected a map of strings to strings")
        return {}
    return value


@functools.lru_cache(maxsize=4096)
def _parsed(value: str | int | float) -> Decimal:
    """`parse_quantity(value)`, kept: a cluster repeats a few quantities thousands of times (every
    node's `8` GPUs, every pod's `64Gi`), and the import alone cost 5 us a call in a profile."""
    from kubernetes.utils import parse_quantity

    return Decimal(parse_quantity(value))


def quantity(value: Any, ref: str, field: str, problems: Problems) -> Decimal | None:
    """A resource quantity (`500m`, `64Gi`, `8`) as Kubernetes parses it (`parse_quantity`)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        problems.add(ref, field, "type", f"expected a quantity, got {type(value).__name__}")
        return None
    try:
        amount = _parsed(value)
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
