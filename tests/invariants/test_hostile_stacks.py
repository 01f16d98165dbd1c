"""Issue 29: hostile stack files — each plans with exit 0 before the whole-plan invariants, and
must now be refused with one error line naming a key that exists in the stack file as written.

A case file is a bad-input case (tests/test_bad_inputs.py: `base`/`set`/`delete` or `text`, and
`expect` words) plus `key`: the stack key the error must name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infra.cli import main
from tests.conftest import ROOT, make_project
from tests.invariants.keys import error_key_paths, key_exists
from tests.test_bad_inputs import _stack_text

CASES = sorted((ROOT / "tests" / "hostile_stacks").glob("*.yaml"))


@pytest.mark.parametrize("case_file", CASES, ids=[p.stem for p in CASES])
def test_hostile_stack_is_refused_naming_a_key_of_the_file(case_file: Path, tmp_path, monkeypatch, capsys):
    case = yaml.safe_load(case_file.read_text())
    root = make_project(tmp_path / "project")
    text = _stack_text(case)
    (root / "stacks" / "Pulumi.case.yaml").write_text(text)
    monkeypatch.chdir(root)
    code = main(["plan", "case", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, f"{case_file.name}: exit {code}\n{err}"
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    problems = lines if len(lines) == 1 else lines[1:]  # `N problems:` then one line per problem
    assert lines[0].startswith("error: ") and all(p.startswith("  - ") for p in problems[1 if len(lines) == 1 else 0:])
    wanted = [p for p in problems if case["key"] in p and all(str(w) in p for w in case["expect"])]
    assert wanted, f"{case_file.name}: no problem names {case['key']} with {case['expect']}:\n{err}"
    doc = yaml.safe_load(text)
    for problem in problems:
        paths = error_key_paths(problem)
        assert paths, f"{case_file.name}: no key path in {problem}"
        assert key_exists(doc, paths[0]), f"{case_file.name}: {paths[0]} is not in the stack file as written"
