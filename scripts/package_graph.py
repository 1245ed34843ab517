"""The import graph of openab_voice's top-level packages and its strongly connected components.

    .venv/bin/python scripts/package_graph.py [--edges]

Modules are collapsed into their top-level package (or module: ``clock``, ``jobs``...); an edge A -> B
means some module of A imports some module of B. Any component of more than one package is a cycle,
which the layer contract (pyproject.toml, docs/adr/0009-one-way-layers.md) forbids.
"""

from __future__ import annotations

import sys
from collections import defaultdict

import grimp


def package_edges(root: str = "openab_voice") -> dict[str, set[str]]:
    graph = grimp.build_graph(root, cache_dir=None)  # no .grimp_cache/ left in the tree
    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        edges[_top(module)]
        for imported in graph.find_modules_directly_imported_by(module):
            if _top(imported) != _top(module):
                edges[_top(module)].add(_top(imported))
    return edges


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


def components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    edges = package_edges()
    cycles = [c for c in components(edges) if len(c) > 1]
    print(f"packages: {len(edges)}, package edges: {sum(len(v) for v in edges.values())}")
    print(f"strongly connected components of more than one package: {cycles or 'none'}")
    if "--edges" in sys.argv:
        for node in sorted(edges):
            print(f"  {node} -> {', '.join(sorted(edges[node])) or '-'}")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
