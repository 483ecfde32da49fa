"""The Slurm adapter on Slurm's own output (tests/data/slurm/SOURCES.md names each file's origin):
nodes, jobs, QOS and topology.conf in; the validator on every plan; preemptions and node-list
updates out; bad input refused with an InputError naming the object and field."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("hostlist")

from optsched import InputError, check, solve
from optsched.adapters.slurm import SlurmConfig, actions, snapshot
from optsched.adapters.slurm.config import EXCLUSIVE_RESOURCE, NODE_LABEL, PARTITION_LABEL
from tests.slurm_records import DATA, JOBS, NODES, NOW, V44, load, node_record, one, pending, qos_record, running
from tests.strategies import mutation_paths, set_at

# -- reading Slurm's own output ------------------------------------------------------------------


def test_nodes_of_slurm_25_11_become_the_cluster() -> None:
    snap = snapshot(NODES, [], partitions=load(V44 / "partitions.json"), now=NOW)
    nodes = {n.id: n for n in snap.cluster.nodes}
    assert set(nodes) == {"cn1", "cn2", "cn3", "cn4", "gpu1", "gpu2", "gpu3", "gpu4"}
    assert nodes["gpu1"].devices is not None and (nodes["gpu1"].devices.model, nodes["gpu1"].devices.count) == ("h100", 4)
    assert nodes["gpu3"].devices is not None and nodes["gpu3"].devices.model == "gpu"  # untyped `gpu:4`
    assert nodes["gpu1"].capacity == {"cpu": 32_000.0, "memory": 524_288.0}
    # cn1 is IDLE+DRAIN and cn2 DOWN: nothing new goes there; ALLOCATED and MIXED nodes are healthy
    assert [n for n in nodes if not nodes[n].healthy] == ["cn1", "cn2"]
    assert nodes["cn3"].labels[PARTITION_LABEL + "normal"] == "true" and nodes["cn3"].labels[NODE_LABEL] == "cn3"
    # cn3 is ALLOCATED (64 CPUs, 32 GiB) and cn4 MIXED by jobs this listing does not give: that room is not offered
    assert nodes["cn3"].capacity["cpu"] == 0.0 and nodes["cn4"].capacity["cpu"] == 64_000.0 - 46_000.0
    assert any(note.startswith("Node/cn3:") for note in snap.ignored)


def test_running_gpu_jobs_keep_their_devices() -> None:
    """job-gpus-multi-nodes: `gres/gpu:8` over gpu[1-2], `gpu:h100:4(IDX:0-3)` on each; job-gpus-per-task:
    2 tasks x `gres/gpu=2` on gpu1, `gpu:h100:4(IDX:0-3)`."""
    for name, nodes in (("job-gpus-multi-nodes", ["gpu1", "gpu2"]), ("job-gpus-per-task", ["gpu1"])):
        snap = snapshot(NODES, [one(name)], now=NOW)
        (run,) = snap.cluster.running
        assert [(p.node, p.devices) for p in run.placements] == [(n, [0, 1, 2, 3]) for n in nodes]
        assert run.job.gang is (len(nodes) > 1 or None) and run.job.groups[0].request.gpu == 4


def test_a_pending_gpu_job_is_placed_and_pinned_with_scontrol() -> None:
    """job-gpus-pending: `gres/gpu:4` in partition gpu (its BeginTime has passed at NOW)."""
    job = one("job-gpus-pending")
    snap = snapshot(NODES, [job], partitions=load(V44 / "partitions.json"), qos=load(V44 / "qos.json"), now=NOW)
    (queued,) = snap.queue.jobs
    group = queued.groups[0]
    assert group.request.gpu == 4 and group.replicas.min == 1 and group.request.memory == 512.0
    assert group.node_affinity[0].match_expressions[0].key == PARTITION_LABEL + "gpu"
    plan = solve(snap.cluster, snap.queue, solver="auto", time_limit=1.0)
    assert check(snap.cluster, snap.queue, plan) == []
    (start,) = actions(plan, snap).starts
    assert start.nodes[0] in {"gpu1", "gpu2", "gpu3", "gpu4"} and sorted(start.devices[start.nodes[0]]) == [0, 1, 2, 3]
    assert start.command == ["scontrol", "update", f"JobId={job['job_id']}", f"ReqNodeList={start.nodes[0]}",
                             "NumNodes=1"]


def test_begin_time_dependency_and_hold_keep_a_job_pending() -> None:
    job = one("job-gpus-pending")  # state_reason BeginTime, eligible_time 1762787291
    early = snapshot(NODES, [job], now=1_762_787_000.0)
    assert not early.queue.jobs and early.held[0].reason == "begin_time"
    held = snapshot(NODES, [{**job, "hold": True, "state_reason": "JobHeldUser"}], now=NOW)
    assert held.held[0].reason == "held"
    waiting = snapshot(NODES, [{**job, "dependency": "afterok:4964", "state_reason": "Dependency"}], now=NOW)
    assert waiting.held[0].reason == "dependency" and waiting.held[0].detail == "afterok:4964"
    plan = solve(waiting.cluster, waiting.queue, time_limit=1.0)
    assert [(w.job_id, w.reason) for w in actions(plan, waiting).waiting] == [(str(job["job_id"]), "dependency")]


def test_the_jobs_listing_of_slurm_25_11() -> None:
    """The 15 jobs of Slurm-web's listing: 4 running on cn1, 1 pending (2 nodes x 64 CPUs), the rest finished."""
    snap = snapshot(NODES, JOBS, partitions=load(V44 / "partitions.json"), qos=load(V44 / "qos.json"), now=NOW)
    assert sorted(r.job.id for r in snap.cluster.running) == ["5745", "5746", "5747", "5748"]
    (big,) = snap.queue.jobs
    group = big.groups[0]
    assert big.id == "5750" and group.replicas.min == 2 and group.request.cpu == 64_000.0
    assert group.request.memory == 64 * 512.0  # memory_per_cpu x its CPUs per node
    assert group.spread is not None and group.spread.level == "node"  # two nodes, not one node twice
    plan = solve(snap.cluster, snap.queue, time_limit=1.0)
    assert check(snap.cluster, snap.queue, plan) == []
    # cn1 drained, cn2 down, cn3 full: no two nodes of `normal` have 64 CPUs free
    assert [w.job_id for w in actions(plan, snap).waiting] == ["5750"]


