"""Shared fixtures: the repository root, stack values, and a cached offline plan per stack."""

from __future__ import annotations

import copy
import functools
import shutil
from pathlib import Path

import pytest

from infra.config import read_stack_file

ROOT = Path(__file__).resolve().parent.parent
STACKS = ("dev", "staging", "prod")


def make_project(root: Path) -> Path:
    """A project directory as `--root` expects one: our Pulumi.yaml and an empty stacks/."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "stacks").mkdir(exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    return root


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
