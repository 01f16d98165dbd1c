"""A hand-edited GPU catalog (INFRA_GPU_CATALOG) with a malformed entry: one line naming the file,
the entry and the field, exit 2 — never a traceback at import (found in the issue-26 audit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.catalog import gpus
from infra.errors import UserError

ROOT = Path(__file__).resolve().parents[1]


def _catalog(tmp_path: Path, edit) -> Path:
    doc = json.loads(gpus.PACKAGED_CATALOG.read_text())
    edit(doc["sizes"][1])
    path = tmp_path / "sizes.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda e: e.pop("ram_gib"), "sizes[1].ram_gib: missing (every entry needs"),
        (lambda e: e.update(offer="free"), "sizes[1]: offer 'free' is not self-serve, spot or contract"),
        (lambda e: e.update(gpus="eight"), "sizes[1]: invalid literal"),
    ],
)
def test_a_malformed_entry_is_one_error_naming_it(tmp_path, edit, words):
    path = _catalog(tmp_path, edit)
    with pytest.raises(UserError) as err:
        gpus.load_sizes(path)
    assert words in err.value.render()
    assert str(path) in err.value.render()


def test_the_cli_says_it_in_one_line_before_any_command_runs(tmp_path):
    path = _catalog(tmp_path, lambda e: e.pop("ram_gib"))
    env = {**os.environ, gpus.CATALOG_ENV_VAR: str(path)}
    out = subprocess.run([sys.executable, "-m", "infra.cli", "plan", "dev"], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"error: GPU catalog {path}: sizes[1].ram_gib: missing (every entry needs slug, accelerator, gpus, vcpus,"
        f" ram_gib, offer); entry {json.loads(gpus.PACKAGED_CATALOG.read_text())['sizes'][1]['slug']!r}"
    ]


_ENTRY = r"""
import asyncio, runpy, sys
import pulumi
from pulumi.runtime import mocks, settings
from pulumi.runtime.stack import run_pulumi_func
from infra.mock_runtime import PlanMocks

asyncio.set_event_loop(asyncio.new_event_loop())
settings.reset_options()
mocks.set_mocks(PlanMocks(), project="inference-platform", stack="dev", preview=False)
try:
    asyncio.get_event_loop().run_until_complete(
        run_pulumi_func(lambda: runpy.run_path(sys.argv[1] + "/infra/__main__.py", run_name="__main__")))
except pulumi.RunError as err:
    print("RunError:", err)
"""


def test_pulumi_up_says_it_as_a_run_error(tmp_path):
    """`pulumi up` prints a RunError without a traceback: the entry point's imports load the catalog."""
    path = _catalog(tmp_path, lambda e: e.pop("ram_gib"))
    env = {**os.environ, gpus.CATALOG_ENV_VAR: str(path)}
    out = subprocess.run([sys.executable, "-c", _ENTRY, str(ROOT)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"RunError: GPU catalog {path}: sizes[1].ram_gib: missing" in out.stdout
