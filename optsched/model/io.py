"""Load and dump Cluster, Queue and Plan documents as JSON or YAML.

Loading validates fields (pydantic) and, for clusters and queues, cross-references; every
problem becomes one entry of a single `InputError`, never a raw pydantic or YAML traceback.
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

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml (C) when available, else the pure-Python loader
M = TypeVar("M", bound=BaseModel)
Source = str | Path | dict[str, Any]


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
        return source
    text: str
    is_json = False
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and len(source) < 4096
                                    and not source.lstrip().startswith(("{", "["))):
        path = Path(source)
        try:
            text = path.read_text()
            is_json = path.suffix == ".json"
        except OSError as exc:
            raise InputError([InputIssue(str(path), "unreadable", str(exc))]) from None
    else:
        text = str(source)
    try:
        if is_json or text.lstrip().startswith("{"):
            data = json.loads(text)
        else:
            data = yaml.load(text, Loader=_Loader)
    except json.JSONDecodeError as exc:
        raise InputError([InputIssue("<document>", "syntax", str(exc))]) from None
    except yaml.YAMLError as exc:
        raise InputError([InputIssue("<document>", "syntax", str(exc).replace("\n", " "))]) from None
    if not isinstance(data, dict):
        raise InputError([InputIssue("<document>", "type", f"expected a mapping, got {type(data).__name__}")])
    return data


def parse_document(model: type[M], source: Source) -> M:
    """Read `source` and validate it as `model`; every problem becomes one `InputError`."""
    try:
        return model.model_validate(read_document(source))
    except ValidationError as err:
        raise InputError(problems_from_validation(err)) from None


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
