"""Issue 29: `pulumi up` runs the whole-plan invariants before declaring anything.

`infra/__main__.py` asks `infra.invariant_gate` (a fresh interpreter: the real engine's runtime is
never swapped for the mock one) with the config values the engine hands it. A committed stack
passes; a hostile one comes back with the problem naming its key; the entry point refuses it
before any registration (tests/test_entry_point.py runs the real entry point).
"""

from __future__ import annotations

from infra.config import NS
from infra.invariant_gate import problems_before_up
from tests.conftest import ROOT, stack_values


def test_a_committed_stack_passes_the_gate():
    values, secrets = stack_values("prod")
    assert problems_before_up(values, "prod", secrets, ROOT) == []


def test_a_model_named_like_another_models_pd_router_is_stopped_before_up():
    values, secrets = stack_values("prod")
    values[NS + "models"][0]["layout"] = "p1tp4-d1tp4"
    values[NS + "models"][1]["name"] = "qwen3-235b-pd-router"
    (problem,) = problems_before_up(values, "prod", secrets, ROOT)
    assert problem.path == NS + "models[1].name"
    assert "Service inference-engines/qwen3-235b-pd-router would be created 2 times" in problem.message
