"""Writing the measured layout into a stack file: comments and everything else preserved."""

from __future__ import annotations

import difflib

import pytest
import yaml

from infra.domain import PROVENANCE_KEYS, Provenance
from infra.errors import UserError
from infra.tuning.stackfile import read_model_entry, write_measured_layout

STACK = """\
# staging: one node (comment at the top)
config:
  inference-platform:environment: staging
  inference-platform:models:
    # The reference workload.
    - name: qwen3-235b
      source: Qwen/Qwen3-235B-A22B-Instruct-2507-FP8
      pool: mi300x-8
      layout: auto   # the planner decides until measured
      workload: {input_tokens: 2000, output_tokens: 300, peak_rps: 4}
      slo:
        ttft_p90_ms: 2000   # product requirement
        tpot_p90_ms: 50
    - name: small
      source: Qwen/Qwen3-8B
      pool: mi300x-8
      layout: auto
  inference-platform:router: {kind: session, session_header: x-session-id}
"""

PROVENANCE = Provenance(
    measured_at="2026-12-02T18:26:00",
    vllm_version="0.33.0",
    image="vllm/vllm-openai-rocm:v0.33.0",
    measured_goodput_rps=5.0857142,
    predicted_goodput_rps=None,
    source_results=["bench/tp4-ep-r2/rate-1.json", "bench/tp4-ep-r2/rate-2.json"],
)
LAYOUT = {"tp": 4, "ep": True, "dp": 1, "replicas_per_node": 2, "max_num_seqs": 128, "gpu_memory_utilization": 0.9, "kv_cache_dtype": "fp8"}


def _changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    removed, added = [], []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return removed, added


def test_only_the_models_layout_changes(tmp_path):
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text(STACK)
    text = write_measured_layout(path, "qwen3-235b", LAYOUT, PROVENANCE)
    assert path.read_text() == text
    removed, added = _changed_lines(STACK, text)
    assert removed == ["      layout: auto   # the planner decides until measured"]
    assert added[0].startswith("      layout:  # measured winner")
    assert all(line.startswith("        ") for line in added[1:])  # nested under layout, same indent style
    # Every comment survives, the other model keeps `auto`.
    for comment in ("# staging: one node", "# The reference workload.", "# product requirement"):
        assert comment in text
    data = yaml.safe_load(text)
    models = data["config"]["inference-platform:models"]
    assert models[1]["layout"] == "auto"
    layout = models[0]["layout"]
    assert {k: layout[k] for k in LAYOUT} == LAYOUT
    assert list(layout["provenance"]) == list(PROVENANCE_KEYS)
    assert layout["provenance"]["measured_at"] == "2026-12-02T18:26:00"  # a string, not a YAML timestamp
    assert layout["provenance"]["predicted_goodput_rps"] is None
    assert layout["provenance"]["measured_goodput_rps"] == 5.086
    assert "predicted_goodput_rps: null" in text


def test_rewriting_replaces_an_earlier_measurement(tmp_path):
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text(STACK)
    write_measured_layout(path, "qwen3-235b", LAYOUT, PROVENANCE)
    second = write_measured_layout(path, "qwen3-235b", {**LAYOUT, "tp": 8, "replicas_per_node": 1}, PROVENANCE)
    layout = read_model_entry(path, "qwen3-235b")["layout"]
    assert (layout["tp"], layout["replicas_per_node"]) == (8, 1)
    assert second.count("provenance:") == 1


def test_dash_at_parent_indent_style_is_kept(tmp_path):
    flat = STACK.replace("    - name", "  - name").replace("      ", "    ")
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(flat)
    text = write_measured_layout(path, "small", {"tp": 1, "replicas_per_node": 8}, PROVENANCE)
    removed, added = _changed_lines(flat, text)
    assert len(removed) == 1 and removed[0].strip() == "layout: auto"
    assert added[1] == "      tp: 1"


def test_unknown_model_and_missing_file_are_user_errors(tmp_path):
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text(STACK)
    with pytest.raises(UserError, match="no model named 'qwen'.*qwen3-235b"):
        write_measured_layout(path, "qwen", LAYOUT, PROVENANCE)
    with pytest.raises(UserError, match="stack file not found"):
        read_model_entry(tmp_path / "Pulumi.nope.yaml", "x")
    with pytest.raises(ValueError, match="not layout keys"):
        write_measured_layout(path, "qwen3-235b", {"tensor_parallel": 4}, PROVENANCE)


def test_invalid_yaml_is_one_line_naming_file_line_and_column(tmp_path):
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text("config:\n  a: [1\n  b: 2\n")
    with pytest.raises(UserError) as info:
        read_model_entry(path, "x")
    assert info.value.render() == f"{path}: not valid YAML at line 3, column 4: expected ',' or ']', but got ':' (while parsing a flow sequence)"


def test_measured_provenance_as_written_is_what_the_plan_sizes_from(tmp_path):
    """The writer and the plan agree on the block: same keys, goodput per node, null prediction allowed."""
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text(STACK)
    write_measured_layout(path, "qwen3-235b", LAYOUT, PROVENANCE)
    measured = Provenance.model_validate(read_model_entry(path, "qwen3-235b")["layout"]["provenance"])
    assert measured.measured_goodput_rps == 5.086  # rounded as written, not re-derived
    assert measured.predicted_goodput_rps is None
    assert measured.label() == "bench 2026-12-02, vLLM 0.33.0"
