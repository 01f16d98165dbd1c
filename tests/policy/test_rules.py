"""The CrossGuard rules: each one with compliant and violating engine-style inputs.

Props are what the engine hands a policy: camelCase input names, numbers as floats. The last
tests go through the real `pulumi_policy` wrappers (with the engine's read-only proxies) and start
the pack entry point the way Pulumi does.
"""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from policy import rules
from policy.rules import StackResource
from tests.conftest import ROOT as TESTS_ROOT

ROOT = TESTS_ROOT
PROD_URN = "urn:pulumi:prod::inference-platform::digitalocean:index/kubernetesCluster:KubernetesCluster::prod"
DEV_URN = PROD_URN.replace(":prod::", ":dev::")

CLUSTER = {
    "name": "prod",
    "region": "atl1",
    "version": "1.33.1-do.5",
    "ha": True,
    "nodePool": {"name": "system", "size": "s-8vcpu-16gb", "nodeCount": 3.0},
}

GPU_POOL = {
    "clusterId": "cluster-id",
    "name": "mi325x",
    "size": "gpu-mi325x8-2048gb-contracted",
    "autoScale": True,
    "minNodes": 2.0,
    "maxNodes": 6.0,
    "labels": {"inference-platform/pool": "mi325x"},
    "taints": [{"key": "amd.com/gpu", "value": "", "effect": "NoSchedule"}],
}


def vllm_deployment(
    gpus_annotation="4", gpu_limit=4.0, image="vllm/vllm-openai-rocm:v0.33.0", **container_extra
):
    container = {
        "name": "vllm",
        "image": image,
        "args": ["--model", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "--tensor-parallel-size", "4"],
        "env": [
            {"name": "VLLM_ROCM_USE_AITER", "value": "1"},
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
        ],
        "resources": {"limits": {"amd.com/gpu": gpu_limit}, "requests": {"amd.com/gpu": gpu_limit}},
    }
    container.update(container_extra)
    annotations = {"inference-platform/layout": "tp4-ep-r2"}
    if gpus_annotation is not None:
        annotations["inference-platform/gpus-per-replica"] = gpus_annotation
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "qwen3-235b", "namespace": "inference"},
        "spec": {
            "replicas": 2.0,
            "template": {
                "metadata": {
                    "labels": {"app.kubernetes.io/name": "vllm", "inference-platform/model": "qwen3-235b"},
                    "annotations": annotations,
                },
                "spec": {
                    "initContainers": [{"name": "wait-cache", "image": "busybox:1.37.0"}],
                    "containers": [container],
                },
            },
        },
    }


DEPLOYMENT = "kubernetes:apps/v1:Deployment"


# ------------------------------------------------------------------------- prod cluster


def test_prod_cluster_ha_and_protected_passes():
    assert (
        rules.prod_cluster_ha_and_protected(rules.DO_CLUSTER, CLUSTER, {}, protect=True, urn=PROD_URN) == []
    )


def test_prod_cluster_without_ha_or_protect_violates():
    props = dict(CLUSTER, ha=False)
    found = rules.prod_cluster_ha_and_protected(rules.DO_CLUSTER, props, {}, protect=False, urn=PROD_URN)
    assert len(found) == 2
    assert any("ha: true" in m for m in found) and any("protect" in m for m in found)


def test_environment_from_config_overrides_the_stack_name():
    props = dict(CLUSTER, ha=False)
    # A stack called "dev" configured as prod is held to prod rules; an unnamed stack is not.
    assert rules.prod_cluster_ha_and_protected(rules.DO_CLUSTER, props, {"environment": "prod"}, urn=DEV_URN)
    assert rules.prod_cluster_ha_and_protected(rules.DO_CLUSTER, props, {}, urn=DEV_URN) == []
    org_urn = PROD_URN.replace(":prod::", ":acme/prod::")
    assert rules.environment_of({}, org_urn) == "prod"
    assert rules.environment_of({}, "urn:pulumi:sandbox-jane::p::t::n") is None


# ------------------------------------------------------------------------- GPU taints


