"""A replica over several nodes as rendered: vLLM's multi-node flags per role, the all-to-all
backend choice, the LeaderWorkerSet shape, and the fabric platform objects."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from infra.catalog.gpus import GPU_SIZES
from infra.catalog.vllm_flags import unknown_flags
from infra.domain import Layout
from infra.errors import UserError
from infra.render.fabric import lws_values, render_attachments, render_multus
from infra.render.model_objects import render_model_service
from infra.render.model_service import ModelServiceSpec
from infra.render.vllm_args import ServeOptions, vllm_serve_args
from tests import gateway_schemas

FABRIC = GPU_SIZES["gpu-mi325x8-2048gb-fabric-contracted"]
WIDE = Layout(tp=4, ep=True, dp=4, nodes_per_replica=2)


def _opts(**kw):
    return ServeOptions(source="deepseek-ai/DeepSeek-R1", served_model_name="r1", moe=True, **kw)


def _spec(layout=WIDE, **kw):
    return ModelServiceSpec(
        name="r1", source="deepseek-ai/DeepSeek-R1", served_model_name="r1", layout=layout, nodes_min=4, nodes_max=4,
        gpu=FABRIC, pool_name="fabric", moe=True, **kw,
    )


def test_each_role_gets_its_multi_node_flags_and_all_pass_the_check():
    leader = vllm_serve_args(WIDE, _opts(node_role="leader"))
    worker = vllm_serve_args(WIDE, _opts(node_role="worker"))
    assert unknown_flags(leader) == [] and unknown_flags(worker) == []
    assert leader[leader.index("--data-parallel-size-local") + 1] == "2"  # 4 DP ranks over 2 nodes
    assert "--headless" in worker and "--headless" not in leader
    with pytest.raises(UserError, match="LeaderWorkerSet leader or worker"):
        vllm_serve_args(WIDE, _opts())


def test_all2all_is_mori_across_amd_nodes_and_extra_args_can_replace_it():
    args = vllm_serve_args(WIDE, _opts(node_role="leader"))
    assert args[args.index("--all2all-backend") + 1] == "mori_high_throughput"
    one_node = vllm_serve_args(Layout(tp=1, ep=True, dp=8), _opts())
    assert one_node[one_node.index("--all2all-backend") + 1] == "allgather_reducescatter"
    replaced = vllm_serve_args(WIDE, _opts(node_role="leader", extra_args=("--all2all-backend", "allgather_reducescatter")))
    assert replaced.count("--all2all-backend") == 1 and replaced[-1] == "allgather_reducescatter"


def test_a_multi_node_model_service_is_a_leader_worker_set_of_whole_nodes():
    objects = {o["kind"]: o for o in render_model_service(_spec())}
    assert "Deployment" not in objects
    lws = objects["LeaderWorkerSet"]
    assert gateway_schemas.errors(lws) == []
    assert lws["spec"]["replicas"] == 2 and lws["spec"]["leaderWorkerTemplate"]["size"] == 2  # 4 nodes, 2 per replica
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert '"$((LWS_WORKER_INDEX * 2))"' in worker["command"][2]
    assert worker["resources"]["limits"]["amd.com/gpu"] == "8"


def test_a_multi_node_spec_the_pool_cannot_hold_is_refused():
    with pytest.raises(UserError, match="not whole replicas"):
        render_model_service(replace(_spec(), layout=Layout(tp=8, ep=True, dp=3, nodes_per_replica=3)))  # 4 nodes
    with pytest.raises(UserError, match="no RDMA fabric"):
        render_model_service(replace(_spec(), gpu=GPU_SIZES["gpu-mi325x8-2048gb-contracted"]))


def test_fabric_platform_objects_are_pinned_and_valid():
    import kubernetes_validate

    multus = render_multus(("fabric",))
    for obj in multus:
        kubernetes_validate.validate(obj, "1.33", strict=True)
    ds = next(o for o in multus if o["kind"] == "DaemonSet")
    terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["fabric"]
    nads = render_attachments("inference")
    assert [n["metadata"]["name"] for n in nads] == [f"fabric{i}" for i in range(8)]
    for nad in nads:
        assert gateway_schemas.errors(nad) == []
        assert json.loads(nad["spec"]["config"])["type"] == "host-device"
    assert lws_values()["image"]["manager"]["tag"] == "v0.10.0"
