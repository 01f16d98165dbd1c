"""Issue 20 end to end: a stack whose weights come from a Spaces bucket plans cleanly; the plan's
time-to-ready and the autoscaler's scale-up policy follow the weight source."""

from __future__ import annotations

import json

import pytest
import yaml

from infra.catalog.vllm_flags import unknown_flags
from infra.offline import SECRET_MARKER, build_plan, kubernetes_objects
from tests.conftest import ROOT, make_project

SPACES = {"kind": "spaces", "bucket": "acme-staging-weights"}


def _variant(tmp_path, stack: str, model_cache: dict):
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["inference-platform:model_cache"] = model_cache
    make_project(tmp_path)
    (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    return build_plan(stack, tmp_path)


def _res(plan, type_suffix):
    return [r for r in plan.resources if r["type"].endswith(type_suffix)]


def _engine(plan, model="qwen3-235b"):
    return next(o for o in kubernetes_objects(plan) if o["kind"] == "Deployment" and o["metadata"]["name"] == f"{model}-engine")


@pytest.fixture(scope="module")
def spaces_plan(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("spaces"), "staging", SPACES)


def test_the_bucket_and_its_scoped_keys_are_declared(spaces_plan):
    (bucket,) = _res(spaces_plan, "spacesBucket:SpacesBucket")
    assert bucket["inputs"]["name"] == "acme-staging-weights" and bucket["inputs"]["region"] == "atl1"
    assert bucket["inputs"]["acl"] == "private" and bucket["inputs"]["forceDestroy"] is False
    grants = sorted(k["inputs"]["grants"][0]["permission"] for k in _res(spaces_plan, "spacesKey:SpacesKey"))
    assert grants == ["read", "readwrite"]
    assert not _res(spaces_plan, "nfs:Nfs")


def test_the_keys_reach_kubernetes_only_as_secrets(spaces_plan):
    secrets = [r for r in _res(spaces_plan, "core/v1:Secret") if "weights" in r["name"]]
    assert len(secrets) == 2
    for secret in secrets:
        assert secret["inputs"]["stringData"] == SECRET_MARKER
    text = spaces_plan.to_json()
    assert "read-key-id-secret" not in text and "write-key-id-secret" not in text  # the mocks' key values


def test_the_prefetch_job_uploads_to_the_bucket(spaces_plan):
    job = next(o for o in kubernetes_objects(spaces_plan) if o["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    command = container["command"]
    assert command[:2] == ["python3", "-c"]
    assert command[3:7] == ["Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "", "acme-staging-weights", "models/Qwen/Qwen3-235B-A22B-Instruct-2507-FP8/main"]
    compile(command[2], "prefetch", "exec")  # the script is valid Python
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_ENDPOINT_URL"]["value"] == "https://atl1.digitaloceanspaces.com"
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "spaces-weights-write"
    assert "persistentVolumeClaim" not in json.dumps(job)


def test_the_engine_streams_from_the_bucket_with_flags_vllm_accepts(spaces_plan):
    container = _engine(spaces_plan)["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "s3://acme-staging-weights/models/Qwen/Qwen3-235B-A22B-Instruct-2507-FP8/main/"
    assert args[args.index("--load-format") + 1] == "runai_streamer"
    extra = json.loads(args[args.index("--model-loader-extra-config") + 1])
    assert extra == {"concurrency": 16, "distributed": True}  # several GPU ranks per replica
    assert set(extra) <= {"distributed", "concurrency", "memory_limit"}  # the keys vLLM 0.33 accepts
    assert unknown_flags(args) == []
    assert "--revision" not in args and "--tokenizer-revision" not in args  # the prefix names the revision
    env = {e["name"]: e for e in container["env"]}
    assert env["RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING"]["value"] == "0"
    assert env["AWS_EC2_METADATA_DISABLED"]["value"] == "true"
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"]["name"] == "spaces-weights-read"
    assert env["HF_HUB_OFFLINE"]["value"] == "1"


def test_without_nfs_the_compile_cache_is_on_the_node(spaces_plan, plans):
    pod = _engine(spaces_plan)["spec"]["template"]["spec"]
    cache = next(v for v in pod["volumes"] if v["name"] == "compile-cache-shared")
    assert cache["hostPath"]["path"].startswith("/var/lib/inference-platform/compile-cache/")
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["VLLM_CACHE_ROOT"] == "/compile-cache/vllm" and env["AITER_JIT_DIR"] == "/compile-cache/aiter"
    nfs_pod = _engine(plans["staging"])["spec"]["template"]["spec"]
    warmup = next(c for c in nfs_pod["initContainers"] if c["name"] == "compile-cache-warmup")
    shared = next(m for m in warmup["volumeMounts"] if m["name"] == "compile-cache-shared")
    assert shared["subPath"].startswith("compile-cache/") and not shared.get("readOnly")


def test_no_serving_container_of_a_shipped_stack_can_write_a_shared_compile_cache(spaces_plan, plans):
    """Issue 30: the engine answers prompts, so it never mounts the keyed directory; only the
    warm-up (loopback, before the pod is Ready) writes it and the seed reads it read-only."""
    for plan in (spaces_plan, *plans.values()):
        for obj in kubernetes_objects(plan):
            if obj.get("kind") != "Deployment" or obj["metadata"]["labels"].get("app.kubernetes.io/name") != "vllm":
                continue
            pod = obj["spec"]["template"]["spec"]
            assert all(m["name"] != "compile-cache-shared" for m in pod["containers"][0]["volumeMounts"])
            seed = next(c for c in pod["initContainers"] if c["name"] == "compile-cache-seed")
            assert all(m.get("readOnly") for m in seed["volumeMounts"] if m["name"] == "compile-cache-shared")


def test_the_plan_shows_time_to_ready_per_source(spaces_plan, plans):
    spaces = spaces_plan.models[0]["time_to_ready"]
    nfs = plans["staging"].models[0]["time_to_ready"]
    assert spaces["source"] == "spaces" and nfs["source"] == "nfs"
    assert spaces["serving_after_seconds"] < nfs["serving_after_seconds"]
    assert "from the Spaces bucket" in spaces["summary"]
    assert spaces_plan.models[0]["time_to_ready"]["startup_budget_seconds"] < nfs["startup_budget_seconds"]


def test_the_summary_says_when_a_new_replica_serves(plans):
    from infra.commands.plan import render_summary

    text = render_summary(plans["prod"])
    assert "cold start: a new replica serves after ~" in text and "scale-up: " in text


def test_autoscaling_follows_the_weight_source(tmp_path):
    """prod's autoscaled model: a slower source asks for more capacity at once with a shorter window."""
    policies = {}
    for kind, cache in (("spaces", {"kind": "spaces", "bucket": "acme-prod-weights"}), ("nfs", {"kind": "nfs"}), ("none", {"kind": "none"})):
        plan = _variant(tmp_path / kind, "prod", cache)
        auto = plan.models[0]["replicas"]["autoscaling"]["scale_up"]
        obj = next(o for o in kubernetes_objects(plan) if o["kind"] == "ScaledObject")
        up = obj["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]
        assert up["stabilizationWindowSeconds"] == auto["stabilization_window_seconds"]
        assert up["policies"][0]["value"] == auto["pods_per_period"]
        policies[kind] = auto
    assert policies["spaces"]["time_to_ready_seconds"] < policies["nfs"]["time_to_ready_seconds"] < policies["none"]["time_to_ready_seconds"]
    windows = [policies[k]["stabilization_window_seconds"] for k in ("spaces", "nfs", "none")]
    assert windows == sorted(windows, reverse=True) and windows[0] > windows[-1]
    assert policies["none"]["pods_per_period"] > policies["spaces"]["pods_per_period"]


def test_gpu_pools_pre_pull_the_engine_image(plans):
    daemonsets = [o for o in kubernetes_objects(plans["prod"]) if o["kind"] == "DaemonSet" and o["metadata"]["name"].startswith("image-prepull-")]
    assert {d["metadata"]["name"] for d in daemonsets} == {"image-prepull-mi325x", "image-prepull-mi325x-small"}
    pod = daemonsets[0]["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["image"] == "vllm/vllm-openai-rocm:v0.33.0"
    assert pod["containers"][0]["image"].startswith("registry.k8s.io/pause:")
    assert pod["tolerations"][0]["key"] == "amd.com/gpu" and "amd.com/gpu" not in json.dumps(pod["containers"])