def test_slurm_25_05_v0_0_43_shapes() -> None:
    d = DATA / "slurmweb-25.05-v0.0.43"
    for name in ("job-gpus-multi-nodes", "job-gpus-per-task"):
        snap = snapshot(load(d / "nodes.json"), [one(name, d)], now=NOW)
        assert all(p.devices == [0, 1, 2, 3] for p in snap.cluster.running[0].placements)


def test_v0_0_39_shapes() -> None:
    """Slurm 23.02 (data_parser v0.0.39): `job_state` a string, bare integer times,
    `job_resources.allocated_nodes` with `nodename` and `memory_allocated`, and `exclusive`
    (rivosinc/prometheus-slurm-exporter's squeue_dataparser.json, job 52173767)."""
    job = {"job_id": 52173767, "job_state": "RUNNING", "partition": "hw-m", "qos": "normal", "nodes": "cs66",
           "start_time": 1694675238, "submit_time": 1694674833, "cpus": {"set": True, "infinite": False, "number": 1},
           "memory_per_node": {"set": True, "infinite": False, "number": 4096}, "gres_detail": [],
           "exclusive": ["false"], "shared": ["oversubscribe"],
           "job_resources": {"nodes": "cs66", "allocated_cores": 0, "allocated_cpus": 1, "allocated_hosts": 1,
                             "allocated_nodes": [{"sockets": {"1": {"cores": {"7": "allocated"}}}, "nodename": "cs66",
                                                 "cpus_used": 0, "memory_used": 0, "memory_allocated": 4096}]}}
    held = {**job, "job_id": 52175550, "job_state": "PENDING", "hold": True, "state_reason": "JobHeldUser",
            "job_resources": {}, "nodes": ""}
    node = {"name": "cs66", "cpus": 32, "real_memory": 257_000, "state": "MIXED", "partitions": "hw-m", "gres": ""}
    snap = snapshot({"nodes": [node]}, {"jobs": [job, held]}, now=1_694_676_000.0)
    (run,) = snap.cluster.running
    assert run.job.groups[0].request.cpu == 1000.0 and run.job.groups[0].request.memory == 4096.0
    assert run.placements[0].node == "cs66" and snap.held[0].reason == "held"


# -- topology.conf -------------------------------------------------------------------------------


