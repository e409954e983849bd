"""The shape of the package: no import cycles (counting imports under TYPE_CHECKING and
inside functions), nothing below the ``Queue`` facade imports it, and the public surface
listed in ``tickq.__all__`` imports and is documented."""

from __future__ import annotations

import ast
from pathlib import Path

import tickq

SRC = Path(tickq.__file__).parent
FACADE = {"tickq.queue", "tickq"}
"""The facade and the package root (which re-exports it) may import anything."""
ABOVE_FACADE = {"tickq.cli", "tickq.plan", "tickq.testing", "tickq.__main__", "tickq.contrib"}
"""Modules that take or build a user's ``Queue`` from outside (CLI, planner, test helpers,
the Django backend): they may import the facade."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every tickq module ``name`` imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_graph_sees_type_checking_and_function_level_imports() -> None:
    graph = import_graph()
    assert "tickq.job" in graph["tickq.cycle"]  # under TYPE_CHECKING
    assert "tickq.worker" in graph["tickq.queue"]  # inside run_worker()


def test_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_nothing_below_the_facade_imports_it() -> None:
    graph = import_graph()
    below = [n for n in graph if n not in FACADE and n.partition(".")[0] == "tickq"
             and not any(n == a or n.startswith(a + ".") for a in ABOVE_FACADE)]  # fmt: skip
    offenders = sorted(n for n in below if "tickq.queue" in graph[n])
    assert not offenders, f"modules below the Queue facade that import tickq.queue: {offenders}"


def test_every_public_name_imports_and_is_documented() -> None:
    assert len(set(tickq.__all__)) == len(tickq.__all__)
    undocumented = []
    for name in tickq.__all__:
        value = getattr(tickq, name)  # AttributeError names a listed name that doesn't import
        if isinstance(value, str):  # __version__
            continue
        if not (getattr(value, "__doc__", None) or "").strip():
            undocumented.append(name)
    assert not undocumented, f"public names without a docstring: {undocumented}"


if __name__ == "__main__":
    for component in cycles(import_graph()):
        print(len(component), " ".join(component))
