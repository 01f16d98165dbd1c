"""`infra rollout promote|abort` edit the commented stack file in place, validated, one model only."""

from __future__ import annotations

import yaml

from infra.cli import main
from infra.config import NS

MODELS = f"{NS}models"


def _model(root) -> dict:
    return yaml.safe_load((root / "stacks" / "Pulumi.staging.yaml").read_text())["config"][MODELS][0]


def _comments(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


def test_promote_walks_the_steps_then_makes_the_candidate_the_layout(rollout_project, capsys):
    path = rollout_project / "stacks" / "Pulumi.staging.yaml"
    before = path.read_text()
    assert main(["rollout", "promote", "staging", "qwen3-235b", "--root", str(rollout_project)]) == 0
    after = path.read_text()
    assert _model(rollout_project)["rollout"]["weight"] == 50
    # one line changed, every comment kept
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert changed == [("        weight: 20", "        weight: 50")]
    assert "20 % → 50 %" in capsys.readouterr().out

    assert main(["rollout", "promote", "staging", "qwen3-235b", "--root", str(rollout_project)]) == 0
    model = _model(rollout_project)
    assert "rollout" not in model and model["layout"] == {"tp": 4, "ep": True, "replicas_per_node": 2}
    text = path.read_text()
    assert set(_comments(before)) - set(_comments(text)) <= {
        "# Canary: TP4+EP ×2 per node instead of TP2 ×4 (planner: 2.4× the goodput per node).",
    }
    assert "# The chat product's traffic" in text
    out = capsys.readouterr().out
    assert "promoted" in out and "qwen3-235b-engine-candidate" in out


def test_abort_removes_the_rollout_only(rollout_project, capsys):
    before = _model(rollout_project)
    assert main(["rollout", "abort", "staging", "qwen3-235b", "--root", str(rollout_project)]) == 0
    after = _model(rollout_project)
    assert "rollout" not in after and after == {k: v for k, v in before.items() if k != "rollout"}
    assert "aborted at 20 %" in capsys.readouterr().out


def test_a_promotion_that_does_not_validate_writes_nothing(rollout_project, capsys):
    path = rollout_project / "stacks" / "Pulumi.staging.yaml"
    # TP1 cannot hold a 235B FP8 model: the stack with this candidate does not plan
    text = path.read_text().replace("layout: {tp: 4, ep: true, replicas_per_node: 2}", "layout: {tp: 1, replicas_per_node: 8}")
    path.write_text(text)
    assert main(["rollout", "promote", "staging", "qwen3-235b", "--root", str(rollout_project)]) == 2
    assert path.read_text() == text
    err = capsys.readouterr().err
    assert "nothing written" in err and "rollout.candidate.layout" in err
