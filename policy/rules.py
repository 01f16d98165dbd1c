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
HELM_CHART_V4 = "kubernetes:helm.sh/v4:Chart"
HELM_TYPES = (HELM_RELEASE, HELM_CHART_V4)  # resources that install a chart with a version and values
PROVIDER_PREFIX = "pulumi:providers:"  # provider resources: `pulumi:providers:digitalocean`, ...
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


def _chart_pinned_by_reference(chart: Any) -> bool:
    """A local chart directory (versioned with the repository) or a chart archive URL/file names a
    fixed chart by itself; a repository chart name or an `oci://` reference needs `version`."""
    if not isinstance(chart, str):
        return False
    chart = chart.strip()
    return chart.startswith(("./", "../", "/")) or chart.endswith((".tgz", ".tar.gz"))


def images_pinned(resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]) -> Violations:
    """Every container image has an explicit tag other than `latest` (or a digest); every Helm
    release (`helm.sh/v3:Release`) and chart (`helm.sh/v4:Chart`) pins its chart version. A diff
    then shows exactly when anything upgrades."""
    if resource_type in HELM_TYPES:
        if not str(props.get("version") or "").strip() and not _chart_pinned_by_reference(props.get("chart")):
            return [f"{_helm_kind(resource_type)} {props.get('chart')!r} must pin a chart version"]
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


# Names of env variables / ConfigMap keys that hold credentials, matched after camelCase is split
# and the name upper-cased. No letter may follow the word: HF_TOKEN, VLLM_API_KEY, adminPassword,
# SLACK_WEBHOOK_URL are credentials; TOKENIZERS_PARALLELISM is not.
_SECRET_NAME = re.compile(
    r"(TOKENS?|API[_-]?KEYS?|PASSWORDS?|PASSWD|SECRETS?|CREDENTIALS?|PRIVATE[_-]?KEYS?|WEBHOOKS?)(?![A-Z])"
)
# Helm values keys that hold a credential (snake_cased, lower-cased): the word ends the key.
# `passwordKey`, `existingSecret`, `url_file`, `api_url_file`, `secretName` name where a Secret is,
# not the credential, and do not match (`existing*` is excluded explicitly). `api_url` is
# Alertmanager's Slack webhook field, matched as spelled (a camelCase `apiUrl` is usually an API
# endpoint, not a credential).
_SECRET_VALUES_KEY = re.compile(
    r"(password|passwd|passphrase|token|secret|secret_?(access_)?key|api_?key|private_?key"
    r"|credentials?|webhook(_?url)?)$"
)
# A whole value that only refers to a variable or template, never a credential itself.
_REFERENCE_VALUE = re.compile(
    r"^\s*(\$\([A-Za-z_][A-Za-z0-9_]*\)|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\{\{.*\}\})\s*$"
)
# A URL carrying a password (`scheme://user:password@host`); `$(VAR)` / `${VAR}` passwords are
# references the kubelet or the application resolves.
_URL_WITH_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]+:(?!\$[({])[^\s/@]+@")
# The shapes of the tokens this platform uses, and URLs that are credentials by themselves.
_SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{30,}"  # Hugging Face user access token
    r"|dop_v1_[a-f0-9]{64}"  # DigitalOcean personal access token
    r"|doo_v1_[a-f0-9]{64}"  # DigitalOcean OAuth token
    r"|pul-[a-f0-9]{40}"  # Pulumi access token
    r"|https://hooks\.slack\.com/(services|workflows|triggers)/[A-Za-z0-9/_-]+"  # Slack webhook
    r"|https://(\w+\.)?discord(app)?\.com/api/webhooks/\d+/[\w-]+"  # Discord webhook
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
    f"|{_URL_WITH_CREDENTIALS.pattern}"
)
# vLLM's API-key flag, inside any command/args string (`sh -c "vllm serve --api-key ..."` too).
# vLLM's parser accepts `--api_key` as well.
_API_KEY_FLAG = re.compile(r"(?<![\w-])--api[-_]key(?![\w-])")
# Env values checked by the env rule, so the token scan does not report them twice.
_ENV_VALUE_PATH = re.compile(r"(^|\.)(initContainers|containers)\[\d+\]\.env\[\d+\]\.value$")


def _snake(name: Any) -> str:
    """`adminPassword` → `admin_password`, so camelCase and snake_case names match alike."""
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name)).lower().replace("-", "_")


