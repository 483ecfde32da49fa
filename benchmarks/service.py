"""The scheduling service on loopback: rounds per second and extender filter latency at 1,280 nodes.

Starts `optsched serve` as its own process on 127.0.0.1 (a free port), pushes a 1,280-node H100
cluster as Kubernetes objects (`PUT /v1/state`: 4 blocks x 10 racks x 32 nodes x 8 GPUs; 60% of
the nodes run four-node gangs, a quarter of them preemptible at low priority; 608 pods wait, for
4,416 GPUs where 4,096 are free: four-node and two-node gangs of 8-GPU pods and single-GPU pods),
then measures, from client threads in this process over keep-alive HTTP/1.1 connections, with the
rounds in a worker process (the default) and in the server's own process (`--no-worker`):
- state rounds (`POST /v1/state/round`: snapshot, compile, solve within the time limit, actions),
  and stateless rounds on the same objects in the body (`POST /v1/rounds`);
- `filter` calls as kube-scheduler makes them with `nodeCacheCapable: true` (the pod and all
  1,280 node names), idle and while state rounds run back to back; and `prioritize` calls;
- in-process, the snapshot of the same objects at 1,280 and 10,240 nodes, read whole and with the
  round before's `SnapshotCache`, and the compile (`snapshot_rows`).
Every object carries a uid and a resourceVersion, as the API server lists them.

Run: `.venv/bin/python benchmarks/service.py [--calls 2000] [--threads 8] [--out DIR]`. Writes
service.md into DIR (default ./optsched-results/; `make bench` passes benchmarks/results).
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table

BLOCK, RACK = "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock"
CONFIG = {"topology": [{"label": BLOCK, "name": "block", "uplink_gbps": 12800},
                       {"label": RACK, "name": "rack", "uplink_gbps": 3200}],
          "tenant_label": "kueue.x-k8s.io/queue-name"}
NODES, GPUS = 1280, 8


def node(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"gpu-{i:04d}", "uid": f"uid-node-{i}", "resourceVersion": str(10 + i), "labels": {
                BLOCK: f"b{i // 320}", RACK: f"r{i // 32:02d}", "kubernetes.io/hostname": f"gpu-{i:04d}",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}},
            "spec": {},
            "status": {"capacity": {"cpu": "224", "memory": "2000Gi", "nvidia.com/gpu": "8", "pods": "110"},
                       "allocatable": {"cpu": "220", "memory": "1950Gi", "nvidia.com/gpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, team: str, gpus: int, priority: int, group: str | None = None, node_name: str | None = None,
        preemptible: bool = False) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": team}
    if group:
        labels["kueue.x-k8s.io/pod-group-name"] = group
    annotations = {"optsched.io/preemptible": "true"} if preemptible else {}
    spec: dict[str, Any] = {"priority": priority, "containers": [{"name": "main", "image": "pytorch:24.01",
                            "resources": {"requests": {"cpu": str(12 * gpus), "memory": f"{100 * gpus}Gi",
                                                       "nvidia.com/gpu": str(gpus)}}}]}
    status: dict[str, Any] = {"phase": "Pending"}
    if node_name:
        spec["nodeName"] = node_name
        status = {"phase": "Running", "startTime": "2026-12-01T10:00:00Z"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": team, "uid": f"uid-{team}-{name}",
                         "resourceVersion": str(100_000 + zlib.crc32(f"{team}/{name}".encode())), "labels": labels,
                         "annotations": annotations, "creationTimestamp": "2026-12-01T09:00:00Z"},
            "spec": spec, "status": status}


def cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The 1,280-node cluster of the module docstring."""
    nodes = [node(i) for i in range(NODES)]
    pods = []
    busy = int(NODES * 0.6) // 4 * 4
    for j in range(busy // 4):
        low = j % 4 == 0
        for k in range(4):
            pods.append(pod(f"run-{j}-{k}", f"team-{j % 3}", GPUS, 10 if low else 500, group=f"run-{j}",
                            node_name=f"gpu-{j * 4 + k:04d}", preemptible=low))
    for j in range(128):
        for k in range(4):
            pods.append(pod(f"train-{j}-{k}", f"team-{j % 3}", GPUS, 100 + j % 5 * 100, group=f"train-{j}"))
    for j in range(16):
        for k in range(2):
            pods.append(pod(f"ft-{j}-{k}", f"team-{j % 3}", GPUS, 300, group=f"ft-{j}"))
    for j in range(64):
        pods.append(pod(f"nb-{j}", f"team-{j % 3}", 1, 50))
    return nodes, pods


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any, float]:
        start = time.perf_counter()
        headers = {"Content-Type": "application/json"} if body else {}
        try:
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.conn.close()  # the server closed an idle keep-alive connection: open a new one
            start = time.perf_counter()
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
        data = resp.read()
        seconds = time.perf_counter() - start
        return resp.status, json.loads(data) if data[:1] in (b"{", b"[") else data, seconds


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def hammer(port: int, bodies: list[bytes], verb: str, threads: int, calls: int) -> tuple[list[float], float, int]:
    """`calls` calls of the verb spread over `threads` connections: latencies (s), wall (s), non-200s."""
    latencies: list[float] = []
    bad = [0]
    lock = threading.Lock()

    def work(t: int) -> None:
        c = Client(port)
        mine = []
        for i in range(t, calls, threads):
            status, _, s = c.call("POST", f"/v1/extender/{verb}", bodies[i % len(bodies)])
            mine.append(s)
            if status != 200:
                with lock:
                    bad[0] += 1
        with lock:
            latencies.extend(mine)

    start = time.perf_counter()
    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return latencies, time.perf_counter() - start, bad[0]