def test_tainted_gpu_pool_passes_and_cpu_pool_is_ignored():
    assert rules.gpu_node_pools_tainted(rules.DO_NODE_POOL, GPU_POOL, {}) == []
    cpu = {"name": "system", "size": "s-4vcpu-8gb", "nodeCount": 2.0}
    assert rules.gpu_node_pools_tainted(rules.DO_NODE_POOL, cpu, {}) == []


@pytest.mark.parametrize(
    "taints",
    [
        [],
        [{"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}],  # wrong vendor for MI325X
        [{"key": "amd.com/gpu", "value": "", "effect": "PreferNoSchedule"}],  # does not keep pods off
    ],
)
def test_gpu_pool_without_the_vendor_taint_violates(taints):
    found = rules.gpu_node_pools_tainted(rules.DO_NODE_POOL, dict(GPU_POOL, taints=taints), {})
    assert found == [
        "GPU node pool mi325x (gpu-mi325x8-2048gb-contracted) must have taint amd.com/gpu:NoSchedule"
    ]


def test_nvidia_pool_needs_the_nvidia_taint_and_inline_default_pool_is_checked():
    h100 = dict(GPU_POOL, size="gpu-h100x8-640gb", taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])
    assert rules.gpu_node_pools_tainted(rules.DO_NODE_POOL, h100, {}) == []
    cluster = dict(CLUSTER, nodePool={"name": "gpu", "size": "gpu-mi300x1-192gb", "nodeCount": 1.0})
    assert rules.gpu_node_pools_tainted(rules.DO_CLUSTER, cluster, {})


# ------------------------------------------------------------------------- vLLM GPU limits


def test_vllm_gpu_limit_matching_the_layout_passes():
    assert rules.vllm_gpu_limits_match_layout(DEPLOYMENT, vllm_deployment("4", 4.0), {}) == []


@pytest.mark.parametrize(
    ("annotation", "limit", "expected"),
    [
        ("4", 8.0, "limit amd.com/gpu=8 but the layout uses 4 GPUs"),
        ("8", 4.0, "limit amd.com/gpu=4 but the layout uses 8 GPUs"),
        (None, 4.0, "needs annotation inference-platform/gpus-per-replica"),
        ("four", 4.0, "needs annotation inference-platform/gpus-per-replica"),
    ],
)
def test_vllm_gpu_limit_mismatch_violates(annotation, limit, expected):
    found = rules.vllm_gpu_limits_match_layout(DEPLOYMENT, vllm_deployment(annotation, limit), {})
    assert len(found) == 1 and expected in found[0]


def test_vllm_container_without_gpu_limit_violates():
    deployment = vllm_deployment()
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
    (found,) = rules.vllm_gpu_limits_match_layout(DEPLOYMENT, deployment, {})
    assert "no GPU limit; expected 4" in found


def test_non_vllm_workloads_are_not_judged_by_the_gpu_rule():
    other = vllm_deployment(None, 1.0)
    other["spec"]["template"]["metadata"]["labels"] = {"app.kubernetes.io/name": "router"}
    assert rules.vllm_gpu_limits_match_layout(DEPLOYMENT, other, {}) == []
    assert rules.vllm_gpu_limits_match_layout(rules.K8S_SERVICE, {"spec": {}}, {}) == []


# ------------------------------------------------------------------------- pinned images


@pytest.mark.parametrize(
    "image",
    [
        "vllm/vllm-openai-rocm:v0.33.0",
        "registry.example.com:5000/team/router:1.4.2",
        "busybox@sha256:" + "a" * 64,
    ],
)
def test_pinned_images_pass(image):
    assert rules.images_pinned(DEPLOYMENT, vllm_deployment(image=image), {}) == []


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("vllm/vllm-openai-rocm:latest", "uses the `latest` tag"),
        ("vllm/vllm-openai-rocm", "has no tag"),
        ("registry.example.com:5000/team/router", "has no tag"),  # the :5000 is a port, not a tag
        ("", "has no image"),
    ],
)
def test_unpinned_images_violate(image, expected):
    (found,) = rules.images_pinned(DEPLOYMENT, vllm_deployment(image=image), {})
    assert found.startswith("qwen3-235b/vllm:") and expected in found