def _helm_kind(resource_type: str) -> str:
    return "Helm release" if resource_type == HELM_RELEASE else "Helm chart"


def _credential_name(name: Any) -> bool:
    """True if an env variable or ConfigMap key is named like a credential."""
    return bool(_SECRET_NAME.search(_snake(name).upper()))


def _credential_values_key(key: Any) -> bool:
    """True if a Helm values key holds a credential itself (not the name of a Secret holding it)."""
    snake = _snake(key)
    if snake.startswith("existing"):
        return False
    return str(key).lower().endswith("api_url") or bool(_SECRET_VALUES_KEY.search(snake))


def _literal_credential(value: Any) -> bool:
    """A non-empty string that is not merely a reference to a variable or template."""
    return isinstance(value, str) and bool(value.strip()) and not _REFERENCE_VALUE.match(value)


def _credential_values_paths(value: Any, path: str) -> Iterable[str]:
    """Paths of Helm values whose key names a credential and whose value is a literal string."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            child = f"{path}.{key}"
            if _credential_values_key(key) and _literal_credential(item):
                yield child
            else:
                yield from _credential_values_paths(item, child)
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray):
        for i, item in enumerate(value):
            yield from _credential_values_paths(item, f"{path}[{i}]")


def secrets_not_in_plain_config(
    resource_type: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Violations:
    """Credentials reach pods only through Secrets, never as literal env values, command-line
    flags, ConfigMap entries or Helm values, and no resource carries a token in any input.

    CrossGuard unwraps secret values before a policy sees them, so a rule cannot ask "is this
    value marked secret?". It can see where credentials sit: a literal `value` on an env var named
    like a credential (or holding a token / a URL with a password), `--api-key` anywhere on a
    container's command line, a credential-named ConfigMap key, a Helm values key named like a
    credential (password, token, secret, apiKey, api_url, webhook, ...) with a literal string, or
    a string shaped like a Hugging Face / DigitalOcean / Pulumi token, a Slack / Discord webhook or
    a URL with a password anywhere outside a Secret. Messages name the place, never the value.

    Provider resources (`pulumi:providers:*`) are exempt: their credentials (the DigitalOcean
    token, a kubeconfig) come from stack secrets by design, and the engine hands them to policies
    in plain text like every other secret input.
    """
    if resource_type == K8S_SECRET or resource_type.startswith(PROVIDER_PREFIX):
        return []
    name = _get(props, "metadata", "name") or resource_type
    violations: Violations = []
    reported: set[str] = set()  # paths already reported by a specific check

    template = _pod_template(resource_type, props)
    if template is not None:
        for container in _containers(template):
            cname = container.get("name")
            for env in container.get("env") or []:
                if not isinstance(env, Mapping) or not _literal_credential(env.get("value")):
                    continue
                value = str(env.get("value"))
                if _credential_name(env.get("name", "")) or _SECRET_VALUE.search(value):
                    violations.append(
                        f"{name}/{cname}: env {env.get('name')} has a literal value; use valueFrom.secretKeyRef"
                    )
            argv = [str(a) for a in list(container.get("command") or []) + list(container.get("args") or [])]
            if any(_API_KEY_FLAG.search(arg) for arg in argv):
                # A literal and `$(VLLM_API_KEY)` alike: the kubelet expands $(VAR) into the
                # process's command line, visible in `ps` and /proc. vLLM reads VLLM_API_KEY itself.
                violations.append(
                    f"{name}/{cname}: --api-key on the command line exposes the key; drop the flag "
                    "and set VLLM_API_KEY from a Secret (vLLM reads it from the environment)"
                )

    if resource_type == K8S_CONFIG_MAP:
        for key in (props.get("data") or {}).keys():
            if _credential_name(key):
                violations.append(
                    f"ConfigMap {name}: key {key} looks like a credential; store it in a Secret"
                )

    if resource_type in HELM_TYPES:
        what = _helm_kind(resource_type)
        label = props.get("name") or props.get("chart") or resource_type
        for path in _credential_values_paths(props.get("values") or {}, "values"):
            reported.add(path)
            violations.append(
                f"{what} {label}: {path} is a literal credential; put it in a Secret and point the "
                "chart at it (e.g. existingSecret)"
            )

    for path in _token_shaped_paths(props):
        if path in reported or (template is not None and _ENV_VALUE_PATH.search(path)):
            continue
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
        if res.resource_type in HELM_TYPES and res.props.get("chart") == KUBE_PROMETHEUS_STACK_CHART:
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
