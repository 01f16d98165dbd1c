"""Kubernetes manifests for one vLLM model service: pure functions, plain dicts, no Pulumi.

One model = one Deployment whose pods each run one vLLM replica of the planned layout (TP × DP
GPUs), a ClusterIP Service, a PodDisruptionBudget, and — when the shared weight cache exists — a
prefetch Job that fills the cache before any replica starts. `components/model_service.py`
turns these dicts into typed pulumi-kubernetes resources; tests validate them against the
Kubernetes 1.33 schema without a Pulumi runtime.

Contract with the router and the monitors (other modules select on these):
  pod labels    app.kubernetes.io/name=vllm, app.kubernetes.io/part-of=inference-platform,
                inference-platform/model=<model name>
  port          `http` 8000 (OpenAI API, /health, /metrics)
  annotations   inference-platform/gpus-per-replica, inference-platform/layout
  rollout       a candidate layout's engines (models[].rollout) run in a second Deployment
                `<model>-engine-candidate` whose pods also carry inference-platform/variant=candidate;
                they keep the common labels, so the model's Service (and the router through it)
                and every selector above include them. The current engines carry no variant
                label (adding one would restart them); the monitoring names them `current`.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from infra.catalog import doks, host_memory, versions
from infra.catalog.engine_env import PLATFORM_ENV
from infra.catalog.gpus import GpuSize
from infra.catalog.vllm_flags import VLLM_PORT, clashes_with_service_env, unknown_env_vars
from infra.domain import KvOffload, Layout
from infra.errors import Problem, UserError
from infra.render import scan_exceptions
from infra.render.lmcache_server import engine_command_with_lmcache, uses_lmcache_server
from infra.render.pod_security import hardened_root_container, restricted_container
from infra.render.scan_exceptions import accept
from infra.render.vllm_args import ServeOptions, vllm_serve_args
from infra.render.warm_start import (
    PREFETCH_SCRATCH_GIB,
    CompileCacheWarmup,
    SpacesWeights,
    compile_cache_env,
    compile_cache_key,
    compile_cache_volume,
    prefetch_to_spaces_command,
    render_compile_cache_warmup,
    s3_env,
    streamer_args,
)

NAMESPACE = "inference"  # the front door (router or gateway) and everything else not an engine: Pod Security restricted
# The engines, and what they read by namespace (Secrets, the weight cache's claim, fabric NIC
# attachments, their ScaledObjects and, with the gateway, InferencePools and endpoint pickers):
# Pod Security privileged, because ROCm engines need more than `baseline` (render_namespace).
ENGINES_NAMESPACE = "inference-engines"
PART_OF = "inference-platform"
LABEL_MODEL = "inference-platform/model"
ANNOTATION_GPUS = "inference-platform/gpus-per-replica"
ANNOTATION_LAYOUT = "inference-platform/layout"
LABEL_VARIANT = "inference-platform/variant"
CANDIDATE = "candidate"
ANNOTATION_API_KEY_REQUIRED = "inference-platform/api-key-required"
PULUMI_TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
PULUMI_PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"

# Keys inside the Secrets this module expects (the component fills them from Pulumi secrets).
HF_TOKEN_KEY = "token"
API_KEY_KEY = "api-key"

VIDEO_GID = 44  # /dev/dri render nodes are group `video` on the ROCm hosts DOKS provisions.
DOKS_POOL_LABEL = doks.NODE_POOL_LABEL

# Node resources kept back for kubelet, system-reserved and DaemonSets (CNI, CSI, device plugin,
# metrics exporters) before the rest is shared among GPU replicas in proportion to their GPUs.
# Memory: infra/planner/host_memory.py (the planner sizes KV offload tiers from the same shares).
NODE_HEADROOM_FRACTION = host_memory.NODE_HEADROOM_FRACTION
NODE_HEADROOM_MIN_CPU = 2

# The vLLM images' own entrypoint, spelled out. The production-stack router (vllm-project/
# production-stack src/vllm_router/service_discovery.py `_check_engine_sleep_mode`, tag
# vllm-stack-0.1.12) treats a container named `vllm` with no `command` as a sleep-mode engine and
# polls its /is_sleeping, which vLLM serves only in dev mode (VLLM_SERVER_DEV_MODE); with an
# explicit command it checks that command for `--enable-sleep-mode` instead, as for the
# production-stack chart's own engines (`command: [vllm, serve, ...]`).
VLLM_COMMAND = ("vllm", "serve")
PRESTOP_SLEEP_SECONDS = 15  # time for endpoints, kube-proxy and the router to stop sending new requests
DRAIN_SECONDS = 120  # vLLM --shutdown-timeout: in-flight requests finish, then the engine exits
STARTUP_PROBE_PERIOD_SECONDS = 10
STARTUP_BUDGET_FACTOR = 1.5  # cold NFS, slow first compile: the estimate is a median, not a bound
IMAGE_PULL_ALLOWANCE_SECONDS = 1200  # the ROCm vLLM image is tens of GB on a fresh node

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,40}[a-z0-9])?$")


@dataclass(frozen=True)
class CacheSpec:
    """The shared weight cache: a ReadWriteMany PVC in the model's namespace."""

    pvc_name: str
    mount_path: str = "/models"

    @property
    def hf_home(self) -> str:
        return f"{self.mount_path}/hf"


