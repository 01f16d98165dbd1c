"""The generated `vllm serve` command lines against the flags of the pinned vLLM release.

`infra/catalog/vllm_flags.json` is extracted from the pinned wheel by
scripts/extract_vllm_flags.py; these tests fail when versions.VLLM_VERSION moves without a
re-extraction, when any catalog model × sensible layout generates a flag the release does not
accept, and when the extractor's reading of vLLM's parser rules breaks (checked on a synthetic
wheel that uses the same constructs as vLLM 0.33).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from infra.catalog import versions
from infra.catalog.gpus import GPU_SIZES
from infra.catalog.models import CATALOG
from infra.catalog.vllm_flags import (
    FLAGS_FILE,
    canonical_flag,
    flag_tokens,
    unknown_env_vars,
    unknown_flags,
    vllm_flags,
)
from infra.domain import Layout
from infra.errors import UserError
from infra.render.model_service import ModelServiceSpec, vendor_env
from infra.render.vllm_args import ServeOptions, vllm_serve_args
from tests.conftest import ROOT as TESTS_ROOT

ROOT = TESTS_ROOT


def _load_extractor():
    spec = importlib.util.spec_from_file_location(
        "extract_vllm_flags", ROOT / "scripts" / "extract_vllm_flags.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_flag_data_matches_pinned_version():
    data = json.loads(FLAGS_FILE.read_text())
    assert data["vllm_version"] == versions.VLLM_VERSION, (
        "infra/catalog/vllm_flags.json is for another vLLM: run scripts/extract_vllm_flags.py"
    )
    assert data["wheel"].startswith(f"vllm-{versions.VLLM_VERSION}-")
    assert versions.VLLM_IMAGE_ROCM.endswith(f":v{versions.VLLM_VERSION}")
    assert versions.VLLM_IMAGE_CUDA.endswith(f":v{versions.VLLM_VERSION}")


def test_flag_data_is_internally_consistent():
    data = vllm_flags()
    flags = data["flags"]
    assert len(flags) > 200  # vLLM 0.33 has ~320 serve options; a parser change that loses most fails here
    accepted = set(data["accepted"])
    for name, entry in flags.items():
        assert name in accepted and set(entry["aliases"]) <= accepted
        assert entry["takes_value"] == (name in data["takes_value"])
        if entry["negatable"]:
            assert f"--no-{name[2:]}" in accepted
    assert set(data["negatable"]) <= set(data["boolean"])
    assert not set(data["takes_value"]) & set(data["boolean"])


@pytest.mark.parametrize(
    "flag, kind",
    [
        ("--tensor-parallel-size", "value"),
        ("--data-parallel-size", "value"),
        ("--enable-expert-parallel", "bool"),
        ("--enable-prefix-caching", "bool"),
        ("--max-num-seqs", "value"),
        ("--max-num-batched-tokens", "value"),
        ("--max-model-len", "value"),
        ("--gpu-memory-utilization", "value"),
        ("--kv-cache-dtype", "value"),
        ("--served-model-name", "value"),
        ("--api-key", "value"),
        ("--port", "value"),
        ("--disable-log-stats", "store_true"),
        ("--headless", "store_true"),
        ("--hf-token", "optional_value"),
    ],
)
def test_known_flags_have_the_kind_vllm_gives_them(flag, kind):
    """Spot checks read off vLLM 0.33's source by hand (arg_utils.py, cli_args.py)."""
    assert vllm_flags()["flags"][flag]["kind"] == kind