def rounds_back_to_back(port: int, stop: threading.Event, seconds: list[float]) -> None:
    """State rounds one after another until `stop`; each one's seconds into `seconds`."""
    c = Client(port)
    while not stop.is_set():
        seconds.append(c.call("POST", "/v1/state/round")[2])


def snapshot_rows(sizes: tuple[int, ...] = (1280, 10240), repeats: int = 3) -> list[list[Any]]:
    """The snapshot of this cluster's objects in-process (no server), at `sizes` nodes: read whole,
    and with the snapshot cache of the round before (nothing changed; 5% of the pods with a new
    resourceVersion, as when the round before bound them), best of `repeats`; and the compile."""
    global NODES
    saved = NODES
    try:
        rows = []
        for size in sizes:
            NODES = size
            rows.append(_snapshot_row(*cluster(), repeats))
        return rows
    finally:
        NODES = saved


def _snapshot_row(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], repeats: int) -> list[Any]:
    from optsched.adapters.kube import KubeConfig
    from optsched.adapters.kube.snapshot import SnapshotCache, snapshot
    from optsched.problem import compile_problem

    config = KubeConfig.model_validate(CONFIG)
    changed = list(pods)
    for i in range(0, len(changed), 20):
        meta = changed[i]["metadata"]
        changed[i] = {**changed[i], "metadata": {**meta, "resourceVersion": meta["resourceVersion"] + "1"}}
    times: dict[str, list[float]] = {"whole": [], "same": [], "changed": [], "compile": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        snap = snapshot(nodes, pods, config=config)
        times["whole"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        compile_problem(snap.cluster, snap.queue, validate=False)  # the collector paused inside
        times["compile"].append(time.perf_counter() - t0)
        for what, listing in (("same", pods), ("changed", changed)):
            cache = SnapshotCache()
            snapshot(nodes, pods, config=config, cache=cache)
            t0 = time.perf_counter()
            snapshot(nodes, listing, config=config, cache=cache)
            times[what].append(time.perf_counter() - t0)
    return [f"{len(nodes):,}", f"{len(pods):,}", *(min(times[k]) * 1000 for k in ("whole", "same", "changed",
                                                                                  "compile"))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=1.0)
    ap.add_argument("--solver", default="auto")
    ap.add_argument("--out", type=Path, default=Path("optsched-results"))
    args = ap.parse_args()
    nodes, pods = cluster()
    names = [n["metadata"]["name"] for n in nodes]
    pending = [p for p in pods if "nodeName" not in p["spec"]]
    rows: list[list[Any]] = []
    notes: list[str] = []
    for worker in (True, False):
        port = free_port()
        mode = "rounds in a worker process (default)" if worker else "rounds in the server process (--no-worker)"
        with tempfile.TemporaryDirectory() as tmp:
            cfg = Path(tmp) / "kube.json"
            cfg.write_text(json.dumps(CONFIG))
            server = subprocess.Popen([sys.executable, "-m", "optsched.cli", "serve", "--port", str(port),
                                       "--config", str(cfg), "--time-limit", str(args.time_limit),
                                       "--solver", args.solver, "--interval", "3600", "--log-level", "warning",
                                       "--worker" if worker else "--no-worker"])
            try:
                mode_rows, mode_notes = run(port, nodes, pods, names, pending, args)
            finally:
                server.terminate()
                server.wait(timeout=60)
        rows += [[f"{r[0]}; {mode}", *r[1:]] for r in mode_rows]
        notes += [f"{mode}: {n}" for n in mode_notes]
    text = (f"# The scheduling service on loopback (benchmarks/service.py)\n\n"
            f"{dt.date.today()}, {machine()}; server `optsched serve` in its own process, clients in "
            f"another over keep-alive HTTP/1.1 on 127.0.0.1.\n\n"
            f"Cluster: {NODES:,} nodes x {GPUS} H100 ({NODES * GPUS:,} GPUs) as Kubernetes objects, "
            f"{len(pods):,} pods of which {len(pending)} wait; solver `{args.solver}`, time limit "
            f"{args.time_limit} s.\n\n"
            + table(["what", "n", "p50 (ms)", "p99 (ms)", "max (ms)", "per second", "non-200"], rows)
            + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
            + "- Extender calls are answered on the server's event loop from the published round. With "
              "`--no-worker` a round runs in a thread of the same process and shares its GIL; with the worker "
              "the round's snapshot and solve run in another process, and only handing the listing over and "
              "the snapshot and plan back (pickled) holds the server's GIL.\n"
            + "\n## The snapshot, read whole and with the round before's cache\n\n"
              "In-process, no server: the same cluster at two sizes (the same pods waiting; 60% of the nodes "
              "running gangs), every object with the uid and resourceVersion the API server gives it. Best of 3; "
              "milliseconds.\n\n"
            + table(["nodes", "pods", "read whole", "cache, nothing changed", "cache, 5% of pods changed",
                     "compile"], snapshot_rows()) + "\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "service.md").write_text(text)
    print(text)


def run(port: int, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], names: list[str],
        pending: list[dict[str, Any]], args: argparse.Namespace) -> tuple[list[list[Any]], list[str]]:
    c = Client(port)
    deadline = time.monotonic() + 120
    while True:
        try:
            if c.call("GET", "/readyz")[0] == 200:
                break
        except OSError:
            c = Client(port)
        if time.monotonic() > deadline:
            raise SystemExit("the service did not become ready")
        time.sleep(0.2)
    rows: list[list[Any]] = []
    notes: list[str] = []
    listing = json.dumps({"nodes": nodes, "pods": pods}).encode()
    status, out, put_s = c.call("PUT", "/v1/state", listing)
    assert status == 200, out
    notes.append(f"`PUT /v1/state`: {len(listing) / 2**20:.1f} MiB of JSON, {put_s * 1000:.0f} ms.")
    while (first_round := c.call("GET", "/v1/state")[1]["round"]) is None:  # the loop's first round, woken by the PUT
        time.sleep(0.05)
    times, snaps = [], []
    for _ in range(args.rounds):
        status, out, s = c.call("POST", "/v1/state/round")
        assert status == 200, out
        times.append(s)
        snaps.append(c.call("GET", "/v1/state")[1]["round"])
    last = snaps[-1]
    rows.append(["state round (POST /v1/state/round)", len(times), statistics.median(times) * 1000,
                 pct(times, 0.99) * 1000, max(times) * 1000, len(times) / sum(times), 0])
    notes.append(f"State rounds: snapshot of the objects {statistics.median(s['snapshot_s'] for s in snaps):.3f} s "
                 f"(median) of {statistics.median(s['seconds'] for s in snaps):.3f} s in the server, the objects "
                 f"unchanged since the loop's first round (the snapshot cache reused the Nodes' read in "
                 f"{sum(s['nodes_reused'] for s in snaps)} of {len(snaps)} rounds and "
                 f"{statistics.median(s['pods_reused'] for s in snaps):.0f} of {len(pods):,} pods at the median; "
                 f"the loop's first round, reading everything: snapshot {first_round['snapshot_s']:.3f} s); the last: "
                 f"`{last['solver']}` {last['status']}, {last['bindings']} bindings, {last['evictions']} evictions, "
                 f"{last['pending']} pods told why they wait.")
    body = json.dumps({"kubernetes": {"nodes": nodes, "pods": pods, "config": CONFIG}, "solver": args.solver,
                       "time_limit": args.time_limit}).encode()
    times = []
    for _ in range(max(2, args.rounds // 2)):
        status, out, s = c.call("POST", "/v1/rounds", body)
        assert status == 200, str(out)[:500]
        times.append(s)
    rows.append(["stateless round (POST /v1/rounds, objects in the body)", len(times), statistics.median(times) * 1000,
                 pct(times, 0.99) * 1000, max(times) * 1000, len(times) / sum(times), 0])
    bodies = [json.dumps({"Pod": p, "NodeNames": names}).encode() for p in pending]
    plan = c.call("GET", "/v1/plan")[1]
    outcome: dict[str, int] = {}
    for b in bodies[:100]:
        r = c.call("POST", "/v1/extender/filter", b)[1]
        key = "one node" if r["NodeNames"] else "unresolvable" if r["FailedAndUnresolvableNodes"] else "wait"
        outcome[key] = outcome.get(key, 0) + 1
    notes.append(f"Filter answers for the first 100 waiting pods: {outcome} (plan #{plan['number']}); a filter "
                 f"body is {len(bodies[0]) / 1024:.0f} KiB (the pod and {len(names):,} node names).")
    for verb, during in (("filter", False), ("prioritize", False), ("filter", True)):
        stop = threading.Event()
        background: list[float] = []
        bg = threading.Thread(target=rounds_back_to_back, args=(port, stop, background)) if during else None
        if bg is not None:
            bg.start()
            time.sleep(0.2)
        lat, wall, bad = hammer(port, bodies, verb, args.threads, args.calls)
        stop.set()
        if bg is not None:
            bg.join()
        what = f"{verb}, {args.threads} clients" + (f", state rounds back to back ({len(background)} ran)"
                                                    if during else ", idle")
        rows.append([what, len(lat), statistics.median(lat) * 1000, pct(lat, 0.99) * 1000, max(lat) * 1000,
                     len(lat) / wall, bad])
    metrics = c.call("GET", "/metrics")[2]
    notes.append(f"`GET /metrics` answered in {metrics * 1000:.1f} ms.")
    return rows, notes


if __name__ == "__main__":
    main()