def hf_token_secret_name(model: str) -> str:
    """The Secret holding a model's Hugging Face token (key `token`)."""
    return f"{model}-hf-token"


def api_key_secret_name(model: str) -> str:
    """The Secret holding the client API key the model's engines check (key `api-key`) when no
    front door stands before them (router.kind service)."""
    return f"{model}-api-key"


def engine_key_secret_name(model: str) -> str:
    """The Secret holding the internal engine key (key `api-key`) the model's engines check behind
    a front door, which sends it upstream in place of the client's key."""
    return f"{model}-engine-key"


@dataclass(frozen=True)
class ModelServiceSpec:
    """Everything one model service needs; pure data the composition root maps config onto.

    name: model key in the stack config; a DNS label, used for every object's name.
    source: Hugging Face repo id, e.g. Qwen/Qwen3-235B-A22B-Instruct-2507-FP8.
    served_model_name: the `model` clients send.
    layout: the planned (or explicit) layout; GPUs per pod = tp × dp.
    nodes_min / nodes_max: the pool's node count (equal for fixed pools).
    gpu: the pool's GPU size (vendor, GPUs, vCPUs, RAM per node).
    pool_name: the GPU pool the pods must land on (on DOKS, the node pool of that name).
    node_selector: the labels of the pool's nodes (an existing cluster's); None: the DOKS pool's.
    system_node_selector: an existing cluster's system nodes, for the P/D router; None: not pinned.
    image: overrides the vendor's pinned vLLM image.
    extra_args / env: appended to the command line / container env (validated).
    cache: the shared weight cache; None = each pod downloads to local scratch.
    hf_token_secret / api_key_secret: names of Secrets (keys `token` / `api-key`); values never
        pass through this module. api_key_secret holds the key the engines check: the engine key
        behind a front door, else the client key.
    estimated_load_seconds: expected time from container start to /health OK (weights read,
        graphs captured); the startup probe tolerates 1.5× that.
    max_model_len: context length when the layout does not fix one.
    moe: Mixture-of-Experts model (enables AITER fused MoE on ROCm; required for EP).
    revision: checkpoint revision to pin (prefetch and serving use the same).
    autoscaled: KEDA scales the Deployment between replicas and max_replicas; the Deployment
        then leaves its replica count to the autoscaler.
    weights: the checkpoint's Spaces bucket (model_cache.kind spaces): the prefetch Job fills it
        and the engine streams from it; `cache` is then None.
    variant: None for the model's engines; "candidate" for a rollout's candidate layout, rendered
        as a Deployment of its own beside the model's (no Service, PDB or prefetch of its own).
    compile_cache: where vLLM/Triton/AITER compile caches live, keyed by image + model + layout:
        "shared" (a subPath of the NFS claim), "node" (a hostPath on the node) or None (in the
        container, lost with it).
    kv_offload: a host-memory KV tier per engine (vLLM's `--kv-offloading-*` flags); its pinned
        buffers live inside the pod's memory request, which the plan checked they fit.
    """

    name: str
    source: str
    served_model_name: str
    layout: Layout
    nodes_min: int
    nodes_max: int
    gpu: GpuSize
    pool_name: str
    namespace: str = ENGINES_NAMESPACE
    node_selector: Mapping[str, str] | None = None  # the pool's nodes; None: the DOKS pool `pool_name`
    system_node_selector: Mapping[str, str] | None = None  # the P/D router's nodes (DOKS: None, GPU taints keep it off GPU nodes)
    image: str | None = None
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cache: CacheSpec | None = None
    hf_token_secret: str | None = None
    api_key_secret: str | None = None
    estimated_load_seconds: int = 600
    max_model_len: int | None = None
    moe: bool = False
    revision: str | None = None
    autoscaled: bool = False
    weights: SpacesWeights | None = None
    compile_cache: str | None = None
    kv_offload: KvOffload | None = None
    variant: str | None = None  # "candidate": a rollout's candidate layout (second Deployment)
    fixed_replicas: int | None = None  # a candidate's count, sized to its traffic share (not the pool's nodes)
    key_path: str = ""  # the model's key in the stack file (`inference-platform:models[0]`), for errors

    @property
    def stack_key(self) -> str:
        """Where an error about this model points: its stack key, else (a spec the bench built) its name."""
        return self.key_path or f"models[{self.name}]"

    @property
    def vendor(self) -> str:
        return self.gpu.vendor

    @property
    def gpus_per_replica(self) -> int:
        return self.layout.tp * self.layout.dp

    @property
    def gpus_per_pod(self) -> int:
        """GPUs one engine pod requests: the whole replica, or one node's share of a replica that
        spans nodes (each node runs one pod of the LeaderWorkerSet group)."""
        return self.layout.gpus_per_node_used if self.layout.multi_node else self.gpus_per_replica

    @property
    def replicas(self) -> int:
        """Replicas per node × nodes (or nodes / nodes_per_replica): the Deployment's count (the
        LeaderWorkerSet's groups; a P/D layout's units: units per node × nodes, or nodes /
        nodes_per_unit), or the autoscaler's floor."""
        if self.fixed_replicas is not None:
            return self.fixed_replicas
        return self.layout.replicas_for_nodes(self.nodes_min)

    @property
    def max_replicas(self) -> int:
        if self.fixed_replicas is not None:
            return self.fixed_replicas
        return self.layout.replicas_for_nodes(self.nodes_max)

    @property
    def pool_selector(self) -> dict[str, str]:
        """The labels of the nodes the pods land on."""
        return dict(self.node_selector) if self.node_selector is not None else doks.pool_node_selector(self.pool_name)

    @property
    def resolved_image(self) -> str:
        if self.image:
            return self.image
        return versions.VLLM_IMAGE_ROCM if self.vendor == "amd" else versions.VLLM_IMAGE_CUDA


