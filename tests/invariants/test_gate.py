"""Issue 29 and 39: `pulumi up` runs the whole-plan invariants before declaring anything, in its
own process.

The plan holds every object, so the check is a function call on the StackPlan the program is
about to declare (`infra.offline.check_before_up`): no second interpreter, no second run of the
program. A committed stack passes; a hostile one comes back with the problem naming its key; the
entry point refuses it before any registration (tests/test_entry_point.py runs the real entry point).
"""

from __future__ import annotations

from infra.config import NS, load_config
from infra.offline import check_before_up
from infra.stack_plan import plan_stack
from tests.conftest import ROOT, stack_values


def _plan(values, secrets):
    return plan_stack(load_config(values, stack="prod", secret_keys=secrets, base_dir=ROOT, source="stack prod"))


def test_a_committed_stack_passes_the_gate():
    assert check_before_up(_plan(*stack_values("prod")), ROOT) == []


def test_a_model_named_like_another_models_pd_router_is_stopped_before_up():
    values, secrets = stack_values("prod")
    values[NS + "models"][0]["layout"] = "p1tp4-d1tp4"
    del values[NS + "models"][0]["workload"]["prefix_cache_hit_rate"]  # MoRI-IO runs without prefix caching
    values[NS + "models"][1]["name"] = "qwen3-235b-pd-router"
    (problem,) = check_before_up(_plan(values, secrets), ROOT)
    assert problem.path == NS + "models[1].name"
    assert "Service inference-engines/qwen3-235b-pd-router would be created 2 times" in problem.message


def test_the_gate_starts_no_interpreter(monkeypatch):
    """The check is in-process: no subprocess (the old gate re-ran the whole program in a second one)."""
    import subprocess

    def refuse(*args, **kwargs):
        raise AssertionError(f"the gate started a process: {args}")

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    assert check_before_up(_plan(*stack_values("prod")), ROOT) == []
