"""Issue 18 follow-up, P/D sides autoscale apart: a staging variant with p1tp4-d1tp4 on an
autoscaling pool (1..3 nodes) plans one ScaledObject per side, each scaling its own Deployment on
its own engines' series (`pd_role`): prefill on its queue per prefill engine, decode on in-flight
requests per decode engine; ranges from the pool; both validate against KEDA's pinned field list."""

from __future__ import annotations

import math

import pytest

from infra.render.autoscaling import RUNNING_HEADROOM, in_flight_query, queue_query
from infra.render.pd_service import PD_ROLE_LABEL
from tests import gateway_schemas
from tests.conftest import plan_objects, plan_variant, validate_built_ins

LAYOUT = "p1tp4-d1tp4"


def _autoscaling_pool(config, layout=LAYOUT):
    (pool,) = config["inference-platform:gpu_pools"]
    pool.pop("nodes")
    pool.update({"min_nodes": 1, "max_nodes": 3})
    config["inference-platform:models"][0]["layout"] = layout


@pytest.fixture(scope="module")
def staging(tmp_path_factory):
    return plan_variant(tmp_path_factory.mktemp("pd-scaled"), "staging", _autoscaling_pool)


def _sides(plan) -> dict[str, dict]:
    objs = plan_objects(plan, "ScaledObject")
    return {o["metadata"]["labels"][PD_ROLE_LABEL]: o for o in objs}


def test_each_side_gets_its_own_scaled_object_on_its_deployment(staging):
    sides = _sides(staging)
    assert sorted(sides) == ["decode", "prefill"]
    deployments = {d["metadata"]["labels"][PD_ROLE_LABEL]: d for d in plan_objects(staging, "Deployment") if PD_ROLE_LABEL in d["metadata"]["labels"]}
    for role, obj in sides.items():
        name = deployments[role]["metadata"]["name"]
        assert name.endswith(f"-engine-{role}")
        assert obj["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert obj["metadata"]["name"] == name
        assert gateway_schemas.errors(obj) == []


def test_prefill_scales_on_its_queue_and_decode_on_in_flight_per_engine(staging):
    sides = _sides(staging)
    (model,) = staging.to_dict()["models"]
    auto = model["replicas"]["autoscaling"]
    (prefill,) = sides["prefill"]["spec"]["triggers"]
    assert 'pd_role="prefill"' in prefill["metadata"]["query"] and "num_requests_running" not in prefill["metadata"]["query"]
    assert prefill["metadata"]["threshold"] == f"{auto['waiting_per_replica']:g}"
    in_flight, queue = sides["decode"]["spec"]["triggers"]
    for trigger in (in_flight, queue):
        assert 'pd_role="decode"' in trigger["metadata"]["query"] and 'pd_role="prefill"' not in trigger["metadata"]["query"]
    # the plan's running requests are per decode engine (the decode side's goodput point)
    running = model["predicted"]["running_per_replica"]
    assert auto["target_running_per_replica"] == max(1, math.floor(RUNNING_HEADROOM * running)) == int(in_flight["metadata"]["threshold"])


def test_side_queries_select_one_side_only():
    from infra.render.slo_rules import ObservedModel, PdObserved

    pd = PdObserved("MoRIIOConnector", "m-engine-prefill", "m-engine-decode", "m-pd-router", 1, 1, 4, 4, 256)
    model = ObservedModel("m", "m", "inference", 2000, 50, 8, 1, 2.0, deployment="m-engine-decode", pd=pd)
    assert 'pd_role="prefill"' in queue_query(model, "prefill") and 'pd_role="decode"' not in queue_query(model, "prefill")
    assert in_flight_query(model) == in_flight_query(model, "decode")  # the default side of a P/D model


def test_sides_range_over_the_pool_next_to_the_other_sides_floor(staging):
    sides = _sides(staging)
    (model,) = staging.to_dict()["models"]
    json_sides = model["replicas"]["autoscaling"]["sides"]
    for role in ("prefill", "decode"):
        spec = sides[role]["spec"]
        # 1 unit per node at min_nodes 1: one engine each; 3 nodes × 8 GPUs − the other side's 4 → 5 engines of TP4
        assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 5)
        assert (json_sides[role]["min_engines"], json_sides[role]["max_engines"]) == (1, 5)
        (up,) = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["policies"]
        assert up["value"] % 2 == 0  # a node's worth of TP4 engines


def test_side_deployments_start_at_the_floor_and_leave_the_count_to_keda(staging):
    engines = [r for r in staging.resources if r["type"] == "kubernetes:apps/v1:Deployment" and "-engine-" in r["name"]]
    assert len(engines) == 2
    for res in engines:
        assert res["inputs"]["spec"]["replicas"] == 1
        assert res["options"].get("ignoreChanges") == ["spec.replicas"]
        assert "pulumi.com/patchForce" not in res["inputs"]["metadata"].get("annotations", {})


def test_built_in_objects_validate_against_kubernetes_1_33(staging):
    assert validate_built_ins(plan_objects(staging)) >= 10