# --- names and labels ---------------------------------------------------------------------------


def deployment_name(spec: ModelServiceSpec) -> str:
    variant = getattr(spec, "variant", None)
    return f"{spec.name}-engine" if variant is None else f"{spec.name}-engine-{variant}"


def service_name(spec: ModelServiceSpec) -> str:
    """The model's ClusterIP Service. Never `vllm`: Kubernetes would inject VLLM_PORT etc."""
    return spec.name


def prefetch_job_name(spec: ModelServiceSpec) -> str:
    return f"{spec.name}-prefetch"


def selector_labels(model: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "vllm", LABEL_MODEL: model}


def common_labels(model: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/instance": model,
        LABEL_MODEL: model,
    }


def pod_labels(spec: ModelServiceSpec) -> dict[str, str]:
    labels = {
        **common_labels(spec.name, "engine"),
        **selector_labels(spec.name),
        "inference-platform/layout": spec.layout.name,
    }
    if spec.variant is not None:
        labels[LABEL_VARIANT] = spec.variant
    return labels


def engine_selector(spec: ModelServiceSpec) -> dict[str, str]:
    """The engines' Deployment selector: the model's, narrowed to the variant for a candidate.

    The model's own Deployment keeps its selector (a Deployment's selector is immutable); its
    ReplicaSets own their pods by ownerReference, so the candidate pods it also matches are not
    adopted."""
    if spec.variant is None:
        return selector_labels(spec.name)
    return {**selector_labels(spec.name), LABEL_VARIANT: spec.variant}


