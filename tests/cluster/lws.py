"""The LeaderWorkerSet controller, started when a stack's `lws` release is installed (the plan's
multi-node and P/D-over-fabric stacks): the manager built from sigs.k8s.io/lws (tests/cluster/
build.py) runs on loopback with the test CA's serving certificate, and its webhooks (from the
module's config/webhook/manifests.yaml, with the pod webhooks limited to LWS pods as its
kustomize patches do) call it by URL instead of through a Service, which a cluster without
kube-proxy could not route."""

from __future__ import annotations

import base64
import shutil
import time
from pathlib import Path

import yaml

from tests.cluster import build, versions
from tests.cluster.control_plane import ControlPlane, Proc, free_port
from tests.cluster.crds import module_dir

POD_SELECTOR = {"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]}


def webhook_configurations(ca: Path, port: int) -> list[dict]:
    root = module_dir("sigs.k8s.io/lws", versions.LWS)
    docs = [d for d in yaml.safe_load_all((root / "config/webhook/manifests.yaml").read_text()) if d]
    bundle = base64.b64encode(ca.read_bytes()).decode()
    for doc in docs:
        doc["metadata"]["name"] = "lws-" + doc["metadata"]["name"]
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
            if hook["rules"][0]["resources"] == ["pods"]:
                hook["objectSelector"] = POD_SELECTOR
            hook["timeoutSeconds"] = 10
    return docs


def start(cp: ControlPlane, applier) -> Proc:
    """The manager (ready to serve its webhooks) and its webhook configurations."""
    build.build(build.TOOLS["lws"])  # built on first need (a no-op when scripts/build_control_plane.sh ran)
    work = cp.workdir / "lws"
    certs = work / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copy(cp.pki.serving_cert, certs / "tls.crt")
    shutil.copy(cp.pki.serving_key, certs / "tls.key")
    port, health = free_port(), free_port()
    config = {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
        "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(certs)},
        "metrics": {"bindAddress": "0"}, "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
    }  # fmt: skip
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    proc = cp.start("lws-manager", [str(build.binary("lws", "lws-manager")), "--config", str(work / "config.yaml"),
                                    "--kubeconfig", str(cp.kubeconfig)])  # fmt: skip
    _wait_ready(cp, proc, health)
    for doc in webhook_configurations(cp.pki.ca, port):
        applier.apply(doc)
    return proc


def _wait_ready(cp: ControlPlane, proc: Proc, health: int, timeout: float = 90) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cp.check_alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=2) as resp:  # noqa: S310 - loopback
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"lws-manager not ready after {timeout} s\n{cp.logs()}")


def stop(cp: ControlPlane, proc: Proc, applier) -> None:
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        res = applier.dyn.resources.get(api_version="admissionregistration.k8s.io/v1", kind=kind)
        for item in res.get().items:
            if item.metadata.name.startswith("lws-"):
                res.delete(name=item.metadata.name)
    proc.popen.terminate()
    proc.popen.wait(timeout=20)
    cp.procs.remove(proc)
