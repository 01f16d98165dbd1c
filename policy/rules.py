"""The platform's guardrails as plain functions: what a resource must look like to be deployed.

Each rule takes what the Pulumi engine hands a CrossGuard policy — the resource type token
(`digitalocean:index/kubernetesCluster:KubernetesCluster`) and its inputs with engine (camelCase)
property names — plus the policy's config dict, and returns violation messages (empty: compliant).
Stack rules take every resource at once. Nothing here imports `pulumi_policy`: constructing a
`PolicyPack` starts a gRPC server, so the pack wrapper lives in `policy/__main__.py` and tests call
these functions directly.

Config keys (all optional, per policy in the pack's config file):
  environment     "dev" | "staging" | "prod"; default: the stack name in the resource URN
  dropletLimit    the account's Droplet limit; default 25 (DigitalOcean's default per account)

Contracts with the toolkit's renderers (infra/render/*), stated here because the rules check them:
  - vLLM pod templates carry label `app.kubernetes.io/name: vllm` and annotation
    `inference-platform/gpus-per-replica: "<n>"`; the vLLM container's GPU limit must equal n.
  - A Service of type LoadBalancer that is reachable from the internet (no
    `service.beta.kubernetes.io/do-loadbalancer-network: "INTERNAL"`) must carry
    `inference-platform/api-key-required: "true"`, which the router / model-service renderers set
    only when an API-key Secret is wired into the pods behind it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# ----------------------------------------------------------------------------- type tokens

DO_CLUSTER = "digitalocean:index/kubernetesCluster:KubernetesCluster"
DO_NODE_POOL = "digitalocean:index/kubernetesNodePool:KubernetesNodePool"
K8S_SERVICE = "kubernetes:core/v1:Service"
K8S_SECRET = "kubernetes:core/v1:Secret"
K8S_CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
OBSERVABILITY_COMPONENT = "inference-platform:observability:Observability"
KUBE_PROMETHEUS_STACK_CHART = "kube-prometheus-stack"

# Workload kinds and where their pod template sits.
_POD_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "kubernetes:apps/v1:Deployment": ("spec", "template"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template"),
    "kubernetes:batch/v1:Job": ("spec", "template"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template"),
    "kubernetes:core/v1:Pod": (),
}

VLLM_APP_LABEL = ("app.kubernetes.io/name", "vllm")
ANNOTATION_GPUS = "inference-platform/gpus-per-replica"
ANNOTATION_API_KEY_REQUIRED = "inference-platform/api-key-required"
DO_LB_NETWORK_ANNOTATION = "service.beta.kubernetes.io/do-loadbalancer-network"
GPU_RESOURCES = ("amd.com/gpu", "nvidia.com/gpu")
DEFAULT_DROPLET_LIMIT = 25

ENVIRONMENTS = ("dev", "staging", "prod")

Violations = list[str]


@dataclass(frozen=True)
class StackResource:
    """One resource as a stack rule sees it (CrossGuard's PolicyResource, minus the engine)."""

    resource_type: str
    props: Mapping[str, Any]
    name: str = ""
    urn: str = ""
    protect: bool = False


# ----------------------------------------------------------------------------- helpers


def environment_of(config: Mapping[str, Any], urn: str = "") -> str | None:
    """The environment from policy config, else the stack name in the URN if it names one.

    URNs look like `urn:pulumi:<stack>::<project>::<type>::<name>`.
    """
    explicit = config.get("environment")
    if explicit:
        return str(explicit)
    parts = urn.split(":")
    if len(parts) > 2 and parts[0] == "urn" and parts[1] == "pulumi":
        stack = parts[2].rsplit("/", 1)[-1]
        if stack in ENVIRONMENTS:
            return stack
    return None


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _pod_template(resource_type: str, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    path = _POD_TEMPLATE_PATHS.get(resource_type)
    if path is None:
        return None
    template = _get(props, *path) if path else props
    return template if isinstance(template, Mapping) else None


def _containers(pod_template: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = pod_template.get("spec") or {}
    # list(): the engine hands sequences as read-only proxies that do not support `+`.
    containers = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    return [c for c in containers if isinstance(c, Mapping)]


def _is_gpu_size(slug: Any) -> bool:
    return isinstance(slug, str) and slug.startswith("gpu-")


def _gpu_taint_key(slug: str) -> str:
    """DOKS taints AMD GPU nodes `amd.com/gpu`, NVIDIA ones `nvidia.com/gpu` (gpu-mi* are AMD)."""
    return "amd.com/gpu" if slug.startswith("gpu-mi") else "nvidia.com/gpu"


def _int_or_none(value: Any) -> int | None:
    """Engine numbers arrive as floats (`4.0`); annotations as strings (`"4"`)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and float(value).is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


# ----------------------------------------------------------------------------- resource rules


def prod_cluster_ha_and_protected(
    resource_type: str,
    props: Mapping[str, Any],
    config: Mapping[str, Any],
    *,
    protect: bool = False,
    urn: str = "",
) -> Violations:
    """In prod the DOKS control plane is HA and the cluster is `protect`ed.

    `protect` is a resource option, not an input: CrossGuard hands it to resource policies as
    `args.opts.protect`, which the pack passes in here.
    """
    if resource_type != DO_CLUSTER or environment_of(config, urn) != "prod":
        return []
    violations = []
    if props.get("ha") is not True:
        violations.append("prod cluster must have a highly available control plane (ha: true)")
    if not protect:
        violations.append("prod cluster must be protected (resource option protect=True) against deletion")
    return violations


def gpu_node_pools_tainted(
    resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Violations:
    """GPU node pools carry the vendor GPU taint so that only pods that tolerate it land there.

    Covers separate node pools and a GPU default pool declared inline on the cluster.
    """
    if resource_type == DO_NODE_POOL:
        pools = [("node pool", props)]
    elif resource_type == DO_CLUSTER:
        pools = [("default node pool", props.get("nodePool") or {})]
    else:
        return []
    violations = []
    for what, pool in pools:
        size = pool.get("size")
        if not _is_gpu_size(size):
            continue
        key = _gpu_taint_key(size)
        taints = [t for t in pool.get("taints") or [] if isinstance(t, Mapping)]
        if not any(t.get("key") == key and t.get("effect") in ("NoSchedule", "NoExecute") for t in taints):
            label = f"GPU {what} {pool['name']}" if pool.get("name") else f"GPU {what}"
            violations.append(f"{label} ({size}) must have taint {key}:NoSchedule")
    return violations


def vllm_gpu_limits_match_layout(
    resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Violations:
    """A vLLM pod asks for exactly the GPUs its layout uses (TP × DP of one replica).

    Fewer GPUs than the layout and vLLM fails to start its workers; more and GPUs sit idle while
    another replica cannot be scheduled. The toolkit writes the layout's GPU count on the pod
    template; the vLLM container's limit must match it.
    """
    template = _pod_template(resource_type, props)
    if template is None:
        return []
    metadata = template.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if labels.get(VLLM_APP_LABEL[0]) != VLLM_APP_LABEL[1]:
        return []
    name = _get(props, "metadata", "name") or "vLLM workload"
    raw = (metadata.get("annotations") or {}).get(ANNOTATION_GPUS)
    expected = _int_or_none(raw)
    if expected is None or expected < 1:
        return [
            f"{name}: pod template needs annotation {ANNOTATION_GPUS} with the layout's GPU count (got {raw!r})"
        ]
    spec = template.get("spec") or {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    vllm = [c for c in containers if c.get("name") == "vllm" or "vllm" in str(c.get("image", ""))]
    if not vllm:
        return [f"{name}: no vLLM container (named `vllm` or running a vLLM image) in a pod labelled vllm"]
    violations = []
    for container in vllm:
        limits = _get(container, "resources", "limits") or {}
        gpu = {key: _int_or_none(limits.get(key)) for key in GPU_RESOURCES if key in limits}
        if not gpu:
            violations.append(
                f"{name}/{container.get('name')}: no GPU limit; expected {expected} (amd.com/gpu or nvidia.com/gpu)"
            )
            continue
        for key, value in gpu.items():
            if value != expected:
                violations.append(
                    f"{name}/{container.get('name')}: limit {key}={value} but the layout uses {expected} GPUs"
                )
    return violations


_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def image_pin_problem(image: Any) -> str | None:
    """Why an image reference is not pinned, or None if it names a fixed tag or a digest."""
    if not isinstance(image, str) or not image.strip():
        return "has no image"
    if _DIGEST.search(image):
        return None
    last = image.rsplit("/", 1)[-1]  # the tag lives after the last slash (a registry may have :port)
    if ":" not in last:
        return f"image {image!r} has no tag (means latest)"
    tag = last.split(":", 1)[1]
    if not tag or tag.lower() == "latest":
        return f"image {image!r} uses the `latest` tag"
    return None


def images_pinned(resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]) -> Violations:
    """Every container image has an explicit tag other than `latest` (or a digest); every Helm
    release pins its chart version. A diff then shows exactly when anything upgrades."""
    if resource_type == HELM_RELEASE:
        if not str(props.get("version") or "").strip():
            return [f"Helm release {props.get('chart')!r} must pin a chart version"]
        return []
    template = _pod_template(resource_type, props)
    if template is None:
        return []
    name = _get(props, "metadata", "name") or resource_type
    violations = []
    for container in _containers(template):
        problem = image_pin_problem(container.get("image"))
        if problem:
            violations.append(f"{name}/{container.get('name')}: {problem}")
    return violations


def public_load_balancer_requires_api_key(
    resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Violations:
    """A LoadBalancer Service on the internet fronts GPUs anyone could burn: it must be marked as
    requiring an API key (the renderers only mark it when the key Secret is wired)."""
    if resource_type != K8S_SERVICE or _get(props, "spec", "type") != "LoadBalancer":
        return []
    annotations = _get(props, "metadata", "annotations") or {}
    if str(annotations.get(DO_LB_NETWORK_ANNOTATION, "")).upper() == "INTERNAL":
        return []
    if str(annotations.get(ANNOTATION_API_KEY_REQUIRED, "")).lower() == "true":
        return []
    name = _get(props, "metadata", "name") or "service"
    return [
        f"public LoadBalancer {name} must require an API key "
        f'(annotation {ANNOTATION_API_KEY_REQUIRED}: "true" with the key Secret wired), '
        f"or be internal ({DO_LB_NETWORK_ANNOTATION}: INTERNAL)"
    ]


# Names of variables/keys that hold credentials, and the shapes of the tokens this platform uses.
_SECRET_NAME = re.compile(
    r"(TOKEN|API[_-]?KEY|PASSWORD|PASSWD|SECRET|CREDENTIAL|PRIVATE[_-]?KEY)", re.IGNORECASE
)
_SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{30,}"  # Hugging Face user access token
    r"|dop_v1_[a-f0-9]{64}"  # DigitalOcean personal access token
    r"|doo_v1_[a-f0-9]{64}"  # DigitalOcean OAuth token
    r"|pul-[a-f0-9]{40}"  # Pulumi access token
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)
_API_KEY_FLAGS = ("--api-key",)


def secrets_not_in_plain_config(
    resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Violations:
    """Credentials reach pods only through Secrets, never as literal env values, command-line
    flags or ConfigMap entries, and no resource carries a token in any input.

    CrossGuard unwraps secret values before a policy sees them, so a rule cannot ask "is this
    value marked secret?". It can see where credentials sit: a literal `value` on an env var named
    like a credential, `--api-key <literal>` on vLLM's command line, a credential-named ConfigMap
    key, or a string shaped like a Hugging Face / DigitalOcean / Pulumi token anywhere outside a
    Secret. Messages name the place, never the value.
    """
    if resource_type == K8S_SECRET:
        return []
    name = _get(props, "metadata", "name") or resource_type
    violations: Violations = []

    template = _pod_template(resource_type, props)
    if template is not None:
        for container in _containers(template):
            cname = container.get("name")
            for env in container.get("env") or []:
                if (
                    isinstance(env, Mapping)
                    and _SECRET_NAME.search(str(env.get("name", "")))
                    and env.get("value")
                ):
                    violations.append(
                        f"{name}/{cname}: env {env.get('name')} has a literal value; use valueFrom.secretKeyRef"
                    )
            argv = [str(a) for a in list(container.get("command") or []) + list(container.get("args") or [])]
            for i, arg in enumerate(argv):
                flag, _, inline = arg.partition("=")
                if flag in _API_KEY_FLAGS and (
                    inline or (i + 1 < len(argv) and not argv[i + 1].startswith("$("))
                ):
                    violations.append(
                        f"{name}/{cname}: {flag} on the command line exposes the key; set VLLM_API_KEY from a Secret"
                    )

    if resource_type == K8S_CONFIG_MAP:
        for key in (props.get("data") or {}).keys():
            if _SECRET_NAME.search(str(key)):
                violations.append(
                    f"ConfigMap {name}: key {key} looks like a credential; store it in a Secret"
                )

    for path in _token_shaped_paths(props):
        violations.append(
            f"{name}: a token-shaped string sits in plain input {path}; pass it as a Pulumi secret into a Secret"
        )
    return violations


def _token_shaped_paths(value: Any, path: str = "") -> Iterable[str]:
    if isinstance(value, str):
        if _SECRET_VALUE.search(value):
            yield path or "(root)"
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _token_shaped_paths(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for i, item in enumerate(value):
            yield from _token_shaped_paths(item, f"{path}[{i}]")


def node_pool_max_within_account_limit(
    resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Violations:
    """One pool alone must fit in the account's Droplet limit (the stack rule checks the sum)."""
    if resource_type != DO_NODE_POOL:
        return []
    limit = int(config.get("dropletLimit", DEFAULT_DROPLET_LIMIT))
    nodes = _pool_max_nodes(props)
    if nodes > limit:
        return [
            f"node pool {props.get('name', '')} can scale to {nodes} nodes, above the account's Droplet limit {limit}"
        ]
    return []


# ----------------------------------------------------------------------------- stack rules


def _pool_max_nodes(pool: Mapping[str, Any]) -> int:
    if pool.get("autoScale"):
        return _int_or_none(pool.get("maxNodes")) or 0
    return _int_or_none(pool.get("nodeCount")) or _int_or_none(pool.get("maxNodes")) or 0


def autoscaling_within_account_limit(
    resources: Sequence[StackResource], config: Mapping[str, Any]
) -> Violations:
    """Every pool at its autoscaling maximum, plus the cluster's default pool, fits in the
    account's Droplet limit — otherwise the autoscaler stalls exactly when traffic peaks."""
    limit = int(config.get("dropletLimit", DEFAULT_DROPLET_LIMIT))
    parts = []
    for res in resources:
        if res.resource_type == DO_NODE_POOL:
            parts.append((res.props.get("name") or res.name, _pool_max_nodes(res.props)))
        elif res.resource_type == DO_CLUSTER:
            default = res.props.get("nodePool") or {}
            parts.append((default.get("name") or f"{res.name} default pool", _pool_max_nodes(default)))
    total = sum(n for _, n in parts)
    if total <= limit:
        return []
    breakdown = ", ".join(f"{name} {n}" for name, n in parts)
    return [
        f"node pools can scale to {total} Droplets ({breakdown}), above the account's Droplet limit {limit}; "
        "raise the limit with DigitalOcean or lower max_nodes"
    ]


def observability_enabled_in_prod(
    resources: Sequence[StackResource], config: Mapping[str, Any]
) -> Violations:
    """A prod stack deploys the monitoring stack (kube-prometheus-stack) that the SLO alerts need."""
    env = environment_of(config, next((r.urn for r in resources if r.urn), ""))
    if env != "prod":
        return []
    for res in resources:
        if res.resource_type == OBSERVABILITY_COMPONENT:
            return []
        if res.resource_type == HELM_RELEASE and res.props.get("chart") == KUBE_PROMETHEUS_STACK_CHART:
            return []
    return [
        "prod must deploy observability (kube-prometheus-stack with the SLO rules); set observability.enabled: true"
    ]


# ----------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Rule:
    """A rule and how the pack should present it."""

    name: str
    description: str
    check: Any  # resource rule: (type, props, config) -> Violations; stack rule: (resources, config)
    scope: str  # "resource" | "stack"
    needs_options: bool = False  # resource rule wants protect= and urn=


RULES: tuple[Rule, ...] = (
    Rule("prod-cluster-ha-and-protected", "Prod DOKS clusters have an HA control plane and are protected.",
         prod_cluster_ha_and_protected, "resource", needs_options=True),
    Rule("gpu-node-pools-tainted", "GPU node pools carry the vendor GPU NoSchedule taint.",
         gpu_node_pools_tainted, "resource"),
    Rule("vllm-gpu-limits-match-layout", "Every vLLM container's GPU limit equals its layout's GPUs.",
         vllm_gpu_limits_match_layout, "resource"),
    Rule("images-pinned", "Container images carry a fixed tag (never latest); Helm charts pin a version.",
         images_pinned, "resource"),
    Rule("public-load-balancer-requires-api-key", "Internet-facing LoadBalancer Services require an API key.",
         public_load_balancer_requires_api_key, "resource"),
    Rule("secrets-not-in-plain-config", "Credentials reach pods only through Secrets.",
         secrets_not_in_plain_config, "resource"),
    Rule("node-pool-within-account-limit", "One node pool's maximum fits in the account's Droplet limit.",
         node_pool_max_within_account_limit, "resource"),
    Rule("autoscaling-within-account-limit", "All node pools at their maximum fit in the account's Droplet limit.",
         autoscaling_within_account_limit, "stack"),
    Rule("observability-enabled-in-prod", "Prod stacks deploy the monitoring stack.",
         observability_enabled_in_prod, "stack"),
)  # fmt: skip
