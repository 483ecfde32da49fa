"""Where the service's state comes from when it talks to the API server itself.

`poller(core, scheduling, interval_s, custom)` lists Nodes, Pods and PriorityClasses every
`interval_s` seconds, and with `custom` (a CustomObjectsApi) Kueue's ClusterQueues, LocalQueues,
ResourceFlavors, Cohorts and WorkloadPriorityClasses where Kueue is installed (its newest served
version first: v1beta2, then v1beta1; Cohorts v1beta2, then v1alpha1) and Volcano's PodGroups and
Queues (v1beta1) where Volcano is installed, and replaces the state with
them (`ClusterState.replace`): simple and self-healing (a missed change is gone by the next
listing), at the cost of one full listing per interval. A listing that fails is logged and
retried at the next interval; the state keeps the last good one.
`api_binder(core)` creates Bindings (`create_namespaced_binding`). `clients(kubeconfig,
in_cluster)` builds both clients from a kubeconfig file or the pod's service account.

`optsched serve` watches instead by default (`optsched.service.watch`: one listing, then watch
events); the poller is its `--no-watch`.

Without API access (the default of `optsched serve`), the state is pushed to the service instead:
`PUT /v1/state` with a listing, `POST /v1/state/events` with watch events.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from optsched.service.extender import Binder
from optsched.service.state import ClusterState

LOG = logging.getLogger("optsched.service")


KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_KINDS = (("cluster_queues", "clusterqueues", ("v1beta2", "v1beta1")),
               ("local_queues", "localqueues", ("v1beta2", "v1beta1")),
               ("resource_flavors", "resourceflavors", ("v1beta2", "v1beta1")),
               ("cohorts", "cohorts", ("v1beta2", "v1alpha1")),
               ("workload_priority_classes", "workloadpriorityclasses", ("v1beta2", "v1beta1")),
               ("workloads", "workloads", ("v1beta2", "v1beta1")))
"""(listing field, plural, versions tried in order) of Kueue's objects."""
VOLCANO_GROUP = "scheduling.volcano.sh"
VOLCANO_KINDS = (("pod_groups", "podgroups", ("v1beta1",)), ("queues", "queues", ("v1beta1",)))
"""(listing field, plural, versions) of Volcano's objects."""


def clients(kubeconfig: str | None = None, in_cluster: bool = False) -> tuple[Any, Any, Any]:
    """(CoreV1Api, SchedulingV1Api, CustomObjectsApi) from the pod's service account or a
    kubeconfig file (None: the default `~/.kube/config`)."""
    from kubernetes import client, config

    if in_cluster:
        config.load_incluster_config()
    else:
        config.load_kube_config(config_file=kubeconfig)
    return client.CoreV1Api(), client.SchedulingV1Api(), client.CustomObjectsApi()


def list_custom(custom: Any) -> dict[str, list[Any]]:
    """Kueue's and Volcano's objects by listing field; a kind (or a whole system) that is not
    served lists as empty."""
    out: dict[str, list[Any]] = {}
    for group, kinds in ((KUEUE_GROUP, KUEUE_KINDS), (VOLCANO_GROUP, VOLCANO_KINDS)):
        out.update(_list_group(custom, group, kinds))
    return out


def served(custom: Any, group: str, plural: str, versions: tuple[str, ...],
           **kwargs: Any) -> tuple[str, dict[str, Any]] | None:
    """(version, listing) of the first of `versions` the API server serves for `plural` of
    `group` (a 404 is a version not served, or the system not installed); None when none is.
    `kwargs` go to the list call (`limit=1` to probe)."""
    for version in versions:
        try:
            return version, custom.list_cluster_custom_object(group, version, plural, **kwargs)
        except Exception as exc:
            if getattr(exc, "status", None) != 404:
                raise
    return None


def _list_group(custom: Any, group: str, kinds: tuple[tuple[str, str, tuple[str, ...]], ...]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for field, plural, versions in kinds:
        got = served(custom, group, plural, versions)
        out[field] = list(got[1].get("items", [])) if got is not None else []
    return out


def poller(core: Any, scheduling: Any, interval_s: float = 5.0, custom: Any = None,
           stop: threading.Event | None = None) -> Callable[[ClusterState], None]:
    """A source for `create_app`: lists the cluster every `interval_s` seconds into the state
    (module docstring) until `stop` is set."""
    stop = stop or threading.Event()

    def run(state: ClusterState) -> None:
        while not stop.is_set():
            try:
                nodes = core.list_node().items
                pods = core.list_pod_for_all_namespaces().items
                classes = scheduling.list_priority_class().items
                extra = list_custom(custom) if custom is not None else {}
                state.replace(nodes, pods, classes, **extra)
            except Exception:  # the API server may be away for a while: keep the last listing
                LOG.exception("listing the cluster failed; the state keeps the last listing")
            stop.wait(interval_s)

    return run


def api_binder(core: Any) -> Binder:
    """A binder that creates the Binding on the API server (the pod's annotations from it too)."""

    def bind(binding: dict[str, Any]) -> None:
        meta = binding["metadata"]
        # the client cannot read the API server's answer to a Binding back into a model: skip it
        core.create_namespaced_binding(meta["namespace"], binding, _preload_content=False)

    return bind
