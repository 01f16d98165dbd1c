"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (node heartbeats, pod status), each a process of its own with its log in
a file; the LeaderWorkerSet controller joins when a test needs it (tests/cluster/lws.py).

Admission: DigitalOcean does not publish the plugin list of DOKS's API server (its docs say only
that the admission controllers are managed and cannot be changed), so the API server runs the
upstream 1.33 default set — PodSecurity among them, with the upstream cluster default
(`privileged`: a namespace's own pod-security labels decide) — plus NodeRestriction, which every
kubeadm-style cluster adds. ExtendedResourceToleration (which would add GPU tolerations by
itself) is left off: a GPU pod must carry its toleration, as on a cluster without it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster import build
from tests.cluster.pki import Pki, kubeconfig, make_pki

# DOKS defaults (infra/catalog/doks.py): pod and service networks.
SERVICE_CIDR = "10.245.0.0/16"
POD_CIDR = "10.244.0.0/16"
KUBERNETES_SERVICE_IP = "10.245.0.1"  # the first address of SERVICE_CIDR: the `kubernetes` Service
ADMISSION_PLUGINS = (
    "NamespaceLifecycle", "LimitRanger", "ServiceAccount", "NodeRestriction", "TaintNodesByCondition",
    "PodSecurity", "Priority", "DefaultTolerationSeconds", "DefaultStorageClass", "StorageObjectInUseProtection",
    "PersistentVolumeClaimResize", "RuntimeClass", "CertificateApproval", "CertificateSigning",
    "ClusterTrustBundleAttest", "CertificateSubjectRestriction", "DefaultIngressClass", "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota",
)  # fmt: skip
POD_SECURITY_CONFIG = """apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults: {enforce: privileged, enforce-version: latest, audit: privileged, warn: privileged}
    exemptions: {usernames: [], runtimeClasses: [], namespaces: []}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path


@dataclass
class ControlPlane:
    """The running processes, their logs, and how to reach the API server."""

    workdir: Path
    pki: Pki
    server: str = ""
    kubeconfig: Path = Path()
    procs: list[Proc] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        log = self.workdir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = open(log, "ab")  # noqa: SIM115 - closed with the process
        popen = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=self.workdir,
                                 env={**os.environ, **(env or {})}, start_new_session=True)  # fmt: skip
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def check_alive(self) -> None:
        dead = [p for p in self.procs if p.popen.poll() is not None]
        if dead:
            raise RuntimeError("control-plane process exited: " + "; ".join(
                f"{p.name} (exit {p.popen.returncode}): {tail(p.log, 15)}" for p in dead))

    def logs(self, lines: int = 40) -> str:
        """The tail of every process's log, for a failing test's report."""
        return "\n".join(f"--- {p.name} ({p.log}) ---\n{tail(p.log, lines)}" for p in self.procs)

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.popen.poll() is None:
                p.popen.terminate()
        for p in reversed(self.procs):
            try:
                p.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.popen.wait(timeout=10)


def tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait(what: str, ok, cp: ControlPlane, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cp.check_alive()
        try:
            if ok():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s\n{cp.logs()}")


def _healthy(url: str, ca: Path, token: str) -> bool:
    import ssl
    import urllib.request

    ctx = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:  # noqa: S310 - loopback
        return resp.status == 200


def start_control_plane(workdir: Path, *, address: str = "127.0.0.1", nodes: tuple[str, ...] = (),
                        kwok: bool = True) -> ControlPlane:  # fmt: skip
    """etcd → kube-apiserver (ready) → controller-manager, scheduler, kwok. The caller stops it.

    tests/node passes the node's `address` (the API server listens and advertises there, so pods
    reach it through the `kubernetes` Service), the kubelets' `nodes` (each gets a token) and
    kwok=False (a real kubelet keeps its own node; kwok would mark every pod Ready itself)."""
    workdir.mkdir(parents=True, exist_ok=True)
    extra_ips = (address, KUBERNETES_SERVICE_IP) if address != "127.0.0.1" else ()
    pki = make_pki(workdir / "pki", ips=extra_ips, nodes=nodes)
    cp = ControlPlane(workdir, pki)
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    try:
        cp.start("etcd", [
            str(build.binary("etcd")), "--data-dir", str(workdir / "etcd"), "--listen-client-urls", etcd_url,
            "--advertise-client-urls", etcd_url, "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer_port}", "--unsafe-no-fsync",
            "--quota-backend-bytes", str(2 * 2**30), "--log-level", "warn",
        ])  # fmt: skip
        admission = workdir / "admission.yaml"
        admission.write_text(POD_SECURITY_CONFIG)
        cp.server = f"https://{address}:{api_port}"
        cp.start("kube-apiserver", [
            str(build.binary("kubernetes", "kube-apiserver")), "--etcd-servers", etcd_url,
            "--bind-address", address, "--advertise-address", address, "--secure-port", str(api_port),
            "--tls-cert-file", str(pki.serving_cert), "--tls-private-key-file", str(pki.serving_key),
            "--client-ca-file", str(pki.ca), "--token-auth-file", str(pki.token_file),
            "--authorization-mode", "Node,RBAC", "--allow-privileged=true",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(pki.sa_pub), "--service-account-signing-key-file", str(pki.sa_key),
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--enable-admission-plugins", ",".join(ADMISSION_PLUGINS), "--admission-control-config-file", str(admission),
            "--profiling=false", "--v=1",
        ])  # fmt: skip
        _wait("kube-apiserver", lambda: _healthy(cp.server + "/readyz", pki.ca, pki.admin_token), cp, 120)
        cp.kubeconfig = kubeconfig(pki, cp.server, workdir / "admin.kubeconfig")
        kc = str(cp.kubeconfig)
        cp.start("kube-controller-manager", [
            str(build.binary("kubernetes", "kube-controller-manager")), "--kubeconfig", kc,
            "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc, "--authentication-skip-lookup",
            "--service-account-private-key-file", str(pki.sa_key), "--root-ca-file", str(pki.ca),
            "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
            "--controllers", "*", "--concurrent-deployment-syncs", "10", "--concurrent-replicaset-syncs", "10",
            "--kube-api-qps", "200", "--kube-api-burst", "400", "--v=1",
        ])  # fmt: skip
        cp.start("kube-scheduler", [
            str(build.binary("kubernetes", "kube-scheduler")), "--kubeconfig", kc,
            "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc, "--authentication-skip-lookup",
            "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
            "--kube-api-qps", "200", "--kube-api-burst", "400", "--v=1",
        ])  # fmt: skip
        if kwok:
            cp.start("kwok", [
                str(build.binary("kwok")), "--kubeconfig", kc, "--manage-all-nodes=true", "--cidr", POD_CIDR,
                "--node-lease-duration-seconds", "40", "--server-address", f"127.0.0.1:{free_port()}",
            ], env={"HOME": str(workdir)})  # fmt: skip
        time.sleep(1)
        cp.check_alive()
    except BaseException:
        cp.stop()
        raise
    return cp