def test_unbalanced_tree_of_slurms_testsuite() -> None:
    """testcase2: root over im0 (over grp10-22) and grp23-35 directly; every grp over 10-20 leaves."""
    text = (DATA / "slurm-testsuite" / "tree-unbalanced.conf").read_text()
    leaves = re.findall(r"SwitchName=(leaf\d+) Nodes=(\S+)", text)
    name, hosts = leaves[0]
    first = hosts.split("[")[0] + hosts.split("[")[1].split("-")[0]
    snap = snapshot([node_record(first, gres="")], [], topology=text, now=NOW)
    topo = snap.cluster.topology
    assert topo.levels == ["switch3", "switch2", "switch1", "switch0"]
    doms = {d.id: d for d in topo.domains}
    assert doms["grp23@switch2"].parent == "root" and doms["grp23"].parent == "grp23@switch2"
    assert doms["grp10"].parent == "im0" and doms[name].level == "switch0"
    assert snap.cluster.nodes[0].domain == name


def test_disconnected_trunks_and_blocks() -> None:
    tree = (DATA / "slurm-testsuite" / "tree-disconnected.conf").read_text()
    snap = snapshot([node_record("node1", gres=""), node_record("node40", gres="")], [], topology=tree, now=NOW)
    doms = {d.id: d for d in snap.cluster.topology.domains}
    assert doms["leafC"].parent == "leafC@switch1" and doms["leafC@switch1"].parent is None
    assert {n.id: n.domain for n in snap.cluster.nodes} == {"node1": "leafA1", "node40": "leafC"}
    block = (DATA / "slurm-testsuite" / "block.conf").read_text()  # 8 blocks of 4, BlockSizes=4,8,16,32,64
    nodes = [node_record(f"node{i:02d}", gres="") for i in range(1, 33)]
    snap = snapshot(nodes, [], topology=block, now=NOW)
    assert snap.cluster.topology.levels == ["block32", "block16", "block8", "block"]
    doms = {d.id: d for d in snap.cluster.topology.domains}
    assert doms["b3"].parent == "block8/1" and doms["block8/1"].parent == "block16/0"
    assert doms["block16/1"].parent == "block32/0"


def test_a_node_topology_conf_leaves_out_is_unconnected() -> None:
    tree = "SwitchName=s0 Nodes=gpu[1-2]\nSwitchName=s1 Nodes=gpu[3-4]\nSwitchName=top Switches=s[0-1]\n"
    nodes = [node_record(f"gpu{i}") for i in range(1, 6)]
    snap = snapshot(nodes, [], topology=tree, now=NOW)
    assert {n.id: n.domain for n in snap.cluster.nodes}["gpu5"] == "unconnected"
    assert any("gpu5" in note for note in snap.ignored)


# -- preemption by QOS ---------------------------------------------------------------------------


def _preemption_round(exempt_s: int | None = None, requeue: bool = True) -> Any:
    """Two 8-GPU nodes full of `scavenger` work; a `high` job needs a whole node."""
    nodes = [node_record("gpu1"), node_record("gpu2")]
    qos = [qos_record("normal"), qos_record("scavenger", mode="REQUEUE", exempt_s=exempt_s),
           qos_record("high", preempts=["scavenger"])]
    jobs = [running(101, ["gpu1"], 8, "scavenger", NOW - 3600, requeue=requeue),
            running(102, ["gpu2"], 8, "scavenger", NOW - 60, requeue=requeue),
            pending(201, gpus_per_node=8, qos="high"), pending(202, gpus_per_node=8, qos="normal")]
    return snapshot(nodes, jobs, qos=qos, now=NOW)


def test_a_high_qos_job_preempts_scavenger_work_and_requeues_it() -> None:
    snap = _preemption_round()
    prio = {j.id: j.priority for j in snap.queue.jobs}
    assert prio == {"201": 100, "202": 0} and all(r.job.preemptible for r in snap.cluster.running)
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=1.0)
    assert check(snap.cluster, snap.queue, plan) == []
    todo = actions(plan, snap)
    assert [s.job_id for s in todo.starts] == ["201"]  # `normal` preempts nothing
    (ev,) = todo.evictions
    assert ev.command == ["scontrol", "requeue", ev.job_id] and ev.by == "201"
    assert todo.commands()[0] == ev.command  # evictions first
    # The optimiser starts 201 by requeueing one scavenger job, as Slurm does: rule 10 (an eviction
    # serves its preemptor) refuses requeueing the second to give its node to 202, of QOS normal,
    # which may preempt nothing (before the rule, the optimiser did: docs/slurm.md).
    plan = solve(snap.cluster, snap.queue, solver="auto", time_limit=1.0)
    assert check(snap.cluster, snap.queue, plan) == []
    todo = actions(plan, snap)
    assert [s.job_id for s in todo.starts] == ["201"] and [e.by for e in todo.evictions] == ["201"]


