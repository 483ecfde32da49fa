"""Kubernetes in and out: Nodes, Pods and PriorityClasses -> a round's Cluster and Queue
(`snapshot`), a Plan -> Bindings, evictions and pending conditions (`actions`).

Needs the `k8s` extra (`pip install 'optsched[k8s]'`: the official `kubernetes` client, whose
quantity parser and models it uses). docs/integration.md says what is read and what is not yet.

    >>> snap = snapshot(core.list_node().items, core.list_pod_for_all_namespaces().items,
    ...                 scheduling.list_priority_class().items, config=KubeConfig(...))
    >>> plan = optsched.solve(snap.cluster, snap.queue, time_limit=1.0)
    >>> todo = actions(plan, snap)   # todo.evictions, todo.bindings, todo.pending
"""

from __future__ import annotations

from optsched.adapters.kube.actions import Actions, PodEviction, PodPending, actions
from optsched.adapters.kube.config import (
    DEVICES_ANNOTATION,
    PREEMPTIBLE_ANNOTATION,
    Accelerator,
    KubeConfig,
    TopologyLevel,
)
from optsched.adapters.kube.pods import Held, PodRef
from optsched.adapters.kube.snapshot import Snapshot, SnapshotCache, snapshot

__all__ = [
    "DEVICES_ANNOTATION",
    "PREEMPTIBLE_ANNOTATION",
    "Accelerator",
    "Actions",
    "Held",
    "KubeConfig",
    "PodEviction",
    "PodPending",
    "PodRef",
    "Snapshot",
    "SnapshotCache",
    "TopologyLevel",
    "actions",
    "snapshot",
]
