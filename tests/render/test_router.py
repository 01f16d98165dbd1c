"""The router manifests: least-privilege discovery, routing modes, safe public exposure."""

from __future__ import annotations

import kubernetes_validate
import pytest

from infra.catalog import versions
from infra.errors import UserError
from infra.render.model_service import selector_labels
from infra.render.router import (
    ROUTER_KINDS,
    RouterSpec,
    render_public_service,
    render_role,
    render_role_binding,
    render_router,
    render_router_deployment,
    render_router_pdb,
    router_args,
)

DO = "service.beta.kubernetes.io/do-loadbalancer-"


def spec(**overrides) -> RouterSpec:
    base = dict(
        model="qwen3-235b",
        kind="session",
        session_header="x-session-id",
        replicas=2,
        api_key_secret="qwen3-235b-api-key",
    )
    base.update(overrides)
    return RouterSpec(**base)


CASES = [
    spec(
        kind=kind,
        public=public,
        tls_certificate_id=cert if public else None,
        allowed_source_cidrs=cidrs if public else (),
    )
    for kind in ROUTER_KINDS
    for public in (False, True)
    for cert in (None, "0c5a3c5b-6f6e-4c2e-9b43-2a1c1e2d3f4a")
    for cidrs in ((), ("203.0.113.0/24", "198.51.100.7/32"))
]


@pytest.mark.parametrize(
    "router",
    CASES,
    ids=lambda r: (
        f"{r.kind}-public{int(r.public)}-tls{int(bool(r.tls_certificate_id))}-acl{len(r.allowed_source_cidrs)}"
    ),
)
def test_every_router_object_validates_against_kubernetes_1_33(router):
    for obj in render_router(router):
        kubernetes_validate.validate(obj, "1.33", strict=True)
        assert obj["metadata"]["name"] != "vllm"


def test_rbac_is_read_only_and_namespaced():
    role = render_role(spec())
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "inference"
    resources = set()
    for rule in role["rules"]:
        assert set(rule["verbs"]) <= {"get", "list", "watch"}
        assert "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        resources.update(rule["resources"])
    # pod-IP discovery (the default; service-name discovery would read Services) lists and
    # watches pods only: no Services, Endpoints or EndpointSlices
    assert resources == {"pods"}
    assert all(rule["apiGroups"] == [""] for rule in role["rules"])
    assert not any(a.startswith("--k8s-service-discovery-type") for a in router_args(spec()))
    binding = render_role_binding(spec())
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "qwen3-235b-router",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "qwen3-235b-router", "namespace": "inference"}
    ]
    kinds = {o["kind"] for k in ROUTER_KINDS for o in render_router(spec(kind=k, public=True))}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}


@pytest.mark.parametrize(
    "kind, logic", [("session", "session"), ("prefix", "prefixaware"), ("round-robin", "roundrobin")]
)
def test_router_command_line_per_kind(kind, logic):
    args = router_args(spec(kind=kind))
    assert args[args.index("--routing-logic") + 1] == logic
    assert args[args.index("--service-discovery") + 1] == "k8s"
    assert args[args.index("--k8s-namespace") + 1] == "inference"
    assert args[args.index("--k8s-port") + 1] == "8000"
    selector = args[args.index("--k8s-label-selector") + 1]
    assert dict(kv.split("=") for kv in selector.split(",")) == selector_labels("qwen3-235b")
    if kind == "session":
        assert args[args.index("--session-key") + 1] == "x-session-id"
    else:
        assert "--session-key" not in args


def test_router_deployment_is_highly_available_and_finds_engines():
    router = spec(replicas=3)
    deployment = render_router_deployment(router)
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "router"
    assert pod["metadata"]["labels"]["inference-platform/model"] == "qwen3-235b"
    assert pod["spec"]["serviceAccountName"] == "qwen3-235b-router"
    c = pod["spec"]["containers"][0]
    assert c["image"] == versions.ROUTER_IMAGE and ":latest" not in c["image"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    # The router authenticates to the engines with the same key, from the Secret.
    assert c["env"] == [
        {
            "name": "VLLM_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "qwen3-235b-api-key", "key": "api-key"}},
        }
    ]
    assert "tolerations" not in pod["spec"]  # never takes a GPU node
    assert render_router_pdb(router)["spec"] == {
        "minAvailable": 1,
        "selector": {
            "matchLabels": {"app.kubernetes.io/name": "router", "inference-platform/model": "qwen3-235b"}
        },
    }
    assert render_router_pdb(spec(replicas=1))["spec"]["maxUnavailable"] == 1  # never blocks a drain


def test_kind_service_has_no_router_pods():
    assert render_router(spec(kind="service")) == []
    objects = render_router(spec(kind="service", public=True))
    assert [o["kind"] for o in objects] == ["Service"]
    assert objects[0]["spec"]["selector"] == selector_labels("qwen3-235b")  # straight to the engines


def test_public_endpoint_is_a_do_load_balancer_with_tls_allow_list_and_api_key():
    router = spec(public=True, tls_certificate_id="cert-123", allowed_source_cidrs=("203.0.113.0/24",))
    svc = render_public_service(router)
    annotations = svc["metadata"]["annotations"]
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert svc["spec"]["externalTrafficPolicy"] == "Local"  # LB health checks follow pod readiness
    assert annotations[f"{DO}certificate-id"] == "cert-123"
    assert annotations[f"{DO}tls-ports"] == "443"
    assert annotations[f"{DO}protocol"] == "http"
    assert annotations[f"{DO}redirect-http-to-https"] == "true"
    assert annotations[f"{DO}healthcheck-check-interval-seconds"] == "5"
    assert annotations["inference-platform/api-key-required"] == "true"
    assert {p["port"] for p in svc["spec"]["ports"]} == {80, 443}
    assert svc["spec"]["selector"]["app.kubernetes.io/name"] == "router"
    for key in annotations:
        assert key.startswith(DO) or key.startswith("inference-platform/")


def test_public_without_tls_listens_on_http_only():
    svc = render_public_service(spec(public=True))
    assert [p["port"] for p in svc["spec"]["ports"]] == [80]
    assert f"{DO}certificate-id" not in svc["metadata"]["annotations"]
    assert "loadBalancerSourceRanges" not in svc["spec"]


@pytest.mark.parametrize(
    ("router", "path", "words"),
    [
        ({"kind": "kvaware"}, "router.kind", "is not allowed"),
        ({"session_header": ""}, "router.session_header", "not an HTTP header name"),
        ({"session_header": "x session"}, "router.session_header", "not an HTTP header name"),
        ({"session_header": "x" * 100_000}, "router.session_header", "1 to 64 characters"),
        ({"tls_certificate_id": "cert-123"}, "router.tls_certificate_id", "public: true"),
        ({"kind": "service", "public": True}, "router.public", "needs a router"),
    ],
)
def test_router_mistakes_are_config_errors_naming_the_key(router, path, words):
    """The stack config owns every router rule; the renderer trusts a spec built from valid config."""
    from infra.config import NS, load_config
    from tests.conftest import ROOT, stack_values

    values, secrets = stack_values("staging")
    values[NS + "router"] = {**values.get(NS + "router", {}), **router}
    with pytest.raises(UserError) as err:
        load_config(values, stack="staging", secret_keys=secrets, base_dir=ROOT)
    (problem,) = [p for p in err.value.problems if p.path == NS + path]
    assert words in problem.message and len(err.value.render()) < 400