def test_exempt_time_and_cancel_mode() -> None:
    snap = _preemption_round(exempt_s=600)  # job 102 ran 60 s: exempt; 101 ran an hour
    assert {r.job.id: r.job.preemptible for r in snap.cluster.running} == {"101": True, "102": False}
    plan = solve(snap.cluster, snap.queue, solver="auto", time_limit=1.0)
    assert [e.job for e in plan.evictions] == ["101"]
    snap = _preemption_round(requeue=False)  # REQUEUE mode on a job that cannot be requeued: Slurm cancels it
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=1.0)
    assert actions(plan, snap).evictions[0].command[0] == "scancel"


def test_qos_errors_name_the_qos() -> None:
    with pytest.raises(InputError) as err:
        snapshot(NODES, [], qos=[qos_record("a", preempts=["b"]), qos_record("b", preempts=["a"])], now=NOW)
    assert {i.rule for i in err.value.problems} == {"cycle"} and err.value.problems[0].path.startswith("QOS/")
    with pytest.raises(InputError) as err:
        snapshot(NODES, [], qos=[qos_record("a", preempts=["ghost"])], now=NOW)
    assert err.value.problems[0].path == "QOS/a.preempt.list"


# -- what a job asks for ---------------------------------------------------------------------------


def test_exclusive_job_takes_a_whole_node() -> None:
    nodes = [node_record("gpu1"), node_record("gpu2")]
    jobs = [running(101, ["gpu1"], 1, "normal", NOW - 60), pending(201, gpus_per_node=1, shared=["none"])]
    snap = snapshot(nodes, jobs, now=NOW)
    assert snap.cluster.nodes[0].capacity[EXCLUSIVE_RESOURCE] == 1000.0
    plan = solve(snap.cluster, snap.queue, solver="best-fit", time_limit=1.0)
    assert check(snap.cluster, snap.queue, plan) == []
    assert [p.node for p in plan.placements] == ["gpu2"]  # best-fit alone would pack it next to job 101


def test_features_partitions_and_node_lists_select_nodes() -> None:
    nodes = [node_record("gpu1", active_features=["ib"]), node_record("gpu2", active_features=["ib", "nvl"]),
             node_record("gpu3"), node_record("gpu4", partitions=("debug",))]
    jobs = [pending(1, gpus_per_node=1, features="ib&nvl"), pending(2, gpus_per_node=1, features="nvl|fast"),
            pending(3, gpus_per_node=1, excluded_nodes="gpu[1-3]", partition="gpu,debug"),
            pending(4, nodes=2, gpus_per_node=1, required_nodes="gpu[1,3]"),
            pending(5, gpus_per_node=1, features="[ib*2]"), pending(6, nodes=2, required_nodes="gpu1")]
    snap = snapshot(nodes, jobs, now=NOW)
    plan = solve(snap.cluster, snap.queue, solver="auto", time_limit=1.0)
    assert check(snap.cluster, snap.queue, plan) == []
    where: dict[str, set[str]] = {}
    for p in plan.placements:
        where.setdefault(p.job, set()).add(p.node)
    assert where == {"1": {"gpu2"}, "2": {"gpu2"}, "3": {"gpu4"}, "4": {"gpu1", "gpu3"}}
    assert {h.job_id: h.reason for h in snap.held} == {"5": "not_modelled", "6": "not_modelled"}


def test_gpus_per_job_task_and_type() -> None:
    nodes = [node_record(f"gpu{i}") for i in range(1, 5)]
    jobs = [pending(1, nodes=2, tres_per_job="gres/gpu:12"), pending(2, nodes=1, tasks={"set": True, "number": 4},
                                                                     tres_per_task="gres/gpu=2"),
            pending(3, tres_per_node="gres/gpu:h100:2")]
    snap = snapshot(nodes, jobs, now=NOW)
    groups = {j.id: j.groups[0] for j in snap.queue.jobs}
    assert groups["1"].request.gpu == 6 and groups["1"].replicas.min == 2
    assert groups["2"].request.gpu == 8
    assert groups["3"].models == {"h100": 1.0}
    models = SlurmConfig(models={"h100": "H100-SXM"})
    snap = snapshot(nodes, jobs[2:], config=models, now=NOW)
    assert snap.cluster.nodes[0].devices.model == "H100-SXM" and snap.queue.jobs[0].groups[0].models == {"H100-SXM": 1.0}


