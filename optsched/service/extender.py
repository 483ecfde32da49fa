"""kube-scheduler extender verbs answered from the current round's plan.

The shapes are those of `k8s.io/kube-scheduler/extender/v1` (Go structs without json tags, so the
field names are the Go names: `Pod`, `Nodes`, `NodeNames`, `FailedNodes`,
`FailedAndUnresolvableNodes`, `Error`, `Host`, `Score`, `PodName`, `PodNamespace`, `PodUID`,
`Node`, `NodeNameToVictims`, `NodeNameToMetaVictims`, `Pods`, `UID`, `NumPDBViolations`).

Every verb is a lookup in the round's per-pod decisions (`optsched.service.rounds.Round`), never a
solve:
- **filter**: a pod the plan places passes on its planned node only (a gang's pods each on the
  node of their replica); the other candidates fail with "optsched: planned for node X". A pod
  the plan defers fails on every node as *unresolvable* (kube-scheduler's preemption would not
  help: the plan already weighed it), with the plan's reason. A pod the round does not know
  (it arrived after the round) fails on every node as resolvable, "not planned yet", and wakes
  the round loop; kube-scheduler retries it after its back-off.
- **prioritize**: the planned node scores `MAX_EXTENDER_PRIORITY`, every other candidate 0.
- **preempt**: of the nodes and victims kube-scheduler proposes, only the planned node is kept,
  with the victims the plan evicts there for this pod's job (none: no preemption).
- **bind**: binds the pod to its planned node, with the plan's device indices as the
  `optsched.io/devices` annotation, through the service's binder (the API server), and records
  it in the state at once.

A decision is used only while it still holds: the pod has the same uid, and the node is still in
the state; otherwise the pod is treated as unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from optsched.adapters.kube.config import DEVICES_ANNOTATION
from optsched.errors import InputError, InputIssue
from optsched.service.rounds import Decision, Round
from optsched.service.state import ClusterState

MAX_EXTENDER_PRIORITY = 10
"""`MaxExtenderPriority` of k8s.io/kube-scheduler/extender/v1."""
PREFIX = "optsched"

Binder = Callable[[dict[str, Any]], None]
"""Creates a Binding (an API dict: `apiVersion`, `kind`, `metadata`, `target`) on the API server;
raises on failure."""


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError([InputIssue(path, "type", "expected an object")])
    return value


def _pod_identity(args: dict[str, Any], path: str = "Pod") -> tuple[str, str, str | None]:
    pod = _mapping(args.get("Pod"), path)
    meta = _mapping(pod.get("metadata"), f"{path}.metadata")
    name, namespace, uid = meta.get("name"), meta.get("namespace") or "default", meta.get("uid")
    if not isinstance(name, str) or not name:
        raise InputError([InputIssue(f"{path}.metadata.name", "required", "the pod needs a name")])
    if not isinstance(namespace, str) or not (uid is None or isinstance(uid, str)):
        raise InputError([InputIssue(f"{path}.metadata", "type", "namespace and uid are strings")])
    return namespace, name, uid


def _candidates(args: dict[str, Any]) -> tuple[list[str], dict[str, Any] | None]:
    """Candidate node names, and the node objects by name when they were sent (not node-cache-capable)."""
    names = args.get("NodeNames")
    if names is not None:
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise InputError([InputIssue("NodeNames", "type", "expected a list of node names")])
        return list(names), None
    nodes = args.get("Nodes")
    if nodes is None:
        return [], {}
    items = _mapping(nodes, "Nodes").get("items") or []
    if not isinstance(items, list):
        raise InputError([InputIssue("Nodes.items", "type", "expected a list of Nodes")])
    by_name: dict[str, Any] = {}
    for i, node in enumerate(items):
        meta = _mapping(_mapping(node, f"Nodes.items[{i}]").get("metadata"), f"Nodes.items[{i}].metadata")
        name = meta.get("name")
        if not isinstance(name, str):
            raise InputError([InputIssue(f"Nodes.items[{i}].metadata.name", "required", "a Node needs a name")])
        by_name[name] = node
    return list(by_name), by_name


def current_decision(rnd: Round | None, state: ClusterState, namespace: str, name: str,
                     uid: str | None) -> Decision | None:
    """The round's decision for the pod while it still holds (module docstring)."""
    if rnd is None:
        return None
    d = rnd.decision(namespace, name, uid)
    if d is None or (d.node is not None and not state.has_node(d.node)):
        return None
    return d