def test_init_containers_and_cronjobs_are_checked_too():
    deployment = vllm_deployment()
    deployment["spec"]["template"]["spec"]["initContainers"][0]["image"] = "busybox"
    (found,) = rules.images_pinned(DEPLOYMENT, deployment, {})
    assert "wait-cache" in found
    cronjob = {
        "metadata": {"name": "bench"},
        "spec": {
            "jobTemplate": {
                "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "x:latest"}]}}}
            }
        },
    }
    assert rules.images_pinned("kubernetes:batch/v1:CronJob", cronjob, {})


@pytest.mark.parametrize("helm_type", [rules.HELM_RELEASE, rules.HELM_CHART_V4])
def test_helm_releases_and_charts_pin_chart_versions(helm_type):
    assert rules.images_pinned(helm_type, {"chart": "kube-prometheus-stack", "version": "81.4.5"}, {}) == []
    (found,) = rules.images_pinned(helm_type, {"chart": "kube-prometheus-stack"}, {})
    assert "'kube-prometheus-stack' must pin a chart version" in found
    assert rules.images_pinned(helm_type, {"chart": "oci://ghcr.io/acme/charts/router", "version": " "}, {})
    # A chart directory in the repository or an archive is fixed by itself.
    assert rules.images_pinned(helm_type, {"chart": "./charts/router"}, {}) == []
    assert rules.images_pinned(helm_type, {"chart": "https://example.com/router-1.2.3.tgz"}, {}) == []


# ------------------------------------------------------------------------- public load balancers


