"""The table of `vllm serve` settings the plan owns (infra/config/engine_flags.py) against what the
renderer writes, and the reading of extra_args by effective value (the last element wins)."""

from __future__ import annotations

import pytest

from infra.catalog.vllm_flags import flag_setting, option_indices
from infra.config.engine_flags import OWNERS, extra_args_problems
from infra.config.model_keys import model_keys
from infra.config.models import ModelConfig
from infra.domain import KvOffload, Layout
from infra.render.vllm_args import ServeOptions, vllm_serve_args

# Rendered settings a user may still write (the plan reads them back) or that another check owns.
NOT_OWNED = {
    "enable_prefix_caching",  # an assumed switch: its effective value is checked
    "all2all_backend",  # extra_args may replace it (docs/serving.md: MoRI EP on an unsupported NIC)
}

_LAYOUTS = [
    (Layout(tp=4, ep=True, dp=2, max_model_len=8192), None),
    (Layout(tp=8, ep=True, dp=16, nodes_per_replica=2), "leader"),
    (Layout(tp=8, ep=True, dp=16, nodes_per_replica=2), "worker"),
    (Layout(tp=16, nodes_per_replica=2), "worker"),
]


@pytest.mark.parametrize(("layout", "role"), _LAYOUTS)
def test_every_flag_the_renderer_writes_has_an_owner(layout, role):
    opts = ServeOptions(source="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", served_model_name="q", moe=True, revision="a" * 40,
                        node_role=role, kv_offload=KvOffload("cpu", 64.0))
    args = vllm_serve_args(layout, opts)
    for i in option_indices(args):
        dest, _ = flag_setting(args[i])
        assert dest in OWNERS or dest in NOT_OWNED, f"{args[i]} is rendered but has no owner in engine_flags.OWNERS"


def _model(extra_args, **workload):
    return ModelConfig.model_validate({
        "name": "m", "source": "Qwen/Qwen3-8B", "pool": "p", "layout": {"tp": 1},
        "workload": {"input_tokens": 1000, "output_tokens": 100, **workload}, "slo": {"ttft_p90_ms": 1000, "tpot_p90_ms": 50},
        "extra_args": extra_args,
    })


def _messages(extra_args, **workload):
    return [(p.path.rsplit(".", 1)[-1], p.message) for p in extra_args_problems(_model(extra_args, **workload), model_keys(0))]


def test_the_last_element_that_sets_a_switch_is_the_one_judged():
    assert _messages(["--no-enable-chunked-prefill", "--enable-chunked-prefill"]) == []
    ((at, message),) = _messages(["--enable-chunked-prefill", "--no-enable-chunked-prefill"])
    assert at == "extra_args[1]" and "turns chunked prefill off" in message


def test_prefix_caching_off_is_refused_only_where_the_plan_counts_hits():
    assert _messages(["--no-enable-prefix-caching"]) == []
    ((at, message),) = _messages(["--no-enable-prefix-caching"], prefix_cache_hit_rate=0.2)
    assert at == "extra_args[0]" and "prefix_cache_hit_rate 0.2" in message
    ((_, message),) = _messages(["--enable-prefix-caching"])
    assert "already set by the platform" in message


@pytest.mark.parametrize(("args", "words"), [
    (["--port", "8080"], "is fixed by the platform"),
    (["--uds", "/tmp/s"], "is fixed by the platform"),
    (["--tensor_parallel_size=2"], "is set by the layout (models[0].layout.tp)"),
    (["--no-enable-expert-parallel"], "is set by the layout (models[0].layout.ep)"),
    (["--model", "x/y"], "is set from models[0].source"),
    (["--tokenizer-revision", "main"], "is set from models[0].revision"),
    (["--kv-offloading-size", "10"], "is set from models[0].kv_offload"),
    (["--custom-histogram-buckets", "1"], "is not allowed"),
])
def test_an_owned_setting_names_its_true_owner(args, words):
    ((at, message),) = _messages(args)
    assert at == "extra_args[0]" and words in message
