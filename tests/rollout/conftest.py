"""A staging variant with a rollout, written as a commented stack file (the way people write them)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, make_project

ROLLOUT_BLOCK = """      layout: {tp: 2, replicas_per_node: 4}
      # Canary: TP4+EP ×2 per node instead of TP2 ×4 (planner: 2.4× the goodput per node).
      rollout:
        candidate:
          layout: {tp: 4, ep: true, replicas_per_node: 2}  # what we are trying
        steps: [20, 50]   # shares of requests, in percent
        weight: 20
"""


def staging_with_rollout_text(block: str = ROLLOUT_BLOCK) -> str:
    text = (ROOT / "stacks" / "Pulumi.staging.yaml").read_text()
    assert "      layout: auto\n" in text
    return text.replace("      layout: auto\n", block, 1)


@pytest.fixture
def rollout_project(tmp_path):
    root = make_project(tmp_path / "project")
    (root / "stacks" / "Pulumi.staging.yaml").write_text(staging_with_rollout_text())
    return root
