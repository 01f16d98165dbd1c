"""The stacks the control-plane tests apply: every stack and variant the security checks cover
(tests/security_variants.py: dev, staging, prod, public router, gateway, P/D on a fabric pool,
replicas over nodes, Spaces weights, the AMD GPU operator) plus the two families only their own
plan tests render: a layout rollout (a candidate Deployment beside the current one) and tiered KV
(a host-memory offload tier in the engine pod)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests import security_variants

CHAT = {"input_tokens": 5600, "output_tokens": 300, "peak_rps": 4, "turns_per_session": 8, "think_time_s": 300}


def _rollout_plan(workdir: Path):
    from infra.offline import build_plan
    from tests.conftest import make_project
    from tests.rollout.conftest import staging_with_rollout_text

    root = make_project(workdir / "staging-rollout")
    (root / "stacks" / "Pulumi.staging.yaml").write_text(staging_with_rollout_text())
    return build_plan("staging", root)


def _tiered_kv(config) -> None:
    config["inference-platform:models"][0].update(
        {"layout": {"tp": 4, "ep": True, "replicas_per_node": 2}, "workload": CHAT, "kv_offload": {"kind": "cpu", "size_gib": 512}}
    )


EXTRA = ("staging-rollout", "staging-tiered-kv")
NAMES = security_variants.NAMES + EXTRA


def plan_named(name: str, workdir: Path):
    """The offline Plan of one stack or variant of NAMES."""
    from tests.conftest import plan_variant

    if name == "staging-rollout":
        return _rollout_plan(workdir)
    if name == "staging-tiered-kv":
        return plan_variant(workdir / name, "staging", _tiered_kv)
    return security_variants.plan_named(name, workdir)


def stack_doc(stack: str, root: Path) -> dict:
    return yaml.safe_load((root / "stacks" / f"Pulumi.{stack}.yaml").read_text())
