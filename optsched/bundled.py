"""The data that ships inside the package, found by name.

`optsched/data/` holds the accelerator catalogue (`accelerators.yaml`), the reference clusters
(`clusters/`), the workload mixes (`workloads/`) and the capacity planner's examples
(`capacity/`). It is package data: a wheel installed with a plain ``pip install`` carries it, so
``optsched demo``, ``optsched generate`` and ``optsched.reference_cluster("dgx-h100-1k")`` work
outside the repository. Set ``OPTSCHED_MODELS`` to a folder of the same layout to use other data.

Wherever a command or function asks for a cluster, a mix or a capacity document it takes a name
(the file's stem under its folder here) or a path; `resolve` decides which, and an unknown name
is an `InputError` that lists the names there are.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from optsched.errors import InputError, InputIssue

if TYPE_CHECKING:
    from optsched.model import Cluster

DATA_DIR = Path(os.environ.get("OPTSCHED_MODELS") or str(files("optsched") / "data"))
"""Where the catalogue, the reference clusters, the workload mixes and the capacity examples live."""

Kind = Literal["cluster", "mix", "capacity"]
FOLDERS: dict[str, str] = {"cluster": "clusters", "mix": "workloads", "capacity": "capacity"}
"""Kind of document -> its folder under DATA_DIR."""

SUFFIXES = (".yaml", ".yml", ".json")


def names(kind: Kind) -> list[str]:
    """The bundled documents of one kind, by name (sorted)."""
    return sorted(p.stem for p in (DATA_DIR / FOLDERS[kind]).glob("*.yaml"))


def looks_like_path(name_or_path: str | Path) -> bool:
    """A path (a Path, a file suffix or a folder separator), not a bundled name."""
    text = str(name_or_path)
    return isinstance(name_or_path, Path) or text.endswith(SUFFIXES) or os.sep in text or "/" in text


def resolve(kind: Kind, name_or_path: str | Path, field: str | None = None) -> Path:
    """The file a name or a path means. A path is returned as given (its loader reports it if it is
    unreadable); a name must be one of `names(kind)`, else InputError at `field` (default: `kind`)."""
    if looks_like_path(name_or_path):
        return Path(name_or_path)
    path = DATA_DIR / FOLDERS[kind] / f"{name_or_path}.yaml"
    if not path.is_file():
        raise InputError([InputIssue(field or kind, "unknown_reference",
                                     f"{name_or_path!r} is neither a file nor a bundled {kind}; "
                                     f"bundled: {names(kind)}")])
    return path


def reference_cluster(name_or_path: str | Path) -> Cluster:
    """A bundled reference cluster by name (`names("cluster")`), or a cluster document by path."""
    from optsched.model import load_cluster

    return load_cluster(resolve("cluster", name_or_path))
