"""Public model: loading, round trips, schema, and InputError for each kind of bad input."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import InputError
from optsched.model import Cluster, Plan, Queue, dump, load_cluster, load_plan, load_queue
from tests.conftest import EXAMPLES

Docs = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]


def test_examples_load() -> None:
    c = load_cluster(EXAMPLES / "cluster.yaml")
    q = load_queue(EXAMPLES / "queue.yaml", c)
    p = load_plan(EXAMPLES / "plan.json")
    assert len(c.nodes) == 4 and len(q.jobs) == 3 and len(p.placements) == 13
    assert q.jobs[1].is_gang and not q.jobs[2].is_gang
    assert q.jobs[2].groups[0].request.is_fractional


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_round_trip(example: tuple[Cluster, Queue, Plan], fmt: str) -> None:
    for doc in example:
        text = dump(doc, fmt=fmt)
        again = type(doc).model_validate(json.loads(text) if fmt == "json" else yaml.safe_load(text))
        assert again == doc


def test_round_trip_files(example: tuple[Cluster, Queue, Plan], tmp_path: Any) -> None:
    c, q, _ = example
    dump(c, tmp_path / "c.yaml")
    dump(q, tmp_path / "q.json")
    c2 = load_cluster(tmp_path / "c.yaml")
    assert c2 == c and load_queue(tmp_path / "q.json", c2) == q


def test_schema_has_every_document() -> None:
    for model in (Cluster, Queue, Plan):
        schema = model.model_json_schema()
        assert schema["type"] == "object" and "properties" in schema


def problems_of(c: dict[str, Any], q: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    with pytest.raises(InputError) as info:
        cluster = load_cluster(c)
        if q is not None:
            load_queue(q, cluster)
    return [(p.path, p.rule) for p in info.value.problems]


BAD_CLUSTER = [
    ("unknown node domain", lambda c: c["nodes"][0].update(domain="leaf-9"), ("nodes[0].domain", "unknown_reference")),
    ("node on a spine", lambda c: c["nodes"][0].update(domain="spine-0"), ("nodes[0].domain", "unknown_reference")),
    ("duplicate node", lambda c: c["nodes"][1].update(id="h100-0"), ("nodes", "duplicate_id")),
    ("unknown pool", lambda c: c["nodes"][0].update(pool="nope"), ("nodes[0].pool", "unknown_reference")),
    ("negative cpu", lambda c: c["nodes"][0]["capacity"].update(cpu=-1), ("nodes[0].capacity.cpu", "greater_than_equal")),
    ("nan memory", lambda c: c["nodes"][0]["capacity"].update(memory=float("nan")), ("nodes[0].capacity.memory", "finite_number")),
    ("unknown model", lambda c: c["nodes"][0]["devices"].update(model="X"), ("nodes[0].devices.model", "unknown_reference")),
    ("interconnect out of range", lambda c: c["nodes"][0].update(interconnect=[[0, 9]]), ("nodes[0].interconnect[0]", "out_of_range")),
    ("overlapping groups", lambda c: c["nodes"][0].update(interconnect=[[0, 1], [1, 2]]), ("nodes[0].interconnect[1]", "overlapping_groups")),
    ("bad parent", lambda c: c["topology"]["domains"][1].update(parent="leaf-1"), ("topology.domains[1].parent", "bad_parent")),
    ("unknown level", lambda c: c["topology"]["domains"][1].update(level="rack"), ("topology.domains[1].level", "unknown_reference")),
    ("unknown template", lambda c: c["pools"][2]["provisionable"].update(template="x"), ("pools[2].provisionable.template", "unknown_reference")),
    ("unknown flavor", lambda c: c["tenants"][0]["quotas"].update(TPU={"nominal": 1}), ("tenants[0].quotas.TPU", "unknown_reference")),
    ("running on unknown node", lambda c: c["running"][0]["placements"][0].update(node="x"), ("running[0].placements[0].node", "unknown_reference")),
    ("unknown field", lambda c: c["nodes"][0].update(colour="red"), ("nodes[0].colour", "extra_forbidden")),
    ("dataset domain", lambda c: c["datasets"]["c4-shard"].update(cached_at=["leaf-7"]), ("datasets.c4-shard.cached_at[0]", "unknown_reference")),
    # issue 20: strict types, upper bounds, impossible running states
    ("cpu as a string", lambda c: c["nodes"][0]["capacity"].update(cpu="8000"), ("nodes[0].capacity.cpu", "float_type")),
    ("healthy as a string", lambda c: c["nodes"][0].update(healthy="yes"), ("nodes[0].healthy", "bool_type")),
    ("speed 1e30", lambda c: c["device_models"]["H100-SXM"].update(speed=1e30), ("device_models.H100-SXM.speed", "less_than_equal")),
    ("quota 1e308", lambda c: c["tenants"][0]["quotas"]["H100-SXM"].update(nominal=1e308), ("tenants[0].quotas.H100-SXM.nominal", "less_than_equal")),
    ("10^9 devices", lambda c: c["nodes"][0]["devices"].update(count=10**9), ("nodes[0].devices.count", "less_than_equal")),
    ("2^64 devices", lambda c: c["nodes"][0]["devices"].update(count=2**64), ("nodes[0].devices.count", "less_than_equal")),
    ("10^9 max_nodes", lambda c: c["pools"][2]["provisionable"].update(max_nodes=10**9), ("pools[2].provisionable.max_nodes", "less_than_equal")),
    ("empty interconnect group", lambda c: c["nodes"][0].update(interconnect=[[]]), ("nodes[0].interconnect[0]", "too_short")),
    ("running: a device twice", lambda c: c["running"][0]["placements"][0].update(devices=[0, 0, 1, 2]), ("running[0].placements[0].devices", "duplicate_device")),
    ("running: fewer devices than asked", lambda c: c["running"][0]["placements"][0].update(devices=[0, 1]), ("running[0].placements[0].devices", "device_count")),
    ("running: two jobs on one device", lambda c: c["running"].append(_second_running(c, [3, 4, 5, 6])), ("running[1].placements[0].devices", "device_overcommitted")),
    ("running: share 1.5", lambda c: c["running"][0]["placements"][0].update(share=1.5), ("running[0].placements[0].share", "less_than_equal")),
    ("running: replica beyond max", lambda c: c["running"][0]["placements"][0].update(replica=999), ("running[0].placements[0].replica", "out_of_range")),
    ("running: gang below min", lambda c: c["running"][0]["job"].update(gang=True, groups=[{**c["running"][0]["job"]["groups"][0], "replicas": {"min": 2, "max": 2}}]), ("running[0].placements", "gang_below_min")),
    ("running: over capacity", lambda c: c["running"][0]["job"]["groups"][0]["request"].update(cpu=10**6), ("nodes[1].capacity.cpu", "over_capacity")),
]


def _second_running(c: dict[str, Any], devices: list[int]) -> dict[str, Any]:
    """A copy of the example's running job under another id, on the same node, on `devices`."""
    other = copy.deepcopy(c["running"][0])
    other["job"]["id"] = "eval-sweep-2"
    other["placements"][0]["devices"] = devices
    return other