def _meta(name: str, namespace: str, labels: dict, annotations: dict | None = None) -> dict:
    meta = {"name": name, "namespace": namespace, "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    return meta


# --- validation ---------------------------------------------------------------------------------


def validate_spec(spec: ModelServiceSpec, path: str | None = None) -> None:
    """Raise UserError listing every problem a user can fix in the stack config.

    Stack config rejects every one of these a stack file can cause (infra/config/); they are
    checked again because the bench renders specs that never went through it (candidate layouts).
    """
    path = path or spec.stack_key
    problems: list[Problem] = []
    if not _DNS_LABEL.match(spec.name):
        problems.append(Problem(f"{path}.name", f"{spec.name!r} must be a lowercase DNS label of at most 42 characters"))
    if clashes_with_service_env(spec.name):
        problems.append(Problem(f"{path}.name", "must not be `vllm` or start with `vllm-`: Kubernetes service env vars "
                                "(VLLM_PORT, ...) clash with vLLM's own settings"))
    if spec.layout.gpus_per_node_used > spec.gpu.gpus:
        problems.append(Problem(f"{path}.layout", f"{spec.layout.name} needs {spec.layout.gpus_per_node_used} GPUs per node, "
                                f"{spec.gpu.slug} has {spec.gpu.gpus}"))
    if spec.nodes_min < 0 or spec.nodes_max < max(spec.nodes_min, 1):
        problems.append(Problem(f"{path}.pool", f"node range {spec.nodes_min}..{spec.nodes_max} is empty"))
    if spec.estimated_load_seconds <= 0:
        problems.append(Problem(f"{path}.estimated_load_seconds", "must be positive"))
    for var in unknown_env_vars(dict(spec.env)):
        problems.append(Problem(f"{path}.env", f"{var} is not read by the pinned vLLM release"))
    for var in sorted(set(spec.env) & set(PLATFORM_ENV)):
        problems.append(Problem(f"{path}.env", f"{var} is set by the platform from {PLATFORM_ENV[var]}"))
    if problems:
        raise UserError(problems)


# --- sizing -------------------------------------------------------------------------------------


def node_share(spec: ModelServiceSpec) -> float:
    return spec.gpus_per_pod / spec.gpu.gpus


def cpu_request(spec: ModelServiceSpec) -> int:
    """Whole CPUs: the replica's GPU share of the node's vCPUs after headroom."""
    headroom = max(NODE_HEADROOM_MIN_CPU, math.ceil(spec.gpu.vcpus * NODE_HEADROOM_FRACTION))
    return max(1, math.floor((spec.gpu.vcpus - headroom) * node_share(spec)))


def memory_request_gib(spec: ModelServiceSpec) -> int:
    """The pod's GPU share of the node's RAM after headroom (request = limit); a KV offload tier's
    pinned buffers live inside it (the config refuses one that does not fit)."""
    return host_memory.pod_memory_gib(spec.gpu.ram_gib, spec.gpu.gpus, spec.gpus_per_pod)


def shm_size_gib(spec: ModelServiceSpec) -> int:
    """/dev/shm of the engine pod (host_memory.shm_gib)."""
    return host_memory.shm_gib(spec.gpus_per_pod, memory_request_gib(spec))


# `estimated_load_seconds` comes from infra/planner/loading.py (the readiness plan's first-rollout
# figure, × 1.5): a 236 GB FP8 model ≈ 25 min from the NFS cache, ≈ 12 min from a Spaces bucket
# and ≈ 47 min straight from the Hub (docs/cold-start.md).


def startup_budget_seconds(spec: ModelServiceSpec) -> int:
    """What the startup probe tolerates: 1.5 × the estimated load, at least 10 minutes."""
    return max(600, math.ceil(spec.estimated_load_seconds * STARTUP_BUDGET_FACTOR))


def startup_failure_threshold(spec: ModelServiceSpec) -> int:
    return math.ceil(startup_budget_seconds(spec) / STARTUP_PROBE_PERIOD_SECONDS)


def termination_grace_seconds() -> int:
    return PRESTOP_SLEEP_SECONDS + DRAIN_SECONDS + 30


def max_unavailable(replicas: int) -> int | str:
    """One pod at a time; a quarter of the fleet when it is large enough that one is too slow."""
    return "25%" if replicas > 8 else 1


def rollout_waves(spec: ModelServiceSpec) -> int:
    mu = max_unavailable(spec.max_replicas)
    per_wave = max(1, math.floor(spec.max_replicas * 0.25)) if isinstance(mu, str) else mu
    return max(1, math.ceil(spec.max_replicas / per_wave))


def warms_compile_cache(spec: ModelServiceSpec) -> bool:
    """Init containers warm the keyed compile cache and copy it into the pod (render/warm_start.py);
    a replica spanning nodes cannot run alone, so its engines use the per-node directory directly."""
    return spec.compile_cache is not None and not spec.layout.multi_node


def warmup_budget_seconds(spec: ModelServiceSpec) -> int:
    """Extra time the first pod of a new compile-cache key spends in its warm-up."""
    return startup_budget_seconds(spec) if warms_compile_cache(spec) else 0


def pod_ready_budget_seconds(spec: ModelServiceSpec) -> int:
    """From scheduling to Ready for one pod: pull, warm-up (a cold cache key), load."""
    return startup_budget_seconds(spec) + IMAGE_PULL_ALLOWANCE_SECONDS + warmup_budget_seconds(spec)


def deployment_timeout_seconds(spec: ModelServiceSpec) -> int:
    """How long Pulumi waits for the Deployment: every rollout wave pulls and loads the model;
    the first wave also warms a new compile-cache key."""
    return rollout_waves(spec) * (startup_budget_seconds(spec) + IMAGE_PULL_ALLOWANCE_SECONDS) + warmup_budget_seconds(spec)


def prefetch_timeout_seconds(spec: ModelServiceSpec) -> int:
    """Downloading from Hugging Face: at least an hour, longer for slow-loading (large) models."""
    return max(3600, 6 * spec.estimated_load_seconds)


# --- weight cache --------------------------------------------------------------------------------


def completion_marker(spec: ModelServiceSpec) -> str:
    """File the prefetch Job writes last; its name changes with the source and revision."""
    assert spec.cache is not None
    slug = re.sub(r"[^A-Za-z0-9._-]+", "--", spec.source)
    return f"{spec.cache.mount_path}/.complete/{slug}@{spec.revision or 'main'}"


def prefetch_script(spec: ModelServiceSpec) -> str:
    """Idempotent (skips when the marker exists) and resumable (hf resumes partial blobs)."""
    revision = f" --revision {shlex.quote(spec.revision)}" if spec.revision else ""
    marker = shlex.quote(completion_marker(spec))
    return "\n".join(
        [
            "set -eu",
            f"if [ -f {marker} ]; then echo 'weights already cached'; exit 0; fi",
            # `hf` is huggingface_hub's CLI (>= 1.0; `huggingface-cli` is gone) shipped in the vLLM image.
            f"hf download {shlex.quote(spec.source)}{revision} --exclude 'original/*' --max-workers 16",
            f"mkdir -p $(dirname {marker})",
            f"date -u +%Y-%m-%dT%H:%M:%SZ > {marker}",
        ]
    )


def _hf_token_env(spec: ModelServiceSpec) -> list[dict]:
    ref = {"secretKeyRef": {"name": spec.hf_token_secret, "key": HF_TOKEN_KEY}}
    return [{"name": "HF_TOKEN", "valueFrom": ref}] if spec.hf_token_secret else []


def _hub_env(spec: ModelServiceSpec) -> list[dict]:
    """The download's hub: the mirror `models[].env.HF_ENDPOINT` names (issue 35: cached engines never call it) and the token."""
    mirror = [{"name": "HF_ENDPOINT", "value": spec.env["HF_ENDPOINT"]}] if spec.env.get("HF_ENDPOINT") else []
    return mirror + _hf_token_env(spec)


def render_prefetch_job(spec: ModelServiceSpec) -> dict | None:
    """The Job that fills the shared cache or the Spaces bucket; None when there is neither."""
    if spec.weights is not None:
        return _spaces_prefetch_job(spec)
    if spec.cache is None:
        return None
    labels = common_labels(spec.name, "prefetch")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(prefetch_job_name(spec), spec.namespace, labels),
        "spec": {
            "backoffLimit": 6,  # every retry resumes where the last one stopped
            "activeDeadlineSeconds": prefetch_timeout_seconds(spec),
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "containers": [
                        {
                            "name": "download",
                            "image": spec.resolved_image,
                            "command": ["/bin/sh", "-c", prefetch_script(spec)],
                            "env": [
                                {"name": "HF_HOME", "value": spec.cache.hf_home},
                                {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
                                *_hub_env(spec),
                            ],
                            "resources": {
                                "requests": {"cpu": "2", "memory": "4Gi"},
                                "limits": {"memory": "8Gi"},
                            },
                            "volumeMounts": [{"name": "cache", "mountPath": spec.cache.mount_path}],
                            "securityContext": hardened_root_container(),
                        }
                    ],
                    "volumes": [
                        {"name": "cache", "persistentVolumeClaim": {"claimName": spec.cache.pvc_name}}
                    ],
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                },
            },
        },
    }
    return accept(job, scan_exceptions.PREFETCH)


