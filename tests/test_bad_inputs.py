"""The bad-input corpus: every file under tests/bad_inputs/ is one mistake a user can make, and the
words its error must contain.

Each case runs the `infra` command line in-process (`infra.cli.main(argv)`) in a fresh copy of the
project, and must exit non-zero with exactly one line saying `error:` that names the key or argument
and what is allowed (the case's `expect` words, all on that line), and no traceback.

A case file is YAML:

    about: what the mistake is (one line)
    # stack-file cases: a shipped stack (`base`) with edits, planned with `infra plan`
    base: dev                      # dev | staging | prod
    set: {models[0].workload.input_tokens: 200000}   # paths under inference-platform: (or full keys)
    delete: [cluster.version]      # paths to remove
    text: |                        # or the whole stack file, instead of base/set/delete
      config: ...
    # command-line cases
    argv: [layout, --model, ...]   # {root} is the project copy, {tmp} a scratch directory
    stacks: {x1: {base: dev, set: {...}}}   # extra stack files, made like the stack cases
    files: {name.json: "text"}     # files under {tmp}
    results: {dir: r, layout: tp99-r1}      # bench fixture results under {tmp}/r, relabelled
    env: {VAR: value}              # environment variables for the command
    factors: {...}                 # stacks/factors.case.json (a JSON value, or its text) beside the stack file
    expect: [words, ...]           # all on the one `error:` line
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml

from infra.cli import main
from infra.config import NS
from tests.conftest import ROOT, make_project

CASES_DIR = Path(__file__).parent / "bad_inputs"
CASES = sorted(CASES_DIR.glob("*.yaml"))
FIXTURE_RESULTS = ROOT / "tests" / "fixtures" / "bench" / "staging-qwen3-235b" / "tp4-ep-r2"
TOKEN = "dop_v1_" + "0123456789abcdef" * 4


def _parts(path: str) -> list[str | int]:
    out: list[str | int] = []
    for piece in path.replace("]", "").split("."):
        name, *indices = piece.split("[")
        if name:
            out.append(name)
        out += [int(i) for i in indices]
    return out


def _edit(config: dict, path: str, value=None, *, delete: bool = False) -> None:
    """Set (or delete) `a.b[0].c` under the inference-platform namespace; a path with its own
    namespace (`digitalocean:token`, `acme:owner`) is a top-level key as written."""
    if ":" in path.split(".")[0]:
        key, rest = path.split(".", 1) if "." in path else (path, "")
        parts: list[str | int] = [key, *(_parts(rest) if rest else [])]
    else:
        parts = _parts(path)
        parts[0] = NS + str(parts[0])
    node = config
    for part in parts[:-1]:
        node = node[part] if isinstance(part, int) or part in node else node.setdefault(part, {})
    if delete:
        del node[parts[-1]]
    elif isinstance(node, list) and parts[-1] == len(node):
        node.append(value)  # `gpu_pools[1]` of a stack with one pool: a second one
    else:
        node[parts[-1]] = value


def _stack_text(spec: dict) -> str:
    if "text" in spec:
        return spec["text"]
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{spec.get('base', 'dev')}.yaml").read_text())
    config = copy.deepcopy(doc["config"])
    for path, value in (spec.get("set") or {}).items():
        _edit(config, path, value)
    for path in spec.get("delete") or []:
        _edit(config, path, delete=True)
    return yaml.safe_dump({"config": config}, sort_keys=False, allow_unicode=True)


def _load_case(path: Path) -> dict:
    case = yaml.safe_load(path.read_text())
    assert isinstance(case, dict) and case.get("expect"), f"{path.name}: needs `expect`"
    assert "argv" in case or "base" in case or "text" in case, f"{path.name}: a stack edit or an argv"
    return case


def test_the_corpus_is_large_and_covers_every_command():
    cases = [_load_case(p) for p in CASES]
    assert len(cases) >= 120
    commands = {tuple(c["argv"][:2]) if c["argv"][0] == "tune" else (c["argv"][0],) for c in cases if "argv" in c}
    assert {("plan",), ("diff",), ("layout",), ("doctor",), ("new-env",), ("bench",), ("tune", "ingest"), ("tune", "calibrate")} <= commands
    assert sum(1 for c in cases if "argv" not in c) >= 80, "stack-key cases"


@pytest.mark.parametrize("case_file", CASES, ids=[p.stem for p in CASES])
def test_bad_input_is_refused_with_one_clear_line(case_file, tmp_path, monkeypatch, capsys):
    case = _load_case(case_file)
    root = make_project(tmp_path / "project")
    for shipped in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        shutil.copy(shipped, root / "stacks")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for name, spec in (case.get("stacks") or {}).items():
        (root / "stacks" / f"Pulumi.{name}.yaml").write_text(_stack_text(spec))
    for name, text in (case.get("files") or {}).items():
        (scratch / name).write_text(text if isinstance(text, str) else json.dumps(text))
    if case.get("results"):
        target = scratch / case["results"]["dir"]
        target.mkdir()
        for result in sorted(FIXTURE_RESULTS.glob("rate-*.json")):
            if result.name.endswith(".pytorch.json"):
                continue
            data = json.loads(result.read_text())
            data.update(case["results"].get("metadata") or {})
            if "layout" in case["results"]:
                data["layout"] = case["results"]["layout"]
            (target / result.name).write_text(json.dumps(data))
    for name in ("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN", "DIGITALOCEAN_API_URL", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (case.get("env") or {}).items():
        monkeypatch.setenv(name, str(value).replace("{token}", TOKEN))
    monkeypatch.chdir(root)

    if "factors" in case:
        factors = case["factors"]
        (root / "stacks" / "factors.case.json").write_text(factors if isinstance(factors, str) else json.dumps(factors))
    if "argv" in case:
        argv = [str(a).replace("{root}", str(root)).replace("{tmp}", str(scratch)) for a in case["argv"]]
    else:
        (root / "stacks" / "Pulumi.case.yaml").write_text(_stack_text(case))
        argv = ["plan", "case", "--quiet"]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse refuses the command line itself
        code = exit_.code
    err = capsys.readouterr().err
    assert code not in (0, None), f"{case_file.name}: exit 0 for {argv}"
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, f"{case_file.name}: expected one error line, got:\n{err}"
    if lines[0].startswith("error:"):  # ours; argparse's own errors follow the command's usage
        assert len(err.strip().splitlines()) == 1, f"{case_file.name}: one problem, one line:\n{err}"
    else:
        assert lines[0].startswith(f"infra {argv[0]}"), f"{case_file.name}: the subcommand's usage, not the top level:\n{err}"
    for words in case["expect"]:
        assert str(words) in lines[0], f"{case_file.name}: {words!r} not in:\n{lines[0]}"
    if "argv" not in case:  # issue 29: the key an error names is in the stack file as written
        assert_key_path_is_written(case_file.name, lines[0], (root / "stacks" / "Pulumi.case.yaml").read_text())


# A key that must be added is named by where it goes: its parent is in the file, the key is not.
_MISSING = ("missing", "required", "is needed", "needs a ", "set it", "not set", "Field required")


def assert_key_path_is_written(name: str, line: str, stack_text: str) -> None:
    from tests.invariants.keys import error_key_paths, key_exists, parent_path

    try:
        doc = yaml.safe_load(stack_text)
    except yaml.YAMLError:
        return  # not YAML at all: the error names the line and column instead
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        return
    for path in error_key_paths(line):
        if key_exists(doc, path):
            continue
        parent = parent_path(path)
        assert parent is not None and (parent == "" or key_exists(doc, parent)) and any(w in line for w in _MISSING), (
            f"{name}: the error names {path}, which is not in the stack file as written:\n{line}"
        )
