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