def filter_nodes(args: dict[str, Any], rnd: Round | None, state: ClusterState) -> tuple[dict[str, Any], str]:
    """The ExtenderFilterResult for ExtenderArgs, and the outcome (`planned`, `planned_elsewhere`,
    `wait`, `unknown`)."""
    namespace, name, uid = _pod_identity(args)
    candidates, objects = _candidates(args)
    d = current_decision(rnd, state, namespace, name, uid)
    passed: list[str] = []
    failed: dict[str, str] = {}
    unresolvable: dict[str, str] = {}
    if d is None or d.action == "evict":
        outcome = "unknown"
        failed = {n: f"{PREFIX}: not planned yet; the next round decides it" for n in candidates}
    elif d.action == "wait":
        outcome = "wait"
        message = f"{PREFIX}: {d.reason}" + (f": {d.detail}" if d.detail else "")
        unresolvable = dict.fromkeys(candidates, message)
    else:
        outcome = "planned" if d.node in candidates else "planned_elsewhere"
        passed = [n for n in candidates if n == d.node]
        failed = {n: f"{PREFIX}: planned for node {d.node}" for n in candidates if n != d.node}
    result: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
    if objects is None:
        result["NodeNames"] = passed
    else:
        result["Nodes"] = {"apiVersion": "v1", "kind": "NodeList", "items": [objects[n] for n in passed]}
    return result, outcome


def prioritize(args: dict[str, Any], rnd: Round | None, state: ClusterState) -> tuple[list[dict[str, Any]], str]:
    """The HostPriorityList for ExtenderArgs, and the outcome."""
    namespace, name, uid = _pod_identity(args)
    candidates, _ = _candidates(args)
    d = current_decision(rnd, state, namespace, name, uid)
    planned = d.node if d is not None and d.action == "bind" else None
    return ([{"Host": n, "Score": MAX_EXTENDER_PRIORITY if n == planned else 0} for n in candidates],
            "planned" if planned else "unknown")


def preempt(args: dict[str, Any], rnd: Round | None, state: ClusterState) -> tuple[dict[str, Any], str]:
    """The ExtenderPreemptionResult for ExtenderPreemptionArgs: the planned node and the plan's
    victims there (as MetaVictims), if kube-scheduler proposed that node; else no node."""
    namespace, name, uid = _pod_identity(args)
    proposed: set[str] = set()
    pdb: dict[str, int] = {}
    for field in ("NodeNameToMetaVictims", "NodeNameToVictims"):
        given = args.get(field)
        if given is None:
            continue
        for node, victims in _mapping(given, field).items():
            proposed.add(node)
            count = victims.get("NumPDBViolations", 0) if isinstance(victims, dict) else 0
            pdb[node] = count if isinstance(count, int) else 0
    d = current_decision(rnd, state, namespace, name, uid)
    if d is None or d.action != "bind" or d.node not in proposed or rnd is None:
        return {"NodeNameToMetaVictims": {}}, "no_victims"
    uids = rnd.victims.get(d.job, {}).get(d.node, [])
    if not uids:
        return {"NodeNameToMetaVictims": {}}, "no_victims"
    return ({"NodeNameToMetaVictims": {d.node: {"Pods": [{"UID": u} for u in uids],
                                                "NumPDBViolations": pdb.get(d.node, 0)}}}, "victims")


def bind(args: dict[str, Any], rnd: Round | None, state: ClusterState,
         binder: Binder | None) -> tuple[dict[str, Any], str]:
    """The ExtenderBindingResult for ExtenderBindingArgs (module docstring)."""
    fields = {k: args.get(k) for k in ("PodName", "PodNamespace", "PodUID", "Node")}
    for key in ("PodName", "Node"):
        if not isinstance(fields[key], str) or not fields[key]:
            raise InputError([InputIssue(key, "required", f"{key} is a non-empty string")])
    name, node = str(fields["PodName"]), str(fields["Node"])
    namespace = fields["PodNamespace"] if isinstance(fields["PodNamespace"], str) and fields["PodNamespace"] \
        else "default"
    uid = fields["PodUID"] if isinstance(fields["PodUID"], str) and fields["PodUID"] else None
    d = current_decision(rnd, state, namespace, name, uid)
    if d is None or d.action != "bind":
        return {"Error": f"{PREFIX}: pod {namespace}/{name} is not planned to run; the next round decides it"}, \
            "unknown"
    if d.node != node:
        return {"Error": f"{PREFIX}: pod {namespace}/{name} is planned for node {d.node}, not {node}"}, "mismatch"
    if binder is None:
        return {"Error": f"{PREFIX}: this service has no API server access to bind with; "
                         "leave bindVerb out of the extender configuration"}, "no_binder"
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        metadata["uid"] = uid
    if d.devices:
        metadata["annotations"] = {DEVICES_ANNOTATION: ",".join(str(i) for i in d.devices)}
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
               "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    try:
        binder(binding)
    except Exception as exc:  # the API server refused: tell kube-scheduler, which retries the pod
        return {"Error": f"{PREFIX}: binding {namespace}/{name} to {node} failed: {exc}"}, "error"
    state.bind(namespace, name, uid, node, list(d.devices))
    return {"Error": ""}, "bound"
