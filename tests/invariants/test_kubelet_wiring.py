"""Issue 35 item 1: pod wiring as the kubelet resolves it (infra/invariants/kubelet.py).

Each check on a small object list (one finding, its message), the router's real probes, and every
shipped stack and scanned variant wired the way a node will run it."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from infra.catalog import versions
from infra.catalog.images import executables_of
from infra.config.stack import load_stack_file
from infra.invariants.keypaths import KeyPaths
from infra.invariants.kubelet import check_kubelet_wiring, object_keys
from infra.invariants.wiring import check_selectors
from infra.offline import kubernetes_objects
from infra.render.router import ROUTER_PORT, RoutedModel, RouterSpec, loopback_probe, render_router
from tests.conftest import ROOT
from tests.security_variants import NAMES, plan_named


def _paths():
    return KeyPaths(load_stack_file("dev", ROOT))


def _deployment(containers, volumes=(), namespace="inference", labels=None):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": namespace},
            "spec": {"replicas": 1, "template": {"metadata": {"labels": labels or {"app": "d"}},
                                                 "spec": {"containers": list(containers), "volumes": list(volumes)}}}}  # fmt: skip


def _messages(objects) -> list[str]:
    return [p.message for p in check_kubelet_wiring(objects, _paths())]


def test_a_probe_on_a_port_only_a_sidecar_declares_is_refused():
    """The finding of issue 35: the kubelet resolves `port: http` in the probed container only."""
    main = {"name": "app", "image": "x", "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}}}
    sidecar = {"name": "proxy", "image": "x", "ports": [{"name": "http", "containerPort": 8000}]}
    (message,) = _messages([_deployment([main, sidecar])])
    assert "readinessProbe uses port 'http', which container 'app' does not declare (only proxy declares it)" in message
    main["ports"] = [{"name": "http", "containerPort": 8000}]
    assert _messages([_deployment([main, sidecar])]) == []


def test_tcp_socket_probes_and_lifecycle_hooks_resolve_their_named_ports_too():
    c = {"name": "app", "image": "x", "livenessProbe": {"tcpSocket": {"port": "grpc"}},
         "lifecycle": {"preStop": {"httpGet": {"path": "/drain", "port": "admin"}}}}  # fmt: skip
    messages = _messages([_deployment([c])])
    assert len(messages) == 2 and "'grpc'" in messages[0] and "lifecycle.preStop" in messages[1]
    c["livenessProbe"] = {"tcpSocket": {"port": 8080}}  # a number needs no declaration
    assert len(_messages([_deployment([c])])) == 1


def _secret(name, keys=None, annotation=None, namespace="inference"):
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}, "stringData": {}}
    if keys is not None:
        obj["stringData"] = dict.fromkeys(keys, "x")
    if annotation is not None:
        obj["metadata"]["annotations"] = {"inference-platform/keys": annotation}
    return obj


def test_env_keys_must_be_in_the_secret_or_config_map_the_plan_renders():
    c = {"name": "app", "image": "x", "env": [
        {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "api-key"}}},
        {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "mode"}}},
        {"name": "C", "valueFrom": {"secretKeyRef": {"name": "s", "key": "maybe", "optional": True}}},
    ]}  # fmt: skip
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "inference"}, "data": {"mode": "on"}}
    assert _messages([_deployment([c]), _secret("s", annotation="api-key"), cm]) == []
    (message,) = _messages([_deployment([c]), _secret("s", annotation="token"), cm])
    assert "env A needs key 'api-key' of Secret inference/s, which holds token" in message
    cm["data"] = {"other": "x"}
    assert any("key 'mode' of ConfigMap inference/cm" in m for m in _messages([_deployment([c]), _secret("s", ["api-key"]), cm]))
    # Keys the plan does not know (a redacted Secret without the annotation): not judged.
    assert _messages([_deployment([c]), _secret("s"), {**cm, "data": {"mode": "on"}}]) == []


def test_mounted_items_must_name_keys_the_object_holds():
    vols = [{"name": "v", "secret": {"secretName": "s", "items": [{"key": "tls.crt", "path": "crt"}]}},
            {"name": "p", "projected": {"sources": [{"configMap": {"name": "cm", "items": [{"key": "ca.crt", "path": "ca"}]}}]}}]  # fmt: skip
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "inference"}, "data": {"ca.crt": "x"}}
    c = {"name": "app", "image": "x"}
    assert _messages([_deployment([c], vols), _secret("s", ["tls.crt"]), cm]) == []
    (message,) = _messages([_deployment([c], vols), _secret("s", ["tls.key"]), cm])
    assert "volume 'v' needs key 'tls.crt' of Secret inference/s" in message


def test_exec_commands_must_exist_in_images_the_catalog_knows():
    probe = {"exec": {"command": ["curl", "-f", "http://127.0.0.1/health"]}}
    c = {"name": "app", "image": versions.ROUTER_BASE_IMAGE, "livenessProbe": probe}
    (message,) = _messages([_deployment([c])])
    assert "livenessProbe runs 'curl', which image python:3.12-slim-bookworm does not have" in message
    c["image"] = "example.com/unknown:1"  # not in the catalog: not judged
    assert _messages([_deployment([c])]) == []
    c = {"name": "app", "image": versions.BUSYBOX_IMAGE, "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}}}
    assert _messages([_deployment([c])]) == []
    assert executables_of(versions.PAUSE_IMAGE) == frozenset({"/pause"})


def test_a_service_target_port_name_must_be_declared_by_the_pods_it_selects():
    pod = _deployment([{"name": "app", "image": "x", "ports": [{"name": "web", "containerPort": 80}]}])
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "inference"},
           "spec": {"selector": {"app": "d"}, "ports": [{"port": 80, "targetPort": "http"}]}}  # fmt: skip
    (problem,) = check_selectors([pod, svc], _paths())
    assert "sends to port 'http'" in problem.message


def test_object_keys_reads_data_and_the_annotation_and_knows_when_it_does_not_know():
    assert object_keys(_secret("s", ["a"], annotation="b")) == {"a", "b"}
    assert object_keys(_secret("s")) is None
    assert object_keys({"kind": "ConfigMap", "data": {}}) == frozenset()


def test_the_router_probes_resolve_in_their_own_containers():
    """The fixed router (issue 35): both probed containers resolve their probes."""
    objects = render_router(RouterSpec(models=(RoutedModel("m", "M"),), client_key_names=("default",)))
    assert _messages(objects) == []


def test_the_router_exec_probe_asks_the_loopback_router_and_fails_when_it_does_not_answer(tmp_path):
    """The exec command, run as the kubelet would (the image's Python), against a stub on a free
    port standing in for the router's 127.0.0.1:8001: 0 on 200, non-zero on 503 and on no server."""
    status = {"code": 200}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(status["code"])
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        command = [a.replace(f":{ROUTER_PORT}/", f":{server.server_address[1]}/") for a in loopback_probe("/readiness")]
        assert command[0] == "python" and command[0] in executables_of(versions.ROUTER_BASE_IMAGE)
        run = [sys.executable, *command[1:]]
        assert subprocess.run(run, capture_output=True, timeout=30).returncode == 0
        status["code"] = 503
        assert subprocess.run(run, capture_output=True, timeout=30).returncode != 0
    finally:
        server.shutdown()
        server.server_close()
    assert subprocess.run(run, capture_output=True, timeout=30).returncode != 0


@pytest.mark.parametrize("name", NAMES)
def test_every_stack_and_variant_is_wired_as_the_kubelet_resolves_it(name, tmp_path):
    """The plan itself enforces the invariant (a plan that breaks it does not build); here it is
    asserted directly over every pod template, and the Secrets the pods read carry their keys."""
    plan = plan_named(name, tmp_path)
    objects = kubernetes_objects(plan)
    assert check_kubelet_wiring(objects, _paths()) == []
    secrets = [o for o in objects if o["kind"] == "Secret" and o["metadata"].get("namespace", "").startswith("inference")]
    assert secrets and all(object_keys(s) for s in secrets), [s["metadata"]["name"] for s in secrets if not object_keys(s)]