def test_an_array_is_one_job_whose_replicas_are_its_tasks() -> None:
    nodes = [node_record("gpu1"), node_record("gpu2")]
    array = pending(700, gpus_per_node=4, array_job_id={"set": True, "number": 700}, array_task_string="0-5")
    snap = snapshot(nodes, [array], now=NOW)
    (job,) = snap.queue.jobs
    assert job.id == "700_[0-5]" and job.gang is False and job.groups[0].replicas.max == 6
    plan = solve(snap.cluster, snap.queue, solver="auto", time_limit=1.0)
    assert check(snap.cluster, snap.queue, plan) == []
    todo = actions(plan, snap)
    assert sorted(s.job_id for s in todo.starts) == [f"700_{t}" for t in range(4)]  # 2 nodes x 8 GPUs / 4
    assert todo.waiting[0].job_id == "700_[0-5]" and "4 of its 6 tasks" in todo.waiting[0].detail


def test_switches_1_prefers_one_leaf() -> None:
    tree = "SwitchName=s0 Nodes=gpu[1-2]\nSwitchName=s1 Nodes=gpu[3-6]\nSwitchName=top Switches=s[0-1]\n"
    nodes = [node_record(f"gpu{i}") for i in range(1, 7)]
    snap = snapshot(nodes, [pending(1, nodes=3, gpus_per_node=8, required_switches=1)], topology=tree, now=NOW)
    assert snap.queue.jobs[0].topology is not None and snap.queue.jobs[0].topology.level == "switch0"
    plan = solve(snap.cluster, snap.queue, solver="auto", time_limit=1.0)
    assert {p.node for p in plan.placements} <= {"gpu3", "gpu4", "gpu5", "gpu6"}


# -- bad input -----------------------------------------------------------------------------------


def test_bad_input_names_the_object_and_field() -> None:
    mixed = load(DATA / "slurmweb-24.11-v0.0.42" / "nodes.json")  # ia1, ia2: gpu:h100:2,gpu:h200:4
    with pytest.raises(InputError) as err:
        snapshot(mixed, [], now=NOW)
    assert {i.path for i in err.value.problems} == {"Node/ia1.gres", "Node/ia2.gres"}
    cases = [
        ([node_record("gpu1")], [running(1, ["ghost"], 1, "normal", NOW)], None, "Job/1.nodes"),
        ([node_record("gpu1", gres="gpu:h100:x:y")], [], None, "Node/gpu1.gres"),
        ([node_record("gpu1")], [pending(2, excluded_nodes="gpu[1-")], None, "Job/2.excluded_nodes"),
        ([node_record("gpu1")], [], "SwitchName=s0 Nodes=gpu1\nSwitchName=s1 Switches=s9\n", "topology.conf"),
        ([node_record("gpu1")], [], "RingName=r0 Nodes=gpu1\n", "topology.conf"),
        ([node_record("gpu1"), node_record("gpu1")], [], None, "Node/gpu1.name"),
        ([node_record("gpu1", cpus="many")], [], None, "Node/gpu1.cpus"),
    ]
    for nodes, jobs, topology, path in cases:
        with pytest.raises(InputError) as err:
            snapshot(nodes, jobs, topology=topology, now=NOW)
        assert any(i.path.startswith(path) for i in err.value.problems), (path, err.value.problems)


OBJECT = re.compile(r"^(Node|Job|QOS|Partition|Tenant|Cluster|topology\.conf)\b")
"""Every problem's path starts with what it comes from (`Job/201.tres_per_node`, `Node[3]`)."""
VALUES = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                   st.sampled_from(["gpu:h100:8(IDX:0-7)", "gres/gpu:3", "gpu[1-", "gpu[1-3]", "DOWN", "N/A",
                                    "(null)", "1e400", "0-3,9", "gpu:h100:2,gpu:a100:2"]),
                   st.lists(st.sampled_from(["RUNNING", "PENDING", "DRAIN", "none", 3]), max_size=3),
                   st.fixed_dictionaries({"set": st.booleans(), "infinite": st.booleans(),
                                          "number": st.integers(-5, 2**40)}))


