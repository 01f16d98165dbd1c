"""The vLLM model-service manifests: schema-valid, and shaped the way scarce GPUs need."""

from __future__ import annotations

import json
import shlex

import kubernetes_validate
import pytest

from infra.catalog import versions
from infra.catalog.gpus import GPU_SIZES, gpu_size
from infra.domain import Layout
from infra.errors import UserError
from infra.render.model_objects import render_model_service
from infra.render.model_service import (
    ANNOTATION_GPUS,
    ANNOTATION_LAYOUT,
    CacheSpec,
    ModelServiceSpec,
    completion_marker,
    cpu_request,
    deployment_timeout_seconds,
    memory_request_gib,
    render_deployment,
    render_namespace,
    render_pdb,
    render_prefetch_job,
    render_secret_shape,
    render_service,
    shm_size_gib,
    startup_budget_seconds,
)

MI325X = gpu_size("gpu-mi325x8-2048gb-contracted")
H200 = gpu_size("gpu-h200x8-1128gb")


def make_spec(**overrides) -> ModelServiceSpec:
    base = dict(
        name="qwen3-235b",
        source="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        served_model_name="qwen3-235b",
        layout=Layout(tp=4, ep=True, replicas_per_node=2, kv_cache_dtype="fp8"),
        nodes_min=4,
        nodes_max=4,
        gpu=MI325X,
        pool_name="mi325x",
        cache=CacheSpec("model-cache"),
        hf_token_secret="qwen3-235b-hf-token",
        api_key_secret="qwen3-235b-api-key",
        estimated_load_seconds=1500,
        max_model_len=32768,
        moe=True,
    )
    base.update(overrides)
    return ModelServiceSpec(**base)


def pod_spec(spec: ModelServiceSpec) -> dict:
    return render_deployment(spec)["spec"]["template"]["spec"]


def container(spec: ModelServiceSpec) -> dict:
    return pod_spec(spec)["containers"][0]


