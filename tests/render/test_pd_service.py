"""The P/D model service: prefill and decode Deployments with the KV connector, the P/D router,
all schema-valid for Kubernetes 1.33, every vLLM flag and env var known to the pinned release."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from infra.catalog.gpus import gpu_size
from infra.catalog.vllm_flags import canonical_flag, flag_tokens, unknown_env_vars, vllm_flags
from infra.domain import PdLayout
from infra.errors import UserError
from infra.render.multi_node import FABRIC_NICS, NETWORKS_ANNOTATION, RDMA_RESOURCES
from infra.render.pd_router import pd_router_args
from infra.render.pd_service import (
    PD_ROLE_LABEL,
    PdServiceSpec,
    kv_transfer_config,
    render_pd_service,
    render_side,
    router_spec,
)
from tests.render.test_model_service import make_spec

H200 = gpu_size("gpu-h200x8-1128gb")
FABRIC = gpu_size("gpu-mi325x8-2048gb-fabric-contracted")
PD = PdLayout(1, 4, 1, 4, True, True, 8, kv_cache_dtype="fp8", decode_max_num_seqs=128)


def spec(**overrides) -> PdServiceSpec:
    pd = overrides.pop("pd", PD)
    return PdServiceSpec(make_spec(layout=pd, **overrides), pd, units=overrides.get("nodes_min", 4))


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def engine(dep) -> dict:
    return dep["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(
    "s",
    [spec(), spec(gpu=H200, pool_name="h200", cache=None), spec(gpu=FABRIC, pd=PdLayout(1, 8, 1, 8, True, True, 8))],
    ids=["mi325x-moriio-xgmi", "h200-nixl", "fabric-moriio-rdma"],
)
def test_every_object_validates_and_every_flag_is_known(s):
    objects = render_pd_service(s)
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33", strict=True)
    accepted = set(vllm_flags()["accepted"])
    for dep in by_kind(objects, "Deployment"):
        if dep["metadata"]["name"].endswith("pd-router"):
            continue
        tokens = flag_tokens(engine(dep)["args"])
        assert all(canonical_flag(t) in accepted for t in tokens), tokens
        names = {e["name"]: e.get("value", "") for e in engine(dep)["env"]}
        assert unknown_env_vars(names) == []


def test_moriio_sides_produce_and_consume_over_xgmi_without_prefix_caching():
    s = spec()
    for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        dep = render_side(s, role)
        args = engine(dep)["args"]
        cfg = json.loads(args[args.index("--kv-transfer-config") + 1])
        assert cfg == kv_transfer_config(s, role)
        assert cfg["kv_connector"] == "MoRIIOConnector" and cfg["kv_role"] == kv_role
        extra = cfg["kv_connector_extra_config"]
        assert extra["backend"] == "xgmi" and extra["http_port"] == "8000" and extra["handshake_port"] == "6301"
        assert extra["proxy_ip"] == "qwen3-235b-pd-router.inference-engines.svc" and extra["proxy_ping_port"] == "36367"
        assert "--no-enable-prefix-caching" in args and "--enable-prefix-caching" not in args
        assert args[args.index("--tensor-parallel-size") + 1] == "4"
        assert dep["spec"]["selector"]["matchLabels"][PD_ROLE_LABEL] == role
        ports = {p["containerPort"] for p in engine(dep)["ports"]}
        assert {8000, 6301, 61005, 61008} <= ports  # notify base + one per TP rank
    assert render_side(s, "prefill")["spec"]["replicas"] == 4  # 1 prefill engine × 4 units
    decode_args = engine(render_side(s, "decode"))["args"]
    assert decode_args[decode_args.index("--max-num-seqs") + 1] == "128"


def test_nixl_on_nvidia_sets_the_side_channel_to_the_pod_ip():
    s = spec(gpu=H200, pool_name="h200")
    dep = render_side(s, "decode")
    cfg = json.loads(engine(dep)["args"][engine(dep)["args"].index("--kv-transfer-config") + 1])
    assert cfg == {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": 14579}
    env = {e["name"]: e for e in engine(dep)["env"]}
    assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"
    assert "--enable-prefix-caching" in engine(dep)["args"]  # NIXL keeps prefix caching
    assert "--vllm-discovery-address" not in pd_router_args(router_spec(s))


def test_units_across_nodes_move_kv_over_rdma_holding_the_nodes_fabric_nics():
    s = spec(gpu=FABRIC, pd=PdLayout(1, 8, 1, 8, True, True, 8))
    for role in ("prefill", "decode"):
        dep = render_side(s, role)
        args = engine(dep)["args"]
        assert json.loads(args[args.index("--kv-transfer-config") + 1])["kv_connector_extra_config"]["backend"] == "rdma"
        assert engine(dep)["securityContext"]["capabilities"]["add"].count("IPC_LOCK") == 1
        template = dep["spec"]["template"]
        assert template["metadata"]["annotations"][NETWORKS_ANNOTATION] == ",".join(FABRIC_NICS)
        for key in ("requests", "limits"):
            assert {r: engine(dep)["resources"][key][r] for r in RDMA_RESOURCES} == {r: "1" for r in RDMA_RESOURCES}
    inside = render_side(spec(), "prefill")
    assert NETWORKS_ANNOTATION not in inside["spec"]["template"]["metadata"]["annotations"]
    assert not set(RDMA_RESOURCES) & set(engine(inside)["resources"]["limits"])


@pytest.mark.parametrize("pd", [PdLayout(8, 1, 8, 1, gpus_per_node=8), PdLayout(1, 4, 1, 8, gpus_per_node=8)], ids=lambda p: p.name)
def test_a_unit_over_nodes_whose_engines_share_nodes_is_refused(pd):
    with pytest.raises(UserError) as info:
        render_pd_service(spec(gpu=FABRIC, pd=pd))
    (problem,) = info.value.problems
    assert problem.path == "models[qwen3-235b].layout" and "one pod at a time" in problem.message and "p1tp8-d1tp8" in problem.message


def test_a_unit_over_nodes_off_the_fabric_is_refused():
    with pytest.raises(UserError, match="no RDMA fabric"):
        render_pd_service(spec(pd=PdLayout(1, 8, 1, 8, gpus_per_node=8)))


def test_the_router_runs_vllm_router_in_pd_mode_and_the_model_service_points_at_it():
    s = spec()
    objects = render_pd_service(s)
    args = pd_router_args(router_spec(s))
    for flag in ("--vllm-pd-disaggregation", "--service-discovery", "--prefill-selector", "--decode-selector"):
        assert flag in args
    assert args[args.index("--kv-connector") + 1] == "moriio"
    assert args[args.index("--vllm-discovery-address") + 1] == "0.0.0.0:36367"
    assert f"{PD_ROLE_LABEL}=prefill" in args and f"{PD_ROLE_LABEL}=decode" in args
    (model_svc,) = [o for o in by_kind(objects, "Service") if o["metadata"]["name"] == "qwen3-235b"]
    assert model_svc["spec"]["selector"]["app.kubernetes.io/name"] == "vllm-pd-router"
    (role,) = by_kind(objects, "Role")
    assert role["rules"][0]["resources"] == ["pods"] and "watch" in role["rules"][0]["verbs"]
    router = [d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == "qwen3-235b-pd-router"][0]
    # issue 30: the same hash-locked wheel set as the front-door router, no unpinned pip install
    pod = router["spec"]["template"]["spec"]
    (install,) = pod["initContainers"]
    assert "--require-hashes" in install["command"] and "-r" in install["command"]
    (lock,) = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"] == "qwen3-235b-pd-router-install"]
    assert "vllm-router==0.1.17" in lock["data"]["requirements.txt"] and "--hash=sha256:" in lock["data"]["requirements.txt"]
    assert engine(router)["command"] == ["/opt/vllm-router/bin/vllm-router"]


def test_a_vendor_without_a_connector_is_a_user_error():
    from dataclasses import replace

    odd = replace(make_spec().gpu, accelerator=replace(make_spec().gpu.accelerator, vendor="intel"))
    with pytest.raises(UserError, match="no KV connector"):
        render_pd_service(PdServiceSpec(make_spec(layout=PD, gpu=odd), PD))
