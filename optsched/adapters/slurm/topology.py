"""Slurm's topology.conf -> the Cluster's fabric (levels from the top, domains, each node's leaf).

Two of Slurm's topology plugins have a fabric optsched models (topology.conf(5)):
- `topology/tree`: `SwitchName=s0 Nodes=tux[0-3]` (a leaf switch) and `SwitchName=s3
  Switches=s[0-2]` (its parent). Levels are counted up from the nodes: `switch0` is the switches
  that hold nodes, `switchK` those K hops above. Where a branch is shorter than the tallest one
  (Slurm's "unbalanced tree"), or a leaf has no parent (disconnected trunks), pass-through
  domains `<switch>@switchK` stand in at the missing levels: they hold the same nodes, so a rule
  on that level means the same switch. `LinkSpeed` is in arbitrary units (the man page says it is
  not used), so uplinks come from `SlurmConfig.uplinks_gbps`.
- `topology/block`: `BlockName=b1 Nodes=node[01-04]` and `BlockSizes=4,16`: the blocks are the
  `block` level; each larger size groups that many nodes' worth of consecutive blocks (in the
  file's order, as Slurm pairs contiguous blocks) into a level `block<size>`, up to the first size
  that holds every block.
`topology/ring`, `topology/torus3d` and topology.yaml are not read (an InputError says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from optsched.adapters.documents import Problems
from optsched.adapters.slurm.hostlists import expand

SOURCE = "topology.conf"
UNCONNECTED = "unconnected"
"""The leaf of nodes topology.conf does not connect (Slurm warns and keeps them out of multi-node jobs)."""


@dataclass
class Fabric:
    """The fabric as the Cluster's topology: levels from the top, domain documents, each node's leaf."""

    levels: list[str]
    domains: list[dict[str, Any]]
    leaf_of: dict[str, str]
    """Node name -> the id of its leaf domain."""


def _lines(text: str, problems: Problems) -> list[tuple[int, dict[str, str]]]:
    """(line number, {key (lower case): value}) of each non-empty line; `#` starts a comment."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        pairs: dict[str, str] = {}
        for word in line.split():
            key, eq, value = word.partition("=")
            if not eq or not value:
                problems.add(f"{SOURCE}:{number}", key, "syntax", f"{word!r} is not Key=Value")
                continue
            pairs[key.lower()] = value
        out.append((number, pairs))
    return out


def read_topology(text: str, config_uplinks: dict[str, float], problems: Problems) -> Fabric | None:
    """The fabric topology.conf describes; None (with problems) when it describes none."""
    lines = _lines(text, problems)
    kinds = {k for _, pairs in lines for k in pairs}
    if "switchname" in kinds and "blockname" in kinds:
        problems.add(SOURCE, "", "syntax", "SwitchName (topology/tree) and BlockName (topology/block) in one file")
        return None
    if "switchname" in kinds:
        return _tree(lines, config_uplinks, problems)
    if "blockname" in kinds:
        return _blocks(lines, config_uplinks, problems)
    problems.add(SOURCE, "", "unsupported", "no SwitchName or BlockName line: only topology/tree and "
                 "topology/block are read (not topology/ring, topology/torus3d or topology.yaml)")
    return None


def _tree(lines: list[tuple[int, dict[str, str]]], uplinks: dict[str, float], problems: Problems) -> Fabric | None:
    children: dict[str, list[str]] = {}
    nodes_of: dict[str, list[str]] = {}
    for number, pairs in lines:
        ref = f"{SOURCE}:{number}"
        name = pairs.get("switchname")
        if name is None:
            problems.add(ref, "", "syntax", "every line of a tree needs SwitchName=")
            continue
        if name in children or name in nodes_of:
            problems.add(ref, "SwitchName", "duplicate_id", f"switch {name!r} defined twice")
            continue
        if "switches" in pairs:
            children[name] = expand(pairs["switches"], ref, "Switches", problems)
        if "nodes" in pairs:
            nodes_of[name] = expand(pairs["nodes"], ref, "Nodes", problems)
        if name in children and name in nodes_of:
            problems.add(ref, "", "syntax", f"switch {name!r} has both Switches= and Nodes=")
        if name not in children and name not in nodes_of:
            nodes_of[name] = []  # a switch with nothing under it
    parent: dict[str, str] = {}
    for name, kids in children.items():
        for kid in kids:
            if kid not in children and kid not in nodes_of:
                problems.add(SOURCE, f"SwitchName={name}.Switches", "unknown_reference",
                             f"switch {kid!r} is not defined")
            elif kid in parent:
                problems.add(SOURCE, f"SwitchName={name}.Switches", "duplicate_id",
                             f"switch {kid!r} is under both {parent[kid]!r} and {name!r}")
            else:
                parent[kid] = name
    height: dict[str, int] = {}

    def height_of(name: str, path: tuple[str, ...] = ()) -> int:
        if name in height:
            return height[name]
        if name in path:
            problems.add(SOURCE, f"SwitchName={name}", "cycle", f"switches form a cycle: {' -> '.join((*path, name))}")
            return 0
        h = 0 if name in nodes_of else 1 + max((height_of(k, (*path, name)) for k in children[name]
                                                if k in children or k in nodes_of), default=-1)
        height[name] = h
        return h

    for name in [*children, *nodes_of]:
        height_of(name)
    if problems.issues:
        return None
    top = max(height.values())
    levels = [f"switch{h}" for h in range(top, -1, -1)]
    domains: list[dict[str, Any]] = []
    leaf_of: dict[str, str] = {}

    def add(name: str, above: str | None, h: int) -> None:
        """Domain `name` at height `height[name]`, with pass-throughs up to just below height `h`
        (the parent's), under `above`."""
        own = height[name]
        up = above
        for k in range(h - 1, own, -1):
            domains.append({"id": f"{name}@switch{k}", "level": f"switch{k}", "parent": up})
            up = f"{name}@switch{k}"
        domains.append({"id": name, "level": f"switch{own}", "parent": up, "uplink_gbps": uplinks.get(name)})
        for kid in children.get(name, []):
            add(kid, name, own)
        for node in nodes_of.get(name, []):
            if node in leaf_of:
                problems.add(SOURCE, f"SwitchName={name}.Nodes", "duplicate_id",
                             f"node {node!r} is under both {leaf_of[node]!r} and {name!r}")
            leaf_of[node] = name

    for name in [*children, *nodes_of]:
        if name not in parent:
            add(name, None, top + 1)
    return Fabric(levels=levels, domains=domains, leaf_of=leaf_of)


