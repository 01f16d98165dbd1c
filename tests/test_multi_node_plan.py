"""Issue 18 part 3, multi-node replicas end to end: a prod variant serving DeepSeek-R1 (BF16) on a
fabric pool with one replica over two nodes plans cleanly and deterministically; every rendered
vLLM flag passes the argument check; every object validates (built-ins against Kubernetes 1.33,
the LeaderWorkerSet and the NetworkAttachmentDefinitions against the field lists of the pinned
LWS and Multus); only leaders serve; the policy pack passes."""

from __future__ import annotations

import json

import pytest

from infra.catalog import versions
from infra.catalog.vllm_flags import unknown_flags
from infra.offline import kubernetes_objects
from infra.render.multi_node import FABRIC_NICS, NETWORKS_ANNOTATION, RDMA_RESOURCES
from tests import gateway_schemas
from tests.conftest import plan_objects, plan_variant, policy_violations, validate_built_ins

FABRIC_SIZE = "gpu-mi325x8-2048gb-fabric-contracted"
R1 = "unsloth/DeepSeek-R1-BF16"
WIDE = {"tp": 8, "ep": True, "dp": 2, "nodes_per_replica": 2}


def _fabric(config, layout=WIDE):
    for pool in config["inference-platform:gpu_pools"]:
        pool["size"], pool["fabric"] = FABRIC_SIZE, True
    config["inference-platform:gpu_pools"][0].update({"min_nodes": 2, "max_nodes": 4})
    # DeepSeek-R1 BF16 is 1.3 TB: the shared cache must hold it (issue 29's storage invariant).
    config["inference-platform:model_cache"]["size_gib"] = 2048
    config["inference-platform:models"][0].update(
        {
            "name": "deepseek-r1",
            "source": R1,
            "layout": layout,
            "workload": {"input_tokens": 5600, "output_tokens": 140, "peak_rps": 2},
            "slo": {"ttft_p90_ms": 2000, "tpot_p90_ms": 50},
            "autoscaling": {"enabled": False},
        }
    )


def _variant(root, mutate=_fabric):
    return plan_variant(root, "prod", mutate)


@pytest.fixture(scope="module")
def prod(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("mn-prod"))


def _lws(plan):
    (lws,) = plan_objects(plan, "LeaderWorkerSet")
    return lws


def _template(plan, role):
    return _lws(plan)["spec"]["leaderWorkerTemplate"][f"{role}Template"]


def test_the_r1_bf16_variant_plans_one_replica_over_two_nodes(prod):
    (model,) = [m for m in prod.to_dict()["models"] if m["name"] == "deepseek-r1"]
    assert model["layout"]["name"] == "tp8-ep-dp2-n2" and model["layout"]["nodes_per_replica"] == 2
    lws = _lws(prod)
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    spec = lws["spec"]
    assert spec["replicas"] == 1 and spec["leaderWorkerTemplate"]["size"] == 2  # min 2 nodes = one group
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupAfterStart"
    assert spec["startupPolicy"] == "LeaderCreated"
    assert not [d for d in plan_objects(prod, "Deployment") if d["metadata"]["name"] == "deepseek-r1-engine"]


def test_the_plan_is_byte_identical_across_runs(prod, tmp_path):
    assert _variant(tmp_path).to_json() == prod.to_json()


def test_leader_and_workers_run_vllm_native_multi_node_flags_vllm_accepts(prod):
    leader = _template(prod, "leader")["spec"]["containers"][0]
    worker = _template(prod, "worker")["spec"]["containers"][0]
    for args in (leader["args"], worker["args"]):
        assert unknown_flags(args) == []
        assert args[args.index("--data-parallel-size") + 1] == "2"
        assert args[args.index("--data-parallel-size-local") + 1] == "1"
        assert args[args.index("--data-parallel-address") + 1] == "$(LWS_LEADER_ADDRESS)"
        assert "--data-parallel-rpc-port" in args and "--enable-expert-parallel" in args
        assert args[args.index("--all2all-backend") + 1] == "mori_high_throughput"
    assert "--headless" in worker["args"] and "--headless" not in leader["args"]
    assert leader["command"] == ["vllm", "serve"]
    shell, flag, script, _name = worker["command"]
    assert (shell, flag) == ("/bin/sh", "-c")
    assert '--data-parallel-start-rank "$((LWS_WORKER_INDEX * 1))"' in script
    assert unknown_flags(["--data-parallel-start-rank", "1"]) == []


