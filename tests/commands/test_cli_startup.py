"""What `infra` does before a command runs: it imports only the command it is given (a plan does not
pay for the bench, tune or doctor machinery) and collects garbage less often while the command
runs, giving the caller's collector settings back afterwards."""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys

import pytest

from infra import cli
from tests.conftest import ROOT


def test_every_command_module_registers_the_command_its_name_says():
    for module_name in cli.COMMAND_MODULES:
        parser = cli.build_parser([cli.command_name(module_name)])
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        assert list(sub.choices) == [cli.command_name(module_name)], module_name


def test_a_named_command_is_the_only_one_imported():
    assert cli.modules_for(["plan", "prod"]) == ["infra.commands.plan"]
    assert cli.modules_for(["new-env", "x"]) == ["infra.commands.new_env"]


@pytest.mark.parametrize("argv", [[], ["--help"], ["plna", "prod"], ["--version"]])
def test_no_command_or_a_typo_registers_every_command(argv):
    assert cli.modules_for(argv) == cli.COMMAND_MODULES


def test_a_typo_still_lists_every_command(capsys):
    with pytest.raises(SystemExit) as err:
        cli.main(["plna", "prod"])
    assert err.value.code == 2
    stderr = capsys.readouterr().err
    assert all(cli.command_name(m) in stderr for m in cli.COMMAND_MODULES), stderr


def test_infra_plan_does_not_import_the_other_commands():
    code = "from infra.cli import main; main(['plan', '--help'])"
    probe = (f"import sys, atexit; atexit.register(lambda: print(sorted(m for m in sys.modules "
             f"if m.startswith('infra.commands.')), file=sys.stderr)); exec({code!r})")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    imported = proc.stderr.strip().splitlines()[-1]
    assert "infra.commands.plan'" in imported
    for other in ("bench", "tune", "doctor", "rollout", "catalog", "layout"):
        assert f"infra.commands.{other}'" not in imported, imported


def test_collections_are_rarer_while_a_command_runs_and_restored_after():
    before = gc.get_threshold()
    with cli.command_collections(owns_process=False):
        assert gc.get_threshold() == (cli.GC_GEN0_THRESHOLD, *before[1:])
    assert gc.get_threshold() == before


def test_a_process_about_to_end_freezes_its_heap():
    before = gc.get_threshold()
    try:
        with cli.command_collections(owns_process=True):
            kept = [[i] for i in range(100)]
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_main_restores_the_collector_settings_after_a_user_mistake(tmp_path):
    before = gc.get_threshold()
    assert cli.main(["plan", "dev", "--json", str(tmp_path / "missing" / "x.json")]) == 2
    assert gc.get_threshold() == before
