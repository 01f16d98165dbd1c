"""The code base stays lint-clean (ruff settings live in pyproject.toml)."""

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_ruff_check_is_clean():
    ruff = shutil.which("ruff") or str(ROOT / ".venv" / "bin" / "ruff")
    if not shutil.which(ruff):
        pytest.skip("ruff is not installed (it is in the test extras)")
    proc = subprocess.run([ruff, "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_python_files_compile():
    proc = subprocess.run([sys.executable, "-m", "compileall", "-q", "infra", "components", "policy", "benchmarks", "scripts"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