def test_tp_over_nodes_uses_nnodes_node_rank_and_master_addr(tmp_path):
    plan = _variant(tmp_path, lambda c: _fabric(c, {"tp": 16, "nodes_per_replica": 2}))
    lws = _lws(plan)["spec"]["leaderWorkerTemplate"]
    leader, worker = (lws[f"{r}Template"]["spec"]["containers"][0]["args"] for r in ("leader", "worker"))
    for args in (leader, worker):
        assert unknown_flags(args) == []
        assert args[args.index("--tensor-parallel-size") + 1] == "16"
        assert args[args.index("--nnodes") + 1] == "2" and args[args.index("--master-addr") + 1] == "$(LWS_LEADER_ADDRESS)"
    assert leader[leader.index("--node-rank") + 1] == "0"
    assert worker[worker.index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)" and "--headless" in worker


def test_every_pod_requests_the_fabric_nics_next_to_its_gpus(prod):
    for role in ("leader", "worker"):
        pod = _template(prod, role)
        assert pod["metadata"]["annotations"][NETWORKS_ANNOTATION] == ",".join(FABRIC_NICS)
        container = pod["spec"]["containers"][0]
        for key in ("requests", "limits"):
            resources = container["resources"][key]
            assert resources["amd.com/gpu"] == "8"
            assert all(resources[r] == "1" for r in RDMA_RESOURCES) and len(RDMA_RESOURCES) == 8
        assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
    nads = plan_objects(prod, "NetworkAttachmentDefinition")
    assert sorted(n["metadata"]["name"] for n in nads) == sorted(FABRIC_NICS)
    for nad in nads:
        config = json.loads(nad["spec"]["config"])
        assert config["type"] == "host-device" and config["device"] == nad["metadata"]["name"]
        assert nad["metadata"]["namespace"] == "inference-engines"  # beside the engines whose pods name them


def test_only_leaders_serve(prod):
    """The Service (so the router's EndpointSlice registrar), PDB and PodMonitor select
    `app.kubernetes.io/name: vllm`; headless workers carry another name and no API port."""
    leader, worker = _template(prod, "leader"), _template(prod, "worker")
    (service,) = [s for s in plan_objects(prod, "Service") if s["metadata"]["name"] == "deepseek-r1"]
    selector = service["spec"]["selector"]

    def selects(pod):
        return all(pod["metadata"]["labels"].get(k) == v for k, v in selector.items())

    assert selects(leader) and not selects(worker)
    container = worker["spec"]["containers"][0]
    assert "ports" not in container and "readinessProbe" not in container
    assert leader["spec"]["containers"][0]["ports"][0]["containerPort"] == 8000
    monitors = [m for m in plan_objects(prod, "PodMonitor") if m["spec"]["selector"].get("matchLabels", {}).get("app.kubernetes.io/name") == "vllm"]
    assert monitors and not any(
        all(worker["metadata"]["labels"].get(k) == v for k, v in m["spec"]["selector"].get("matchLabels", {}).items()) for m in monitors
    )


