"""The architecture as a test: import-linter contracts from pyproject.toml, and no hidden channels.

The contracts say which layer may import which (the planner and the catalog know no Pulumi, the
config no renderer, components no config). The grep catches the channels no import shows: a
module global set as a side effect, an environment variable between the plan and the program.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_import_contracts_hold():
    beside = Path(sys.executable).parent / "lint-imports"
    lint = str(beside) if beside.exists() else shutil.which("lint-imports")
    assert lint, "lint-imports is in the test extras (import-linter)"
    proc = subprocess.run([lint, "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_no_hidden_channels_between_the_plan_and_the_program():
    hidden = re.compile(r"LAST_FACTS|INFRA_STACK_ROOT|runpy|sys\.modules\[")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "infra").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if hidden.search(line)
    ]
    assert offenders == []


# Diagram node → the modules it stands for (docs/architecture.md, "Data path").
_DIAGRAM_NODES = {
    "config": ["infra.config"], "plan": ["infra.stack_plan", "infra.layout_fit"], "declare": ["infra.declare"],
    "components": ["components"], "render": ["infra.render", "infra.specs"], "planner": ["infra.planner"],
    "catalog": ["infra.catalog"], "domain": ["infra.domain"], "main": ["infra.__main__"],
    "offline": ["infra.offline"], "mock": ["infra.mock_runtime"], "cli": ["infra.cli", "infra.commands"],
    "resources": ["infra.stack_resources"], "graph": ["infra.resource_graph"],
}


def test_the_architecture_diagrams_import_arrows_are_real_imports():
    """Every dotted arrow of the data-path diagram is an import the code makes."""
    import grimp

    text = (ROOT / "docs" / "architecture.md").read_text()
    diagram = text.split("```mermaid", 1)[1].split("```", 1)[0]
    graph = grimp.build_graph("infra", "components")

    def modules(node: str) -> set[str]:
        prefixes = _DIAGRAM_NODES[node]
        return {m for m in graph.modules if any(m == p or m.startswith(p + ".") for p in prefixes)}

    arrows = []
    for line in diagram.splitlines():
        if "-.->" in line:
            left, right = (side.strip() for side in line.split("-.->"))
            arrows += [(a.strip(), b.strip()) for a in left.split("&") for b in right.split("&")]
    assert len(arrows) >= 10
    missing = [
        (a, b) for a, b in arrows
        if not any(graph.direct_import_exists(importer=x, imported=y) for x in modules(a) for y in modules(b))
    ]
    assert missing == []


def test_components_only_group_and_the_plan_holds_every_object():
    """Issue 39: components import no renderer (nor config, plan or planner: the contract above), and
    nothing in `infra/` but `declare` and the entry point imports Pulumi itself."""
    import grimp

    graph = grimp.build_graph("infra", "components", "pulumi", include_external_packages=True,
                              exclude_type_checking_imports=True, cache_dir=None)  # fmt: skip
    renderers = {m for m in graph.modules if m == "infra.render" or m.startswith("infra.render.")}
    for module in {m for m in graph.modules if m.startswith("components")}:
        assert not graph.find_modules_directly_imported_by(module) & renderers, module
    pulumi_users = {m for m in graph.modules if m.startswith("infra") and "pulumi" in graph.find_modules_directly_imported_by(m)}
    assert pulumi_users == {"infra.declare", "infra.__main__", "infra.mock_runtime"}


# infra/config/ (issue 39): each section of the stack file is a leaf. A section's modules import
# only the shared helpers and their own section's modules; whatever spans sections is
# cross_checks.py, on the whole input (stack_input.py); stack.py runs both. TYPE_CHECKING imports
# count here: a section that names another's type to read it is reading another section.
CONFIG_SECTIONS = {
    "api_keys": {"client_keys"},
    "cluster": {"cluster"},
    "gpu_pools": {"pools"},
    "gpu_runtime": {"runtime"},
    "model_cache": {"model_cache"},
    "models": {"models", "layout", "kv_offload", "model_keys", "admin_switches", "engine_flags", "rollout", "model_checks", "model_env"},
    "network": {"network"},
    "observability": {"observability"},
    "router": {"router"},
    "secrets": {"secrets"},
}
# Shared by several sections or by the whole, knowing no section: names and the strict model, the
# allow-list judgement (cluster's and router's lists), pydantic's errors in words, the YAML reader,
# the credential scan over every string of the file.
CONFIG_HELPERS = {"base", "allow_lists", "errors", "load", "credentials"}
CONFIG_WHOLE = {"__init__", "stack_input", "cross_checks", "stack"}


def _config_graph():
    import grimp

    graph = grimp.build_graph("infra", exclude_type_checking_imports=False, cache_dir=None)
    modules = {m.removeprefix("infra.config.") if m != "infra.config" else "__init__"
               for m in graph.modules if m == "infra.config" or m.startswith("infra.config.")}

    def imports(name: str) -> set[str]:
        module = "infra.config" if name == "__init__" else f"infra.config.{name}"
        found = {m for m in graph.find_modules_directly_imported_by(module) if m == "infra.config" or m.startswith("infra.config.")}
        return {m.removeprefix("infra.config.") if m != "infra.config" else "__init__" for m in found}

    return modules, imports


def test_config_sections_are_leaves():
    modules, imports = _config_graph()
    sections = {m: s for s, ms in CONFIG_SECTIONS.items() for m in ms}
    assert modules == set(sections) | CONFIG_HELPERS | CONFIG_WHOLE, "every infra/config module is a section's, a helper or the whole's"
    for helper in CONFIG_HELPERS:
        assert imports(helper) <= CONFIG_HELPERS, f"helper {helper} imports {imports(helper) - CONFIG_HELPERS}"
    for module, section in sections.items():
        allowed = CONFIG_HELPERS | CONFIG_SECTIONS[section]
        assert imports(module) <= allowed, f"section {section} ({module}.py) imports {sorted(imports(module) - allowed)}"
    importers_of_stack = {m for m in modules if "stack" in imports(m)}
    assert importers_of_stack == {"__init__"}, "stack.py runs the checks: nothing in infra/config imports it"
    assert {m for m in modules if "cross_checks" in imports(m)} == {"__init__", "stack"}


def test_no_import_cycle_in_the_config_counting_type_checking_imports():
    modules, imports = _config_graph()
    graph = {m: imports(m) for m in modules}
    done: set[str] = set()

    def cycle_from(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module):], module]
        if module in done:
            return None
        for imported in sorted(graph[module]):
            found = cycle_from(imported, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    cycles = [c for m in sorted(modules) if (c := cycle_from(m, []))]
    assert cycles == []