def test_running_work_on_an_unhealthy_node_is_tolerated(example_docs: Docs) -> None:
    """The cluster changed under running work: a running job on a node (or devices) now unhealthy loads."""
    c, _, _ = example_docs
    node = next(n for n in c["nodes"] if n["id"] == c["running"][0]["placements"][0]["node"])
    node["healthy"] = False
    node["devices"]["unhealthy"] = [0]
    assert load_cluster(c).running
    c["running"].append(_second_running(c, [4, 5, 6, 7]))  # and two jobs on distinct devices of one node
    assert len(load_cluster(c).running) == 2


@pytest.mark.parametrize(("name", "mutate", "expected"), BAD_CLUSTER, ids=[b[0] for b in BAD_CLUSTER])
def test_bad_cluster(example_docs: Docs, name: str, mutate: Any, expected: tuple[str, str]) -> None:
    c, _, _ = example_docs
    mutate(c)
    assert expected in problems_of(c)


BAD_QUEUE = [
    ("unknown tenant", lambda q: q["jobs"][0].update(tenant="x"), ("jobs[0].tenant", "unknown_reference")),
    ("duplicate job", lambda q: q["jobs"][1].update(id="llm-pretrain"), ("jobs", "duplicate_id")),
    ("unknown model", lambda q: q["jobs"][0]["groups"][0]["models"].update(TPU=1.0), ("jobs[0].groups[0].models.TPU", "unknown_reference")),
    ("unknown image", lambda q: q["jobs"][0]["groups"][0].update(image="x"), ("jobs[0].groups[0].image", "unknown_reference")),
    ("unknown dataset", lambda q: q["jobs"][0]["groups"][0].update(datasets=["x"]), ("jobs[0].groups[0].datasets[0]", "unknown_reference")),
    ("unsatisfiable", lambda q: q["jobs"][0]["groups"][0]["request"].update(gpu=16), ("jobs[0].groups[0].request", "unsatisfiable")),
    ("fractional above one", lambda q: q["jobs"][0]["groups"][0]["request"].update(gpu=1.5), ("jobs[0].groups[0].request.gpu", "value_error")),
    ("replicas max < min", lambda q: q["jobs"][1]["groups"][1]["replicas"].update(max=2), ("jobs[1].groups[1].replicas", "value_error")),
    ("unknown ratio group", lambda q: q["jobs"][1]["ratios"][0].update(group="x"), ("jobs[1].ratios[0].group", "unknown_reference")),
    ("unknown level", lambda q: q["jobs"][0]["topology"].update(level="rack"), ("jobs[0].topology.level", "unknown_reference")),
    ("already running", lambda q: q["jobs"][0].update(id="eval-sweep"), ("jobs[0].id", "duplicate_id")),
    ("negative bandwidth", lambda q: q["jobs"][0].update(bandwidth_gbps=-1), ("jobs[0].bandwidth_gbps", "greater_than_equal")),
    ("priority 2^63", lambda q: q["jobs"][0].update(priority=2**63), ("jobs[0].priority", "less_than_equal")),
    ("replicas max 2^64", lambda q: q["jobs"][0]["groups"][0]["replicas"].update(max=2**64), ("jobs[0].groups[0].replicas.max", "less_than_equal")),
    ("gang as a string", lambda q: q["jobs"][0].update(gang="yes"), ("jobs[0].gang", "bool_type")),
    ("time as a string", lambda q: q["jobs"][0].update(submitted_at="3000"), ("jobs[0].submitted_at", "float_type")),
]