def _spaces_prefetch_job(spec: ModelServiceSpec) -> dict:
    """Hugging Face → the Spaces bucket, one file at a time through a scratch emptyDir."""
    assert spec.weights is not None
    labels = common_labels(spec.name, "prefetch")
    scratch = "/scratch"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(prefetch_job_name(spec), spec.namespace, labels),
        "spec": {
            "backoffLimit": 6,  # every retry skips the files already uploaded
            "activeDeadlineSeconds": prefetch_timeout_seconds(spec),
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "containers": [
                        {
                            "name": "upload",
                            "image": spec.resolved_image,
                            "command": prefetch_to_spaces_command(spec.weights, spec.source, spec.revision, scratch),
                            "env": [
                                {"name": "HF_HOME", "value": f"{scratch}/hf"},
                                {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
                                {"name": "PYTHONUNBUFFERED", "value": "1"},
                                *_hub_env(spec),
                                *s3_env(spec.weights, spec.weights.write_secret),
                            ],
                            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}},
                            "volumeMounts": [{"name": "scratch", "mountPath": scratch}],
                            "securityContext": hardened_root_container(),
                        }
                    ],
                    "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": f"{PREFETCH_SCRATCH_GIB}Gi"}}],
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                },
            },
        },
    }
    return accept(job, scan_exceptions.PREFETCH)


# --- the engine ----------------------------------------------------------------------------------


def vendor_env(spec: ModelServiceSpec) -> dict[str, str]:
    """Vendor switches for vLLM. ROCm: AITER kernels, fused-MoE AITER only for MoE models."""
    if spec.vendor != "amd":
        return {}
    return {
        "VLLM_ROCM_USE_AITER": "1",
        "VLLM_ROCM_USE_AITER_MOE": "1" if spec.moe else "0",
        "SAFETENSORS_FAST_GPU": "1",
    }


