"""The shape of the code as a test: no import cycle in infra/ (issue 27).

A cycle means two modules that can only be understood (and imported) together: the shared piece
belongs in a module both import. Imports under `if TYPE_CHECKING:` are not counted: they never run,
and they are how a section of the stack file names the whole input its cross-checks read
(infra/config/*.py → infra/config/stack.py `StackInput`).
"""

from __future__ import annotations

# Cycles allowed for now, each with its reason and owner (none: issue 23 broke planner/search ↔
# planner/disaggregation). An entry is a frozenset of module names.
KNOWN_CYCLES: set[frozenset[str]] = set()


def _import_cycles(package: str) -> list[frozenset[str]]:
    """Every strongly connected set of more than one module under `package` (Tarjan), runtime imports only."""
    import grimp

    # No cache: grimp's .grimp_cache can outlive a checkout and report a cycle already broken.
    graph = grimp.build_graph(package, exclude_type_checking_imports=True, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[frozenset[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in graph.modules:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(frozenset(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycle_in_infra():
    cycles = _import_cycles("infra")
    assert [sorted(c) for c in cycles if c not in KNOWN_CYCLES] == []


def test_every_known_cycle_still_exists():
    """An exemption does not outlive its cycle: once one is broken, remove it from KNOWN_CYCLES."""
    cycles = _import_cycles("infra")
    assert [sorted(c) for c in KNOWN_CYCLES if c not in cycles] == []