def _layouts_for(size) -> list[Layout]:
    out = []
    for tp in (1, 2, 4, 8):
        if tp <= size.gpus and size.gpus % tp == 0:
            out.append(Layout(tp=tp, replicas_per_node=size.gpus // tp))
            out.append(Layout(tp=tp, ep=True, replicas_per_node=1))
    if size.gpus >= 8:
        out.append(Layout(tp=1, ep=True, dp=8, replicas_per_node=1))
        out.append(Layout(tp=2, ep=True, dp=2, replicas_per_node=2))
    return out


MATRIX = [
    # Cache and scratch alternate across layouts: both modes meet every size without doubling the run.
    (size, layout, i % 2 == 0)
    for size in GPU_SIZES.values()
    for i, layout in enumerate(_layouts_for(size) * (2 if len(_layouts_for(size)) == 1 else 1))
]


def test_matrix_covers_vendors_layouts_and_cache_modes():
    assert len(MATRIX) > 60
    assert {s.vendor for s, _, _ in MATRIX} == {"amd", "nvidia"}
    assert {cached for _, _, cached in MATRIX} == {True, False}


@pytest.mark.parametrize(
    "size, layout, cached", MATRIX, ids=lambda v: getattr(v, "slug", getattr(v, "name", str(v)))
)
def test_every_object_validates_against_kubernetes_1_33(size, layout, cached):
    spec = make_spec(
        gpu=size,
        layout=layout,
        pool_name="pool",
        cache=CacheSpec("model-cache") if cached else None,
        nodes_min=1,
        nodes_max=3,
    )
    objects = [
        render_namespace("inference-engines", "privileged"),
        *render_model_service(spec),
        render_secret_shape("s", "inference-engines", "token"),
    ]
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33", strict=True)
    resources = container(spec)["resources"]
    assert resources["limits"][size.gpu_resource_name] == str(layout.tp * layout.dp)


def test_gpus_per_pod_equal_tp_times_dp():
    for layout in (
        Layout(tp=4, replicas_per_node=2),
        Layout(tp=2, ep=True, dp=4),
        Layout(tp=1, ep=True, dp=8),
    ):
        spec = make_spec(layout=layout)
        res = container(spec)["resources"]
        assert res["requests"]["amd.com/gpu"] == res["limits"]["amd.com/gpu"] == str(layout.tp * layout.dp)
        annotations = render_deployment(spec)["spec"]["template"]["metadata"]["annotations"]
        assert annotations[ANNOTATION_GPUS] == str(layout.tp * layout.dp)
        assert annotations[ANNOTATION_LAYOUT] == layout.name


@pytest.mark.parametrize("size", [MI325X, H200, gpu_size("gpu-mi300x1-192gb"), gpu_size("gpu-l40sx1-48gb")])
def test_pods_tolerate_exactly_their_pool_taint_and_select_their_pool(size):
    layout = Layout(tp=1, replicas_per_node=size.gpus)
    spec = make_spec(gpu=size, layout=layout, pool_name="gpu-pool-a", moe=False)
    pod = pod_spec(spec)
    assert pod["tolerations"] == [{"key": size.taint_key, "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["nodeSelector"] == {"doks.digitalocean.com/node-pool": "gpu-pool-a"}
    assert size.gpu_resource_name in container(spec)["resources"]["limits"]


@pytest.mark.parametrize(
    "layout, nodes_min, nodes_max, replicas",
    [
        (Layout(tp=4, replicas_per_node=2), 4, 4, 8),
        (Layout(tp=8, replicas_per_node=1), 3, 3, 3),
        (Layout(tp=1, replicas_per_node=8), 2, 2, 16),
        (Layout(tp=2, replicas_per_node=4), 1, 6, 4),  # autoscaled: replicas for the minimum
        (Layout(tp=2, ep=True, dp=2, replicas_per_node=2), 2, 5, 4),
    ],
)
def test_replicas_match_layout_times_nodes(layout, nodes_min, nodes_max, replicas):
    spec = make_spec(layout=layout, nodes_min=nodes_min, nodes_max=nodes_max)
    assert render_deployment(spec)["spec"]["replicas"] == replicas == layout.replicas_per_node * nodes_min
    assert spec.max_replicas == layout.replicas_per_node * nodes_max


def test_rollout_never_needs_a_spare_gpu():
    small = render_deployment(make_spec())["spec"]["strategy"]
    assert small == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    large = render_deployment(make_spec(layout=Layout(tp=1, replicas_per_node=8), nodes_min=2, nodes_max=2))
    assert large["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": "25%"}
    pdb = render_pdb(make_spec())
    assert pdb["spec"]["maxUnavailable"] == 1
    assert (
        pdb["spec"]["selector"]["matchLabels"]
        == render_deployment(make_spec())["spec"]["selector"]["matchLabels"]
    )


@pytest.mark.parametrize("load_s", [60, 600, 1500, 3600])
def test_startup_probe_budget_covers_the_estimated_load_time(load_s):
    spec = make_spec(estimated_load_seconds=load_s)
    probe = container(spec)["startupProbe"]
    budget = probe["periodSeconds"] * probe["failureThreshold"] + probe.get("initialDelaySeconds", 0)
    assert budget >= load_s * 1.5 and budget >= 600
    assert probe["httpGet"] == {"path": "/health", "port": "http"}
    for name in ("readinessProbe", "livenessProbe"):
        assert container(spec)[name]["httpGet"]["path"] == "/health"
    # Pulumi waits at least as long as one load (plus image pull) before calling it failed.
    assert deployment_timeout_seconds(spec) >= startup_budget_seconds(spec)
    deployment = render_deployment(spec)
    assert int(deployment["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) >= load_s
    assert deployment["spec"]["progressDeadlineSeconds"] >= budget


def test_graceful_termination_drains_in_flight_requests():
    spec = make_spec()
    c = container(spec)
    args = c["args"]
    drain = int(args[args.index("--shutdown-timeout") + 1])
    assert drain > 0  # 0 would abort in-flight requests
    sleep = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pod_spec(spec)["terminationGracePeriodSeconds"] > sleep + drain


def test_no_secret_value_inline_only_secret_key_refs():
    for cached in (True, False):
        spec = make_spec(cache=CacheSpec("model-cache") if cached else None)
        objects = render_model_service(spec)
        text = json.dumps(objects)
        for obj in objects:
            for pod in _pod_specs(obj):
                for c in [*pod.get("initContainers", []), *pod["containers"]]:
                    for env in c.get("env", []):
                        if env["name"] in {"HF_TOKEN", "VLLM_API_KEY"}:
                            assert "value" not in env and "secretKeyRef" in env["valueFrom"]
                    assert not any("token" in a.lower() and "=" in a for a in c.get("args", []))
        assert "--api-key" not in text and "--hf-token" not in text
        assert render_secret_shape("x", "inference", "token").keys() == {
            "apiVersion",
            "kind",
            "metadata",
            "type",
        }


def _pod_specs(obj: dict) -> list[dict]:
    if obj["kind"] in {"Deployment", "Job"}:
        return [obj["spec"]["template"]["spec"]]
    return []


def test_api_key_reaches_vllm_through_env_and_marks_the_service():
    spec = make_spec()
    env = {e["name"]: e for e in container(spec)["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "qwen3-235b-api-key",
        "key": "api-key",
    }
    assert render_service(spec)["metadata"]["annotations"]["inference-platform/api-key-required"] == "true"
    no_key = make_spec(api_key_secret=None)
    assert "VLLM_API_KEY" not in {e["name"] for e in container(no_key)["env"]}
    assert "annotations" not in render_service(no_key)["metadata"]


def test_service_is_never_named_vllm_and_vllm_names_are_rejected():
    svc = render_service(make_spec())
    assert svc["metadata"]["name"] != "vllm" and svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
    for bad in ("vllm", "vllm-qwen"):
        with pytest.raises(UserError, match="must not be `vllm`"):
            render_deployment(make_spec(name=bad))
    # Service env injection is off anyway, so no VLLM_* variable can leak in from any Service.
    assert pod_spec(make_spec())["enableServiceLinks"] is False


def test_labels_and_ports_are_the_contract_other_modules_select_on():
    spec = make_spec()
    deployment = render_deployment(spec)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "vllm"
    assert labels["app.kubernetes.io/part-of"] == "inference-platform"
    assert labels["inference-platform/model"] == "qwen3-235b"
    assert container(spec)["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert render_service(spec)["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_amd_pods_get_rocm_needs_and_aiter():
    spec = make_spec()
    pod = pod_spec(spec)
    c = container(spec)
    assert "hostIPC" not in pod  # issue 30: /dev/shm is the pod's Memory emptyDir
    assert pod["securityContext"] == {"seccompProfile": {"type": "Unconfined"}, "supplementalGroups": [44]}
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["SYS_PTRACE"]}}
    one_gpu = container(make_spec(layout=Layout(tp=1, replicas_per_node=8)))
    assert "add" not in one_gpu["securityContext"]["capabilities"]  # no GPU IPC between processes
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["VLLM_ROCM_USE_AITER"] == "1" and env["VLLM_ROCM_USE_AITER_MOE"] == "1"
    assert c["image"] == versions.VLLM_IMAGE_ROCM
    dense = make_spec(moe=False, layout=Layout(tp=2, replicas_per_node=4))
    dense_env = {e["name"]: e.get("value") for e in container(dense)["env"]}
    assert dense_env["VLLM_ROCM_USE_AITER_MOE"] == "0"  # AITER fused MoE only for MoE models


def test_nvidia_pods_use_the_cuda_image_and_no_rocm_settings():
    spec = make_spec(gpu=H200, pool_name="h200", layout=Layout(tp=8, ep=True, replicas_per_node=1))
    pod = pod_spec(spec)
    c = container(spec)
    assert c["image"] == versions.VLLM_IMAGE_CUDA
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "8" and "amd.com/gpu" not in c["resources"]["limits"]
    assert not any("ROCM" in e["name"] or "AITER" in e["name"] for e in c["env"])
    assert "hostIPC" not in pod and pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert "--disable-nccl-for-dp-synchronization" not in c["args"]


def test_image_override_wins():
    spec = make_spec(image="registry.example.com/vllm-rocm:custom")
    assert container(spec)["image"] == "registry.example.com/vllm-rocm:custom"
    assert render_prefetch_job(spec)["spec"]["template"]["spec"]["containers"][0]["image"] == spec.image


@pytest.mark.parametrize(
    "size", [MI325X, H200, gpu_size("gpu-mi300x1-192gb"), gpu_size("gpu-4000adax1-20gb")]
)
def test_cpu_and_memory_requests_fit_the_node_with_headroom(size):
    for layout in _layouts_for(size):
        spec = make_spec(gpu=size, layout=layout, moe=True)
        per_node = layout.replicas_per_node
        assert cpu_request(spec) * per_node <= size.vcpus * 0.9
        assert memory_request_gib(spec) * per_node <= size.ram_gib * 0.9
        # Proportional: on a big node a replica using half the GPUs gets about half the node.
        share = layout.gpus_per_replica / size.gpus
        if size.ram_gib >= 100:
            assert memory_request_gib(spec) >= 0.85 * size.ram_gib * share - 1
            assert cpu_request(spec) >= 0.85 * size.vcpus * share - 1
        res = container(spec)["resources"]
        assert res["requests"]["memory"] == res["limits"]["memory"]
        assert "cpu" not in res["limits"]  # no CPU throttling of the engine's scheduler loop


def test_dev_shm_is_memory_backed_and_grows_with_the_ranks():
    sizes = {}
    for layout in (
        Layout(tp=1, replicas_per_node=8),
        Layout(tp=2, replicas_per_node=4),
        Layout(tp=4, ep=True, replicas_per_node=2),
        Layout(tp=8, ep=True),
    ):
        spec = make_spec(layout=layout)
        volume = next(v for v in pod_spec(spec)["volumes"] if v["name"] == "dshm")
        assert volume["emptyDir"]["medium"] == "Memory"
        assert volume["emptyDir"]["sizeLimit"] == f"{shm_size_gib(spec)}Gi"
        sizes[layout.gpus_per_replica] = shm_size_gib(spec)
        assert {"name": "dshm", "mountPath": "/dev/shm"} in container(spec)["volumeMounts"]
    assert sizes[1] < sizes[2] < sizes[4] <= sizes[8] <= 64
    assert sizes[4] >= 20  # FACTS: 20-64 GiB for TP/EP


def test_weights_come_from_the_read_only_cache_after_the_prefetch_job():
    spec = make_spec()
    pod = pod_spec(spec)
    c = container(spec)
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["HF_HOME"] == "/models/hf" and env["HF_HUB_OFFLINE"] == "1"
    assert "HF_TOKEN" not in env  # serving pods never download when the cache exists
    assert {"name": "cache", "mountPath": "/models", "readOnly": True} in c["volumeMounts"]
    claim = next(v for v in pod["volumes"] if v["name"] == "cache")["persistentVolumeClaim"]
    assert claim == {"claimName": "model-cache", "readOnly": True}

    # The init container waits for exactly the marker the Job writes last.
    init = pod["initContainers"][0]
    marker = completion_marker(spec)
    assert shlex.quote(marker) in init["command"][-1] or marker in init["command"][-1]
    job = render_prefetch_job(spec)
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    lines = script.splitlines()
    assert lines[-1].endswith(f"> {marker}")  # marker written after the download succeeded
    assert any(line.startswith(f"if [ -f {marker} ]") for line in lines)  # idempotent
    assert "hf download Qwen/Qwen3-235B-A22B-Instruct-2507-FP8" in script


def test_prefetch_job_takes_the_token_from_a_secret_and_writes_into_hf_home():
    spec = make_spec(revision="abc123")
    job = render_prefetch_job(spec)
    c = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in c["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "qwen3-235b-hf-token", "key": "token"}
    assert env["HF_HOME"]["value"] == spec.cache.hf_home
    assert c["image"] == versions.VLLM_IMAGE_ROCM  # the `hf` CLI ships in the vLLM image
    assert "--revision abc123" in c["command"][-1]
    assert completion_marker(spec).endswith("@abc123")
    assert "--revision" in container(spec)["args"]  # serving loads the same revision
    assert job["spec"]["backoffLimit"] >= 3  # retries resume the partial download
    assert "tolerations" not in job["spec"]["template"]["spec"]  # never occupies a GPU node
    assert render_prefetch_job(make_spec(hf_token_secret=None))["spec"]["template"]["spec"]["containers"][0][
        "env"
    ]


def test_without_a_cache_pods_download_to_local_scratch():
    spec = make_spec(cache=None)
    assert render_prefetch_job(spec) is None
    pod = pod_spec(spec)
    assert "initContainers" not in pod
    env = {e["name"]: e for e in container(spec)["env"]}
    assert env["HF_HOME"]["value"].startswith("/scratch")
    assert "HF_HUB_OFFLINE" not in env
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "qwen3-235b-hf-token"
    assert {"name": "scratch", "emptyDir": {}} in pod["volumes"]


def test_topology_spread_across_nodes():
    spread = pod_spec(make_spec())["topologySpreadConstraints"]
    assert spread[0]["topologyKey"] == "kubernetes.io/hostname"
    assert spread[0]["labelSelector"]["matchLabels"]["inference-platform/model"] == "qwen3-235b"


def test_config_mistakes_are_user_errors_naming_the_model():
    with pytest.raises(UserError, match=r"models\[qwen3-235b\]\.layout"):
        render_deployment(make_spec(layout=Layout(tp=8, replicas_per_node=2)))  # 16 GPUs on an 8-GPU node
    with pytest.raises(UserError, match="not read by the pinned vLLM"):
        render_deployment(make_spec(env={"VLLM_USE_TRITON_FLASH_ATTN": "0"}))
    with pytest.raises(UserError, match="extra_args"):
        render_deployment(make_spec(extra_args=("--no-such-flag",)))
    with pytest.raises(UserError, match="Mixture-of-Experts"):
        render_deployment(make_spec(moe=False))  # the default layout uses EP


def test_startup_probe_tolerates_the_planners_load_estimate():
    from infra.catalog.models import resolve_model
    from infra.planner import estimated_load_seconds

    arch = resolve_model("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
    first_load = estimated_load_seconds(arch, source="huggingface", gpus_per_replica=4)
    assert first_load >= 10 * 60  # "tens of minutes the first time"
    assert estimated_load_seconds(arch, source="nfs", gpus_per_replica=4) < first_load
    spec = make_spec(estimated_load_seconds=first_load)
    probe = container(spec)["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= spec.estimated_load_seconds


def _config_accepts(field: str, value) -> bool:
    from infra.config import NS, load_config
    from infra.errors import ConfigError
    from tests.conftest import ROOT, stack_values

    values, secrets = stack_values("prod")
    values[NS + "models"][1][field] = value
    try:
        load_config(values, stack="prod", secret_keys=secrets, base_dir=ROOT)
    except ConfigError:
        return False
    return True


def _renderer_accepts(**spec_fields) -> bool:
    try:
        render_deployment(make_spec(**spec_fields))
    except UserError:
        return False
    return True


@pytest.mark.parametrize(
    "field,value,valid",
    [
        ("name", "vllm", False),
        ("name", "vllm-qwen", False),
        ("name", "vllmqwen", True),
        ("name", "qwen-vllm", True),
        ("env", {"VLLM_USE_TRITON_FLASH_ATTN": "0"}, False),
        ("env", {"VLLM_ROCM_USE_AITER": "1", "HF_HUB_ETAG_TIMEOUT": "30"}, True),
        ("env", {"HF_HOME": "/tmp/hf", "HF_HUB_OFFLINE": "0"}, False),
        ("extra_args", ["--enable-turbo"], False),
        ("extra_args", ["--async-scheduling", "--max_log_len", "100"], True),
    ],
)
def test_stack_config_rejects_what_the_renderer_rejects(field, value, valid):
    """The renderer's checks are a backstop: every spec built from a valid stack must render."""
    spec_value = tuple(value) if field == "extra_args" else value
    assert _config_accepts(field, value) is valid
    assert _renderer_accepts(**{field: spec_value}) is valid


def _router_thinks_sleep_mode(pod_spec: dict) -> bool:
    """The production-stack router's test (service_discovery.py `_check_engine_sleep_mode` at tag
    vllm-stack-0.1.12): the container named `vllm` without a command, or with
    `--enable-sleep-mode` in its command, is a sleep-mode engine whose /is_sleeping it polls."""
    for container in pod_spec["containers"]:
        if container["name"] == "vllm":
            command = container.get("command")
            return not command or "--enable-sleep-mode" in command
    return False


def test_router_does_not_take_the_engine_for_a_sleep_mode_engine():
    pod = render_deployment(make_spec())["spec"]["template"]["spec"]
    (engine,) = [c for c in pod["containers"] if c["name"] == "vllm"]
    # The images' entrypoint, spelled out: the args stay the `vllm serve` arguments.
    assert engine["command"] == ["vllm", "serve"] and engine["args"][0] != "serve"
    assert not _router_thinks_sleep_mode(pod)
