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