def lb_service(annotations):
    return {
        "metadata": {"name": "qwen3-235b-public", "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80.0}]},
    }


def test_public_load_balancer_with_api_key_passes():
    props = lb_service({"inference-platform/api-key-required": "true"})
    assert rules.public_load_balancer_requires_api_key(rules.K8S_SERVICE, props, {}) == []


def test_internal_load_balancer_and_cluster_ip_pass_without_a_key():
    internal = lb_service({"service.beta.kubernetes.io/do-loadbalancer-network": "INTERNAL"})
    assert rules.public_load_balancer_requires_api_key(rules.K8S_SERVICE, internal, {}) == []
    cluster_ip = {"metadata": {"name": "qwen3-235b"}, "spec": {"type": "ClusterIP"}}
    assert rules.public_load_balancer_requires_api_key(rules.K8S_SERVICE, cluster_ip, {}) == []


@pytest.mark.parametrize("annotations", [{}, None, {"inference-platform/api-key-required": "false"}])
def test_public_load_balancer_without_api_key_violates(annotations):
    (found,) = rules.public_load_balancer_requires_api_key(rules.K8S_SERVICE, lb_service(annotations), {})
    assert "qwen3-235b-public must require an API key" in found


# ------------------------------------------------------------------------- secrets


HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def test_secret_references_pass():
    assert rules.secrets_not_in_plain_config(DEPLOYMENT, vllm_deployment(), {}) == []
    # The value belongs in a Secret, which is exactly where this rule lets it be.
    secret = {"metadata": {"name": "hf-token"}, "stringData": {"token": HF_TOKEN}}
    assert rules.secrets_not_in_plain_config(rules.K8S_SECRET, secret, {}) == []


def test_literal_credential_env_violates_without_echoing_the_value():
    deployment = vllm_deployment(env=[{"name": "HF_TOKEN", "value": "not-a-real-token"}])
    (found,) = rules.secrets_not_in_plain_config(DEPLOYMENT, deployment, {})
    assert "env HF_TOKEN has a literal value" in found and "not-a-real-token" not in found


@pytest.mark.parametrize(
    "container",
    [
        {"args": ["--api-key", "sk-local-123"]},
        {"args": ["--api-key=sk-local-123"]},
        {"args": ["--api_key", "sk-local-123"]},  # vLLM's parser accepts underscores too
        # $(VAR) is expanded by the kubelet into the process's visible command line: both forms
        # are flagged alike, the key must come only from the VLLM_API_KEY env.
        {"args": ["--api-key", "$(VLLM_API_KEY)"]},
        {"args": ["--api-key=$(VLLM_API_KEY)"]},
        {"command": ["sh", "-c", "vllm serve Qwen/Qwen3-8B --api-key sk-local-123"], "args": []},
        {"command": ["/bin/sh", "-c", "exec vllm serve m --port 8000 --api-key=sk-local-123"]},
    ],
)
def test_api_key_on_the_command_line_violates(container):
    (found,) = rules.secrets_not_in_plain_config(DEPLOYMENT, vllm_deployment(**container), {})
    assert "--api-key on the command line" in found and "sk-local-123" not in found


def test_api_key_from_the_environment_only_and_similar_flags_pass():
    # Only the exact flag counts: longer flags that contain it (made up here) and a bare word do not.
    deployment = vllm_deployment(
        command=["sh", "-c", "vllm serve m --api-key-file /run/key --no-api-keys"],
        args=["--served-model-name", "api-key"],
        env=[{"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "api-key", "key": "api-key"}}}],
    )
    assert rules.secrets_not_in_plain_config(DEPLOYMENT, deployment, {}) == []


@pytest.mark.parametrize(
    ("env", "violates"),
    [
        ({"name": "SLACK_WEBHOOK_URL", "value": "https://example.com/hook"}, True),
        ({"name": "alertWebhook", "value": "https://example.com/hook"}, True),
        ({"name": "DATABASE_URL", "value": "postgres://app:hunter2@db:5432/app"}, True),
        ({"name": "NOTIFY", "value": "https://hooks.slack.com/services/T000/B000/XXXXXXXX"}, True),
        ({"name": "DB_PASSWORD", "value": "hunter2"}, True),
        # compliant counterparts
        ({"name": "DATABASE_URL", "value": "postgres://app:$(DB_PASSWORD)@db:5432/app"}, False),
        ({"name": "DATABASE_URL", "value": "postgres://db:5432/app"}, False),
        ({"name": "TOKENIZERS_PARALLELISM", "value": "false"}, False),
        ({"name": "SLACK_WEBHOOK_URL", "valueFrom": {"secretKeyRef": {"name": "w", "key": "url"}}}, False),
        ({"name": "HF_TOKEN", "value": ""}, False),
    ],
)
def test_credential_env_values(env, violates):
    found = rules.secrets_not_in_plain_config(DEPLOYMENT, vllm_deployment(env=[env]), {})
    if violates:
        (message,) = found  # once, not again as a token-shaped string
        assert f"env {env['name']} has a literal value" in message and env["value"] not in message
    else:
        assert found == []


def test_token_shaped_strings_and_credential_configmap_keys_violate():
    configmap = {"metadata": {"name": "router-config"}, "data": {"routing": "session", "API_KEY": "x"}}
    (found,) = rules.secrets_not_in_plain_config(rules.K8S_CONFIG_MAP, configmap, {})
    assert "key API_KEY" in found
    release = {"chart": "router", "version": "1.0.0", "values": {"hub": {"token": HF_TOKEN}}}
    (found,) = rules.secrets_not_in_plain_config(rules.HELM_RELEASE, release, {})
    assert "values.hub.token" in found and HF_TOKEN not in found


@pytest.mark.parametrize("helm_type", [rules.HELM_RELEASE, rules.HELM_CHART_V4])
@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"grafana": {"adminPassword": "hunter2"}}, "values.grafana.adminPassword"),
        (
            {
                "alertmanager": {
                    "config": {
                        "receivers": [
                            {
                                "name": "p",
                                "slack_configs": [
                                    {"api_url": "https://hooks.slack.com/services/T000/B000/XXXXXXXX"}
                                ],
                            }
                        ]
                    }
                }
            },
            "values.alertmanager.config.receivers[0].slack_configs[0].api_url",
        ),
        ({"notifier": {"webhook_url": "https://example.com/hook"}}, "values.notifier.webhook_url"),
        ({"auth": {"apiKey": "sk-abc"}}, "values.auth.apiKey"),
        ({"oauth": {"clientSecret": "s3cr3t"}}, "values.oauth.clientSecret"),
        ({"storage": {"url": "s3://key:s3cr3t@bucket"}}, "values.storage.url"),
    ],
)
def test_credentials_in_helm_values_violate(helm_type, values, path):
    release = {"name": "kps", "chart": "kube-prometheus-stack", "version": "81.4.5", "values": values}
    (found,) = rules.secrets_not_in_plain_config(helm_type, release, {})
    assert path in found
    for secret in ("hunter2", "XXXXXXXX", "example.com/hook", "sk-abc", "s3cr3t"):
        assert secret not in found


