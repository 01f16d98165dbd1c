"""Valid controls (issue 37): stack files the checks must NOT refuse — each plans with exit 0 — and
the notes a plan owes its reader (an override, a setting a rollout suspends).

A case file is a bad-input case's stack part (tests/test_bad_inputs.py: `base`/`set`/`delete` or
`text`) plus, optionally, `notes`: words that must all appear in one note of the plan
(`summary.notes` of `infra plan --json`), and `no_notes`: words no note may contain. `factors`
(a JSON value or text) is written as the stack's `stacks/factors.case.json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from infra.cli import main
from tests.conftest import ROOT, make_project
from tests.test_bad_inputs import _stack_text

CASES = sorted((ROOT / "tests" / "valid_stacks").glob("*.yaml"))


@pytest.mark.parametrize("case_file", CASES, ids=[p.stem for p in CASES])
def test_valid_stack_plans_with_its_notes(case_file: Path, tmp_path, monkeypatch, capsys):
    case = yaml.safe_load(case_file.read_text())
    root = make_project(tmp_path / "project")
    (root / "stacks" / "Pulumi.case.yaml").write_text(_stack_text(case))
    if "factors" in case:
        factors = case["factors"]
        (root / "stacks" / "factors.case.json").write_text(factors if isinstance(factors, str) else json.dumps(factors))
    monkeypatch.chdir(root)
    out = tmp_path / "plan.json"
    code = main(["plan", "case", "--quiet", "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 0, f"{case_file.name}: a valid stack was refused:\n{err}"
    notes = json.loads(out.read_text())["summary"]["notes"]
    for words in case.get("notes") or []:
        words = [words] if isinstance(words, str) else words
        assert any(all(str(w) in n for w in words) for n in notes), f"{case_file.name}: no note with {words}:\n" + "\n".join(notes)
    for words in case.get("no_notes") or []:
        assert not any(str(words) in n for n in notes), f"{case_file.name}: a note says {words!r}:\n" + "\n".join(notes)