@pytest.mark.parametrize(("name", "mutate", "expected"), BAD_QUEUE, ids=[b[0] for b in BAD_QUEUE])
def test_bad_queue(example_docs: Docs, name: str, mutate: Any, expected: tuple[str, str]) -> None:
    c, q, _ = example_docs
    mutate(q)
    assert expected in problems_of(c, q)


def test_every_problem_listed(example_docs: Docs) -> None:
    c, _, _ = example_docs
    c["nodes"][0]["domain"] = "x"
    c["nodes"][1]["pool"] = "y"
    assert len(problems_of(c)) == 2


def test_syntax_error_is_input_error() -> None:
    with pytest.raises(InputError):
        load_cluster("topology: [unclosed\n")
    with pytest.raises(InputError):
        load_cluster("/no/such/file.yaml")


def _mutations() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=True),
                        st.text(max_size=5), st.just([]), st.just({}))
    return st.lists(st.tuples(st.integers(0, 10**6), scalars), min_size=1, max_size=4)


def _walk(node: Any, paths: list[tuple[Any, Any]]) -> None:
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for k, v in items:
        paths.append((node, k))
        _walk(v, paths)


def _mutate(doc: Any, picks: list[tuple[int, Any]]) -> Any:
    doc = copy.deepcopy(doc)
    for pick, value in picks:
        paths: list[tuple[Any, Any]] = []
        _walk(doc, paths)
        if paths:
            parent, key = paths[pick % len(paths)]
            parent[key] = value
    return doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=_mutations())
def test_fuzzed_documents_load_or_raise_input_error(example_docs: Docs, picks: list[tuple[int, Any]]) -> None:
    """Any mutated cluster/queue document either loads or raises InputError, never another exception."""
    c, q, _ = example_docs
    c2, q2 = _mutate(c, picks), _mutate(q, picks[::-1])
    try:
        cluster = load_cluster(c2)
        load_queue(q2, cluster)
    except InputError as exc:
        assert exc.problems


def _rules(source: Any) -> list[tuple[str, str]]:
    with pytest.raises(InputError) as info:
        load_cluster(source)
    return [(p.path, p.rule) for p in info.value.problems]


