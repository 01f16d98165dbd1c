"""plan_stack: a model nothing fits is an error naming what would fit; gated models and project
names (issue 15)."""

from __future__ import annotations

import pytest

from infra.config import NS, load_config
from infra.errors import ConfigError
from infra.planner.search import sizes_that_fit
from infra.stack_plan import plan_stack, project_name
from tests.conftest import ROOT, STACKS, stack_values


def _plan(stack: str, edit=None, *, name: str | None = None):
    values, secrets = stack_values(stack)
    if edit:
        edit(values)
    return plan_stack(load_config(values, stack=name or stack, secret_keys=secrets, base_dir=ROOT))


def _problem(stack: str, edit) -> str:
    with pytest.raises(ConfigError) as info:
        _plan(stack, edit)
    (problem,) = info.value.problems
    return str(problem)


def test_layout_auto_with_nothing_that_fits_is_an_error_naming_bigger_sizes():
    # Before: exit 0 and a Deployment of tp1-r1 with 236 GB of weights on one 192 GB GPU, and a note.
    def one_gpu(values):
        values[NS + "gpu_pools"][0]["size"] = "gpu-mi300x1-192gb"

    problem = _problem("staging", one_gpu)
    assert problem.startswith(f"{NS}models[0].pool: layout: auto found no layout of Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
    # smallest sizes first: one 256 GB MI325X holds the 236 GB of weights (the self-serve sizes of FACTS)
    assert "it fits on gpu-mi325x1-256gb, " in problem and " and others" in problem
    assert "give gpu pool 'mi300x-8'" in problem


def test_deepseek_r1_on_eight_h100s_is_refused_with_the_closest_layout():
    # Before: tp1-r8 with 673 GB of weights per GPU, exit 0.
    def h100(values):
        values[NS + "gpu_pools"][0]["size"] = "gpu-h100x8-640gb"
        values[NS + "models"][0]["source"] = "deepseek-ai/DeepSeek-R1"

    problem = _problem("staging", h100)
    # The widest shape (most memory per weight byte), not the ranking's tp1-r8 with 673 GB per GPU.
    assert "tp8-r1 of deepseek-ai/DeepSeek-R1 on gpu-h100x8-640gb" in problem and "exceed the" in problem
    assert "it fits on gpu-h200x8-1128gb" in problem


def test_sizes_that_fit_is_memory_only_and_keeps_the_order():
    from infra.catalog.gpus import GPU_SIZES
    from infra.catalog.models import resolve_model
    from infra.domain import Workload

    arch = resolve_model("Qwen/Qwen3-8B")
    sizes = [GPU_SIZES["gpu-4000adax1-20gb"], GPU_SIZES["gpu-l40sx1-48gb"], GPU_SIZES["gpu-mi300x1-192gb"]]
    assert [s.slug for s in sizes_that_fit(arch, Workload(1000, 200), sizes)] == ["gpu-l40sx1-48gb", "gpu-mi300x1-192gb"]


def test_a_gated_model_without_the_token_gets_a_note_naming_it():
    def llama(values):
        values[NS + "models"][0]["source"] = "meta-llama/Llama-3.1-8B-Instruct"

    plan = _plan("dev", llama)
    (note,) = [n for n in plan.notes if "gated" in n]
    assert note.startswith("model qwen3-8b: meta-llama/Llama-3.1-8B-Instruct is a gated Hugging Face repo")
    assert "pulumi config set --secret huggingface_token" in note
    # The Deployment reads the token from its Secret, as `pulumi up` will require it to be set.
    assert plan.services[0].hf_token_secret is not None


def test_project_names_follow_the_stack():
    assert project_name("dev-alice") == "inference-platform-dev-alice"
    for stack in STACKS:
        assert _plan(stack).project.project_name == f"inference-platform-{stack}"
    assert _plan("dev", name="dev-alice").project.project_name == "inference-platform-dev-alice"
    assert _plan("dev", name="dev-alice").project.environment == "dev"  # environment still drives the DO label


def _seed_workload_on_mi325x(values):
    # The reference chat workload (5600 → 140 tokens, p90 TTFT 2 s / TPOT 50 ms) on staging's model:
    # the planner predicts tp1-r8 fastest, which keeps 236 GB of weights on every 256 GB GPU.
    values[NS + "gpu_pools"][0]["size"] = "gpu-mi325x8-2048gb"
    values[NS + "region"] = "tor1"  # where the catalog lists the self-serve MI325X size (issue 29)
    model = values[NS + "models"][0]
    model["workload"] = {"input_tokens": 5600, "output_tokens": 140, "peak_rps": 4}
    model["slo"] = {"ttft_p90_ms": 2000, "tpot_p90_ms": 50}


def test_auto_holds_back_a_layout_with_a_sliver_of_kv_cache_and_names_the_bench_that_would_justify_it():
    plan = _plan("staging", _seed_workload_on_mi325x)
    model = plan.models[0]
    chosen = model.plan.chosen
    assert chosen.name != "tp1-r8" and chosen.memory.max_concurrency_per_replica >= 32
    assert "it gives up tp1-r8" in model.plan.reason
    assert f"`infra bench staging qwen3-235b --layouts tp1-r8,{chosen.name}` would justify it" in model.plan.reason
    assert not [n for n in plan.notes if "for KV cache" in n and "prefill/decode" not in n]  # no thin-KV note


def test_an_explicit_layout_with_a_sliver_of_kv_cache_gets_a_note_naming_a_roomier_one():
    def explicit_tp1(values):
        _seed_workload_on_mi325x(values)
        values[NS + "models"][0]["layout"] = {"tp": 1, "replicas_per_node": 8}

    plan = _plan("staging", explicit_tp1)
    assert plan.models[0].layout.name == "tp1-r8"
    (note,) = [n for n in plan.notes if "for KV cache" in n]
    assert note.startswith("model qwen3-235b: tp1-r8 leaves 7.1 GB of the ")


@pytest.mark.parametrize("stack", STACKS)
def test_the_shipped_stacks_have_room_for_kv_cache(stack):
    assert not [n for n in _plan(stack).notes if "for KV cache" in n and "prefill/decode" not in n]


def test_a_p_d_layout_held_back_by_the_choice_rules_is_not_advised_unmeasured():
    """prod's qwen3-235b: the best P/D unit runs TP1 prefill engines (236 GB of weights per GPU), so
    the note names it but says to bench it first rather than to switch."""
    (note,) = [n for n in _plan("prod").notes if "prefill/decode layout" in n]
    assert note.startswith("model qwen3-235b: prefill/decode layout p4tp1-")
    assert "not advised unmeasured" in note and "set layout:" not in note
