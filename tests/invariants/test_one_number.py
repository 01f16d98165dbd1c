"""Issue 29, one number and `--out`: the plan says one figure wherever it repeats one, and
`infra plan --out` never writes two objects to one file."""

from __future__ import annotations

import pytest

from infra.commands.plan import write_manifests
from infra.offline import Plan
from tests.conftest import plan_variant


def _busy(config):
    # qwen3-30b on its fixed 1-node pool with a peak far beyond it: the plan notes the shortfall.
    config["inference-platform:models"][1]["workload"]["peak_rps"] = 400


def test_the_peak_note_and_the_model_line_give_the_same_node_count(tmp_path):
    plan = plan_variant(tmp_path, "prod", _busy)
    model = next(m for m in plan.models if m["name"] == "qwen3-30b")
    (note,) = [n for n in plan.summary["notes"] if n.startswith("model qwen3-30b: peak")]
    assert f"needs {model['predicted']['nodes_needed']} nodes" in note
    assert "low end" in note


def test_out_refuses_to_write_two_objects_to_one_file(tmp_path):
    twin = {"type": "kubernetes:core/v1:Service", "custom": True, "name": "a",
            "inputs": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x", "namespace": "inference"}}}
    plan = Plan(stack="t", project="p", resources=[twin, {**twin, "name": "b"}])
    with pytest.raises(RuntimeError, match="several objects to one file"):
        write_manifests(plan, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