def test_duplicate_keys_are_refused(example_docs: Docs, tmp_path: Path) -> None:
    """JSON and YAML both keep the last of two equal keys; optsched refuses the document (issue 20)."""
    c, _, _ = example_docs
    text = json.dumps(c)
    twice = text.replace('"topology": {', '"topology": {"levels": ["x"], ', 1)
    assert ("<document>", "duplicate_key") in _rules(twice)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(c) + "network:\n  registry_gbps: 5\n")
    assert ("<document>", "duplicate_key") in _rules(path)
    inner = "network:\n  registry_gbps: 5\n  registry_gbps: 6\n"  # inside a nested mapping too
    path.write_text(yaml.safe_dump({k: v for k, v in c.items() if k != "network"}) + inner)
    assert ("<document>", "duplicate_key") in _rules(path)
    path.write_text(yaml.safe_dump(c))
    assert load_cluster(path)  # the same document without the repeat loads


def test_non_utf8_and_too_deep_documents_are_input_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"topology: \xff\xfe\n")
    assert _rules(path) == [(str(path), "encoding")]
    deep = "[" * 10_000 + "]" * 10_000
    assert _rules('{"topology": ' + deep + "}") == [("<document>", "too_deep")]
    (deep_yaml,) = _rules("topology: " + deep + "\n")
    assert deep_yaml[1] in ("too_deep", "syntax")  # libyaml may stop it first
    nested: dict[str, Any] = {}
    inner = nested
    for _ in range(100):
        inner["x"] = {}
        inner = inner["x"]
    assert _rules({"topology": nested}) == [("<document>", "too_deep")]


def test_yaml_values_json_has_no_type_for_are_refused(example_docs: Docs) -> None:
    """A YAML date or a non-string key is refused, not turned into a string."""
    c, _, _ = example_docs
    text = yaml.safe_dump(c)
    assert _rules(text.replace("id: h100-0", "id: 2024-01-01", 1)) == [("<document>", "type")]
    labelled = text.replace("id: h100-0", "id: h100-0\n  labels: {1: a}", 1)
    assert _rules(labelled) == [("<document>", "key_type")]


def test_every_schema_field_has_a_description_and_every_document_an_id() -> None:
    """Issue 20 item 9: the JSON Schemas other schedulers write documents against describe every
    field (the models' attribute docstrings, with units), and each document has an `$id`."""
    from optsched.model import Cluster, Plan, Queue

    for document, model in (("cluster", Cluster), ("queue", Queue), ("plan", Plan)):
        schema = model.model_json_schema()
        assert schema["$id"] == f"urn:optsched:v1:{document}"
        objects = [schema, *schema.get("$defs", {}).values()]
        bare = [f"{o.get('title')}.{name}" for o in objects for name, prop in o.get("properties", {}).items()
                if not prop.get("description")]
        assert bare == [], f"{document}: fields without a description"


def test_node_selector_requirement_follows_kubernetes() -> None:
    """In/NotIn/Exists/DoesNotExist/Gt/Lt as Kubernetes' label selectors judge them, values checked at the door."""
    from optsched.model import NodeSelectorRequirement as R

    labels = {"zone": "a", "gpu-count": "8"}
    assert R(key="zone", operator="In", values=["a", "b"]).matches(labels)
    assert not R(key="zone", operator="NotIn", values=["a"]).matches(labels)
    assert R(key="rack", operator="NotIn", values=["a"]).matches(labels)  # an absent label is not in any set
    assert R(key="zone", operator="Exists").matches(labels)
    assert R(key="rack", operator="DoesNotExist").matches(labels)
    assert R(key="gpu-count", operator="Gt", values=["4"]).matches(labels)
    assert not R(key="gpu-count", operator="Lt", values=["8"]).matches(labels)
    assert not R(key="zone", operator="Gt", values=["1"]).matches(labels)  # not an integer: no match
    assert not R(key="rack", operator="Lt", values=["1"]).matches(labels)
    for bad in ({"operator": "In"}, {"operator": "Exists", "values": ["a"]}, {"operator": "Gt", "values": ["x"]},
                {"operator": "Lt", "values": ["1", "2"]}, {"operator": "Near", "values": ["a"]}):
        with pytest.raises(ValueError):
            R.model_validate({"key": "zone", **bad})