def test_the_fabric_platform_is_installed_pinned(prod):
    releases = [r for r in prod.resources if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"].get("name") == "lws"]
    (lws,) = releases
    assert lws["inputs"]["chart"] == "oci://registry.k8s.io/lws/charts/lws"
    assert lws["inputs"]["version"] == versions.LWS_CHART_VERSION == "0.10.0"
    assert lws["inputs"]["values"]["image"]["manager"]["tag"] == versions.LWS_IMAGE_TAG
    (ds,) = [d for d in plan_objects(prod, "DaemonSet") if d["metadata"]["name"] == "kube-multus-ds"]
    images = {c["image"] for c in ds["spec"]["template"]["spec"]["containers"] + ds["spec"]["template"]["spec"]["initContainers"]}
    assert images == {versions.MULTUS_IMAGE} and versions.MULTUS_IMAGE.endswith(":v4.3.0-thick")
    fabric = [r for r in prod.resources if r["type"] == "inference-platform:fabric:Fabric"]
    assert len(fabric) == 1


def test_clusters_without_a_fabric_pool_install_none_of_it():
    from tests.conftest import plan_of

    plan = plan_of("prod")
    assert not [r for r in plan.resources if r["type"] == "inference-platform:fabric:Fabric"]
    assert not [o for o in kubernetes_objects(plan) if o["kind"] in ("LeaderWorkerSet", "NetworkAttachmentDefinition")]


def test_built_in_objects_validate_against_kubernetes_1_33(prod):
    assert validate_built_ins(plan_objects(prod)) >= 10


def test_custom_resources_validate_against_the_pinned_field_lists(prod):
    seen = set()
    for obj in plan_objects(prod):
        if obj["kind"] in ("LeaderWorkerSet", "NetworkAttachmentDefinition"):
            assert gateway_schemas.errors(obj) == [], (obj["kind"], obj["metadata"]["name"])
            seen.add(obj["kind"])
    assert seen == {"LeaderWorkerSet", "NetworkAttachmentDefinition"}


def test_an_unknown_lws_field_fails_the_validator(prod):
    lws = _lws(prod)
    bad = {**lws, "spec": {**lws["spec"], "leaderWorkerTemplate": {**lws["spec"]["leaderWorkerTemplate"], "restartPolicy": "Always"}}}
    assert gateway_schemas.errors(bad)
    bad = {**lws, "spec": {**lws["spec"], "groupSize": 2}}
    assert gateway_schemas.errors(bad)


def test_the_variant_complies_with_every_policy(prod):
    assert policy_violations(prod, "prod") == []


def test_model_down_alerts_watch_the_leader_statefulset(prod):
    """A LeaderWorkerSet has no Deployment: kube-state-metrics reports its leaders as the
    StatefulSet named like it, which is what VllmModelDown and VllmMetricsAbsent read."""
    rules = [r for o in plan_objects(prod, "PrometheusRule") for g in o["spec"]["groups"] for r in g["rules"]]
    down = [r for r in rules if r.get("alert") == "VllmModelDown" and r["labels"].get("model") == "deepseek-r1"]
    assert down and 'statefulset="deepseek-r1-engine"' in down[0]["expr"] and "kube_statefulset_replicas" in down[0]["expr"]
    others = [r for r in rules if r.get("alert") == "VllmModelDown" and r["labels"].get("model") != "deepseek-r1"]
    assert others and all("kube_deployment_status_replicas_ready" in r["expr"] for r in others)


def test_the_disruption_budget_counts_workers_too(prod):
    (pdb,) = [p for p in plan_objects(prod, "PodDisruptionBudget") if p["metadata"]["name"] == "deepseek-r1-engine"]
    selector = pdb["spec"]["selector"]["matchLabels"]
    for role in ("leader", "worker"):
        labels = _template(prod, role)["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in selector.items()), role
    assert pdb["spec"]["maxUnavailable"] == 1


# --- autoscaling in whole groups (issue 18 follow-up) ----------------------------------------------


def _autoscaled(config):
    """The R1 variant with autoscaling left to its default on the 2..4-node fabric pool."""
    _fabric(config)
    del config["inference-platform:models"][0]["autoscaling"]


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("mn-scaled"), _autoscaled)


def _scaled_object(plan):
    (obj,) = [o for o in plan_objects(plan, "ScaledObject") if o["metadata"]["labels"]["inference-platform/model"] == "deepseek-r1"]
    return obj


def test_a_replica_over_nodes_autoscales_by_default_on_an_autoscaling_pool(scaled):
    (model,) = [m for m in scaled.to_dict()["models"] if m["name"] == "deepseek-r1"]
    assert model["replicas"]["min"] == 1 and model["replicas"]["max"] == 2
    assert model["replicas"]["autoscaling"] is not None
    spec = _scaled_object(scaled)["spec"]
    # KEDA scales the LeaderWorkerSet through its scale subresource: .spec.replicas counts groups.
    assert spec["scaleTargetRef"] == {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "deepseek-r1-engine"}
    assert _lws(scaled)["metadata"]["name"] == "deepseek-r1-engine"
    # 2..4 nodes of a fabric pool ÷ 2 nodes per replica: 1..2 groups.
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 2)
    # Each step asks for at least one whole group (its 2 nodes arrive together).
    (up,) = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["policies"]
    assert up["type"] == "Pods" and up["value"] >= 1


