"""The product's modules import each other without a circle: each can be read, tested and
compiled after the ones it imports. Type-only imports count too (a circle of types is still a
circle for a reader), and so do the hand-written Cython modules' Python imports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import REPO

PACKAGES = ("pipeline", "capture", "schemas", "dags")
# a .pyx file's Python imports, at the start of a line (``cimport`` lines are C-level)
_PYX_IMPORT = re.compile(r"^(?:from\s+([\w.]+)\s+import\s+(?!\()(.+)|import\s+([\w.]+))", re.M)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in [*(REPO / package).rglob("*.py"), *(REPO / package).rglob("*.pyx")]:
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules ``name`` imports (the deepest known module of each imported name)."""

    def resolve(target: str) -> str | None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    if path.suffix == ".pyx":
        for module, names, plain in _PYX_IMPORT.findall(path.read_text()):
            named = [plain] if plain else [f"{module}.{n.split()[0]}" for n in names.split(",")]
            found.update(t for t in map(resolve, named) if t is not None and t != name)
        return found
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [base])])
            targets = [f"{base}.{alias.name}" for alias in node.names]
        found.update(t for t in map(resolve, targets) if t is not None and t != name)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_circles_are_found() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_relative_imports_resolve() -> None:
    known = modules()
    assert "pipeline.session.model" in imports(
        "pipeline.session", REPO / "pipeline/session/__init__.py", known
    )


def test_no_module_is_in_an_import_circle() -> None:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert circles(graph) == []
