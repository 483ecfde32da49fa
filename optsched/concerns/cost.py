"""Concern: what the plan costs per hour, and the spot risk it takes (cost term).

- `cost` ($/h) = `node_cost` + `spot_loss`:
  - `node_cost`: on-demand and spot nodes that host work (kept or placed) at their pool price,
    plus every provisioned node at its pool price. Reserved nodes are paid whether used or not:
    they are sunk, and reported apart (`reserved_idle_cost`: $/h of reserved nodes left empty).
    On-demand and spot nodes left empty are not counted: the platform can release them
    (`releasable_nodes`, `releasable_cost` $/h); consolidating work onto fewer of them is what
    lowers `node_cost`.
  - `spot_loss`: the expected interruption loss of the round's spot placements, priced: over
    placed replicas of `spot: allowed` jobs on spot nodes, the replica's lost GPU-hours per hour
    (below) x the node's $/GPU-hour (its price / its devices), i.e. what re-running the lost work
    there costs. `spot: preferred` jobs are not charged: their owners take the risk (the job
    checkpoints for it), so where cost is optimised spot's price alone decides for them, while
    an `allowed` job goes to spot only where spot's price plus its expected loss is the cheaper.
- `spot_risk` (GPU-hours lost per hour, every job): over placed replicas on spot nodes, the
  pool's interruption rate x the replica's GPUs x (half the job's checkpoint interval + restart
  time) / 3600. CPU-only replicas count 0 (as in GPU-hours).

`chargeback` attributes the $/h to tenants, per pool, so that a platform can bill from the plan:
a node that hosts work (reserved, on-demand, spot or provisioned) is charged to the tenants on it
in proportion to what they use of it (GPUs, device shares counted; CPU millicores where no GPU is
used; replicas where neither is); the idle reserved nodes' $/h is shared in proportion to the $/h
each tenant is charged for the reserved nodes it uses, and left `unattributed` when no one uses
any.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from optsched.problem import PRICING_CODES, GroupSpec, JobSpec, Problem
from optsched.view import PlanView

if TYPE_CHECKING:
    from optsched.roundmodel.variables import RoundModel

COST_SCALE = 1000
"""The CP-SAT cost term counts milli-dollars per hour (node prices rounded to 0.001 $/h)."""


def _hosting(p: Problem, used: np.ndarray, dev_used: np.ndarray) -> np.ndarray:
    """Nodes with any resource or device in use (bool per node)."""
    busy: np.ndarray = np.any(used > 0, axis=1)
    return busy | (np.bincount(p.dev_node, weights=dev_used > 0, minlength=p.n_nodes) > 0)


def spot_loss_per_replica(p: Problem, job: JobSpec, group: GroupSpec, node: int) -> tuple[float, float]:
    """(GPU-hours lost per hour, $/h charged to the round's cost) of one replica of `group` on
    `node`: both 0 off spot nodes; the $/h is 0 for `spot: preferred` jobs (module docstring)."""
    if not p.node_spot[node]:
        return 0.0, 0.0
    lost_s = job.spec.checkpoint_interval_s / 2 + job.restart_s
    risk = float(p.pool_rate[p.node_pool[node]]) * group.gpu * lost_s / 3600
    devices = int(p.node_dev_count[node])
    if job.spot == "preferred" or not devices:
        return risk, 0.0
    return risk, risk * float(p.node_price[node]) / devices


def term(view: PlanView) -> dict[str, float]:
    """`cost` (with its parts `node_cost` and `spot_loss`), `reserved_idle_cost`, `spot_risk`, and the
    healthy on-demand and spot nodes the plan leaves without work (`releasable_nodes`, their
    `releasable_cost` $/h: what releasing them saves, not in `cost`)."""
    p = view.problem
    if not len(p.pool_names):
        return {"cost": 0.0, "node_cost": 0.0, "spot_loss": 0.0, "reserved_idle_cost": 0.0, "spot_risk": 0.0,
                "releasable_nodes": 0.0, "releasable_cost": 0.0}
    hosting = _hosting(p, view.ledger.used, view.ledger.dev_used)
    real = ~p.node_provisioned
    has_pool = p.node_pool >= 0
    pricing = np.where(has_pool, p.pool_pricing[np.maximum(p.node_pool, 0)], -1)
    reserved = pricing == PRICING_CODES["reserved"]
    cost = float(p.node_price[hosting & real & has_pool & ~reserved].sum())
    cost += sum(count * float(p.pool_price[pool]) for pool, count in view.provisioned.items())
    idle = float(p.node_price[~hosting & real & reserved].sum())
    releasable = ~hosting & real & has_pool & ~reserved & p.node_healthy
    risk = loss = 0.0
    for rep in view.replicas:
        if p.node_spot[rep.node]:
            gpu_h, dollars = spot_loss_per_replica(p, rep.job, rep.job.groups[rep.group], rep.node)
            risk += gpu_h
            loss += dollars
    return {"cost": cost + loss, "node_cost": cost, "spot_loss": loss, "reserved_idle_cost": idle, "spot_risk": risk,
            "releasable_nodes": float(releasable.sum()), "releasable_cost": float(p.node_price[releasable].sum())}


def _uses_something(group: GroupSpec) -> bool:
    """A replica of `group` makes its node a hosting one (it requests a resource or a device)."""
    return group.uses_devices or bool(np.any(group.req > 0))


def provisioning_cpsat(r: RoundModel) -> None:
    """CP-SAT: which provisioning slots the round creates (docs/formulation.md K3-K4), when slots
    are candidates (`r.provision`). ``u[v]`` (bool) for each slot with a key: every replica count
    on v forces it (``y[k] <= ub x u[v]``), and a pool's slots are created in order
    (``u[new-(i+1)] <= u[new-i]``, a slot without keys counting 0), so the plan provisions
    exactly ``sum u`` nodes per pool (``<pool>/new-0`` ..). In a neighbourhood, the slots up to the
    last one that work outside the model uses are created anyway (`r.slots_created`, a constant
    of the cost); the order binds the slots after them."""
    if not r.provision:
        return
    p = r.p
    hosting = _hosting(p, r.base.used, r.base.dev_used)
    for q in range(len(p.pool_names)):
        slots = np.flatnonzero(p.node_provisioned & (p.node_pool == q)).tolist()
        fixed = [i for i, v in enumerate(slots) if hosting[v]]  # used by work outside the model
        created = r.slots_created[q] = fixed[-1] + 1 if fixed else 0
        slots = slots[created:]
        for v in slots:
            if r.by_node.get(v):
                u = r.slot_used[v] = r.model.new_bool_var(f"u[{v}]")
                for k in r.by_node[v]:
                    r.model.add(r.y[k] <= r.model_ub(r.y[k]) * u)
        for before, after in itertools.pairwise(slots):
            if after in r.slot_used:
                if before in r.slot_used:
                    r.model.add(r.slot_used[after] <= r.slot_used[before])
                else:
                    r.model.add(r.slot_used[after] == 0)


def cpsat(r: RoundModel) -> None:
    """CP-SAT: the `cost` term, built only when the objective names it (docs/formulation.md K1).

    ``h[v]`` (bool) is 1 when node v hosts work: every replica count of a group that uses
    something (``y[j, g, v] <= ub x h[v]``) and every kept evictable job on v (``keep[k] <= h[v]``)
    force it. Cost = sum over non-reserved priced nodes of price_v x h[v], plus the nodes that
    host running jobs the round cannot evict (a constant), plus every created provisioning slot
    (``price_v x u[v]``, K4), plus the priced spot loss of each replica count on a spot node
    (``loss_k x y[k]``, K5, `spot_loss_per_replica`).
    """
    if "cost" not in r.wanted:
        return
    p = r.p
    if not len(p.pool_names):
        r.add_term("cost", 0, COST_SCALE, maximise=False)
        r.term_ub["cost"] = 0
        return
    has_pool = p.node_pool >= 0
    pricing = np.where(has_pool, p.pool_pricing[np.maximum(p.node_pool, 0)], -1)
    paid = has_pool & (pricing != PRICING_CODES["reserved"]) & ~p.node_provisioned & (p.node_price > 0)
    hosting = _hosting(p, r.base.used, r.base.dev_used)
    price = np.rint(p.node_price * COST_SCALE).astype(np.int64)
    constant = int(price[paid & hosting].sum())
    constant += sum(n * int(np.rint(p.pool_price[q] * COST_SCALE)) for q, n in r.slots_created.items())
    items: list[tuple[int, object]] = []
    for v in sorted(set(r.by_node) | set(r.held)):
        if not paid[v] or hosting[v]:
            continue
        uses = [k for k in r.by_node.get(v, []) if _uses_something(p.jobs[k[0]].groups[k[1]])]
        kept = [keep for keep, _, _ in r.held.get(v, [])]
        if not uses and not kept:
            continue
        h = r.model.new_bool_var(f"h[{v}]")
        for k in uses:
            r.model.add(r.y[k] <= r.model_ub(r.y[k]) * h)
        for keep in kept:
            r.model.add_implication(keep, h)
        items.append((int(price[v]), h))
    items += [(int(price[v]), u) for v, u in sorted(r.slot_used.items())]
    upper = constant + sum(c for c, _ in items)
    for v in sorted(r.by_node):  # K5: the priced spot loss of every replica on a spot node
        if not p.node_spot[v]:
            continue
        for k in r.by_node[v]:
            job = p.jobs[k[0]]
            loss = round(spot_loss_per_replica(p, job, job.groups[k[1]], v)[1] * COST_SCALE)
            if loss > 0:
                items.append((loss, r.y[k]))
                upper += loss * r.model_ub(r.y[k])
    r.add_term("cost", constant + r.wsum((h for _, h in items), (c for c, _ in items)), COST_SCALE, maximise=False)
    r.term_ub["cost"] = upper


UNATTRIBUTED = "(unattributed)"
"""The payer of idle reserved capacity when no tenant uses reserved nodes."""


def _usage_by_tenant(view: PlanView) -> np.ndarray:
    """(tenants, nodes): what each tenant uses of each node, kept running jobs and new replicas:
    GPUs (a device share counts its fraction) on nodes where GPUs are used, else CPU millicores,
    else replicas (of groups that request something, as for `cost`)."""
    p: Problem = view.problem
    gpu = np.zeros((len(p.tenant_names), p.n_nodes))
    cpu = np.zeros_like(gpu)
    count = np.zeros_like(gpu)
    cpu_r = p.resources.index("cpu") if "cpu" in p.resources else None
    items = [(job, job.groups[rp.group], rp.node, rp.devices, rp.share)
             for job in view.kept for rp in job.placements]
    items += [(r.job, r.job.groups[r.group], r.node, r.devices, r.share) for r in view.replicas]
    for job, group, node, devices, share in items:
        if not _uses_something(group):  # a replica that requests nothing does not make its node host work
            continue
        gpu[job.tenant, node] += len(devices) * share
        count[job.tenant, node] += 1.0
        if cpu_r is not None:
            cpu[job.tenant, node] += float(group.req[cpu_r])
    by_cpu = np.where(cpu.sum(axis=0)[None, :] > 0, cpu, count)
    return np.where(gpu.sum(axis=0)[None, :] > 0, gpu, by_cpu)


def chargeback(view: PlanView) -> dict[str, dict[str, dict[str, float]]]:
    """Per tenant, per pool: ``used`` ($/h of the nodes it works on, by its share of each) and
    ``idle_reserved`` ($/h of its share of the empty reserved nodes); see the module docstring."""
    p = view.problem
    out: dict[str, dict[str, dict[str, float]]] = {}
    if not len(p.pool_names):
        return out

    def add(tenant: str, pool: int, kind: str, amount: float) -> None:
        if amount > 0:
            row = out.setdefault(tenant, {}).setdefault(p.pool_names[pool], {"used": 0.0, "idle_reserved": 0.0})
            row[kind] += amount

    usage = _usage_by_tenant(view)
    total = usage.sum(axis=0)
    has_pool = p.node_pool >= 0
    hosting = has_pool & (total > 0) & (~p.node_provisioned | np.isin(p.node_pool, list(view.provisioned)))
    share = np.divide(usage, total, out=np.zeros_like(usage), where=total > 0)
    charged = share * np.where(hosting, p.node_price, 0.0)[None, :]
    for t, name in enumerate(p.tenant_names):
        per_pool = np.bincount(p.node_pool[has_pool], weights=charged[t, has_pool], minlength=len(p.pool_names))
        for pool in np.flatnonzero(per_pool > 0).tolist():
            add(name, pool, "used", float(per_pool[pool]))
    pricing = np.where(has_pool, p.pool_pricing[np.maximum(p.node_pool, 0)], -1)
    reserved = (pricing == PRICING_CODES["reserved"]) & ~p.node_provisioned
    idle = reserved & (total <= 0)
    if idle.any():
        use = charged[:, reserved].sum(axis=1)  # $/h each tenant uses of reserved nodes
        idle_by_pool = np.bincount(p.node_pool[idle], weights=p.node_price[idle], minlength=len(p.pool_names))
        for pool in np.flatnonzero(idle_by_pool > 0).tolist():
            if use.sum() <= 0:
                add(UNATTRIBUTED, pool, "idle_reserved", float(idle_by_pool[pool]))
                continue
            for t in np.flatnonzero(use > 0).tolist():
                add(p.tenant_names[t], pool, "idle_reserved", float(idle_by_pool[pool] * use[t] / use.sum()))
    return out
