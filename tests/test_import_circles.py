"""The product's import picture has no circles: a module never imports, even late inside a function or only for
type checking, a module that imports it back. import-linter checks the arrows between packages; this checks the
circles inside them, which it does not see."""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("core", "config", "memory", "observability", "tool_executor", "agent")
CHECKED = PACKAGES
"""Where no circle is allowed: everywhere (tool_executor's last one went with the call record's types module)."""


def _circles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """Strongly connected groups of more than one module inside `package` ("": all), by Tarjan, iteratively."""
    modules = sorted(m for m in graph.modules if not package or m == package or m.startswith(package + "."))
    edges = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i in modules) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)


@pytest.mark.parametrize("package", CHECKED)
def test_no_import_circle_inside_a_package(graph: grimp.ImportGraph, package: str) -> None:
    """No group of the package's modules imports itself round (late imports and TYPE_CHECKING ones count)."""
    assert _circles(graph, package) == []


def test_the_circle_finder_sees_a_circle() -> None:
    """The finder itself works: the graph with one edge added back finds that circle."""
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    graph.add_import(importer="core.events", imported="agent.loop")
    assert any("core.events" in group and "agent.loop" in group for group in _circles(graph, ""))