@settings(max_examples=int(os.environ.get("OPTSCHED_FUZZ_EXAMPLES", "100")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_slurm_output_is_read_or_refused_with_an_input_error(data: st.DataObject) -> None:
    doc = copy.deepcopy({
        "nodes": [node_record("gpu1"), node_record("gpu2")],
        "jobs": [running(101, ["gpu1"], 8, "scavenger", NOW - 3600), pending(201, gpus_per_node=8, qos="high"),
                 pending(202, nodes=2, gpus_per_node=2)],
        "qos": [qos_record("scavenger", mode="REQUEUE"), qos_record("high", preempts=["scavenger"])]})
    paths = [p for p in mutation_paths(doc) if len(p) >= 3]
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        try:
            set_at(doc, data.draw(st.sampled_from(paths)), data.draw(VALUES))
        except (KeyError, IndexError, TypeError):  # an earlier mutation removed the way there
            continue
    try:
        snap = snapshot(doc["nodes"], doc["jobs"], qos=doc["qos"], now=NOW)
    except InputError as err:
        assert err.problems and all(OBJECT.match(i.path) for i in err.problems), err.problems
    else:
        plan = solve(snap.cluster, snap.queue, solver="best-fit", time_limit=1.0)
        assert check(snap.cluster, snap.queue, plan) == []
        actions(plan, snap)


def cluster_64() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], str]:
    """64 nodes of 8 H100 (8 leaf switches of 8 under 2 spines), 16 running jobs (half of them
    `scavenger`, preemptible by `high`), 30 pending jobs of 1-4 nodes and 1-8 GPUs per node."""
    nodes = [node_record(f"gpu{i:02d}") for i in range(64)]
    tree = "".join(f"SwitchName=leaf{s} Nodes=gpu[{8 * s:02d}-{8 * s + 7:02d}]\n" for s in range(8))
    tree += "SwitchName=spine0 Switches=leaf[0-3]\nSwitchName=spine1 Switches=leaf[4-7]\n"
    qos = [qos_record("normal"), qos_record("scavenger", mode="REQUEUE"), qos_record("high", preempts=["scavenger"])]
    jobs = [running(100 + j, [f"gpu{4 * j + k:02d}" for k in range(2)], 8, "scavenger" if j % 2 else "normal",
                    NOW - 3600 * (j + 1), cpus=16) for j in range(16)]
    for j in range(30):
        n, gpus = 1 + j % 4, (8, 4, 2, 1)[j % 3]
        jobs.append(pending(200 + j, nodes=n, gpus_per_node=gpus, cpus=8 * n, qos="high" if j % 5 == 0 else "normal",
                            required_switches=1 if j % 7 == 0 else 0, shared=["none"] if j == 3 else []))
    return nodes, jobs, qos, tree


@pytest.mark.parametrize("solver", ["best-fit", "kueue", "auto"])
def test_round_trip_on_64_nodes(solver: str) -> None:
    """Slurm's JSON -> snapshot -> plan (checked by the validator) -> actions; then, from the JSON
    alone: each started job gets as many distinct nodes as it asks, no node ends over its CPUs or
    GPUs once the requeued jobs are gone, and every pending job is started or told why it waits."""
    nodes, jobs, qos, tree = cluster_64()
    snap = snapshot(nodes, jobs, qos=qos, topology=tree, now=NOW)
    assert len(snap.cluster.nodes) == 64 and len(snap.cluster.running) == 16 and len(snap.queue.jobs) == 30
    plan = solve(snap.cluster, snap.queue, solver=solver, time_limit=2.0)
    assert check(snap.cluster, snap.queue, plan) == []
    todo = actions(plan, snap)
    evicted = {e.job_id for e in todo.evictions}
    by_id = {str(j["job_id"]): j for j in jobs}
    assert all(by_id[e]["qos"] == "scavenger" for e in evicted)
    cpus: dict[str, float] = {}
    gpus: dict[str, float] = {}
    for j in jobs:
        if j["job_state"] == ["RUNNING"] and str(j["job_id"]) not in evicted:
            for name in j["nodes"].split(","):
                cpus[name] = cpus.get(name, 0) + 16
                gpus[name] = gpus.get(name, 0) + 8
    for start in todo.starts:
        job = by_id[start.job_id]
        assert len(set(start.nodes)) == len(start.nodes) == job["node_count"]["number"]
        per_node = float(job["tres_per_node"].split(":")[-1])
        for name in start.nodes:
            cpus[name] = cpus.get(name, 0) + job["cpus"]["number"] / len(start.nodes)
            gpus[name] = gpus.get(name, 0) + per_node
            assert len(start.devices[name]) == per_node
    assert all(cpus[n] <= 96 for n in cpus) and all(gpus[n] <= 8 for n in gpus)
    told = {s.job_id for s in todo.starts} | {w.job_id for w in todo.waiting}
    assert told == {str(j["job_id"]) for j in jobs if j["job_state"] == ["PENDING"]}