def test_the_group_starts_at_the_floor_and_then_leaves_the_count_to_keda(scaled, prod):
    assert _lws(scaled)["spec"]["replicas"] == 1
    (engine,) = [r for r in scaled.resources if r["name"].endswith("-model-deepseek-r1-engine")]
    assert engine["options"].get("ignoreChanges") == ["spec.replicas"]
    (fixed,) = [r for r in prod.resources if r["name"].endswith("-model-deepseek-r1-engine")]
    assert not fixed["options"].get("ignoreChanges")
    assert not [o for o in plan_objects(prod, "ScaledObject") if o["metadata"]["labels"]["inference-platform/model"] == "deepseek-r1"]


def test_the_in_flight_target_counts_the_whole_group(scaled):
    """The plan's running requests per replica are the group's (all DP ranks over both nodes);
    the leader's API server reports them, so the per-replica target is the group's too."""
    (model,) = [m for m in scaled.to_dict()["models"] if m["name"] == "deepseek-r1"]
    running = model["predicted"]["running_per_replica"]
    target = model["replicas"]["autoscaling"]["target_running_per_replica"]
    # the JSON rounds running to 0.1: the target comes from the unrounded figure
    assert max(1, int(0.8 * (running - 0.05))) <= target <= max(1, int(0.8 * (running + 0.05)))
    in_flight, _queue = _scaled_object(scaled)["spec"]["triggers"]
    assert in_flight["metadata"]["threshold"] == f"{target:g}"


def test_the_queries_read_only_the_leaders(scaled):
    """Workers are headless (no /metrics) and labelled app.kubernetes.io/name: vllm-worker, which
    the PodMonitor maps to `component`: the queries' component="vllm" keeps them out."""
    worker = _template(scaled, "worker")["metadata"]["labels"]["app.kubernetes.io/name"]
    leader = _template(scaled, "leader")["metadata"]["labels"]["app.kubernetes.io/name"]
    assert (leader, worker) == ("vllm", "vllm-worker")
    for trigger in _scaled_object(scaled)["spec"]["triggers"]:
        query = trigger["metadata"]["query"]
        assert query.count('component="vllm"') == query.count("vllm:num_requests_") >= 1
        assert "vllm-worker" not in query


def test_a_group_loads_on_all_its_nodes_at_once(scaled):
    (model,) = [m for m in scaled.to_dict()["models"] if m["name"] == "deepseek-r1"]
    readiness = model["time_to_ready"]
    assert readiness["new_replica"]["concurrent_loaders"] == 2  # one pod per node of the group
    assert readiness["first_start"]["concurrent_loaders"] == 2  # the floor: one group
    assert model["replicas"]["autoscaling"]["scale_up"]["time_to_ready_seconds"] == readiness["scale_up_seconds"]


def test_the_scaled_object_validates_against_the_pinned_keda_field_list(scaled):
    obj = _scaled_object(scaled)
    assert gateway_schemas.errors(obj) == []
    bad = {**obj, "spec": {**obj["spec"], "scaleTargetRef": {**obj["spec"]["scaleTargetRef"], "group": "leaderworkerset.x-k8s.io"}}}
    assert gateway_schemas.errors(bad)