def engine_env(spec: ModelServiceSpec) -> list[dict]:
    env: dict[str, str] = {**vendor_env(spec)}
    if spec.cache is not None:
        # Weights were prefetched; offline mode keeps 64 replicas from each asking the Hub.
        env.update({"HF_HOME": spec.cache.hf_home, "HF_HUB_OFFLINE": "1"})
    elif spec.weights is not None:
        # Weights, config and tokenizer all come from the bucket; vLLM pulls the small files to
        # VLLM_ASSETS_CACHE on scratch and streams the safetensors.
        env.update({"HF_HOME": "/scratch/hf", "HF_HUB_OFFLINE": "1", "VLLM_ASSETS_CACHE": "/scratch/vllm-assets"})
    else:
        env.update({"HF_HOME": "/scratch/hf"})
    if spec.compile_cache is not None:
        env.update(compile_cache_env(spec.vendor == "amd"))
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env["VLLM_NO_USAGE_STATS"] = "1"
    env.update(spec.env)
    out: list[dict] = [{"name": k, "value": v} for k, v in sorted(env.items())]
    if spec.weights is not None:
        out += [e for e in s3_env(spec.weights, spec.weights.read_secret) if e["name"] not in env]
    elif spec.cache is None:
        out += _hf_token_env(spec)
    if spec.api_key_secret:
        # vLLM reads VLLM_API_KEY like --api-key; as env the key stays out of `ps` and pod args.
        out.append(
            {
                "name": "VLLM_API_KEY",
                "valueFrom": {"secretKeyRef": {"name": spec.api_key_secret, "key": API_KEY_KEY}},
            }
        )
    return out


def serve_args(spec: ModelServiceSpec, node_role: str | None = None) -> list[str]:
    """From a Spaces bucket the model is its `s3://` prefix, which already names the revision.
    `node_role` ("leader" | "worker") for a replica that spans nodes (render/multi_node.py)."""
    spaces = spec.weights
    return vllm_serve_args(
        spec.layout,
        ServeOptions(
            source=spaces.model_uri(spec.source, spec.revision) if spaces else spec.source,
            served_model_name=spec.served_model_name,
            max_model_len=spec.max_model_len,
            moe=spec.moe,
            vendor=spec.vendor,
            revision=None if spaces else spec.revision,
            drain_seconds=DRAIN_SECONDS,
            load_args=tuple(streamer_args(spaces, spec.gpus_per_replica)) if spaces else (),
            extra_args=tuple(spec.extra_args),
            node_role=node_role,
            kv_offload=spec.kv_offload,
        ),
        path=spec.stack_key,
    )


def compile_cache_dir_key(spec: ModelServiceSpec) -> str:
    """The compile cache directory of this replica shape (image + checkpoint + layout + flags + env)."""
    return compile_cache_key(
        image=spec.resolved_image,
        source=spec.source,
        revision=spec.revision,
        layout_fields={**spec.layout.fields(), "max_model_len": spec.layout.max_model_len or spec.max_model_len},
        args=tuple(spec.extra_args),
        env={**vendor_env(spec), **spec.env},
    )


def _probe(path: str, period: int, failures: int, timeout: int) -> dict:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": timeout,
    }