def test_cli_prints_the_commands(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from optsched.cli import app

    (tmp_path / "jobs.json").write_text(json.dumps({"jobs": [one("job-gpus-pending")]}))
    (tmp_path / "slurm.yaml").write_text("models: {h100: H100-SXM}\n")
    got = CliRunner().invoke(app, ["slurm", "--nodes", str(V44 / "nodes.json"), "--jobs", str(tmp_path / "jobs.json"),
                                   "--qos", str(V44 / "qos.json"), "--config", str(tmp_path / "slurm.yaml")])
    assert got.exit_code == 0, got.output
    assert re.search(r"^scontrol update JobId=4965 ReqNodeList=gpu\d NumNodes=1$", got.stdout, re.M)
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe")
    got = CliRunner().invoke(app, ["slurm", "--nodes", str(tmp_path / "bad.json"), "--jobs", str(tmp_path / "jobs.json")])
    assert got.exit_code == 2 and "encoding" in got.output


def test_a_round_request_on_slurm_output_returns_the_commands() -> None:
    """`POST /v1/rounds` with `slurm`: the plan (checked against the same snapshot) and its commands."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from optsched import load_plan
    from optsched.service import ServiceSettings, create_app

    nodes, jobs, qos, tree = cluster_64()
    body = {"slurm": {"nodes": {"nodes": nodes}, "jobs": {"jobs": jobs}, "qos": {"qos": qos}, "topology": tree,
                      "now": NOW}, "solver": "kueue", "time_limit": 2.0}
    with TestClient(create_app(ServiceSettings(loop=False))) as client:
        r = client.post("/v1/rounds", json=body)
        assert r.status_code == 200, r.text
        out = r.json()
        snap = snapshot(nodes, jobs, qos=qos, topology=tree, now=NOW)
        plan = load_plan(out["plan"])
        assert check(snap.cluster, snap.queue, plan) == []
        assert {s["job_id"] for s in out["actions"]["starts"]} == {p.job for p in plan.placements}
        assert all(s["command"][:2] == ["scontrol", "update"] for s in out["actions"]["starts"])
        bad = copy.deepcopy(body)
        bad["slurm"]["nodes"]["nodes"][3]["gres"] = "gpu:h100:x:y"
        r = client.post("/v1/rounds", json=bad)
        assert r.status_code == 422 and [d["loc"] for d in r.json()["detail"]] == ["slurm.Node/gpu03.gres"]
        r = client.post("/v1/rounds", json={**body, "cluster": {}})
        assert r.status_code == 422 and r.json()["detail"][0]["rule"] == "exclusive"


def _with_limit(account: str, tres: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Slurm-web's associations with `account`'s own association given a GrpTRES."""
    records = copy.deepcopy(load(V44 / "associations.json")["associations"])
    for a in records:
        if a["account"] == account and not a["user"] and not a["partition"]:
            a["max"]["tres"]["total"] = tres
    return records


def test_account_gpu_limits_are_tenant_quotas() -> None:
    """GrpTRES gres/gpu=4 on account biology: of three 4-GPU biology jobs one runs; optic (no limit) runs too."""
    nodes = [node_record("gpu1"), node_record("gpu2")]
    jobs = [pending(1, gpus_per_node=4, account="biology"), pending(2, gpus_per_node=4, account="biology"),
            pending(3, gpus_per_node=4, account="biology"), pending(4, gpus_per_node=4, account="optic")]
    limit = [{"type": "gres", "name": "gpu", "id": 1001, "count": 4}]
    snap = snapshot(nodes, jobs, associations={"associations": _with_limit("biology", limit)},
                    config=SlurmConfig(tenant_by="account"), now=NOW)
    quotas = {t.name: {k: q.nominal for k, q in t.quotas.items()} for t in snap.cluster.tenants}
    assert quotas == {"biology": {"slurm/gpu": 4.0}, "optic": {"slurm/gpu": 16.0}}
    for solver in ("kueue", "auto"):
        plan = solve(snap.cluster, snap.queue, solver=solver, time_limit=1.0)
        assert check(snap.cluster, snap.queue, plan) == []
        placed = {p.job for p in plan.placements}
        assert len(placed & {"1", "2", "3"}) == 1 and "4" in placed, solver
        assert {d.reason for d in plan.deferred} == {"quota"}
    # a parent account's limit (physic, over acoustic and optic) is reported, not applied
    snap = snapshot(nodes, jobs, associations=_with_limit("physic", limit), config=SlurmConfig(tenant_by="account"),
                    now=NOW)
    assert any(n.startswith("Association/physic.max.tres.total") for n in snap.ignored)
    assert all(not t.quotas for t in snap.cluster.tenants)


def test_qos_limits_of_slurm_25_11() -> None:
    """QOS study: GrpTRES node=50 and per-account / per-job / per-user limits, none of them modelled (reported)."""
    snap = snapshot(NODES, [pending(9, gpus_per_node=1, qos="study")], qos=load(V44 / "qos.json"),
                    config=SlurmConfig(tenant_by="qos"), now=NOW)
    assert [t.name for t in snap.cluster.tenants] == ["study"] and not snap.cluster.tenants[0].quotas
    notes = [n for n in snap.ignored if n.startswith("QOS/study")]
    assert any("node" in n for n in notes) and any("per-account/job/user" in n for n in notes)
    with pytest.raises(InputError) as err:
        snapshot(NODES, [], associations=_with_limit("biology", [{"type": "gres", "name": "gpu", "count": -1}]),
                 config=SlurmConfig(tenant_by="account"), now=NOW)
    assert err.value.problems[0].path == "Association/biology.max.tres.total[0].count"


def test_partition_priority_tiers_preempt_lower_tiers() -> None:
    """PreemptType=preempt/partition_prio: a job of the `urgent` partition (PriorityTier 10) preempts
    the `gpu` partition's (tier 1) work on the nodes both hold; the partitions are Slurm-web's, one
    copied with a higher tier."""
    parts = copy.deepcopy(load(V44 / "partitions.json")["partitions"])
    gpu = next(q for q in parts if q["name"] == "gpu")
    urgent = {**copy.deepcopy(gpu), "name": "urgent", "priority": {"job_factor": 1, "tier": 10}}
    nodes = [node_record("gpu1", partitions=("gpu", "urgent")), node_record("gpu2", partitions=("gpu", "urgent"))]
    jobs = [running(101, ["gpu1"], 8, "normal", NOW - 3600), running(102, ["gpu2"], 8, "normal", NOW - 3600),
            pending(201, gpus_per_node=8, partition="urgent"), pending(202, gpus_per_node=8, partition="gpu")]
    config = SlurmConfig(preempt_type="partition_prio")
    snap = snapshot(nodes, jobs, partitions=[gpu, urgent], config=config, now=NOW)
    assert {j.id: j.priority for j in snap.queue.jobs} == {"201": 100, "202": 0}
    assert all(r.job.preemptible for r in snap.cluster.running)
    plan = solve(snap.cluster, snap.queue, solver="kueue", time_limit=1.0)
    assert check(snap.cluster, snap.queue, plan) == []
    assert [p.job for p in plan.placements] == ["201"] and [e.by for e in plan.evictions] == ["201"]
    with pytest.raises(InputError) as err:
        snapshot(nodes, jobs, config=config, now=NOW)
    assert err.value.problems[0].path == "Partition" and err.value.problems[0].rule == "required"


def test_a_heterogeneous_job_is_one_gang_of_its_components() -> None:
    """salloc -N1 --gres=gpu:8 : -N2 -c32 (components 300+0 and 300+1), and a running one (400+0, 400+1)."""
    het = {"set": True, "infinite": False, "number": 300}
    nodes = [node_record(f"gpu{i}") for i in range(1, 5)]
    jobs = [pending(300, gpus_per_node=8, het_job_id=het, het_job_offset={"set": True, "number": 0}),
            pending(301, nodes=2, cpus=64, het_job_id=het, het_job_offset={"set": True, "number": 1}),
            running(400, ["gpu1"], 8, "normal", NOW - 60, het_job_id={"set": True, "number": 400},
                    het_job_offset={"set": True, "number": 0}),
            running(401, ["gpu2"], 4, "normal", NOW - 60, het_job_id={"set": True, "number": 400},
                    het_job_offset={"set": True, "number": 1})]
    snap = snapshot(nodes, jobs, now=NOW)
    (queued,) = snap.queue.jobs
    assert queued.id == "300" and queued.gang and [(g.name, g.replicas.min, g.request.gpu) for g in queued.groups] == [
        ("c0", 1, 8.0), ("c1", 2, 0.0)]
    (run,) = snap.cluster.running
    assert run.job.id == "400" and sorted((p.group, p.node) for p in run.placements) == [("c0", "gpu1"), ("c1", "gpu2")]
    plan = solve(snap.cluster, snap.queue, solver="auto", time_limit=1.0)
    assert check(snap.cluster, snap.queue, plan) == []
    starts = {s.job_id: s for s in actions(plan, snap).starts}
    assert set(starts) == {"300+0", "300+1"} and len(starts["300+1"].nodes) == 2
    assert starts["300+0"].command[2] == "JobId=300+0"
    held = snapshot(nodes, [jobs[0], {**jobs[1], "hold": True}], now=NOW)
    assert not held.queue.jobs and [(h.job_id, h.reason) for h in held.held] == [("300", "held")]
