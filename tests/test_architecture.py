"""The package's shape: no import cycles, no private names across modules, the validator and the
metrics independent of every solver, every concern complete, every solver registered.

The import graph is read from the source (ast): module-level imports, imports inside functions and
imports under TYPE_CHECKING all count. An import names the deepest module it reaches
(``from optsched.concerns import gang`` is an edge to ``optsched.concerns.gang``).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import optsched

ROOT = Path(optsched.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for f in ROOT.rglob("*.py"):
        parts = list(f.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


MODULES = _modules()


def _target(name: str) -> str | None:
    """The deepest optsched module that `name` (a dotted path) names."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in MODULES:
            return candidate
    return None


def _imports(module: str) -> Iterator[tuple[str, str | None, bool]]:
    """(target module, imported name or None, at module level and outside TYPE_CHECKING)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    runtime: set[int] = set()
    for node in tree.body:  # module-level statements outside `if TYPE_CHECKING:`
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import | ast.ImportFrom) and not _in_function(tree, sub):
                runtime.add(id(sub))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if not name.startswith("optsched"):
                continue
            for alias in node.names:
                sub_module = f"{name}.{alias.name}"
                if sub_module in MODULES:
                    yield sub_module, None, id(node) in runtime
                else:
                    target = _target(name)
                    if target is not None:
                        yield target, alias.name, id(node) in runtime
        elif isinstance(node, ast.Import):
            for alias in node.names:
                target = _target(alias.name) if alias.name.startswith("optsched") else None
                if target is not None:
                    yield target, None, id(node) in runtime


def _in_function(tree: ast.AST, target: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) \
                and any(sub is target for sub in ast.walk(node)):
            return True
    return False


def _graph(runtime_only: bool = False) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _name, at_runtime in _imports(m):
            if target != m and (at_runtime or not runtime_only):
                edges[m].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_the_module_graph_has_no_cycle() -> None:
    assert _cycles(_graph()) == []


def test_a_cycle_is_found_when_there_is_one() -> None:
    """The cycle finder itself: a made-up graph with a loop."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]


def test_no_module_imports_a_private_name_of_another() -> None:
    private = [(m, target, name) for m in MODULES for target, name, _ in _imports(m)
               if name is not None and name.startswith("_") and not name.startswith("__")]
    assert private == []


def test_no_module_reads_a_private_attribute_of_another_object() -> None:
    """``x._name`` only on `self` or `cls` (third-party internals excepted: highspy's base class),
    and no subclass in another module overrides or calls its base's private methods."""
    found = []
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = ast.unparse(node.value)
                if owner not in ("self", "cls") and not owner.startswith("highspy"):
                    found.append(f"{m}: {owner}.{node.attr}")
    assert found == []
    from optsched.pareto.genome import GenomeEngine
    from optsched.solvers.greedy import GreedyEngine
    from optsched.solvers.kueue import KueueEngine

    base = {n for n in vars(GreedyEngine) if n.startswith("_") and not n.startswith("__")}
    for sub in (KueueEngine, GenomeEngine):
        assert not base & set(vars(sub)), sub  # no private method of the base overridden


def _reachable(start: str, edges: dict[str, set[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for w in edges[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_the_core_imports_no_integration() -> None:
    """The adapters and the service sit behind optional extras: no module outside them (the CLI's
    `serve` and `slurm` excepted, inside their functions) imports them, so the core runs without their libraries."""
    edges = _graph()
    outer = ("optsched.adapters", "optsched.service")
    found = [(m, t) for m, targets in edges.items() for t in targets
             if t.startswith(outer) and not m.startswith(outer) and m != "optsched.cli"]
    assert found == []
    cli_runtime = _graph(runtime_only=True)["optsched.cli"]
    assert not [t for t in cli_runtime if t.startswith(outer)]


@pytest.mark.parametrize("module", ["optsched.check", "optsched.metrics"])
def test_the_validator_and_the_metrics_load_no_solver_and_no_round_model(module: str) -> None:
    """Statically (every import they make when loaded) and in a fresh interpreter."""
    loaded = _reachable(module, _graph(runtime_only=True))
    assert not [m for m in loaded if m.startswith(("optsched.solvers", "optsched.roundmodel", "optsched.pareto"))]
    code = (f"import sys, {module}; print(sorted(m for m in sys.modules if m.startswith(('optsched.solvers', "
            "'optsched.roundmodel', 'optsched.pareto', 'ortools', 'highspy', 'pymoo'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_every_concern_module_is_registered_with_every_part_given_or_explained() -> None:
    from optsched import concerns
    from optsched.roundmodel.build import ENCODINGS

    registered = {c.module.__name__ for c in concerns.CONCERNS}
    modules = {f"optsched.concerns.{m.name}" for m in pkgutil.iter_modules(concerns.__path__)} | {
        f"optsched.concerns.tenancy.{m.name}" for m in pkgutil.iter_modules(
            importlib.import_module("optsched.concerns.tenancy").__path__)}
    modules -= {"optsched.concerns.base", "optsched.concerns.tenancy"}
    assert modules == registered
    encodings = dict(ENCODINGS)
    for c in concerns.CONCERNS:
        missing = dict(c.missing)
        for part, given in (("check", c.check), ("term", c.term), ("encodings", c.encodings), ("search", c.search)):
            assert bool(given) != bool(missing.get(part)), f"{c.name}: {part} must be given or explained, not both"
        for name in c.encodings:  # its encodings are in the model, and are its module's functions
            assert encodings[name].__module__ == c.module.__name__, (c.name, name)
    named = [n for c in concerns.CONCERNS for n in c.encodings]
    assert sorted(named) == sorted(encodings), "every encoding of the model belongs to one concern"
    assert [n for n, _ in concerns.CHECKS] == [c.name for c in concerns.CONCERNS if c.check]


def test_every_solver_name_resolves_to_its_registered_solver() -> None:
    from optsched.solvers.registry import LOADERS, lookup, solver_names

    for name, loader in LOADERS.items():
        assert name in {info.name for info in loader()}
    for name in solver_names():
        if name != "auto":
            info = lookup(name)
            assert info.name == name and info.summary
            assert info.honours <= {"num_workers", "initial_plan", "deterministic"}