def _blocks(lines: list[tuple[int, dict[str, str]]], uplinks: dict[str, float], problems: Problems) -> Fabric | None:
    blocks: list[tuple[str, list[str]]] = []
    sizes: list[int] = []
    for number, pairs in lines:
        ref = f"{SOURCE}:{number}"
        if "blocksizes" in pairs:
            raw_sizes = pairs["blocksizes"].split(",")
            if not all(s.isdigit() and int(s) > 0 for s in raw_sizes):
                problems.add(ref, "BlockSizes", "syntax", f"{pairs['blocksizes']!r} is not a list of positive counts")
                continue
            sizes = [int(s) for s in raw_sizes]
            if any(b % a or (b // a) & (b // a - 1) for a, b in pairwise(sizes)):
                problems.add(ref, "BlockSizes", "syntax", "each block size must be a power of two times the one before")
            continue
        name = pairs.get("blockname")
        if name is None:
            problems.add(ref, "", "syntax", "every line needs BlockName= (or is BlockSizes=)")
            continue
        if any(name == b for b, _ in blocks):
            problems.add(ref, "BlockName", "duplicate_id", f"block {name!r} defined twice")
            continue
        blocks.append((name, expand(pairs.get("nodes", ""), ref, "Nodes", problems)))
    if not blocks:
        problems.add(SOURCE, "", "required", "no BlockName line")
    if problems.issues:
        return None
    base = sizes[0] if sizes else min(len(n) for _, n in blocks) or 1
    groups: list[int] = []  # blocks per domain, per level above the base
    for size in sizes[1:]:
        groups.append(size // base)
        if size // base >= len(blocks):
            break
    levels = [f"block{base * g}" for g in reversed(groups)] + ["block"]
    domains: list[dict[str, Any]] = []

    def above(i: int, k: int) -> str | None:
        """The domain of level `groups[k]` that holds block i; None above the top."""
        return None if k >= len(groups) else f"block{base * groups[k]}/{i // groups[k]}"

    for k in range(len(groups) - 1, -1, -1):
        level = f"block{base * groups[k]}"
        for j in range((len(blocks) + groups[k] - 1) // groups[k]):
            dom = f"{level}/{j}"
            domains.append({"id": dom, "level": level, "parent": above(j * groups[k], k + 1),
                            "uplink_gbps": uplinks.get(dom)})
    leaf_of: dict[str, str] = {}
    for i, (name, members) in enumerate(blocks):
        domains.append({"id": name, "level": "block", "parent": above(i, 0), "uplink_gbps": uplinks.get(name)})
        for node in members:
            if node in leaf_of:
                problems.add(SOURCE, f"BlockName={name}.Nodes", "duplicate_id",
                             f"node {node!r} is in both {leaf_of[node]!r} and {name!r}")
            leaf_of[node] = name
    return Fabric(levels=levels, domains=domains, leaf_of=leaf_of)


def unconnected_leaf(fabric: Fabric) -> list[dict[str, Any]]:
    """Domains for the `unconnected` leaf, a chain from the top level down (added to `fabric`)."""
    out = []
    up = None
    for level in fabric.levels:
        dom = UNCONNECTED if level == fabric.levels[-1] else f"{UNCONNECTED}@{level}"
        out.append({"id": dom, "level": level, "parent": up})
        up = dom
    return out