def _wait_for_cache_container(spec: ModelServiceSpec) -> dict:
    marker = shlex.quote(completion_marker(spec))
    return {
        "name": "wait-for-weights",
        "image": versions.BUSYBOX_IMAGE,
        "command": [
            "/bin/sh",
            "-c",
            f"until [ -f {marker} ]; do echo 'waiting for {prefetch_job_name(spec)}'; sleep 15; done",
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
        "volumeMounts": [{"name": "cache", "mountPath": spec.cache.mount_path, "readOnly": True}],
        # Reads a world-readable marker file: restricted, as nobody.
        "securityContext": restricted_container(),
    }


def engine_security(spec: ModelServiceSpec) -> tuple[dict, dict]:
    """(container, pod) securityContext of an engine: every capability dropped, then only what
    the GPU runtime needs, each for its reason (issue 30). No hostIPC: the processes of one pod
    share its IPC namespace and RCCL's intra-node transport uses /dev/shm, a Memory emptyDir here.

    ROCm, more than one GPU per pod: SYS_PTRACE. The ROCm runtime imports another process's GPU
    memory handles with pidfd_getfd(2), which needs ptrace access between the sibling worker
    processes ("A common reason is lacking CAP_SYS_PTRACE capability", ROCm/rocm-systems #3762).
    ROCm: seccomp Unconfined, as AMD documents for vLLM containers (`--security-opt
    seccomp=unconfined`); the runtime's NUMA calls (mbind, set_mempolicy) are gated behind
    CAP_SYS_NICE in the container runtimes' default profiles, and RuntimeDefault has not been
    run on an MI300X/MI325X node by this project. The scanner's skip annotation says so."""
    container: dict = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    if spec.vendor != "amd":
        return container, {"seccompProfile": {"type": "RuntimeDefault"}}
    if spec.gpus_per_pod > 1:
        container["capabilities"]["add"] = ["SYS_PTRACE"]
    return container, {"seccompProfile": {"type": "Unconfined"}, "supplementalGroups": [VIDEO_GID]}


def render_deployment(spec: ModelServiceSpec, node_role: str | None = None) -> dict:
    """The engines' Deployment; `node_role` renders one node's pod of a replica that spans nodes
    (the LeaderWorkerSet takes its template, render/multi_node.py)."""
    validate_spec(spec)
    container_security, pod_security = engine_security(spec)
    volumes, mounts, init_containers = _engine_storage(spec)
    resources = _engine_resources(spec)
    command = engine_command_with_lmcache(spec.kv_offload) if uses_lmcache_server(spec.kv_offload) else list(VLLM_COMMAND)
    args, env = serve_args(spec, node_role), engine_env(spec)
    cache_volumes, cache_init, cache_mounts = _compile_cache_storage(
        spec, command=command, args=args, env=env, resources=resources, security=container_security, mounts=mounts
    )
    volumes += cache_volumes
    init_containers += cache_init
    mounts += cache_mounts

    container = {
        "name": "vllm",
        "image": spec.resolved_image,
        "command": command,
        "args": args,
        "ports": [{"name": "http", "containerPort": VLLM_PORT, "protocol": "TCP"}],
        "env": env,
        "resources": resources,
        "startupProbe": _probe("/health", STARTUP_PROBE_PERIOD_SECONDS, startup_failure_threshold(spec), 5),
        "readinessProbe": _probe("/health", 10, 3, 5),
        "livenessProbe": _probe("/health", 20, 6, 10),
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRESTOP_SLEEP_SECONDS)]}}},
        "securityContext": container_security,
        "volumeMounts": mounts,
    }
    pod_spec = _engine_pod_spec(spec, container, volumes, init_containers, pod_security)
    annotations = {PULUMI_TIMEOUT_ANNOTATION: str(deployment_timeout_seconds(spec))}
    if not spec.autoscaled:
        # The count is ours: take .spec.replicas back from an HPA (autoscaling just switched
        # off) or a `kubectl scale` instead of failing the update with a field conflict.
        annotations[PULUMI_PATCH_FORCE_ANNOTATION] = "true"
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(deployment_name(spec), spec.namespace, pod_labels(spec), annotations),
        "spec": {
            # Autoscaled: the floor, for the first rollout only (see deployment_ignore_changes).
            "replicas": spec.replicas,
            "revisionHistoryLimit": 3,
            # A new pod becoming available counts as progress; one model load must fit inside.
            "progressDeadlineSeconds": pod_ready_budget_seconds(spec),
            "selector": {"matchLabels": engine_selector(spec)},
            "strategy": {
                "type": "RollingUpdate",
                # No spare GPUs to surge into: replace one replica (or a quarter) at a time.
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": max_unavailable(spec.max_replicas if spec.autoscaled else spec.replicas)},
            },
            "template": {
                "metadata": {
                    "labels": pod_labels(spec),
                    "annotations": {
                        ANNOTATION_GPUS: str(spec.gpus_per_replica),
                        ANNOTATION_LAYOUT: spec.layout.name,
                    },
                },
                "spec": pod_spec,
            },
        },
    }
    return accept(deployment, scan_exceptions.ENGINE)


def _engine_resources(spec: ModelServiceSpec) -> dict:
    """The engine's CPU, memory and GPU requests; memory and GPUs limited at the request."""
    gpu_resource = spec.gpu.gpu_resource_name
    memory = f"{memory_request_gib(spec)}Gi"
    return {
        "requests": {"cpu": str(cpu_request(spec)), "memory": memory, gpu_resource: str(spec.gpus_per_pod)},
        "limits": {"memory": memory, gpu_resource: str(spec.gpus_per_pod)},
    }


def _engine_storage(spec: ModelServiceSpec) -> tuple[list[dict], list[dict], list[dict]]:
    """(volumes, mounts, init containers) for /dev/shm and the weights: the NFS cache read-only
    (with the init container that waits for it), else a scratch directory for the download."""
    volumes: list[dict] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_size_gib(spec)}Gi"}}
    ]
    mounts: list[dict] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    init_containers: list[dict] = []
    if spec.cache is not None:
        volumes.append(
            {"name": "cache", "persistentVolumeClaim": {"claimName": spec.cache.pvc_name, "readOnly": True}}
        )
        mounts.append({"name": "cache", "mountPath": spec.cache.mount_path, "readOnly": True})
        init_containers.append(_wait_for_cache_container(spec))
    else:
        volumes.append({"name": "scratch", "emptyDir": {}})
        mounts.append({"name": "scratch", "mountPath": "/scratch"})
    return volumes, mounts, init_containers


