"""The router manifests: one vllm-router for all models, least-privilege registrar, safe exposure."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest

from infra.catalog import versions
from infra.errors import UserError
from infra.render.router import (
    LOCK_FILE,
    METRICS_PORT,
    ROUTER_KINDS,
    RoutedModel,
    RouterSpec,
    loopback_probe,
    render_public_service,
    render_role,
    render_role_binding,
    render_router,
    render_router_deployment,
    render_router_pdb,
    router_args,
    router_timeout_seconds,
)
from tests.conftest import ROOT

DO = "service.beta.kubernetes.io/do-loadbalancer-"
HELP = (ROOT / "tests" / "fixtures" / "vllm_router_0.1.17_help.txt").read_text()
MODELS = (RoutedModel("qwen3-235b", "Qwen/Qwen3-235B"), RoutedModel("qwen3-30b", "Qwen/Qwen3-30B"))


def spec(**overrides) -> RouterSpec:
    base = dict(models=MODELS, kind="session", replicas=2, client_key_names=("ci-2026q4", "default"))
    base.update(overrides)
    return RouterSpec(**base)


CASES = [
    spec(
        kind=kind,
        public=public,
        tls_certificate_id=cert if public else None,
        allowed_source_cidrs=cidrs if public else (),
        image=image,
    )
    for kind in ROUTER_KINDS
    if kind != "service"
    for public in (False, True)
    for cert in (None, "0c5a3c5b-6f6e-4c2e-9b43-2a1c1e2d3f4a")
    for cidrs in ((), ("203.0.113.0/24", "198.51.100.7/32"))
    for image in (None, "registry.example.com/vllm-router:0.1.17")
]


@pytest.mark.parametrize(
    "router",
    CASES,
    ids=lambda r: (
        f"{r.kind}-public{int(r.public)}-tls{int(bool(r.tls_certificate_id))}-acl{len(r.allowed_source_cidrs)}"
        f"-img{int(bool(r.image))}"
    ),
)
def test_every_router_object_validates_against_kubernetes_1_33(router):
    objects = render_router(router)
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33", strict=True)
        assert obj["metadata"]["name"] != "vllm"
    assert [o["kind"] for o in objects].count("Deployment") == 1  # one router for every model
    assert [o["kind"] for o in objects].count("Service") == (2 if router.public else 1)


def test_rbac_is_read_only_namespaced_endpointslices():
    role = render_role(spec())
    # the engine Services' EndpointSlices are in the engines' namespace: the Role is there, bound
    # to the router's ServiceAccount in the front door's namespace
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "inference-engines"
    assert role["rules"] == [
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]}
    ]
    binding = render_role_binding(spec())
    assert binding["metadata"]["namespace"] == "inference-engines"
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "router"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "router", "namespace": "inference"}]
    kinds = {o["kind"] for k in ROUTER_KINDS for o in render_router(spec(kind=k, public=k != "service"))}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}


def _help_flags() -> dict[str, list[str] | None]:
    """Every long flag of vllm-router 0.1.17's --help (recorded from the real binary), with its
    choices when it lists them."""
    flags: dict[str, list[str] | None] = {}
    for m in re.finditer(r"(--[a-z0-9-]+)(?: \{([a-z_,]+)\})?", HELP):
        flags.setdefault(m.group(1), m.group(2).split(",") if m.group(2) else None)
        if m.group(2):
            flags[m.group(1)] = m.group(2).split(",")
    return flags


@pytest.mark.parametrize("kind", [k for k in ROUTER_KINDS if k != "service"])
def test_every_rendered_flag_exists_in_vllm_router_0_1_17(kind):
    known = _help_flags()
    args = router_args(spec(kind=kind))
    for i, token in enumerate(args):
        if token.startswith("--"):
            assert token in known, f"{token} is not a vllm-router 0.1.17 flag"
            if known[token]:
                assert args[i + 1] in known[token], (token, args[i + 1], known[token])


@pytest.mark.parametrize("kind, policy", [("session", "consistent_hash"), ("prefix", "cache_aware"), ("round-robin", "round_robin")])
def test_router_command_line_per_kind(kind, policy):
    args = router_args(spec(kind=kind))
    assert args[args.index("--policy") + 1] == policy
    assert "--enable-igw" in args  # routes on the request's model
    assert args[args.index("--host") + 1] == "127.0.0.1"  # admin routes: loopback only (issue 30)
    assert args[args.index("--prometheus-host") + 1] == "0.0.0.0"
    assert args[args.index("--prometheus-port") + 1] == str(METRICS_PORT)
    assert "--api-key" not in args  # clients' keys pass through; no key on a command line (issue 30)
    assert "--worker-urls" not in args and "--service-discovery" not in args  # the registrar adds workers


def test_request_timeout_follows_the_slowest_model():
    assert router_timeout_seconds([(1000, 25, 250)]) == 300  # floor
    # the longest model decides: 2 × (2 s + 4 × 2000 × 0.1 s) = 1604 s
    assert router_timeout_seconds([(1000, 25, 250), (2000, 100, 2000)]) == 1610
    assert router_timeout_seconds([(2000, 200, 4000)]) == 3600  # ceiling
    assert router_args(spec(request_timeout_s=777))[router_args(spec()).index("--request-timeout-secs") + 1] == "777"


def test_router_deployment_installs_the_locked_wheels_and_runs_the_registrar():
    router = spec(replicas=3, node_selector={"doks.digitalocean.com/node-pool": "system"})
    deployment = render_router_deployment(router)
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "router"
    assert "inference-platform/model" not in pod["metadata"]["labels"]  # serves every model
    assert pod["spec"]["nodeSelector"] == {"doks.digitalocean.com/node-pool": "system"}
    assert pod["spec"]["serviceAccountName"] == "router"
    (install,) = pod["spec"]["initContainers"]
    assert install["image"] == versions.ROUTER_BASE_IMAGE and ":latest" not in install["image"]
    assert {"--no-deps", "--require-hashes"} <= set(install["command"])
    router_c, registrar, proxy = pod["spec"]["containers"]
    assert router_c["image"] == versions.ROUTER_BASE_IMAGE
    assert router_c["command"] == ["/opt/vllm-router/bin/vllm-router"]
    # Issue 35: the router listens on loopback; its probes run in the container and ask 127.0.0.1,
    # the client proxy's readiness asks the router through the proxy on the proxy's own port.
    assert router_c["readinessProbe"]["exec"]["command"] == loopback_probe("/readiness")
    assert router_c["livenessProbe"]["exec"]["command"] == loopback_probe("/liveness")
    assert proxy["readinessProbe"]["httpGet"] == {"path": "/readiness", "port": "http"}
    assert proxy["livenessProbe"]["tcpSocket"] == {"port": "http"}
    assert {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"} in router_c["ports"]
    assert not any(e["name"] == "VLLM_API_KEY" for e in router_c["env"])  # the router holds no key
    assert [p["name"] for p in proxy["ports"]] == ["http"] and "http" not in [p["name"] for p in router_c["ports"]]
    args = registrar["args"]
    models = [args[i + 1] for i, a in enumerate(args) if a == "--model"]
    assert models == ["Qwen/Qwen3-235B=qwen3-235b", "Qwen/Qwen3-30B=qwen3-30b"]  # served name = engine Service
    assert "tolerations" not in pod["spec"]  # never takes a GPU node
    assert render_router_pdb(router)["spec"] == {
        "minAvailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "router", "app.kubernetes.io/part-of": "inference-platform"}},
    }
    assert render_router_pdb(spec(replicas=1))["spec"]["maxUnavailable"] == 1  # never blocks a drain


def test_the_lock_pins_vllm_router_by_pypi_sha256():
    lock = LOCK_FILE.read_text()
    assert "vllm-router==0.1.17 \\\n    --hash=sha256:85c96bea4d573a49b5a8ae4c72ee3dfe733aba26b6f1ff1256e6142f1f42694d" in lock
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==\S+ \\\n    --hash=sha256:[0-9a-f]{64}$", lock, re.M)
    assert {"vllm-router", "setproctitle", "aiohttp", "orjson", "uvicorn", "fastapi"} <= set(pins)


def test_a_changed_registrar_or_lock_rolls_the_router_pods(monkeypatch, tmp_path):
    import infra.render.router as r

    before = render_router_deployment(spec())["spec"]["template"]["metadata"]["annotations"]
    changed = tmp_path / "router_registrar.py"
    changed.write_text(r.REGISTRAR_FILE.read_text() + "\n# changed\n")
    monkeypatch.setattr(r, "REGISTRAR_FILE", changed)
    after = render_router_deployment(spec())["spec"]["template"]["metadata"]["annotations"]
    assert before.keys() == after.keys() and before != after


def test_image_override_skips_the_install():
    objects = render_router(spec(image="registry.example.com/vllm-router:0.1.17"))
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert "initContainers" not in pod
    assert pod["containers"][0]["image"] == "registry.example.com/vllm-router:0.1.17"
    assert pod["containers"][0]["command"] == ["vllm-router"]
    assert not any(o["kind"] == "ConfigMap" and o["metadata"]["name"] == "router-install" for o in objects)


def test_kind_service_has_no_router_pods():
    assert render_router(spec(kind="service")) == []


def test_public_endpoint_is_a_do_load_balancer_with_tls_allow_list_and_api_key():
    router = spec(public=True, tls_certificate_id="cert-123", allowed_source_cidrs=("203.0.113.0/24",))
    svc = render_public_service(router)
    annotations = svc["metadata"]["annotations"]
    assert svc["metadata"]["name"] == "router-public"
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
        ({"tls_certificate_id": "5a1c2f4e-9b3d-4e7a-8c21-0f6d3b9a7e15"}, "router.tls_certificate_id", "public: true"),
        ({"tls_certificate_id": "inference-cert", "public": True}, "router.tls_certificate_id", "UUID"),
        ({"kind": "service", "public": True}, "router.public", "needs a router"),
        ({"session_header": "x-user"}, "router.session_header", "no flag to rename"),
        ({"image": "registry.example.com/vllm-router"}, "router.image", "explicit tag"),
        ({"image": "registry.example.com/vllm-router:latest"}, "router.image", "explicit tag"),
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


def test_only_the_registrar_gets_the_service_account_token():
    """issue 30: the pod mounts no token; the registrar (the one container calling the API) gets a
    projected one where it reads it; the router and the client proxy see none."""
    from infra.render.router import SERVICE_ACCOUNT_DIR, render_router_deployment

    pod = render_router_deployment(spec())["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    mounts = {c["name"]: [m["mountPath"] for m in c.get("volumeMounts", [])] for c in pod["containers"]}
    assert SERVICE_ACCOUNT_DIR in mounts["registrar"]
    assert all(SERVICE_ACCOUNT_DIR not in paths for name, paths in mounts.items() if name != "registrar")
