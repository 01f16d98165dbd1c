"""An upgrade meets Kubernetes (issue 36): each shipped stack as the base ref plans it (default
origin/main, else main; INFRA_CLUSTER_BASE names another ref, e.g. a pull request's base) is
applied, then this checkout's plan over it. Every rejection of that second apply must be a field
`infra diff` announced as a replacement (Pulumi deletes and recreates those; an immutable field
it does not know about fails `pulumi up` half-way instead).

Variants are not upgraded: the base ref plans only the stack files it has (infra diff's own
machinery, infra/commands/diff.py `plan_at_ref`)."""

from __future__ import annotations

import os
import subprocess

import pytest

from infra.commands.diff import plan_at_ref
from infra.offline import build_plan
from infra.plandiff import diff_plans
from tests.conftest import ROOT
from tests.security_variants import SHIPPED

IMMUTABLE_WORDS = ("immutable", "Forbidden: updates to", "may not change once set", "cannot be changed")


def base_ref() -> str:
    for ref in (os.environ.get("INFRA_CLUSTER_BASE"), "origin/main", "main"):
        if ref and subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                                  capture_output=True).returncode == 0:  # fmt: skip
            return ref
    pytest.skip("no base ref to upgrade from (set INFRA_CLUSTER_BASE)")


@pytest.mark.parametrize("name", SHIPPED)
def test_upgrade_from_the_base_ref_meets_only_announced_replacements(name, cluster):
    ref = base_ref()
    old = plan_at_ref(name, ref, ROOT)
    new = build_plan(name, ROOT).to_dict()
    replaced = {f"{ch.key[0]}::{ch.key[1]}" for ch in diff_plans(old, new).changed if ch.replaced}
    base = cluster.run_stack(f"{name}@{ref}", old["resources"], settle_timeout=60)
    try:
        upgrade = cluster.reapply(new["resources"])
        base.outcome.applied += upgrade.applied
        unannounced = [r for r in upgrade.rejected if r.split(" ", 1)[0] not in replaced]
        immutable = [r for r in unannounced if any(w in r for w in IMMUTABLE_WORDS)]
        assert not immutable, f"immutable fields {ref} → this checkout that `infra diff` does not announce:\n" + "\n".join(immutable)
        assert not unannounced, f"rejected on the upgrade from {ref}:\n" + "\n".join(unannounced)
    finally:
        cluster.reset(base)
