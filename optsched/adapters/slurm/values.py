"""The value shapes of Slurm's JSON (data_parser plugins v0.0.39 to v0.0.44, as `scontrol --json`,
`squeue --json` and slurmrestd print them) and of its strings: GRES (`gpu:h100:4(S:0-1)`,
`gpu:h100:4(IDX:0-3)`), TRES (`cpu=2,mem=4G,gres/gpu=1`), memory sizes and hostlists.

Numbers arrive bare (v0.0.39) or as `{"set": true, "infinite": false, "number": 8}` (v0.0.40 on);
states as a string or a list of flags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from optsched.adapters.documents import Problems, raw

MAX_NUMBER = 1e18
"""The largest number read: beyond it a value is an error, not a float that overflows later."""
SIZE_SUFFIX_MIB = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}
"""Slurm's memory suffixes (binary) in MiB; a bare number is MiB (`--mem=4096`)."""
COUNT_SUFFIX = {"": 1.0, "K": 1024.0, "M": 1024.0**2, "G": 1024.0**3, "T": 1024.0**4, "P": 1024.0**5}
"""Suffixes of a GRES count (`tmpsize:7T`), binary as Slurm's `gres.conf` Count."""
_COUNT = re.compile(r"^(?P<count>\d+)(?P<suffix>[KMGTP]?)$")
_IDX = re.compile(r"IDX:(N/A|[0-9,\-]+)", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_SIZE = re.compile(r"^(?P<number>\d+(?:\.\d+)?)(?P<suffix>[KMGTP]?)B?$", re.IGNORECASE)


def number(obj: dict[str, Any], path: str, ref: str, problems: Problems) -> float | None:
    """The number at `path`: bare or in a `{set, infinite, number}` struct; None when absent,
    unset or infinite (Slurm's "no limit"). Anything else is a problem."""
    value = raw(obj, path)
    if value is None:
        return None
    if isinstance(value, dict):
        if not value.get("set", False) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.add(ref, path, "type", f"expected a number, got {type(value).__name__}")
        return None
    if not (-MAX_NUMBER <= value <= MAX_NUMBER):  # also refuses NaN
        problems.add(ref, path, "out_of_range", f"{value!r} is outside +-{MAX_NUMBER:.0E}")
        return None
    return float(value)


def flags(obj: dict[str, Any], path: str, ref: str, problems: Problems) -> list[str]:
    """A state or flag list, upper case: given as a list of strings or one string (v0.0.39)."""
    value = raw(obj, path)
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip().upper() for v in value.replace("+", ",").split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.upper() for v in value]
    problems.add(ref, path, "type", "expected a string or a list of strings")
    return []


def text(obj: dict[str, Any], path: str, ref: str, problems: Problems) -> str:
    """A string field; absent, null or Slurm's `(null)` / `N/A` is empty."""
    value = raw(obj, path)
    if value is None:
        return ""
    if not isinstance(value, str):
        problems.add(ref, path, "type", f"expected a string, got {type(value).__name__}")
        return ""
    return "" if value in ("(null)", "N/A") else value.strip()


def csv(obj: dict[str, Any], path: str, ref: str, problems: Problems) -> list[str]:
    """A comma-separated list given as a string (v0.0.39) or a list of strings (v0.0.40 on)."""
    value = raw(obj, path)
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    problems.add(ref, path, "type", "expected a comma-separated string or a list of strings")
    return []


def size_mib(value: str) -> float | None:
    """A memory size (`512M`, `4G`, `1T`, `4096`) in MiB; None when it is not one."""
    m = _SIZE.match(value.strip())
    if m is None:
        return None
    return float(m["number"]) * SIZE_SUFFIX_MIB[m["suffix"].upper()]


def split_top(value: str) -> list[str]:
    """`value` split at the commas outside parentheses (`gpu:2(IDX:0,2),shard:1` is two entries)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(value):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            out.append(value[start:i])
            start = i + 1
    out.append(value[start:])
    return [v.strip() for v in out if v.strip()]


@dataclass(frozen=True)
class Gres:
    """One GRES entry: `name[:type][:count][(detail)]`."""

    name: str
    type: str | None
    count: float
    detail: str
    """What the parentheses held (`S:0-1`, `IDX:0-3`), '' if none."""

    def indices(self) -> list[int] | None:
        """The device indices of an `IDX:` detail (`0-3`, `0,2`), [] for `IDX:N/A`; None without one."""
        m = _IDX.search(self.detail)
        if m is None:
            return None
        return [] if m[1].upper() == "N/A" else ranges(m[1])


def ranges(value: str) -> list[int] | None:
    """`0-3,6` -> [0, 1, 2, 3, 6]; None when it is not such a list."""
    out: list[int] = []
    for part in value.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            return None
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first or last - first > 4096:
            return None
        out.extend(range(first, last + 1))
    return out


def gres_entries(value: str, ref: str, field: str, problems: Problems) -> list[Gres]:
    """The GRES entries of a node's `gres` or a job's `gres_detail` item (`gpu:h100:4(S:0-1),tmpsize:7T`).
    A count with no number (`gpu:h100`) is 1, as Slurm reads it."""
    out = []
    for entry in split_top(value):
        body, paren, detail = entry.partition("(")
        parts = body.strip().split(":")
        count = _COUNT.match(parts[-1]) if len(parts) > 1 else None
        kinds = parts[1:-1] if count is not None else parts[1:]
        malformed = len(kinds) > 1 or any(not k for k in kinds) or (paren and not detail.endswith(")"))
        if not _NAME.match(parts[0]) or malformed:
            problems.add(ref, field, "gres", f"{entry!r} is not a GRES entry (name[:type][:count])")
            continue
        amount = float(count["count"]) * COUNT_SUFFIX[count["suffix"]] if count is not None else 1.0
        out.append(Gres(name=parts[0], type=kinds[0] if kinds else None, count=amount,
                        detail=detail[:-1] if paren else ""))
    return out


def tres_gres(value: str, ref: str, field: str, problems: Problems) -> list[Gres]:
    """The GRES of a job's `tres_per_node` / `tres_per_job` / `tres_per_task` / `tres_per_socket`
    (`gres/gpu:4`, `gres/gpu:h100:1`, `gres/gpu=2`, `gres:gpu:1`); other TRES (`cpu=2`) are skipped
    (the job's cpu and memory fields carry them)."""
    out = []
    for entry in split_top(value):
        for prefix in ("gres/", "gres:"):
            if entry.startswith(prefix):
                body = entry[len(prefix):]
                break
        else:
            continue
        name_type, eq, count = body.partition("=")
        out.extend(gres_entries(f"{name_type}:{count}" if eq else name_type, ref, field, problems))
    return out


def tres(value: str) -> dict[str, str]:
    """A TRES string (`cpu=2,mem=4G,node=1,gres/gpu=1`) as a map of names to values."""
    out = {}
    for entry in split_top(value):
        key, _, amount = entry.partition("=")
        out[key.strip()] = amount.strip()
    return out


def named(obj: dict[str, Any], kind: str, index: int, problems: Problems) -> tuple[str, str | None]:
    """(`Kind/<name>` as errors name it, the name) of the index-th object of a listing; a missing
    name is a problem (`Kind[i].name`, rule `required`) and comes back as None."""
    name = text(obj, "name", f"{kind}[{index}]", problems)
    if not name:
        problems.add(f"{kind}[{index}]", "name", "required", f"a {kind} needs a name")
        return f"{kind}[{index}]", None
    return f"{kind}/{name}", name
