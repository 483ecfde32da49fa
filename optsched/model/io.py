"""Load and dump Cluster, Queue and Plan documents as JSON or YAML.

Loading validates fields (pydantic, strict: no string-to-number or string-to-bool coercion) and,
for clusters and queues, cross-references; every problem becomes one entry of a single
`InputError`, never a raw pydantic or YAML traceback. Refused before validation: text that is not
UTF-8, a mapping with a key given twice (JSON or YAML; neither silently keeps the last), a
mapping key that is not a string, a value JSON has no type for (YAML dates, binary), and
documents nested deeper than `MAX_DEPTH`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from optsched.errors import InputError, InputIssue
from optsched.model.cluster import Cluster
from optsched.model.plan import Plan
from optsched.model.queue import Queue
from optsched.model.references import validate_cluster, validate_queue

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml (C) when available
M = TypeVar("M", bound=BaseModel)
Source = str | Path | dict[str, Any]

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists a document may have (the deepest real one is about 8)."""


class DuplicateKey(ValueError):
    """A mapping gives one key twice."""


class _UniqueKeyLoader(_BaseLoader):  # type: ignore[valid-type, misc]
    """YAML's safe loader, refusing a mapping key given twice (PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base constructor reports it
                break
            if duplicate:
                mark = key_node.start_mark
                raise DuplicateKey(f"key {key!r} given twice (line {mark.line + 1}, column {mark.column + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _UniqueKeyLoader.construct_mapping)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object hook: a mapping, refusing a key given twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"key {key!r} given twice")
        out[key] = value
    return out


def _walk_problems(data: Any, limit: int) -> list[InputIssue]:
    """Nesting deeper than `limit` (lists and mappings), or a mapping key that is not a string
    (YAML allows `1:` or `true:`; JSON would turn them into strings silently). No recursion."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return [InputIssue("<document>", "too_deep", f"nested deeper than {limit} levels")]
            if isinstance(item, dict):
                bad = next((k for k in item if not isinstance(k, str)), None)
                if bad is not None:
                    return [InputIssue("<document>", "key_type", f"mapping key {bad!r} is not a string: quote it")]
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return []


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<document>"


def problems_from_validation(err: ValidationError) -> list[InputIssue]:
    """Translate pydantic's errors into field-path problems."""
    return [InputIssue(_loc(tuple(e["loc"])), e["type"], e["msg"]) for e in err.errors()]


def read_document(source: Source) -> dict[str, Any]:
    """Parse a path, a JSON/YAML text or a dict into a mapping; syntax errors become InputError."""
    if isinstance(source, dict):
        problems = _walk_problems(source, MAX_DEPTH)
        if problems:
            raise InputError(problems)
        return source
    text: str
    is_json = False
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and len(source) < 4096
                                    and not source.lstrip().startswith(("{", "["))):
        path = Path(source)
        try:
            text = path.read_bytes().decode("utf-8")
            is_json = path.suffix == ".json"
        except OSError as exc:
            raise InputError([InputIssue(str(path), "unreadable", str(exc))]) from None
        except UnicodeDecodeError as exc:
            raise InputError([InputIssue(str(path), "encoding", f"not UTF-8 text: {exc}")]) from None
    else:
        text = str(source)
    try:
        if is_json or text.lstrip().startswith("{"):
            data = json.loads(text, object_pairs_hook=_unique_pairs)
        else:
            data = yaml.load(text, Loader=_UniqueKeyLoader)
    except DuplicateKey as exc:
        raise InputError([InputIssue("<document>", "duplicate_key", str(exc))]) from None
    except RecursionError:
        raise InputError([InputIssue("<document>", "too_deep", f"nested deeper than {MAX_DEPTH} levels")]) from None
    except json.JSONDecodeError as exc:
        raise InputError([InputIssue("<document>", "syntax", str(exc))]) from None
    except yaml.YAMLError as exc:
        raise InputError([InputIssue("<document>", "syntax", str(exc).replace("\n", " "))]) from None
    if not isinstance(data, dict):
        raise InputError([InputIssue("<document>", "type", f"expected a mapping, got {type(data).__name__}")])
    problems = _walk_problems(data, MAX_DEPTH)
    if problems:
        raise InputError(problems)
    return data


def parse_document(model: type[M], source: Source) -> M:
    """Read `source` and validate it as `model` in strict mode (a number given as a string, or
    ``"yes"`` for a bool, is refused); every problem becomes one `InputError`."""
    data = read_document(source)
    try:
        text = json.dumps(data, default=_not_json)
    except TypeError as exc:
        raise InputError([InputIssue("<document>", "type", str(exc))]) from None
    try:  # JSON-mode strict validation: lists are accepted for tuples, strings never for numbers
        return model.model_validate_json(text, strict=True)
    except ValidationError as err:
        raise InputError(problems_from_validation(err)) from None


def _not_json(value: Any) -> Any:
    """json.dumps' fallback: YAML values JSON has no type for (dates, binary) are refused."""
    raise TypeError(f"a {type(value).__name__} value ({value!r}) is not document data: quote it as a string")


def load_cluster(source: Source) -> Cluster:
    """Load and fully validate a cluster document."""
    cluster = parse_document(Cluster, source)
    validate_cluster(cluster)
    return cluster


def load_queue(source: Source, cluster: Cluster | None = None) -> Queue:
    """Load a queue document; with `cluster`, also check its references against it."""
    queue = parse_document(Queue, source)
    if cluster is not None:
        validate_queue(queue, cluster)
    return queue


def load_plan(source: Source) -> Plan:
    """Load a plan document (its rules are checked by `optsched.check`, not here)."""
    return parse_document(Plan, source)


def dump(doc: BaseModel, path: str | Path | None = None, *, fmt: str | None = None,
         exclude_defaults: bool = False) -> str:
    """Serialise a document to JSON (default) or YAML (`fmt="yaml"` or a .yaml/.yml path)."""
    if fmt is None:
        fmt = "yaml" if path is not None and str(path).endswith((".yaml", ".yml")) else "json"
    data = doc.model_dump(mode="json", exclude_defaults=exclude_defaults)
    text = yaml.safe_dump(data, sort_keys=False) if fmt == "yaml" else json.dumps(data, indent=1)
    if path is not None:
        Path(path).write_text(text)
    return text
