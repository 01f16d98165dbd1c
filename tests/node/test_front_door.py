"""Stage 3 of issue 40: the front door (router, registrar, client proxy) and one engine pod of the
node test stack, as `infra plan --out` renders them, under a real kubelet (tests/node/stack.py lists
every change made to them, and the first test shows there is no other).

The pods become Ready through their own probes; the registrar, reaching the API server through
the `kubernetes` Service, files the engine with the router; a chat request with a client key
through the router Service's endpoint (and its ClusterIP, routed by kube-proxy) gets an answer, one
without a key gets 401; each container runs with the user, capabilities, no_new_privs, seccomp
mode and read-only root its securityContext renders. The last test reverts the router's probe to
the form main had before issue 35 (an HTTP probe on the client proxy's named port, which the router
container does not declare) and shows the pod never becomes Ready: the class of defect this layer
exists to catch.
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from dataclasses import dataclass

import pytest

from tests.node import runtime, stack
from tests.node.node import Node, http, in_pod_network, process_status, wait

ROUTER_READY_S = 300  # vllm-router's installer (pip from PyPI), then the router
ENGINE_READY_S = 1500  # the compile-cache warm-up engine, then the engine: two CPU vLLM starts on 2 cores
ORDER = ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Secret", "Service", "PodDisruptionBudget",
         "Deployment")  # fmt: skip
CAP_SYS_RESOURCE = 24


@dataclass
class Deployed:
    rendered: list[dict]
    applied: list[dict]
    changes: list[str]
    keys: dict[str, str]
    seconds: dict[str, float]


def _ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def _pods(node: Node, namespace: str, selector: str = "") -> list[dict]:
    path = f"/api/v1/namespaces/{namespace}/pods" + (f"?labelSelector={selector}" if selector else "")
    return node.api("GET", path)["items"]


def _all_ready(node: Node, namespace: str, selector: str):
    pods = _pods(node, namespace, selector)
    return pods if pods and all(_ready(p) for p in pods) else None


@pytest.fixture(scope="module")
def deployed(node, image, tmp_path_factory) -> Deployed:
    seconds = {}
    for name in ("pause", "python", "nginx", "vllm"):
        seconds[f"image {name} import"] = image(name)["import_seconds"]
    rendered = stack.render(tmp_path_factory.mktemp("stack"))
    keys = stack.keys()
    applied, changes = stack.for_node(rendered, keys)
    print("changes to the rendered objects:\n  " + "\n  ".join(changes))
    ordered = sorted(applied, key=lambda o: ORDER.index(o["kind"]))
    for obj in ordered:  # the node's compile cache (a hostPath) starts empty: every run warms it up
        for volume in obj["spec"].get("template", {}).get("spec", {}).get("volumes", []) if obj["kind"] == "Deployment" else []:
            if "hostPath" in volume and volume["hostPath"]["path"].startswith("/var/lib/inference-platform/"):
                shutil.rmtree(volume["hostPath"]["path"], ignore_errors=True)
    start = time.monotonic()
    node.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": ordered}))
    wait("the router pod Ready", lambda: _all_ready(node, "inference", "app.kubernetes.io/name=router"), node, ROUTER_READY_S, 3)
    seconds["router Ready after apply"] = round(time.monotonic() - start, 1)
    wait("the engine pod Ready", lambda: _all_ready(node, "inference-engines", "app.kubernetes.io/name=vllm"), node, ENGINE_READY_S, 5)
    seconds["engine Ready after apply"] = round(time.monotonic() - start, 1)
    print(json.dumps(seconds))
    return Deployed(rendered, applied, changes, keys, seconds)


def _diff(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _diff(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def test_only_the_listed_changes_are_made(deployed):
    """Every difference between what was rendered and what was applied is a listed swap: GPU
    requests, the engine's size, its node selector, the Secrets' values."""
    allowed = ("amd.com/gpu", ".cpu", ".memory", ".nodeSelector.doks.digitalocean.com/node-pool", ".stringData")
    by_key = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in deployed.rendered}
    for obj in deployed.applied:
        diffs = _diff(by_key[(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])], obj)
        unlisted = [d for d in diffs if not any(a in d for a in allowed)]
        assert not unlisted, f"{obj['kind']}/{obj['metadata']['name']}: unlisted changes {unlisted}"
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "router":
            assert diffs == [], "the front door is applied exactly as rendered"


def test_every_pod_is_ready_through_its_own_probes(node, deployed):
    for namespace, selector in (("inference", "app.kubernetes.io/name=router"), ("inference-engines", "app.kubernetes.io/name=vllm")):
        for pod in _pods(node, namespace, selector):
            statuses = pod["status"]["containerStatuses"]
            assert all(s["ready"] for s in statuses), statuses
            probed = [c["name"] for c in pod["spec"]["containers"] if c.get("readinessProbe")]
            assert probed, f"{pod['metadata']['name']}: no container has a readiness probe"
            inits = pod["status"].get("initContainerStatuses", [])
            assert all(s["state"].get("terminated", {}).get("exitCode") == 0 for s in inits), inits


def _router_pid(node: Node) -> int:
    found = [c for c in runtime.containers(node.workdir) if c["namespace"] == "inference" and c["container"] == "router"]
    assert found, "no running router container"
    return found[0]["pid"]


def _engine_url(node: Node) -> str:
    pod = _pods(node, "inference-engines", "app.kubernetes.io/name=vllm")[0]
    return f"http://{pod['status']['podIP']}:8000"


def test_the_registrar_files_the_engine_with_the_router(node, deployed):
    want = _engine_url(node)

    def registered():
        status, body = in_pod_network(_router_pid(node), "http://127.0.0.1:8001/workers")
        return body if status == 200 and want in body else None

    body = wait("the engine registered with the router", registered, node, 60, 2)
    assert stack.images.MODEL_SOURCE in body


def _router_endpoint(node: Node) -> str:
    slices = node.api("GET", "/apis/discovery.k8s.io/v1/namespaces/inference/endpointslices?labelSelector=kubernetes.io/service-name=router")
    (s,) = slices["items"]
    ready = [e["addresses"][0] for e in s["endpoints"] if e.get("conditions", {}).get("ready")]
    assert ready, s
    return f"http://{ready[0]}:{s['ports'][0]['port']}"


CHAT = {"model": stack.images.MODEL_SOURCE, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8}


def test_a_request_with_a_client_key_is_answered(node, deployed):
    auth = {"Authorization": f"Bearer {deployed.keys['client']}"}
    status, body = http(_router_endpoint(node) + "/v1/chat/completions", "POST", CHAT, auth)
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"] is not None
    cluster_ip = node.api("GET", "/api/v1/namespaces/inference/services/router")["spec"]["clusterIP"]
    status, body = http(f"http://{cluster_ip}/v1/chat/completions", "POST", CHAT, auth)  # kube-proxy's route
    assert status == 200, body


def test_a_request_without_a_key_is_refused(node, deployed):
    url = _router_endpoint(node) + "/v1/chat/completions"
    assert http(url, "POST", CHAT)[0] == 401
    assert http(url, "POST", CHAT, {"Authorization": f"Bearer {deployed.keys['engine']}"})[0] == 401  # the engine key is no client key


def test_the_security_context_holds(node, deployed):
    """What the kernel reports for each running container against its rendered securityContext."""
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for ns in ("inference", "inference-engines") for p in _pods(node, ns)}
    checked = []
    for c in runtime.containers(node.workdir):
        pod = pods.get((c["namespace"], c["pod"]))
        if pod is None:
            continue
        spec = next(x for x in pod["spec"]["containers"] if x["name"] == c["container"])
        ctx = {**pod["spec"].get("securityContext", {}), **spec.get("securityContext", {})}
        got = process_status(c["pid"])
        where = f"{c['namespace']}/{c['pod']}/{c['container']}"
        assert got["uid"] == ctx.get("runAsUser", 0), (where, got)
        if "runAsGroup" in ctx:
            assert got["gid"] == ctx["runAsGroup"], (where, got)
        if ctx.get("capabilities", {}).get("drop") == ["ALL"]:
            assert got["cap_eff"] == 0 and got["cap_bnd"] == 0, (where, got)
        if ctx.get("allowPrivilegeEscalation") is False:
            assert got["no_new_privs"] == 1, (where, got)
        seccomp = ctx.get("seccompProfile", {}).get("type")
        assert got["seccomp"] == {"RuntimeDefault": 2, "Unconfined": 0}.get(seccomp, got["seccomp"]), (where, got)
        assert got["root_read_only"] == bool(ctx.get("readOnlyRootFilesystem")), (where, got)
        checked.append(where)
    assert len(checked) == 4, checked  # router, registrar, client-proxy, vllm


def test_the_router_pod_stops_promptly(node, deployed):
    """Scaling the router to 0: the pod is gone within its preStop sleep and the proxy's graceful
    stop, not after its 300 s grace period (the registrar, PID 1 of its container, ignored SIGTERM
    until it installed a handler). Also makes room for the next test on this 2-core node."""
    start = time.monotonic()
    node.kubectl("scale", "deployment/router", "-n", "inference", "--replicas=0")
    wait("the router pod gone", lambda: not _pods(node, "inference", "app.kubernetes.io/name=router"), node, 120, 1)
    seconds = time.monotonic() - start
    print(f"router pod gone {seconds:.0f} s after the scale-down")
    assert seconds < 60


def test_a_router_probe_on_a_port_the_router_does_not_declare_never_turns_ready(node, deployed):
    """Main before issue 35 probed the router with `httpGet /health` on port `http`: the client
    proxy's port, not the router's (which declares only `metrics`). The kubelet resolves a named
    port in the probed container alone, so the probe cannot succeed. Here the rendered router pod,
    with only that probe reverted, runs beside nothing else (the router Deployment is scaled to 0
    first: the node has 2 cores) and must stay unready while its containers all run. The kubelet
    says why: `Readiness probe errored and resulted in unknown state: strconv.Atoi: parsing "http":
    invalid syntax` (the name is not in the container's ports)."""
    router = stack.pick(deployed.applied, "Deployment", "router")
    node.kubectl("scale", "deployment/router", "-n", "inference", "--replicas=0")
    node.kubectl("delete", "pods", "-n", "inference", "-l", "app.kubernetes.io/name=router", "--grace-period=1")
    spec = copy.deepcopy(router["spec"]["template"]["spec"])
    container = next(c for c in spec["containers"] if c["name"] == "router")
    assert "http" not in [p.get("name") for p in container.get("ports", [])]
    container["readinessProbe"] = {"httpGet": {"path": "/health", "port": "http"}, "timeoutSeconds": 5, "periodSeconds": 5,
                                   "failureThreshold": 3}  # fmt: skip
    labels = {**router["spec"]["template"]["metadata"]["labels"], "node-test": "probe-defect"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "router-probe-defect", "namespace": "inference", "labels": labels}, "spec": spec}
    node.kubectl("apply", "-f", "-", stdin=json.dumps(pod))

    def all_running():
        got = node.api("GET", "/api/v1/namespaces/inference/pods/router-probe-defect")
        statuses = got["status"].get("containerStatuses", [])
        return got if statuses and all("running" in s["state"] for s in statuses) else None

    wait("the reverted pod's containers running", all_running, node, ROUTER_READY_S, 3)
    time.sleep(45)  # nine probe periods: the real router turned Ready within seconds of starting
    got = node.api("GET", "/api/v1/namespaces/inference/pods/router-probe-defect")
    router_status = next(s for s in got["status"]["containerStatuses"] if s["name"] == "router")
    assert not _ready(got) and not router_status["ready"], got["status"]
    events = node.api("GET", "/api/v1/namespaces/inference/events?fieldSelector=involvedObject.name=router-probe-defect")
    messages = [e["message"] for e in events["items"] if e["reason"] == "Unhealthy"]
    print("\n".join(messages))
    assert any("Readiness probe" in m for m in messages), [e["message"] for e in events["items"]]
    node.kubectl("delete", "pod", "router-probe-defect", "-n", "inference", "--grace-period=1")
