"""The registrar's decisions (pure): which engines the router should have, and what to change."""

from __future__ import annotations

import ast

from infra.render import router_registrar as reg


def _slice(addresses, *, ready=True, port=8000, name="http", family="IPv4"):
    return {
        "addressType": family,
        "ports": [{"name": name, "port": port}],
        "endpoints": [{"addresses": [a], "conditions": {"ready": ready}} for a in addresses],
    }


def test_ready_urls_keep_ready_endpoints_only():
    slices = [
        _slice(["10.0.0.1", "10.0.0.2"]),
        _slice(["10.0.0.3"], ready=False),  # terminating or failing readiness
        {"addressType": "IPv4", "ports": [{"name": "http", "port": 8000}], "endpoints": [{"addresses": ["10.0.0.4"]}]},
        _slice(["10.0.0.5"], name="metrics"),  # not the engine port
        _slice(["engine.example"], family="FQDN"),
        _slice(["fd00::1"], family="IPv6"),
    ]
    assert reg.ready_urls(slices) == [
        "http://10.0.0.1:8000", "http://10.0.0.2:8000", "http://10.0.0.4:8000", "http://[fd00::1]:8000",
    ]  # fmt: skip


def test_reconcile_adds_missing_removes_gone_and_refiles_a_reused_ip():
    desired = {"http://a:8000": "llama", "http://b:8000": "llama", "http://c:8000": "mixtral"}
    registered = {"http://a:8000": "llama", "http://c:8000": "llama", "http://gone:8000": "llama"}
    actions = reg.reconcile(desired, registered)
    assert actions.remove == ("http://c:8000", "http://gone:8000")
    assert actions.add == (("http://b:8000", "llama"), ("http://c:8000", "mixtral"))
    assert reg.reconcile(desired, desired).empty


def test_a_worker_the_router_filed_as_unknown_is_replaced():
    actions = reg.reconcile({"http://a:8000": "llama"}, {"http://a:8000": "unknown"})
    assert actions.remove == ("http://a:8000",) and actions.add == (("http://a:8000", "llama"),)


def test_router_listing_and_model_arguments():
    listing = {"workers": [{"url": "http://a:8000", "model_id": "llama"}, {"url": "http://b:8000"}], "total": 2}
    assert reg.registered_workers(listing) == {"http://a:8000": "llama", "http://b:8000": "unknown"}
    assert reg.parse_models(["Qwen/Qwen3-30B=qwen3-30b"]) == {"Qwen/Qwen3-30B": "qwen3-30b"}


def test_registrar_is_stdlib_only():
    """It runs from a ConfigMap on the plain Python image: nothing but the standard library."""
    import sys

    tree = ast.parse(reg.__loader__.get_source(reg.__name__))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
    assert imported - {"__future__"} <= sys.stdlib_module_names, imported


def test_sigterm_stops_the_registrar_at_once(tmp_path):
    """PID 1 of a container gets no default action for SIGTERM, so without its own handler the
    registrar ignored the kubelet's stop signal and each router pod waited out its 300 s grace
    period (seen under a real kubelet, tests/node). Here (not PID 1) the handler shows as exit 0
    instead of death by the signal."""
    import signal
    import subprocess
    import sys
    import time

    token = tmp_path / "token"
    token.write_text("t")
    proc = subprocess.Popen([sys.executable, reg.__file__, "--router", "http://127.0.0.1:9", "--namespace", "ns",
                             "--model", "m=s", "--interval", "60", "--api-server", "https://127.0.0.1:9",
                             "--token-file", str(token), "--ca-file", ""],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    assert proc.stdout is not None
    assert "registrar:" in proc.stdout.readline()  # the handler is in place before this line
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
