"""Compile time of a 102,400-GPU cluster (12,800 nodes) and a 10,000-job queue.

Run: `.venv/bin/python benchmarks/compile.py`. Writes benchmarks/results/compile.md.
Stages are timed apart: field validation (pydantic), cross-reference checks, and compiling the
validated documents into arrays (`compile_problem(..., validate=False)`).
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, table, timed, write
from optsched.generate import NodeGroup, fat_tree_cluster, generate_queue
from optsched.model import Cluster, Queue
from optsched.model.references import validate_cluster, validate_queue
from optsched.problem import compile_problem


def big_cluster(nodes: int) -> Cluster:
    """H100 / A100 / L40S thirds in a 3-level fat tree, 32 nodes per leaf, 10 leaves per spine."""
    third = nodes // 3
    groups = [
        NodeGroup(nodes - 2 * third, "H100-SXM", 8, [list(range(8))],
                  {"cpu": 192000, "memory": 2097152, "rdma_nics": 8}, "h100"),
        NodeGroup(third, "A100-SXM", 8, [list(range(8))], {"cpu": 96000, "memory": 1048576, "rdma_nics": 4}, "a100"),
        NodeGroup(third, "L40S", 8, [[0, 1], [2, 3], [4, 5], [6, 7]], {"cpu": 128000, "memory": 786432}, "l40s",
                  taints=[{"key": "spot", "effect": "NoSchedule"}]),
    ]
    return fat_tree_cluster(groups, nodes_per_leaf=32, leaves_per_spine=10, oversubscription=2.0)


def main() -> None:
    rows = []
    for nodes, jobs in [(1280, 1000), (12800, 10000)]:
        cluster = big_cluster(nodes)
        queue = generate_queue(cluster, "mixed", jobs=jobs, load=1.0, seed=0)
        c_doc, q_doc = cluster.model_dump(), queue.model_dump()
        _, t_fields = timed(lambda c=c_doc: Cluster.model_validate(c), repeat=3)
        _, t_qfields = timed(lambda q=q_doc: Queue.model_validate(q), repeat=3)
        _, t_refs = timed(lambda c=cluster, q=queue: (validate_cluster(c), validate_queue(q, c)), repeat=3)
        p, t_compile = timed(lambda c=cluster: compile_problem(c, validate=False), repeat=3)
        _, t_compile_q = timed(lambda c=cluster, q=queue: compile_problem(c, q, validate=False), repeat=3)
        gpus = int(p.node_dev_count.sum())
        rows.append([f"{nodes:,}", f"{gpus:,}", f"{jobs:,}", t_fields, t_qfields, t_refs, t_compile, t_compile_q])
    text = (f"# Compiling the round\n\n{dt.date.today()}, {machine()}; median of 3 runs, seconds.\n\n"
            + table(["nodes", "GPUs", "queued jobs", "cluster fields", "queue fields", "cross-refs",
                     "compile cluster", "compile cluster+queue"], rows)
            + "\n\n`compile` turns validated documents into the read-only arrays every solver, the validator "
              "and the metrics share (`optsched/problem.py`).\n")
    write("compile", text)


if __name__ == "__main__":
    main()
