"""Staging variants with a KV offload tier and multi-turn sessions, planned end to end (issue 26):
the engine flags (checked against the pinned vLLM's parser), the pod memory the tier lives in,
the plan's hit rates with and without the tier, and the rules that watch it."""

from __future__ import annotations

import pytest
import yaml

from infra.catalog.vllm_flags import unknown_flags
from infra.commands.plan import render_summary
from infra.offline import build_plan, kubernetes_objects
from tests.conftest import ROOT, make_project

CHAT = {"input_tokens": 5600, "output_tokens": 300, "peak_rps": 4, "turns_per_session": 8, "think_time_s": 300}
LMCACHE_IMAGE = "registry.example.com/vllm-openai-rocm-lmcache:v0.33.0"


def _variant(tmp_path, **model_edit):
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    doc["config"]["inference-platform:models"][0].update(model_edit)
    make_project(tmp_path)
    (tmp_path / "stacks" / "Pulumi.staging.yaml").write_text(yaml.safe_dump(doc))
    return build_plan("staging", tmp_path)


def _engine(plan):
    return next(o for o in kubernetes_objects(plan) if o["kind"] == "Deployment" and o["metadata"]["name"] == "qwen3-235b-engine")


def _args(plan) -> list[str]:
    return _engine(plan)["spec"]["template"]["spec"]["containers"][0]["args"]


def _model(plan) -> dict:
    return next(m for m in plan.models if m["name"] == "qwen3-235b")


@pytest.fixture(scope="module")
def cpu_plan(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("cpu"), layout={"tp": 4, "ep": True, "replicas_per_node": 2},
                    workload=CHAT, kv_offload={"kind": "cpu", "size_gib": 512})


@pytest.fixture(scope="module")
def lmcache_plan(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("lmcache"), image=LMCACHE_IMAGE, kv_offload={"kind": "lmcache", "size_gib": 256})


@pytest.fixture(scope="module")
def auto_plan(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("auto"), workload=CHAT, kv_offload={"kind": "auto"})


def test_cpu_tier_renders_vllms_native_offloading_flags(cpu_plan):
    args = _args(cpu_plan)
    assert args[args.index("--kv-offloading-backend") + 1] == "native"
    assert args[args.index("--kv-offloading-size") + 1] == "512"
    assert "--kv-transfer-config" not in args  # vLLM builds the OffloadingConnector config itself
    assert unknown_flags(args) == []


def test_the_tier_fits_in_the_engine_pods_memory(cpu_plan):
    container = _engine(cpu_plan)["spec"]["template"]["spec"]["containers"][0]
    memory_gib = int(container["resources"]["requests"]["memory"].removesuffix("Gi"))
    assert container["resources"]["limits"]["memory"] == container["resources"]["requests"]["memory"]
    assert memory_gib >= 512 + 8 + 8 * 4  # the tier beside the engine's processes (and /dev/shm)


def test_the_plan_shows_hit_rate_and_goodput_with_and_without_the_tier(cpu_plan):
    pc = _model(cpu_plan)["prefix_cache"]
    assert pc["requested"] == "cpu" and pc["enabled"]
    without, with_ = pc["without_offload"], pc["with_offload"]
    assert with_["kv_offload"] == {"kind": "cpu", "size_gib": 512.0}
    assert with_["hit_rate"]["total"] > without["hit_rate"]["total"] > 0
    assert with_["goodput_rps_per_node"] > without["goodput_rps_per_node"]
    assert _model(cpu_plan)["kv_offload"] == {"kind": "cpu", "size_gib": 512.0}
    summary = render_summary(cpu_plan, terminal=False)
    assert "prefix cache: without offload" in summary and "with a 512 GiB cpu tier per engine" in summary


def test_lmcache_tier_plans_cleanly_on_an_image_with_lmcache(lmcache_plan):
    container = _engine(lmcache_plan)["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert container["image"] == LMCACHE_IMAGE
    assert args[args.index("--kv-offloading-backend") + 1] == "lmcache"
    assert args[args.index("--kv-offloading-size") + 1] == "256"
    assert unknown_flags(args) == []
    # vLLM's lmcache backend is LMCache's multi-process connector: its server runs in the engine container
    command = container["command"]
    assert command[:2] == ["/bin/sh", "-c"] and command[3] == "vllm-serve"
    # every LMCache release with `lmcache server` (0.4.3+) exits without an eviction policy (issue 37)
    assert "lmcache server --host 127.0.0.1 --port 5555 --l1-size-gb 256 --eviction-policy LRU &" in command[2]
    assert command[2].endswith('exec vllm serve "$@"')
    assert "prefix_cache" not in _model(lmcache_plan)  # single-turn workload: no session model


def test_auto_turns_the_tier_on_where_it_pays_and_the_rules_watch_it(auto_plan):
    model = _model(auto_plan)
    assert model["prefix_cache"]["enabled"] and model["kv_offload"]["kind"] == "cpu"
    assert "kv_offload auto" in " ".join(auto_plan.summary["notes"])
    args = _args(auto_plan)
    assert args[args.index("--kv-offloading-size") + 1] == f"{model['kv_offload']['size_gib']:g}"
    rules = [o for o in kubernetes_objects(auto_plan) if o["kind"] == "PrometheusRule"]
    recorded = {r.get("record") for o in rules for g in o["spec"]["groups"] for r in g["rules"]}
    assert {"model:vllm_prefix_cache_hit:planned", "model:vllm_kv_offload_load_bytes:rate5m",
            "model:vllm_prefix_cache_total_hit:ratio_rate30m"} <= recorded
    alerts = {r.get("alert") for o in rules for g in o["spec"]["groups"] for r in g["rules"]}
    assert "VllmPrefixCacheHitRateCollapsed" in alerts


def test_shipped_stacks_keep_their_engines_and_plans(plans):
    """No session fields, no tier: the engines' flags and the model plans are as before."""
    for plan in plans.values():
        for m in plan.models:
            assert "prefix_cache" not in m and "kv_offload" not in m
        for o in kubernetes_objects(plan):
            if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-engine"):
                assert "--kv-offloading-backend" not in o["spec"]["template"]["spec"]["containers"][0].get("args", [])
