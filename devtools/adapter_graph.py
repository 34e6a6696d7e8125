"""The import graph of ``functions_adapter/``, in the figures issue 39 tracks.

A module is one ``.py`` file (a package's ``__init__`` is the package); an arrow is one
module importing another of the adapter. A *protocol folder* is a sub-package (``api``,
``openai``, ``ag_ui``, ``mcp``, ``webhooks``, ``console``); everything at the top level is
*shared*. An arrow *up* goes from a shared module into a protocol folder; an arrow *across*
goes from one protocol folder into another; a *cycle* is a set of modules that reach each
other (a strongly connected component of more than one module).

    python -m devtools.adapter_graph [checkout]   # the figures, then every arrow up or across
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "functions_adapter"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the adapter, by dotted name."""
    return {_module_name(path, root): path for path in sorted((root / PACKAGE).rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The adapter module ``name`` lands in (``pkg.mod.attr`` → ``pkg.mod``), None if outside."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def arrows(known: dict[str, Path]) -> set[tuple[str, str]]:
    """(importer, imported) for every import between two adapter modules, lazy ones included."""
    found: set[tuple[str, str]] = set()
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                resolved = _resolve(target, known)
                if resolved is not None and resolved != name:
                    found.add((name, resolved))
    return found


def folder_of(module: str, known: dict[str, Path]) -> str | None:
    """The protocol folder ``module`` is in (or is), None for a shared module or the root."""
    parts = module.split(".")
    if len(parts) > 2:
        return parts[1]
    return parts[1] if len(parts) == 2 and known[module].name == "__init__.py" else None


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    graph: dict[str, list[str]] = {}
    for source, target in sorted(edges):
        graph.setdefault(source, []).append(target)
        graph.setdefault(target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@dataclass(frozen=True)
class Figures:
    modules: int
    arrows: int
    up: list[tuple[str, str]]
    across: list[tuple[str, str]]
    cycles: list[list[str]]


def figures(root: Path = ROOT) -> Figures:
    known = modules(root)
    edges = arrows(known)
    folder = {name: folder_of(name, known) for name in known}
    up = sorted((s, t) for s, t in edges if folder[s] is None and s != PACKAGE and folder[t] is not None)
    across = sorted((s, t) for s, t in edges if None not in (folder[s], folder[t]) and folder[s] != folder[t])
    return Figures(len(known), len(edges), up, across, cycles(edges))


def main() -> None:
    """``python -m devtools.adapter_graph [checkout]``: the figures of this checkout, or another's."""
    found = figures(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
    print(
        f"modules {found.modules}, arrows {found.arrows}, arrows up {len(found.up)}, "
        f"arrows between protocols {len(found.across)}, cycles {len(found.cycles)}"
    )
    for source, target in found.up:
        print(f"  up      {source} -> {target}")
    for source, target in found.across:
        print(f"  across  {source} -> {target}")
    for component in found.cycles:
        print(f"  cycle   {' <-> '.join(component)}")


if __name__ == "__main__":
    sys.exit(main())
