"""Slurm QOS (`sacctmgr show qos --json`, slurmrestd `GET /slurmdb/v0.0.4x/qos`) -> who may preempt whom.

Under `PreemptType=preempt/qos` a job may preempt running jobs whose QOS its own QOS lists in
`Preempt=`; the preempted job's QOS `PreemptMode` says how (its `DISABLED`, the default, falls
back to the cluster's `PreemptMode`: `SlurmConfig.preempt_mode`), and `PreemptExemptTime` how long
it runs first. optsched's rule is by priority within a tenant (`within_tenant: lower_priority`),
so each QOS gets a *preemption level*: 0 for a QOS that preempts nothing, else one more than the
highest level it preempts. A job's priority is 100 x its QOS level. Every pair a QOS lists is
then allowed; a pair the lists leave out but the levels order (A lists B, B lists C, A does not
list C) is allowed too, and is reported in `Snapshot.ignored`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from optsched.adapters.documents import Problems
from optsched.adapters.slurm.config import SlurmConfig
from optsched.adapters.slurm.values import flags, named, number

LEVEL_PRIORITY = 100
"""optsched priority per QOS preemption level (admitted value doubles per level: problem.priority_weight)."""
Mode = Literal["requeue", "cancel", "off"]


@dataclass
class QosRead:
    """Preemption levels, modes and exemption times per QOS name."""

    level: dict[str, int] = field(default_factory=dict)
    mode: dict[str, Mode] = field(default_factory=dict)
    exempt_s: dict[str, float] = field(default_factory=dict)
    preemptable: set[str] = field(default_factory=set)
    """QOS some QOS lists in `Preempt=`."""
    ignored: list[str] = field(default_factory=list)

    def priority(self, qos: str) -> int:
        """The optsched priority of a job in `qos` (0 for a QOS not given)."""
        return LEVEL_PRIORITY * self.level.get(qos, 0)


def _mode(given: list[str], config: SlurmConfig) -> Mode:
    if "REQUEUE" in given:
        return "requeue"
    if "CANCEL" in given:
        return "cancel"
    if "SUSPEND" in given or "GANG" in given:
        return "off"  # a suspended job keeps its memory: nothing is freed for another job
    return config.preempt_mode


def read_qos(objects: list[dict[str, Any]], config: SlurmConfig, problems: Problems) -> QosRead:
    """Read every QOS (name, preempt.list, preempt.mode, preempt.exempt_time)."""
    out = QosRead()
    lists: dict[str, list[str]] = {}
    for i, obj in enumerate(objects):
        ref, name = named(obj, "QOS", i, problems)
        if name is None:
            continue
        if name in lists:
            problems.add(ref, "name", "duplicate_id", f"QOS {name!r} given twice")
            continue
        listed = obj.get("preempt", {}).get("list") if isinstance(obj.get("preempt"), dict) else None
        if listed is not None and not (isinstance(listed, list) and all(isinstance(q, str) for q in listed)):
            problems.add(ref, "preempt.list", "type", "expected a list of QOS names")
            listed = []
        lists[name] = list(listed or [])
        out.mode[name] = _mode(flags(obj, "preempt.mode", ref, problems), config)
        exempt = number(obj, "preempt.exempt_time", ref, problems)
        out.exempt_s[name] = config.preempt_exempt_s if exempt is None else exempt
    for name, listed in lists.items():
        for q in listed:
            if q not in lists:
                problems.add(f"QOS/{name}", "preempt.list", "unknown_reference", f"QOS {q!r} was not given")
    if problems.issues:
        return out

    def level(name: str, path: tuple[str, ...]) -> int:
        if name in out.level:
            return out.level[name]
        if name in path:
            problems.add(f"QOS/{name}", "preempt.list", "cycle",
                         "QOS preempt one another: " + " -> ".join((*path, name)))
            return 0
        got = 1 + max((level(q, (*path, name)) for q in lists[name]), default=-1)
        out.level[name] = got
        return got

    for name in lists:
        level(name, ())
    out.preemptable = {q for listed in lists.values() for q in listed}
    for a, listed in lists.items():
        extra = sorted(b for b in out.preemptable if out.level[b] < out.level[a] and b not in listed)
        if extra:
            out.ignored.append(f"QOS/{a}.preempt.list: by preemption level it may also preempt {', '.join(extra)}")
    return out
