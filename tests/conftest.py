"""Shared fixtures: the repository root, stack values, and a cached offline plan per stack."""

from __future__ import annotations

import copy
import functools
import os
import shutil
from pathlib import Path

import pytest

from infra.config import read_stack_file

ROOT = Path(__file__).resolve().parent.parent
TESTS_DIR = ROOT / "tests"
STACKS = ("dev", "staging", "prod")


def make_project(root: Path) -> Path:
    """A project directory as `--root` expects one: our Pulumi.yaml and an empty stacks/."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "stacks").mkdir(exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    return root


def plan_variant(root: Path, stack: str, mutate):
    """`infra plan` of a committed stack with `mutate(config)` applied, in a project copy at `root`."""
    import yaml

    from infra.offline import build_plan

    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    mutate(doc["config"])
    make_project(root)
    (root / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    return build_plan(stack, root)


def plan_objects(plan, kind: str | None = None) -> list[dict]:
    """The plan's Kubernetes objects, of one kind or all."""
    from infra.offline import kubernetes_objects

    return [o for o in kubernetes_objects(plan) if kind is None or o["kind"] == kind]


def validate_built_ins(objects) -> int:
    """Validate every built-in Kubernetes object against the 1.33 schema (strict); custom
    resources (LWS, Multus, Gateway API...) are left to tests.gateway_schemas. Returns the count."""
    import kubernetes_validate

    checked = 0
    for obj in objects:
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        if "." in group and not group.endswith("k8s.io") or group.endswith("x-k8s.io") or group == "k8s.cni.cncf.io":
            continue
        kubernetes_validate.validate(obj, "1.33", strict=True)
        checked += 1
    return checked


@functools.cache
def _stack_values(stack: str):
    return read_stack_file(ROOT / "stacks" / f"Pulumi.{stack}.yaml")


def stack_values(stack: str) -> tuple[dict, set]:
    """A fresh deep copy of a committed stack's raw values and secret keys (safe to mutate)."""
    values, secrets = _stack_values(stack)
    return copy.deepcopy(values), set(secrets)


@functools.cache
def _plan(stack: str):
    from infra.offline import build_plan

    return build_plan(stack, ROOT)


@pytest.fixture(scope="session")
def plans():
    """stack name → offline Plan of the committed stack (computed once per session)."""
    return {s: _plan(s) for s in STACKS}


def plan_of(stack: str):
    return _plan(stack)


# Markers of tests that need something outside the Python environment. Each also gets `external`,
# so `pytest -m "not external"` runs the fast, self-contained subset.
EXTERNAL_MARKERS = ("promtool", "actionlint", "vllm_wheel", "e2e", "checkov", "nginx")


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """`infra ARGV` in this process (`infra.cli.main`): exit code, stdout, stderr. One subprocess
    smoke test per command (tests/commands/test_smoke.py) covers the real entry point."""
    from infra.cli import main

    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table_rows(text: str) -> list[list[str]]:
    """The cells of every row of the ASCII tables in a command's output (`| a | b |`), headers included."""
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.get_closest_marker(name) for name in EXTERNAL_MARKERS):
            item.add_marker(pytest.mark.external)


def need_tool(name: str, install: str, marker: str | None = None) -> list:
    """Marks for a test that runs a command-line tool: its marker (default: the tool's name) and a
    skip when the tool is missing, which fails instead where the environment promises the tools
    (CI sets INFRA_REQUIRE_TOOLS=1): a missing promtool must not pass CI silently.
    Use as `pytestmark = need_tool(...)` or `@apply(need_tool(...))`."""
    path = shutil.which(name)
    if path is None and os.environ.get("INFRA_REQUIRE_TOOLS") == "1":
        raise RuntimeError(f"{name} is required here (INFRA_REQUIRE_TOOLS=1) but not on PATH; {install}")
    return [getattr(pytest.mark, marker or name), pytest.mark.skipif(path is None, reason=f"{name} not installed ({install})")]


def apply(marks: list):
    """Decorate a test with several marks at once."""

    def decorate(test):
        for mark in marks:
            test = mark(test)
        return test

    return decorate


def policy_violations(plan, environment: str) -> list[str]:
    """Every policy-pack finding (resource and stack rules) for a plan's resources."""
    from policy import rules
    from policy.rules import StackResource

    resources = plan.to_dict()["resources"]
    config = {"environment": environment, "dropletLimit": 25}
    found = []
    for res in resources:
        for rule in rules.RULES:
            if rule.scope == "resource":
                kwargs = {"protect": res["options"]["protect"]} if rule.needs_options else {}
                found += [f"{rule.name}: {m}" for m in rule.check(res["type"], res["inputs"], config, **kwargs)]
    view = [StackResource(r["type"], r["inputs"], r["name"], protect=r["options"]["protect"]) for r in resources]
    for rule in rules.RULES:
        if rule.scope == "stack":
            found += [f"{rule.name}: {m}" for m in rule.check(view, config)]
    return found
