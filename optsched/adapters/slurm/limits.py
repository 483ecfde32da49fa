"""Slurm's GrpTRES limits -> tenant quotas, when tenants are accounts or QOS.

GrpTRES is "the maximum number of TRES able to be allocated by running jobs in this association
and its children" (data_parser: association `max.tres.total`, QOS `limits.max.tres.total`): a
hard cap, which is a quota without a cohort (usage <= nominal). With `SlurmConfig.tenant_by`
`account`, each account's own association (`sacctmgr show associations --json`: the record with
no user and no partition) caps its tenant; with `qos`, each QOS's limits cap its tenant:
- `gres/gpu` (`SlurmConfig.gpu_gres`) -> the quota key `slurm/gpu`, GPUs of every model (a
  resource flavor `slurm` that every node is in);
- `cpu` -> `cpu` (millicores), `mem` -> `memory` (MiB).
A tenant without a limit on a key gets the cluster's whole amount as nominal (no limit; every
tenant needs a quota for a key some tenant has). Not modelled, and reported in
`SlurmSnapshot.ignored`: a parent account's limit over its children's jobs, limits on other TRES
(`node`, `billing`, licenses), per-user, per-job and per-node limits, and TRES-minutes limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from optsched.adapters.documents import Problems, raw
from optsched.adapters.slurm.config import SlurmConfig
from optsched.adapters.slurm.values import named, text

FLAVOR = "slurm"
"""The resource flavor every node is in: `slurm/gpu` counts GPUs of every model."""
GPU_KEY = f"{FLAVOR}/gpu"


@dataclass
class Limits:
    """Per tenant: its quota nominals by key (`slurm/gpu`, `cpu`, `memory`)."""

    caps: dict[str, dict[str, float]] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


def _tres_list(obj: dict[str, Any], path: str, ref: str, problems: Problems) -> list[dict[str, Any]]:
    value = raw(obj, path)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        problems.add(ref, path, "type", "expected a list of TRES ({type, name, count})")
        return []
    return value


def _caps(tres: list[dict[str, Any]], ref: str, path: str, config: SlurmConfig, problems: Problems,
          ignored: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, t in enumerate(tres):
        kind, name, count = t.get("type"), t.get("name") or "", t.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            problems.add(ref, f"{path}[{k}].count", "type", "expected a non-negative integer count")
            continue
        if kind == "gres" and name == config.gpu_gres:
            out[GPU_KEY] = float(count)
        elif kind == "cpu":
            out["cpu"] = count * 1000.0
        elif kind == "mem":
            out["memory"] = float(count)
        else:
            ignored.append(f"{ref}.{path}: a limit on {kind}{'/' + name if name else ''} is not modelled")
    return out


def read_limits(associations: list[dict[str, Any]], qos: list[dict[str, Any]], config: SlurmConfig,
                problems: Problems) -> Limits:
    """The caps of the tenants `config.tenant_by` names (module docstring)."""
    out = Limits()
    if config.tenant_by == "account":
        parents = {text(a, "parent_account", f"Association[{i}]", problems) for i, a in enumerate(associations)}
        for i, a in enumerate(associations):
            ref = f"Association[{i}]"
            account = text(a, "account", ref, problems)
            if not account or text(a, "user", ref, problems) or text(a, "partition", ref, problems):
                continue  # per-user and per-partition associations: not modelled (below)
            ref = f"Association/{account}"
            caps = _caps(_tres_list(a, "max.tres.total", ref, problems), ref, "max.tres.total", config, problems,
                         out.ignored)
            if caps and account in parents:
                out.ignored.append(f"{ref}.max.tres.total: a limit over its child accounts' jobs is not modelled")
            elif caps:
                out.caps[account] = caps
        users = [a for a in associations if text(a, "user", "Association", problems)
                 and raw(a, "max.tres.total")]
        if users:
            out.ignored.append(f"Association: {len(users)} per-user limit(s) are not modelled")
    elif config.tenant_by == "qos":
        for i, q in enumerate(qos):
            ref, name = named(q, "QOS", i, problems)
            if name is None:
                continue
            caps = _caps(_tres_list(q, "limits.max.tres.total", ref, problems), ref, "limits.max.tres.total",
                         config, problems, out.ignored)
            if caps:
                out.caps[name] = caps
            per = raw(q, "limits.max.tres.per")
            if isinstance(per, dict) and any(per.values()):
                out.ignored.append(f"{ref}.limits.max.tres.per: per-{'/'.join(k for k, v in per.items() if v)} "
                                   "limits are not modelled")
    return out


def quotas(tenants: list[str], limits: Limits, totals: dict[str, float]) -> tuple[dict[str, dict[str, Any]], bool]:
    """(tenant -> its `quotas` document, whether the `slurm` resource flavor is needed): every
    tenant gets every capped key, the cluster's total (`totals`) where its own limit is absent."""
    keys = sorted({k for caps in limits.caps.values() for k in caps})
    out = {t: {k: {"nominal": limits.caps.get(t, {}).get(k, totals.get(k, 0.0))} for k in keys} for t in tenants}
    return out, GPU_KEY in keys