def _sensible_layouts(arch, gpus: int) -> list[Layout]:
    """TP sizes that divide the node and the attention heads; EP/DP variants only for MoE."""
    layouts = []
    for tp in (1, 2, 4, 8):
        if tp > gpus or gpus % tp or arch.num_attention_heads % tp:
            continue
        r = gpus // tp
        layouts.append(Layout(tp=tp, replicas_per_node=r, max_model_len=8192))
        layouts.append(Layout(tp=tp, replicas_per_node=1, kv_cache_dtype="fp8", max_num_batched_tokens=32768))
        if arch.is_moe:
            layouts.append(Layout(tp=tp, ep=True, replicas_per_node=r, kv_cache_dtype="fp8"))
    if arch.is_moe and gpus > 1:
        layouts.append(Layout(tp=1, ep=True, dp=gpus, replicas_per_node=1, max_num_seqs=512))
        if gpus >= 4:
            layouts.append(Layout(tp=2, ep=True, dp=gpus // 2, replicas_per_node=1))
    return layouts


def _catalog_cases():
    for entry in CATALOG:
        arch = entry.arch
        for slug in (
            "gpu-mi325x8-2048gb-contracted",
            "gpu-mi300x8-1536gb",
            "gpu-h200x8-1128gb",
            "gpu-h100x1-80gb",
        ):
            size = GPU_SIZES[slug]
            for layout in _sensible_layouts(arch, size.gpus):
                yield arch, size, layout


CATALOG_CASES = list(_catalog_cases())


def test_catalog_matrix_is_not_trivial():
    assert len(CATALOG_CASES) > 100
    assert any(layout.dp > 1 for _, _, layout in CATALOG_CASES)
    assert {size.vendor for _, size, _ in CATALOG_CASES} == {"amd", "nvidia"}


def test_every_generated_flag_for_every_catalog_model_and_layout_is_accepted():
    accepted = set(vllm_flags()["accepted"])
    seen: set[str] = set()
    for arch, size, layout in CATALOG_CASES:
        opts = ServeOptions(
            source=arch.id,
            served_model_name=arch.id.split("/")[-1].lower(),
            max_model_len=4096,
            moe=arch.is_moe,
            vendor=size.vendor,
            revision="0123abcd",
        )
        args = vllm_serve_args(layout, opts)
        tokens = flag_tokens(args)
        assert tokens, args
        for token in tokens:
            assert canonical_flag(token) in accepted, f"{token} ({arch.id}, {layout.name}, {size.slug})"
        seen.update(canonical_flag(t) for t in tokens)
    # The matrix exercises every flag the generator can emit.
    assert {
        "--data-parallel-size",
        "--enable-expert-parallel",
        "--all2all-backend",
        "--disable-nccl-for-dp-synchronization",
        "--revision",
        "--tokenizer-revision",
        "--kv-cache-dtype",
    } <= seen


def test_every_env_var_the_renderer_sets_is_read_by_vllm():
    for size in GPU_SIZES.values():
        for moe in (False, True):
            spec = ModelServiceSpec(
                name="m",
                source="org/m",
                served_model_name="m",
                layout=Layout(),
                nodes_min=1,
                nodes_max=1,
                gpu=size,
                pool_name="p",
                moe=moe,
            )
            env = vendor_env(spec)
            assert unknown_env_vars(env) == []
            if size.vendor == "amd":
                assert env["VLLM_ROCM_USE_AITER"] == "1"
                assert env["VLLM_ROCM_USE_AITER_MOE"] == ("1" if moe else "0")
            else:
                assert not any("AITER" in k for k in env)
    # FACTS.md listed VLLM_USE_TRITON_FLASH_ATTN; vLLM 0.33 no longer reads it, so we don't set it.
    assert unknown_env_vars({"VLLM_USE_TRITON_FLASH_ATTN": "0"}) == ["VLLM_USE_TRITON_FLASH_ATTN"]


def test_flag_tokenizer_follows_vllm_parser_conventions():
    assert canonical_flag("--max_num_seqs=8") == "--max-num-seqs"
    assert canonical_flag("--compilation-config.cudagraph_mode=FULL") == "--compilation-config"
    assert canonical_flag("-tp") == "--tensor-parallel-size"
    assert canonical_flag("-O3") == "--optimization-level"
    # Values are skipped, even when they look like flags (negative numbers, JSON).
    assert flag_tokens(["--seed", "-1", "--enable-chunked-prefill", "--compilation-config", '{"x": 1}']) == [
        "--seed",
        "--enable-chunked-prefill",
        "--compilation-config",
    ]
    assert (
        unknown_flags(["--no-enable-prefix-caching", "--async-scheduling", "-O3", "--max_num_seqs", "4"])
        == []
    )
    assert unknown_flags(["--enable-turbo", "--tensor-paralel-size", "2"]) == [
        "--enable-turbo",
        "--tensor-paralel-size",
    ]


def test_extra_args_with_a_flag_the_release_does_not_know_is_a_user_error():
    opts = ServeOptions(source="org/m", served_model_name="m", extra_args=("--disable-log-request",))
    with pytest.raises(UserError) as err:
        vllm_serve_args(Layout(), opts, path="models[m]")
    assert "models[m].extra_args" in str(err.value) and "--disable-log-request" in str(err.value)
    assert versions.VLLM_VERSION in str(err.value)


def test_the_enable_disable_inverse_of_vllm_0_33_is_known():
    """vLLM 0.33's EnableDisableAction: `--enable-x` also answers to `--disable-x` and the reverse
    (vllm/utils/argparse_utils.py); the inverse writes the same setting, off."""
    from infra.catalog.vllm_flags import flag_setting

    assert unknown_flags(["--disable-log-requests", "--disable-prefix-caching", "--enable-nccl-for-dp-synchronization"]) == []
    assert flag_setting("--disable-prefix-caching") == ("enable_prefix_caching", False)
    assert flag_setting("--disable_chunked_prefill") == ("enable_chunked_prefill", False)
    assert flag_setting("--enable-nccl-for-dp-synchronization") == ("disable_nccl_for_dp_synchronization", False)
    assert flag_setting("--no-disable-fastapi-docs") == ("disable_fastapi_docs", False)
    assert flag_setting("--disable-log-stats") == ("disable_log_stats", True)  # store_true: no inverse


def test_extra_args_cannot_silently_override_the_layout():
    opts = ServeOptions(source="org/m", served_model_name="m", extra_args=("--tensor_parallel_size=2",))
    with pytest.raises(UserError, match="layout"):
        vllm_serve_args(Layout(tp=4), opts)


def test_expert_parallel_on_a_dense_model_is_a_user_error():
    with pytest.raises(UserError, match="Mixture-of-Experts"):
        vllm_serve_args(Layout(tp=2, ep=True), ServeOptions(source="org/dense", served_model_name="d"))


def test_accepted_extra_args_are_appended_verbatim():
    extra = ("--compilation-config", '{"full_cuda_graph": false}', "--async-scheduling")
    args = vllm_serve_args(Layout(), ServeOptions(source="org/m", served_model_name="m", extra_args=extra))
    assert tuple(args[-3:]) == extra


# --- the extractor, on a synthetic wheel using the constructs of vLLM 0.33's parser ------------

_FAKE_SOURCES = {
    "vllm/config/fake.py": """
from typing import Literal, Optional, Annotated
CacheDType = Literal["auto", "fp8"]
Flaggy = bool | None

@config
class SubConfig:
    x: int = 1

@config
class FakeConfig:
    size: int = 1
    enable_thing: bool = False
    maybe_thing: Flaggy = None
    dtype: CacheDType = "auto"
    token: bool | str | None = None
    sub: SubConfig = None
    opt: Optional[int] = None
    ann: Annotated[bool, "meta"] = False
    quoted: "str | None" = None
""",
    "vllm/engine/arg_utils.py": """
import argparse
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        fake_kwargs = get_kwargs(FakeConfig)
        g = parser.add_argument_group("x")
        g.add_argument("--size", "-s", **fake_kwargs["size"])
        g.add_argument("--enable-thing", **fake_kwargs["enable_thing"])
        g.add_argument("--maybe-thing", **{**fake_kwargs["maybe_thing"], "default": None})
        g.add_argument("--dtype", **fake_kwargs["dtype"])
        g.add_argument("--token", **fake_kwargs["token"])
        g.add_argument("--sub-config", **fake_kwargs["sub"])
        g.add_argument("--opt", **fake_kwargs["opt"])
        g.add_argument("--ann", **fake_kwargs["ann"])
        g.add_argument("--quoted", **fake_kwargs["quoted"])
        parser.add_argument("--plain-switch", action="store_true")
        parser.add_argument("--explicit-bool", action=argparse.BooleanOptionalAction)
        parser.add_argument("--typed", type=int, default=0)
        return parser

class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser, async_args_only=False):
        if not async_args_only:
            parser = EngineArgs.add_cli_args(parser)
        parser.add_argument("--log-requests", action=argparse.BooleanOptionalAction)
        return parser
""",
    "vllm/entrypoints/common/cli_args.py": """
@config
class BaseFrontendArgs:
    chat_template: str | None = None
    trust_request: bool = False

@config
class FrontendArgs(BaseFrontendArgs):
    port: int = 8000
    api_key: list[str] | None = None

    @classmethod
    def _customize_cli_kwargs(cls, frontend_kwargs):
        frontend_kwargs["port"]["flags"] = ["-p"]
        return frontend_kwargs

    @classmethod
    def add_cli_args(cls, parser):
        frontend_kwargs = get_kwargs(cls)
        frontend_kwargs = cls._customize_cli_kwargs(frontend_kwargs)
        for key, value in frontend_kwargs.items():
            extra_flags = value.pop("flags", [])
            parser.add_argument(*extra_flags, f"--{key.replace('_', '-')}", **value)
        return parser

def make_arg_parser(parser):
    parser.add_argument("model_tag", type=str, nargs="?")
    parser.add_argument("--headless", action="store_true", default=False)
    parser = FrontendArgs.add_cli_args(parser)
    parser = AsyncEngineArgs.add_cli_args(parser)
    return parser
""",
    "vllm/envs.py": """
environment_variables: dict = {
    "VLLM_API_KEY": lambda: None,
    "VLLM_ROCM_USE_AITER": lambda: False,
}
""",
}


@pytest.fixture
def fake_wheel(tmp_path) -> Path:
    wheel = tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in _FAKE_SOURCES.items():
            zf.writestr(name, text)
    return wheel


def test_extractor_applies_vllm_type_rules(fake_wheel):
    data = _load_extractor().extract(fake_wheel)
    flags = data["flags"]
    kinds = {name: entry["kind"] for name, entry in flags.items()}
    assert kinds == {
        "--size": "value",
        "--enable-thing": "bool",  # bool field → BooleanOptionalAction
        "--maybe-thing": "bool",  # alias to `bool | None`, through a `{**kwargs, ...}` merge
        "--dtype": "value",  # Literal alias
        "--token": "optional_value",  # bool | str | None → nargs='?'
        "--sub-config": "value",  # dataclass-typed field → JSON value
        "--opt": "value",
        "--ann": "bool",  # Annotated[bool, ...]
        "--quoted": "value",  # string annotation
        "--plain-switch": "store_true",
        "--explicit-bool": "bool",
        "--typed": "value",
        "--log-requests": "bool",  # AsyncEngineArgs adds after EngineArgs
        "--headless": "store_true",
        "--chat-template": "value",  # frontend fields, base class first
        "--trust-request": "bool",
        "--port": "value",
        "--api-key": "value",
    }
    assert flags["--size"]["aliases"] == ["-s"]
    assert flags["--port"]["aliases"] == ["-p"]  # `flags` set in _customize_cli_kwargs
    assert "--no-enable-thing" in data["accepted"] and "--no-size" not in data["accepted"]
    assert "--no-plain-switch" not in data["accepted"]  # store_true is not negatable
    assert data["vllm_version"] == "9.9.9"
    assert data["env_vars"] == ["VLLM_API_KEY", "VLLM_ROCM_USE_AITER"]


@pytest.mark.vllm_wheel
@pytest.mark.skipif(not os.environ.get("VLLM_WHEEL"), reason="set VLLM_WHEEL=<path to the pinned wheel>")
def test_committed_data_equals_a_fresh_extraction():
    fresh = _load_extractor().extract(Path(os.environ["VLLM_WHEEL"]))
    assert fresh == json.loads(FLAGS_FILE.read_text())