def test_secret_references_in_helm_values_pass():
    values = {
        "grafana": {
            "adminPassword": "",
            "admin": {
                "existingSecret": "grafana-admin",
                "userKey": "admin-user",
                "passwordKey": "admin-password",
            },
        },
        "alertmanager": {
            "alertmanagerSpec": {"secrets": ["alert-webhook"]},
            "config": {
                "receivers": [
                    {
                        "name": "p",
                        "slack_configs": [{"api_url_file": "/etc/alertmanager/secrets/alert-webhook/url"}],
                    },
                    {
                        "name": "w",
                        "webhook_configs": [{"url_file": "/etc/alertmanager/secrets/alert-webhook/url"}],
                    },
                ]
            },
        },
        "prometheusOperator": {"admissionWebhooks": {"enabled": True}},
        "serviceAccount": {"automountServiceAccountToken": False, "secretName": "sa-token"},
        "auth": {"tokenUrl": "https://auth.example.com/token", "apiKey": "${API_KEY}"},
        "datasource": {"url": "http://kps-prometheus:9090", "apiUrl": "https://api.example.com/v1"},
    }
    for helm_type in (rules.HELM_RELEASE, rules.HELM_CHART_V4):
        release = {"chart": "kube-prometheus-stack", "version": "81.4.5", "values": values}
        assert rules.secrets_not_in_plain_config(helm_type, release, {}) == []


DO_TOKEN = "dop_v1_" + "0123456789abcdef" * 4


def test_provider_credentials_from_stack_secrets_are_allowed_elsewhere_not():
    """`pulumi config set --secret digitalocean:token dop_v1_...` reaches the provider resource as a
    plain `token` input; that is by design. The same token on any other resource is a leak."""
    provider = {"token": DO_TOKEN, "version": "4.40.0"}
    assert rules.secrets_not_in_plain_config("pulumi:providers:digitalocean", provider, {}) == []
    kubeconfig = {"kubeconfig": "users:\n- user:\n    token: " + DO_TOKEN}
    assert rules.secrets_not_in_plain_config("pulumi:providers:kubernetes", kubeconfig, {}) == []
    (found,) = rules.secrets_not_in_plain_config(rules.DO_CLUSTER, dict(CLUSTER, tags=[DO_TOKEN]), {})
    assert "token-shaped string sits in plain input tags[0]" in found and DO_TOKEN not in found
    configmap = {"metadata": {"name": "router-config"}, "data": {"endpoint": DO_TOKEN}}
    (found,) = rules.secrets_not_in_plain_config(rules.K8S_CONFIG_MAP, configmap, {})
    assert "plain input data.endpoint" in found


# ------------------------------------------------------------------------- Droplet limit


def stack(*pools, cluster=CLUSTER):
    resources = [StackResource(rules.DO_CLUSTER, cluster, "prod", PROD_URN, protect=True)]
    resources += [StackResource(rules.DO_NODE_POOL, p, p["name"]) for p in pools]
    return resources


def test_pools_within_the_droplet_limit_pass():
    # system 3 + mi325x max 6 + small fixed 1 = 10 ≤ 10
    small = {"name": "mi325x-small", "size": "gpu-mi325x8-2048gb-contracted", "nodeCount": 1.0}
    assert rules.autoscaling_within_account_limit(stack(GPU_POOL, small), {"dropletLimit": 10}) == []


