"""Spaces weights, keyed compile caches and image pre-pull as Kubernetes objects (issue 20)."""

from __future__ import annotations

import dataclasses
import os
import subprocess

import kubernetes_validate
import pytest

from infra.domain import Layout
from infra.render import warm_start
from infra.render.model_service import (
    compile_cache_dir_key,
    deployment_timeout_seconds,
    pod_ready_budget_seconds,
    render_deployment,
    render_prefetch_job,
    startup_budget_seconds,
)
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


def _init(pod, name):
    return next(c for c in pod["initContainers"] if c["name"] == name)


@pytest.mark.parametrize("compile_cache", ["node", "shared"])
def test_only_the_warm_up_writes_the_keyed_compile_cache(compile_cache):
    """Issue 30: the engine gets a per-pod copy; the keyed directory is read-write only in the
    warm-up, which runs the engine's own command and arguments bound to loopback."""
    spec = _spaces_spec() if compile_cache == "node" else make_spec(compile_cache="shared", api_key_secret="api-key")
    pod = render_deployment(spec)["spec"]["template"]["spec"]
    engine = pod["containers"][0]
    warmup, seed = _init(pod, "compile-cache-warmup"), _init(pod, "compile-cache-seed")
    assert [c["name"] for c in pod["initContainers"]][-2:] == ["compile-cache-warmup", "compile-cache-seed"]
    assert {m["name"]: m["mountPath"] for m in engine["volumeMounts"]}["compile-cache"] == "/compile-cache"
    assert "compile-cache-shared" not in {m["name"] for m in engine["volumeMounts"]}
    assert next(v for v in pod["volumes"] if v["name"] == "compile-cache") == {"name": "compile-cache", "emptyDir": {}}
    # The engine's mounts (/dev/shm for RCCL, weights or scratch), the keyed directory at the engine's path.
    assert warmup["volumeMounts"][:-1] == engine["volumeMounts"][:-1]
    assert warmup["volumeMounts"][-1]["mountPath"] == engine["volumeMounts"][-1]["mountPath"] == "/compile-cache"
    assert {m["name"]: m.get("readOnly", False) for m in seed["volumeMounts"]} == {"compile-cache-shared": True, "compile-cache": False}
    # Same command, arguments, GPUs and environment (what the compiled code depends on); no key.
    assert warmup["command"][5:] == engine["command"]
    host = warmup["args"].index("--host")
    assert warmup["args"][host + 1] == "127.0.0.1" and engine["args"][host + 1] == "0.0.0.0"
    assert warmup["args"][:host] + warmup["args"][host + 2:] == engine["args"][:host] + engine["args"][host + 2:]
    assert warmup["resources"] == engine["resources"] and warmup["securityContext"] == engine["securityContext"]
    assert [e for e in engine["env"] if e["name"] != "VLLM_API_KEY"] == warmup["env"]
    assert "ports" not in warmup and "SYS_PTRACE" not in str(seed["securityContext"])


def test_the_warm_up_adds_one_startup_budget_to_the_first_pod_and_rollout():
    warm, plain = make_spec(compile_cache="shared"), make_spec()
    assert pod_ready_budget_seconds(warm) - pod_ready_budget_seconds(plain) == startup_budget_seconds(warm)
    assert deployment_timeout_seconds(warm) - deployment_timeout_seconds(plain) == startup_budget_seconds(warm)
    assert render_deployment(warm)["spec"]["progressDeadlineSeconds"] == pod_ready_budget_seconds(warm)


def _run_sh(script, *args, env=None):
    return subprocess.run(["/bin/sh", "-c", script, "sh", *args], capture_output=True, text=True, env=env, timeout=60)


def test_the_warm_up_script_marks_the_cache_only_when_health_answers(tmp_path, monkeypatch):
    """The script itself, with a stand-in engine: exits at once when warm, marks after /health,
    gives up without a mark (exit 0: the replica still starts) when the engine dies."""
    cache = tmp_path / "cache"
    cache.mkdir()
    script = warm_start.WARMUP_SH.replace(warm_start.COMPILE_CACHE_MOUNT, str(cache))
    fake_python = tmp_path / "bin"
    fake_python.mkdir()
    # python3 stands for the /health probe: it succeeds once the engine wrote its "ready" file.
    (fake_python / "python3").write_text(f"#!/bin/sh\ntest -f {tmp_path}/ready\n")
    (fake_python / "python3").chmod(0o755)
    (fake_python / "sleep").write_text("#!/bin/sh\nexec /bin/sleep 0.1\n")
    (fake_python / "sleep").chmod(0o755)
    env = {"PATH": f"{fake_python}:{os.environ['PATH']}"}
    dead = _run_sh(script, "30", "/bin/sh", "-c", "exit 1", env=env)
    assert dead.returncode == 0 and not (cache / ".warm").exists() and "did not answer" in dead.stderr
    ok = _run_sh(script, "30", "/bin/sh", "-c", f"touch {tmp_path}/ready; /bin/sleep 30", env=env)
    assert ok.returncode == 0 and (cache / ".warm").exists() and "written" in ok.stdout
    again = _run_sh(script, "30", "/bin/false", env=env)
    assert again.returncode == 0 and "already warm" in again.stdout


def test_the_seed_script_copies_or_leaves_an_empty_cache(tmp_path):
    seed, cache = tmp_path / "seed", tmp_path / "cache"
    (seed / "vllm").mkdir(parents=True)
    (seed / "vllm" / "graph.bin").write_text("kernels")
    cache.mkdir()
    script = warm_start.SEED_SH.replace(warm_start.COMPILE_CACHE_SEED_MOUNT, str(seed)).replace(
        warm_start.COMPILE_CACHE_MOUNT + "/", str(cache) + "/"
    ).replace(f"du -sh {warm_start.COMPILE_CACHE_MOUNT}", f"du -sh {cache}").replace(
        f"find {warm_start.COMPILE_CACHE_MOUNT}", f"find {cache}"
    )
    assert _run_sh(script).returncode == 0
    assert (cache / "vllm" / "graph.bin").read_text() == "kernels"


def test_multi_node_engines_keep_the_per_node_directory():
    spec = make_spec(compile_cache="node", layout=Layout(tp=8, nodes_per_replica=2), nodes_min=2, nodes_max=2)
    pod = render_deployment(spec, node_role="leader")["spec"]["template"]["spec"]
    assert "compile-cache-warmup" not in {c["name"] for c in pod.get("initContainers", [])}
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "compile-cache")
    assert not mount.get("readOnly")
