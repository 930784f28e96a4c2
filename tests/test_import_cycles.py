"""No import cycle in ``kiln_verify``, ``pytest_kiln`` or ``oracle``, counting every import.

import-linter's layer contract orders the layers, but two modules of one layer (or two
modules a contract does not name) may still import each other, and a cycle hidden in a
function body or under ``TYPE_CHECKING`` is still a cycle: the two modules cannot be
understood, tested or moved apart. This test builds the import graph from the source
itself, every ``import`` statement wherever it stands (module level, inside a function,
under ``if TYPE_CHECKING:``), and fails naming one cycle of each tangle it finds.

An edge is what a statement names: ``import a.b`` and ``from a.b import c`` reach
``a.b``, or ``a.b.c`` where ``c`` is a module; running a package's ``__init__`` before its
module is the interpreter's doing and not an edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kiln_verify", "pytest_kiln", "oracle")

Graph = dict[str, set[str]]


def _modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of ``packages`` under ``root``, by dotted name."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` statement names, relative levels resolved."""
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """``name`` or its nearest enclosing module that is one of ours (``None``: foreign)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(root: Path, packages: Iterable[str]) -> Graph:
    """The modules of ``packages`` and, for each, the modules of ours it imports anywhere."""
    modules = _modules(root, packages)
    graph: Graph = {name: set() for name in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _base(module, path, node)
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                found = _known(target, modules)
                if found is not None and found != module:
                    graph[module].add(found)
    return graph


def _tangles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    tangles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        tangles.append(sorted(component))
    return tangles


def _cycle(graph: Graph, tangle: list[str]) -> list[str]:
    """One cycle through the first module of ``tangle``, as ``a -> b -> ... -> a``."""
    members = set(tangle)
    start = tangle[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for successor in sorted(graph[node] & members):
            if successor == start:
                return [*paths[node], start]
            if successor not in paths:
                paths[successor] = [*paths[node], successor]
                queue.append(successor)
    raise AssertionError(f"{tangle} is not strongly connected")


def cycles(graph: Graph) -> list[list[str]]:
    """One cycle of each tangle of ``graph``, sorted."""
    return [_cycle(graph, tangle) for tangle in _tangles(graph)]


def test_no_import_cycle() -> None:
    found = cycles(import_graph(ROOT, PACKAGES))
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


def test_the_graph_counts_imports_in_functions_and_under_type_checking() -> None:
    graph = import_graph(ROOT, PACKAGES)
    # inside a fixture's body (the plugin module must not import the client)
    assert "kiln_verify.openenv.protocol.client" in graph["pytest_kiln.fixtures"]
    # under ``if TYPE_CHECKING:`` only
    assert "oracle.runner" in graph["pytest_kiln.fixtures"]
    # a module imported by ``from package import module``
    assert "pytest_kiln.cases.mcp_checks" in graph["pytest_kiln.cases.inventory"]


@pytest.mark.parametrize(
    ("a_body", "b_body", "expected"),
    [
        ("from pkg import b\n", "import pkg.a\n", [["pkg.a", "pkg.b", "pkg.a"]]),
        (
            "def f() -> None:\n    from pkg.b import g\n",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
            [["pkg.a", "pkg.b", "pkg.a"]],
        ),
        ("from .b import g\n", "import json\n", []),
    ],
    ids=["module-level", "function-and-type-checking", "no-cycle"],
)
def test_a_cycle_is_found_wherever_its_imports_stand(
    tmp_path: Path, a_body: str, b_body: str, expected: list[list[str]]
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(a_body)
    (package / "b.py").write_text(b_body)
    assert cycles(import_graph(tmp_path, ["pkg"])) == expected
