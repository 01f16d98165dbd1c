"""The shape of the code as a test: no import cycle in infra/, no file in infra/ over 900 lines, no
function in infra/ or components/ over 100 lines (issue 27).

A cycle means two modules that can only be understood (and imported) together: the shared piece
belongs in a module both import. Imports under `if TYPE_CHECKING:` are not counted here: they never
run (infra/config/ counts them too: tests/project/test_architecture.py).
"""

from __future__ import annotations

import ast

from tests.conftest import ROOT

MAX_FILE_LINES = 900
MAX_FUNCTION_LINES = 100  # decorators, signature, docstring and body

# Functions allowed past MAX_FUNCTION_LINES, each with its reason ("path.py:function"). Only a rule
# or data table belongs here: a function a reader would split into named parts is split instead.
LONG_FUNCTIONS: dict[str, str] = {
}

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


def _python_files(*packages: str):
    for package in packages:
        yield from sorted((ROOT / package).rglob("*.py"))


def _long_functions() -> dict[str, int]:
    """Every function (methods and nested ones too) over MAX_FUNCTION_LINES, by "path.py:name"."""
    long = {}
    for path in _python_files("infra", "components"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = node.end_lineno - first + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    return long


def test_no_file_in_infra_is_over_900_lines():
    """A file past 900 lines holds more than one concern: split it by what a reader would name."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in _python_files("infra")
        if (n := len(path.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_function_is_over_100_lines_outside_the_allow_list():
    long = _long_functions()
    assert {name: n for name, n in long.items() if name not in LONG_FUNCTIONS} == {}


def test_every_allowed_long_function_is_still_long():
    """An exemption does not outlive its length: once a function is split, remove it from LONG_FUNCTIONS."""
    long = _long_functions()
    assert [name for name in LONG_FUNCTIONS if name not in long] == []
