"""Spaces weights, keyed compile caches and image pre-pull as Kubernetes objects (issue 20)."""

from __future__ import annotations

import dataclasses

import kubernetes_validate
import pytest

from infra.domain import Layout
from infra.render.model_service import compile_cache_dir_key, render_deployment, render_prefetch_job
from infra.render.warm_start import (
    PREFETCH_TO_SPACES_PY,
    PrepullSpec,
    SpacesWeights,
    compile_cache_volume,
    render_prepull_daemonset,
    streamer_args,
)
from tests.render.test_model_service import make_spec

WEIGHTS = SpacesWeights(bucket="acme-weights", region="atl1", prefix="models")


def _spaces_spec(**overrides):
    return make_spec(cache=None, weights=WEIGHTS, compile_cache="node", **overrides)


@pytest.mark.parametrize("compile_cache", ["node", "shared"])
def test_engines_and_prefetch_validate_against_kubernetes(compile_cache):
    spec = _spaces_spec() if compile_cache == "node" else make_spec(compile_cache="shared")
    for obj in (render_deployment(spec), render_prefetch_job(spec)):
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_the_prepull_daemonset_validates_and_holds_no_gpu():
    ds = render_prepull_daemonset(PrepullSpec("mi325x", ("vllm/vllm-openai-rocm:v0.33.0",), "amd.com/gpu", "inference"))
    kubernetes_validate.validate(ds, "1.33", strict=True)
    pod = ds["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["initContainers"]] == ["vllm/vllm-openai-rocm:v0.33.0"]
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == "100%"


def test_the_compile_cache_key_follows_image_layout_and_flags():
    base = make_spec(compile_cache="shared")
    key = compile_cache_dir_key(base)
    assert compile_cache_dir_key(dataclasses.replace(base, name="other", served_model_name="other")) == key
    assert compile_cache_dir_key(dataclasses.replace(base, image="vllm/vllm-openai-rocm:v0.34.0")) != key
    assert compile_cache_dir_key(dataclasses.replace(base, layout=Layout(tp=8, ep=True))) != key
    assert compile_cache_dir_key(dataclasses.replace(base, extra_args=("--enforce-eager",))) != key
    volume, mount = compile_cache_volume("shared", key, "model-cache")
    assert mount["subPath"] == f"compile-cache/{key}" and volume["persistentVolumeClaim"]["claimName"] == "model-cache"
    with pytest.raises(ValueError):
        compile_cache_volume("shared", key, None)


def test_a_single_gpu_replica_streams_without_the_distributed_mode():
    assert streamer_args(WEIGHTS, 1) == ["--load-format", "runai_streamer", "--model-loader-extra-config", '{"concurrency":16}']


def test_a_pinned_revision_names_the_prefix():
    spec = _spaces_spec(revision="a" * 40)
    args = render_deployment(spec)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == f"s3://acme-weights/models/Qwen/Qwen3-235B-A22B-Instruct-2507-FP8/{'a' * 40}/"
    job = render_prefetch_job(spec)["spec"]["template"]["spec"]["containers"][0]["command"]
    assert job[4] == "a" * 40


def test_the_prefetch_script_is_python_and_respects_the_put_limit():
    compile(PREFETCH_TO_SPACES_PY, "prefetch", "exec")
    command = render_prefetch_job(_spaces_spec())["spec"]["template"]["spec"]["containers"][0]["command"]
    assert int(command[-1]) < 10  # Spaces: 10 concurrent PUTs per object
