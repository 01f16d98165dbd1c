"""Pod Security levels of the serving namespaces (issue 30 item 4), over every shipped stack and
every security variant (tests/security_variants.py).

`inference` enforces `restricted`, so every pod the plan puts there must pass that level's checks
or the API server refuses it at admission (a Deployment then never gets its pods, which no offline
check would notice); `inference-engines` enforces `privileged` and audits/warns at `baseline`.
The checks are the `restricted` profile of kubernetes.io/docs/concepts/security/pod-security-standards
(Kubernetes 1.33), as far as a pod template shows them.
"""

from __future__ import annotations

import pytest

from infra.invariants.objects import pod_templates
from infra.offline import kubernetes_objects
from infra.stack_plan import ENGINES_NAMESPACE, INFERENCE_NAMESPACE
from tests.security_variants import NAMES, plan_named

RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}  # fmt: skip


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    root = tmp_path_factory.mktemp("podsecurity")
    return {name: plan_named(name, root) for name in NAMES}


def restricted_violations(template: dict) -> list[str]:
    """What the `restricted` profile would refuse in one pod template."""
    pod = template["spec"]
    pod_ctx = pod.get("securityContext") or {}
    out = [f"host namespace {k}" for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)]
    out += [f"volume {v['name']}" for v in pod.get("volumes", []) if not set(v) - {"name"} <= RESTRICTED_VOLUMES]
    out += [f"sysctl {s['name']}" for s in pod_ctx.get("sysctls", []) if s["name"] not in SAFE_SYSCTLS]
    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        ctx = c.get("securityContext") or {}
        name = c["name"]
        if ctx.get("privileged"):
            out.append(f"{name}: privileged")
        if ctx.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation not false")
        caps = ctx.get("capabilities") or {}
        if "ALL" not in caps.get("drop", []):
            out.append(f"{name}: capabilities not dropping ALL")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: adds {caps['add']}")
        if not ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")):
            out.append(f"{name}: runAsNonRoot not true")
        if ctx.get("runAsUser", pod_ctx.get("runAsUser")) == 0:
            out.append(f"{name}: runAsUser 0")
        seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccomp {seccomp}")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append(f"{name}: hostPort")
    return out


@pytest.mark.parametrize("name", NAMES)
def test_the_serving_namespaces_carry_their_levels(plans, name):
    namespaces = {o["metadata"]["name"]: o["metadata"]["labels"] for o in kubernetes_objects(plans[name]) if o["kind"] == "Namespace"}
    front, engines = namespaces[INFERENCE_NAMESPACE], namespaces[ENGINES_NAMESPACE]
    assert {front[f"pod-security.kubernetes.io/{mode}"] for mode in ("enforce", "audit", "warn")} == {"restricted"}
    assert engines["pod-security.kubernetes.io/enforce"] == "privileged"
    assert engines["pod-security.kubernetes.io/audit"] == engines["pod-security.kubernetes.io/warn"] == "baseline"


@pytest.mark.parametrize("name", NAMES)
def test_every_pod_in_inference_passes_restricted(plans, name):
    bad = {
        f"{o['kind']} {o['metadata']['name']}": problems
        for o in kubernetes_objects(plans[name])
        if (o.get("metadata") or {}).get("namespace") == INFERENCE_NAMESPACE
        for t in pod_templates(o)
        if (problems := restricted_violations(t.template))
    }
    assert not bad, f"refused by Pod Security restricted in {INFERENCE_NAMESPACE}: {bad}"


@pytest.mark.parametrize("name", NAMES)
def test_engines_live_in_their_namespace(plans, name):
    """Every engine pod, and every pod that needs more than restricted, is in the engines' namespace."""
    for o in kubernetes_objects(plans[name]):
        ns = (o.get("metadata") or {}).get("namespace")
        for t in pod_templates(o):
            labels = t.labels
            if labels.get("app.kubernetes.io/component") == "engine":
                assert ns == ENGINES_NAMESPACE, o["metadata"]["name"]


def test_the_gateway_proxies_get_the_seccomp_profile_restricted_needs(plans):
    """The agentgateway controller makes the proxy pods in the Gateway's namespace; its template
    (v1.4.1) drops every capability and runs as non-root but sets no seccomp profile: the
    AgentgatewayParameters overlay adds RuntimeDefault."""
    (params,) = [o for o in kubernetes_objects(plans["prod-gateway"]) if o["kind"] == "AgentgatewayParameters"]
    assert params["metadata"]["namespace"] == INFERENCE_NAMESPACE
    template = params["spec"]["deployment"]["spec"]["template"]["spec"]
    assert template["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_checker_refuses_what_restricted_refuses():
    engine_like = {"spec": {"hostIPC": True, "containers": [{"name": "vllm", "securityContext": {
        "capabilities": {"drop": ["ALL"], "add": ["SYS_PTRACE"]}, "seccompProfile": {"type": "Unconfined"}}}]}}  # fmt: skip
    problems = restricted_violations(engine_like)
    assert "host namespace hostIPC" in problems and any("SYS_PTRACE" in p for p in problems)
    assert any("seccomp Unconfined" in p for p in problems) and any("runAsNonRoot" in p for p in problems)
