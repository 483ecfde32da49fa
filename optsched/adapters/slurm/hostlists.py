"""Slurm hostlist expressions (`gpu[001-018,020]`), read and written by python-hostlist (the
`slurm` extra), the parser most Slurm tooling in Python uses."""

from __future__ import annotations

from collections.abc import Iterable

from optsched.adapters.documents import Problems

MAX_HOSTS = 1_000_000
"""The most names one expression may expand to (a 100,000-node cluster has a tenth of it)."""


def expand(expression: str, ref: str, field: str, problems: Problems) -> list[str]:
    """The names of a hostlist expression, in its order; a malformed one is a problem ([])."""
    import hostlist

    if not expression.strip():
        return []
    try:
        names: list[str] = hostlist.expand_hostlist(expression.strip())
    except hostlist.BadHostlist as exc:
        problems.add(ref, field, "hostlist", f"{expression!r} is not a hostlist expression ({exc})")
        return []
    if len(names) > MAX_HOSTS:
        problems.add(ref, field, "out_of_range", f"{expression!r} expands to more than {MAX_HOSTS:,} names")
        return []
    return names


def compress(names: Iterable[str]) -> str:
    """The shortest hostlist expression of `names` (sorted, as Slurm writes them)."""
    import hostlist

    return str(hostlist.collect_hostlist(list(names)))
