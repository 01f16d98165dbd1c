"""Issue 18, a P/D unit over two nodes of a fabric pool end to end: a staging variant with
p1tp8-ep-d1tp8-ep plans cleanly; every engine pod (one per node) requests the node's fabric NICs
next to its GPUs, carries the Multus networks annotation and IPC_LOCK, and waits for the fabric
component; every rendered vLLM flag passes the argument check; every object validates against
Kubernetes 1.33 (the NetworkAttachmentDefinitions against Multus's pinned field list)."""

from __future__ import annotations

import json

import pytest

from infra.catalog.vllm_flags import unknown_env_vars, unknown_flags
from infra.render.multi_node import FABRIC_NICS, NETWORKS_ANNOTATION, RDMA_RESOURCES
from infra.render.pd_service import PD_ROLE_LABEL
from tests import gateway_schemas
from tests.conftest import plan_objects, plan_variant, validate_built_ins

FABRIC_SIZE = "gpu-mi325x8-2048gb-fabric-contracted"
LAYOUT = "p1tp8-ep-d1tp8-ep"


def _fabric(config, layout=LAYOUT):
    (pool,) = config["inference-platform:gpu_pools"]
    pool.update({"size": FABRIC_SIZE, "fabric": True, "nodes": 2, "usd_per_hour": 24.0})
    config["inference-platform:models"][0]["layout"] = layout


@pytest.fixture(scope="module")
def staging(tmp_path_factory):
    return plan_variant(tmp_path_factory.mktemp("pd-fabric"), "staging", _fabric)


def _engines(plan):
    deps = [d for d in plan_objects(plan, "Deployment") if PD_ROLE_LABEL in d["metadata"]["labels"]]
    assert sorted(d["metadata"]["labels"][PD_ROLE_LABEL] for d in deps) == ["decode", "prefill"]
    return deps


def test_the_variant_plans_one_unit_over_two_nodes(staging):
    (model,) = staging.to_dict()["models"]
    assert model["layout"]["name"] == LAYOUT and model["layout"]["nodes_per_unit"] == 2
    for dep in _engines(staging):
        assert dep["spec"]["replicas"] == 1  # one unit: one prefill and one decode engine, a node each
        resources = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
        assert resources["limits"]["amd.com/gpu"] == "8"  # the whole node: the one pod on it


def test_every_engine_pod_requests_the_fabric_nics_and_moves_kv_over_rdma(staging):
    for dep in _engines(staging):
        pod = dep["spec"]["template"]
        assert pod["metadata"]["annotations"][NETWORKS_ANNOTATION] == ",".join(FABRIC_NICS)
        container = pod["spec"]["containers"][0]
        for key in ("requests", "limits"):
            assert all(container["resources"][key][r] == "1" for r in RDMA_RESOURCES) and len(RDMA_RESOURCES) == 8
        assert container["securityContext"]["capabilities"]["add"].count("IPC_LOCK") == 1
        args = container["args"]
        config = json.loads(args[args.index("--kv-transfer-config") + 1])
        assert config["kv_connector"] == "MoRIIOConnector" and config["kv_connector_extra_config"]["backend"] == "rdma"
    (router,) = [d for d in plan_objects(staging, "Deployment") if d["metadata"]["name"].endswith("-pd-router")]
    assert NETWORKS_ANNOTATION not in router["spec"]["template"]["metadata"].get("annotations", {})
    nads = plan_objects(staging, "NetworkAttachmentDefinition")
    assert sorted(n["metadata"]["name"] for n in nads) == sorted(FABRIC_NICS)


def test_every_engine_flag_and_env_var_passes_the_vllm_check(staging):
    for dep in _engines(staging):
        container = dep["spec"]["template"]["spec"]["containers"][0]
        assert unknown_flags(container["args"]) == []
        assert unknown_env_vars({e["name"]: e.get("value", "") for e in container["env"]}) == []


def _nad_urns(plan) -> set[str]:
    """The fabric component's NetworkAttachmentDefinitions as dependsOn names them (a component
    dependency resolves to its children)."""
    kind = "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition"
    urns = {f"{kind}::{r['name']}" for r in plan.resources if r["type"] == kind}
    assert len(urns) == len(FABRIC_NICS)
    return urns


def _deployments(plan, test):
    return [r for r in plan.resources if r["type"] == "kubernetes:apps/v1:Deployment" and test(r["inputs"]["metadata"]["name"])]


def test_the_engines_wait_for_the_fabric_component(staging):
    nads = _nad_urns(staging)
    engines = _deployments(staging, lambda n: n.startswith("qwen3-235b-engine-"))
    assert len(engines) == 2
    for res in engines:
        assert nads <= set(res["options"]["dependsOn"]), res["name"]
    (router,) = _deployments(staging, lambda n: n.endswith("-pd-router"))
    assert not nads & set(router["options"]["dependsOn"])


def test_a_unit_on_one_node_takes_no_nics_and_waits_for_nothing_of_the_fabric(tmp_path):
    plan = plan_variant(tmp_path, "staging", lambda c: _fabric(c, "p1tp4-ep-d1tp4-ep"))
    for dep in _engines(plan):
        pod = dep["spec"]["template"]
        assert NETWORKS_ANNOTATION not in pod["metadata"]["annotations"]
        assert not any(r in pod["spec"]["containers"][0]["resources"]["limits"] for r in RDMA_RESOURCES)
    nads = _nad_urns(plan)
    assert not any(nads & set(r["options"]["dependsOn"]) for r in _deployments(plan, lambda n: True))


def test_built_in_objects_validate_against_kubernetes_1_33(staging):
    assert validate_built_ins(plan_objects(staging)) >= 10
    for nad in plan_objects(staging, "NetworkAttachmentDefinition"):
        assert gateway_schemas.errors(nad) == []
