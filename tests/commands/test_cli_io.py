"""Output paths the user names: refused before the work when unwritable, one line, exit 2, no traceback."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra import cli
from tests.conftest import ROOT, plan_of


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a directory\n")
    return path


@pytest.mark.parametrize(
    ("argv", "flag", "reason"),
    [
        (lambda t, f: ["plan", "dev", "--json", str(t / "missing" / "x.json")], "--json", "does not exist"),
        (lambda t, f: ["plan", "dev", "--json", str(t)], "--json", "is a directory"),
        (lambda t, f: ["plan", "dev", "--out", str(f / "x")], "--out", "is a file, not a directory"),
        (lambda t, f: ["plan", "dev", "--out", str(f)], "--out", "is a file, not a directory"),
        (lambda t, f: ["bench", "staging", "qwen3-235b", "--out", str(f / "x")], "--out", "is a file, not a directory"),
    ],
)
def test_unwritable_output_is_one_line_before_any_work(tmp_path, a_file, monkeypatch, capsys, argv, flag, reason):
    """Checked before the plan or render: both are stubbed to fail if they are reached (the
    real entry point's one-line errors are covered by tests/commands/test_smoke.py)."""
    from infra.commands import bench, plan

    def too_late(*_a, **_k):
        raise AssertionError("the path was checked only after the work")

    monkeypatch.setattr(plan, "build_plan", too_late)
    monkeypatch.setattr(bench, "stack_target", too_late)
    args = argv(tmp_path, a_file)
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    path = args[args.index(flag) + 1]
    assert err.count("\n") == 1 and err.startswith(f"error: {flag} {path}: ") and reason in err, err


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_directory_is_refused(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert cli.main(["plan", "dev", "--json", str(locked / "x.json")]) == 2
        assert "permission denied" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)


def test_failure_while_writing_names_the_path_and_reason(tmp_path, monkeypatch, capsys):
    """A disk that fills up after the check: still one line with the OS reason."""
    from infra.commands import plan

    monkeypatch.setattr(plan, "build_plan", lambda stack, root=None: plan_of("dev"))
    target = tmp_path / "x.json"
    real_write = Path.write_text

    def full_disk(self, *a, **k):
        if self == target:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full_disk)
    assert cli.main(["plan", "dev", "--json", str(target), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --json {target}: cannot write: {os.strerror(errno.ENOSPC)}\n"


def test_stray_oserror_is_still_one_line(monkeypatch, capsys):
    """The last resort in `main`: an OSError no command caught is reported, not a traceback."""
    from infra.commands import plan

    def boom(*_a, **_k):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/some/where")

    monkeypatch.setattr(plan, "build_plan", boom)
    assert cli.main(["plan", "dev", "--quiet"]) == 2
    assert capsys.readouterr().err == f"error: /some/where: {os.strerror(errno.EACCES)}\n"


def test_writable_outputs_still_work(tmp_path, monkeypatch, capsys):
    from infra.commands import plan

    monkeypatch.setattr(plan, "build_plan", lambda stack, root=None: plan_of("dev"))
    out = tmp_path / "new" / "deeper"
    assert cli.main(["plan", "dev", "--json", str(tmp_path / "p.json"), "--out", str(out), "--quiet"]) == 0
    assert (tmp_path / "p.json").read_text() == plan_of("dev").to_json()
    assert (out / plan.MARKER).is_file() and list(out.glob("*.yaml"))


def test_a_closed_stdout_ends_quietly_with_exit_zero():
    # `infra layout ... --json | head -1` once ended with "error: Broken pipe" and exit 2.
    argv = [sys.executable, "-m", "infra.cli", "layout", "--model", "Qwen/Qwen3-8B", "--gpu", "gpu-mi300x8-1536gb",
            "--input-tokens", "1000", "--output-tokens", "200", "--ttft-p90-ms", "1000", "--tpot-p90-ms", "40", "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout.read(1) == b"["
    proc.stdout.close()  # the reader leaves, as `head -1` does
    assert proc.wait(timeout=120) == 0
    assert proc.stderr.read() == b""


def test_an_unknown_option_shows_the_subcommands_usage(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["layout", "--model", "m", "--gpu", "g", "--input-tokens", "1", "--output-tokens", "1",
                  "--ttft-p90-ms", "1", "--tpot-p90-ms", "1", "--bogus"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith("usage: infra layout ") and "infra layout: error: unrecognized arguments: --bogus" in err
    with pytest.raises(SystemExit):
        cli.main(["tune", "ingest", "results", "--bogus"])
    assert "infra tune ingest: error: unrecognized arguments: --bogus" in capsys.readouterr().err


def test_diff_of_plans_of_different_stacks_warns(tmp_path, capsys):
    import json

    (tmp_path / "dev.json").write_text(json.dumps(plan_of("dev").to_dict()))
    (tmp_path / "staging.json").write_text(json.dumps(plan_of("staging").to_dict()))
    assert cli.main(["diff", str(tmp_path / "dev.json"), str(tmp_path / "staging.json")]) == 0
    captured = capsys.readouterr()
    assert "warning: comparing plans of different stacks (dev → staging)" in captured.err
    assert captured.out.startswith("> **Warning:** comparing plans of different stacks")
    assert cli.main(["diff", str(tmp_path / "dev.json"), str(tmp_path / "dev.json")]) == 0
    assert "warning" not in capsys.readouterr().err