def test_pools_above_the_droplet_limit_violate_with_a_breakdown():
    small = {"name": "mi325x-small", "size": "gpu-mi325x8-2048gb-contracted", "nodeCount": 1.0}
    (found,) = rules.autoscaling_within_account_limit(stack(GPU_POOL, small), {"dropletLimit": 9})
    assert "scale to 10 Droplets (system 3, mi325x 6, mi325x-small 1)" in found and "limit 9" in found


def test_droplet_limit_defaults_to_the_digitalocean_default():
    big = dict(GPU_POOL, maxNodes=30.0)
    assert rules.autoscaling_within_account_limit(stack(big), {})  # 33 > 25
    assert rules.node_pool_max_within_account_limit(rules.DO_NODE_POOL, big, {})
    assert rules.node_pool_max_within_account_limit(rules.DO_NODE_POOL, GPU_POOL, {}) == []


def test_autoscaling_pool_is_counted_at_max_not_at_its_current_count():
    pool = dict(GPU_POOL, nodeCount=2.0, maxNodes=8.0)
    assert rules.autoscaling_within_account_limit(stack(pool), {"dropletLimit": 10})  # 3 + 8 > 10


# ------------------------------------------------------------------------- observability


def test_prod_with_kube_prometheus_stack_passes():
    release = StackResource(
        rules.HELM_RELEASE, {"chart": "kube-prometheus-stack", "version": "81.4.5"}, "kps"
    )
    assert rules.observability_enabled_in_prod(stack(GPU_POOL) + [release], {}) == []
    component = StackResource(rules.OBSERVABILITY_COMPONENT, {}, "observability")
    assert rules.observability_enabled_in_prod(stack(GPU_POOL) + [component], {}) == []
    chart = StackResource(rules.HELM_CHART_V4, {"chart": "kube-prometheus-stack", "version": "81.4.5"}, "kps")
    assert rules.observability_enabled_in_prod(stack(GPU_POOL) + [chart], {}) == []


def test_prod_without_observability_violates_but_dev_does_not():
    assert rules.observability_enabled_in_prod(stack(GPU_POOL), {})
    dev = [StackResource(r.resource_type, r.props, r.name, DEV_URN) for r in stack(GPU_POOL)]
    assert rules.observability_enabled_in_prod(dev, {}) == []


# ------------------------------------------------------------------------- the pack


def test_rules_module_does_not_import_pulumi_policy():
    source = (ROOT / "policy" / "rules.py").read_text()
    assert "pulumi_policy" not in source.replace("`pulumi_policy`", "")
    code = "import sys, policy.rules; sys.exit(1 if 'pulumi_policy' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False).returncode == 0


def test_every_rule_is_wrapped_once_with_the_right_policy_kind():
    pulumi_policy = pytest.importorskip("pulumi_policy", reason="pulumi-policy is the pack's own dependency")
    from policy import pack

    policies = pack.build_policies()
    assert [p.name for p in policies] == [r.name for r in rules.RULES]
    for policy, rule in zip(policies, rules.RULES, strict=True):
        kind = (
            pulumi_policy.ResourceValidationPolicy
            if rule.scope == "resource"
            else pulumi_policy.StackValidationPolicy
        )
        assert isinstance(policy, kind)


def _engine_props(props):
    """Props as the analyzer hands them over: read-only proxies that raise on unknown values."""
    from pulumi_policy.proxy import unknown_checking_proxy

    return unknown_checking_proxy(copy.deepcopy(props))


def test_resource_policy_sees_protect_from_resource_options():
    pulumi_policy = pytest.importorskip("pulumi_policy", reason="pulumi-policy is the pack's own dependency")
    from policy import pack

    policy = next(p for p in pack.build_policies() if p.name == "prod-cluster-ha-and-protected")

    def run(protect):
        opts = pulumi_policy.PolicyResourceOptions(
            protect, [], None, [], pulumi_policy.PolicyCustomTimeouts(0, 0, 0), [], None
        )
        args = pulumi_policy.ResourceValidationArgs(
            rules.DO_CLUSTER, _engine_props(CLUSTER), PROD_URN, "prod", opts, None, {}
        )
        seen: list[str] = []
        policy.validate(args, lambda message, urn=None: seen.append(message))
        return seen

    assert run(True) == []
    assert run(False) == ["prod cluster must be protected (resource option protect=True) against deletion"]