def _compile_cache_storage(
    spec: ModelServiceSpec, *, command: list[str], args: list[str], env: list[dict], resources: dict, security: dict,
    mounts: list[dict],
) -> tuple[list[dict], list[dict], list[dict]]:
    """(volumes, init containers, mounts) the compile cache adds: the warm-up init containers and the
    read-only copy the engine uses, or the per-node directory; nothing without a compile cache.
    The warm-up runs the engine's command on loopback, with the engine's `mounts` so far."""
    pvc_name = spec.cache.pvc_name if spec.cache else None
    if warms_compile_cache(spec):
        cache_volumes, warm_init, mount = render_compile_cache_warmup(CompileCacheWarmup(
            kind=spec.compile_cache, key=compile_cache_dir_key(spec), pvc_name=pvc_name, image=spec.resolved_image,
            command=command, args=args, env=[e for e in env if e["name"] != "VLLM_API_KEY"],  # loopback: no key
            resources=resources, security=security, budget_seconds=startup_budget_seconds(spec),
            mounts=list(mounts),
        ))  # fmt: skip
        return list(cache_volumes), list(warm_init), [mount]
    if spec.compile_cache is not None:
        volume, mount = compile_cache_volume(spec.compile_cache, compile_cache_dir_key(spec), pvc_name)
        return [volume], [], [mount]
    return [], [], []


def _engine_pod_spec(
    spec: ModelServiceSpec, container: dict, volumes: list[dict], init_containers: list[dict], pod_security: dict | None
) -> dict:
    """The engine pod: on its pool's GPU nodes (tolerating their taint), spread across nodes."""
    pod_spec: dict = {
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": termination_grace_seconds(),
        "nodeSelector": spec.pool_selector,
        "tolerations": [{"key": spec.gpu.taint_key, "operator": "Exists", "effect": "NoSchedule"}],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                # GPU requests already cap replicas per node; spreading is a preference so a node
                # being drained never blocks scheduling.
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector_labels(spec.name)},
            }
        ],
        "containers": [container],
        "volumes": volumes,
    }
    if pod_security:
        pod_spec["securityContext"] = pod_security
    if init_containers:
        pod_spec["initContainers"] = init_containers
    return pod_spec


def deployment_ignore_changes(spec: ModelServiceSpec) -> list[str]:
    """Autoscaled: after creation the replica count belongs to KEDA's HPA.

    The Deployment still declares the floor so a new model starts all its minimum replicas at
    once. Ignoring the field afterwards keeps `pulumi up` from resetting a scaled-out fleet to
    the floor; under server-side apply the provider then sends the live count (or leaves the
    field to the HPA that owns it), so nothing conflicts. Leaving the field out instead would
    drop the count to Kubernetes' default of 1 on a model that used to have a fixed count.
    """
    return ["spec.replicas"] if spec.autoscaled else []


def render_service(spec: ModelServiceSpec) -> dict:
    annotations = {ANNOTATION_API_KEY_REQUIRED: "true"} if spec.api_key_secret else None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(
            service_name(spec), spec.namespace, common_labels(spec.name, "engine"), annotations
        ),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(spec.name),
            "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def render_pdb(spec: ModelServiceSpec) -> dict:
    """At most one replica voluntarily disrupted (node drains, upgrades) at a time. For a replica
    over several nodes the budget counts every engine pod, leaders and headless workers alike (a
    drained worker takes its whole group down), so a drain takes one group at a time."""
    selector = selector_labels(spec.name)
    if spec.layout.multi_node:
        selector = {LABEL_MODEL: spec.name, "app.kubernetes.io/component": "engine", "app.kubernetes.io/part-of": PART_OF}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(deployment_name(spec), spec.namespace, common_labels(spec.name, "engine")),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": selector},
        },
    }


def render_namespace(name: str, pod_security: str) -> dict:
    """A namespace of the stack with its Pod Security labels (pod_security: privileged | restricted).

    `privileged` is for the engines' namespace only: ROCm engines need SYS_PTRACE (multi-GPU pods),
    IPC_LOCK (fabric NICs) and an unconfined seccomp profile (`engine_security`), none of which
    `baseline` allows; audit and warn still report anything beyond `baseline`, so a new exception
    shows up in the API server's audit log and in `kubectl` warnings. Every other namespace of the
    stack enforces `restricted` (non-root, every capability dropped, RuntimeDefault seccomp, no
    privilege escalation): a pod that needs more is refused at admission, not found by a scan."""
    if pod_security not in ("privileged", "restricted"):
        raise ValueError(f"pod_security {pod_security!r}: privileged or restricted")
    report = "baseline" if pod_security == "privileged" else "restricted"
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {
                "app.kubernetes.io/part-of": PART_OF,
                "app.kubernetes.io/managed-by": "pulumi",
                "pod-security.kubernetes.io/enforce": pod_security,
                "pod-security.kubernetes.io/audit": report,
                "pod-security.kubernetes.io/warn": report,
            },
        },
    }


def render_secret_shape(name: str, namespace: str, key: str, model: str | None = None) -> dict:
    """A Secret without its value: the component adds `stringData[key]` from a Pulumi secret."""
    labels = {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/managed-by": "pulumi"}
    if model:
        labels[LABEL_MODEL] = model
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(name, namespace, labels),
        "type": "Opaque",
    }