def test_resource_policies_work_on_engine_proxies():
    pulumi_policy = pytest.importorskip("pulumi_policy", reason="pulumi-policy is the pack's own dependency")
    from policy import pack

    by_name = {p.name: p for p in pack.build_policies()}
    opts = pulumi_policy.PolicyResourceOptions(
        False, [], None, [], pulumi_policy.PolicyCustomTimeouts(0, 0, 0), [], None
    )
    bad = vllm_deployment("4", 8.0, image="vllm/vllm-openai-rocm:latest", args=["--api-key", "k"])
    seen: dict[str, list[str]] = {}
    for name in ("vllm-gpu-limits-match-layout", "images-pinned", "secrets-not-in-plain-config"):
        args = pulumi_policy.ResourceValidationArgs(
            DEPLOYMENT, _engine_props(bad), "urn", "qwen3-235b", opts, None, {}
        )
        by_name[name].validate(
            args, lambda message, urn=None, name=name: seen.setdefault(name, []).append(message)
        )
    assert set(seen) == {"vllm-gpu-limits-match-layout", "images-pinned", "secrets-not-in-plain-config"}


def test_stack_policy_reads_config_and_resources():
    pulumi_policy = pytest.importorskip("pulumi_policy", reason="pulumi-policy is the pack's own dependency")
    from policy import pack

    policy = next(p for p in pack.build_policies() if p.name == "autoscaling-within-account-limit")
    opts = pulumi_policy.PolicyResourceOptions(
        False, [], None, [], pulumi_policy.PolicyCustomTimeouts(0, 0, 0), [], None
    )
    resources = [
        pulumi_policy.PolicyResource(
            rules.DO_CLUSTER, _engine_props(CLUSTER), PROD_URN, "prod", opts, None, None, [], {}
        ),
        pulumi_policy.PolicyResource(
            rules.DO_NODE_POOL, _engine_props(GPU_POOL), "urn2", "mi325x", opts, None, None, [], {}
        ),
    ]
    seen: list[str] = []
    policy.validate(
        pulumi_policy.StackValidationArgs(resources, {"dropletLimit": 8}), lambda m, urn=None: seen.append(m)
    )
    assert len(seen) == 1 and "scale to 9 Droplets" in seen[0]
    seen.clear()
    policy.validate(
        pulumi_policy.StackValidationArgs(resources, {"dropletLimit": 9}), lambda m, urn=None: seen.append(m)
    )
    assert seen == []


def test_pack_entry_point_starts_the_analyzer():
    """Run __main__.py as Pulumi does (from inside policy/): it must import its rules and serve."""
    pytest.importorskip("pulumi_policy", reason="pulumi-policy is the pack's own dependency")
    proc = subprocess.Popen(
        [sys.executable, "-u", "__main__.py"],
        cwd=ROOT / "policy",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port_line = proc.stdout.readline().strip()
        assert port_line.isdigit() and int(port_line) > 0, (
            proc.stderr.read() if proc.poll() is not None else port_line
        )
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_pack_metadata_is_consistent():
    import yaml

    meta = yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())
    assert meta["runtime"]["name"] == "python" and meta["version"]
    requirements = (ROOT / "policy" / "requirements.txt").read_text()
    assert "pulumi-policy" in requirements


# ------------------------------------------------------------------------- the committed stacks


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_committed_stacks_comply_with_every_policy(stack):
    """The offline plan of each checked-in stack passes the whole pack, as `pulumi up` would require."""
    from tests.conftest import plan_of, policy_violations

    plan = plan_of(stack)
    assert policy_violations(plan, stack) == []
    resources = plan.to_dict()["resources"]
    if stack == "prod":  # the plan really exercises the prod rules
        assert any(r["type"] == rules.DO_CLUSTER and r["options"]["protect"] for r in resources)
