"""A one-node cluster on this machine: the control plane of tests/cluster (no kwok), containerd
(tests/node/runtime.py), a kubelet and kube-proxy built from the same Kubernetes release.

The node's address: NODE_IP/32 added to the loopback interface for the run (this kernel has no
`dummy` link type: "ip link add ... type dummy: Error: Unknown device type"). The API server
listens and advertises there, so the `kubernetes` Service's endpoint is an address pods can reach
(127.0.0.1 inside a pod is the pod); the kubelet reports it as the node's InternalIP. kube-proxy
(iptables mode) routes ClusterIPs, which the router's registrar needs: it reaches the API server
at the `kubernetes` Service as any in-cluster client does.

The kubelet: cgroupfs driver (cgroup v1, no systemd), token authentication as
`system:node:<name>` (the Node authorizer and NodeRestriction apply), swap allowed, image garbage
collection off (the stand-in images are imported once), no cluster DNS (pods get the machine's
resolver: nothing here resolves Service names; the plan's pods use addresses and the API server's
Service environment). Pod logs go to files under the run's directory; a failing test prints them.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.cluster import build
from tests.cluster.control_plane import POD_CIDR, ControlPlane, free_port, start_control_plane, tail
from tests.cluster.pki import kubeconfig
from tests.node import runtime

NODE_NAME = "node-0"
NODE_IP = "10.250.0.1"


@dataclass
class Node:
    cp: ControlPlane
    workdir: Path
    name: str = NODE_NAME

    # --- API --------------------------------------------------------------------------------
    def api(
        self, method: str, path: str, body: dict | None = None, content_type: str = "application/json"
    ) -> dict:
        ctx = ssl.create_default_context(cafile=str(self.cp.pki.ca))
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.cp.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.cp.pki.admin_token}", "Content-Type": content_type, "Accept": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:  # noqa: S310 - the test API server
            return json.loads(resp.read() or b"{}")

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(["kubectl", "--kubeconfig", str(self.cp.kubeconfig), *args], input=stdin, capture_output=True,
                              text=True, check=False, timeout=120)  # fmt: skip
        if check and proc.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def node_ready(self) -> bool:
        node = self.api("GET", f"/api/v1/nodes/{self.name}")
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in node.get("status", {}).get("conditions", [])
        )

    def pod_logs(self, lines: int = 30) -> str:
        """The tail of every container log the kubelet wrote (pod logs directory)."""
        out = []
        for log in sorted((self.workdir / "pod-logs").glob("*/*/*.log")):
            out.append(f"--- {log.relative_to(self.workdir / 'pod-logs')} ---\n{tail(log, lines)}")
        return "\n".join(out)


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and proc.returncode:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()}")
    return proc


def add_node_address() -> None:
    _sh("ip", "addr", "del", f"{NODE_IP}/32", "dev", "lo", check=False)
    _sh("ip", "addr", "add", f"{NODE_IP}/32", "dev", "lo")


def remove_node_network() -> None:
    """The node address and the CNI bridge go with the run."""
    _sh("ip", "addr", "del", f"{NODE_IP}/32", "dev", "lo", check=False)
    _sh("ip", "link", "del", runtime.BRIDGE, check=False)


def kubelet_config(node: Node, port: int, healthz: int) -> dict:
    pki = node.cp.pki
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs", "containerRuntimeEndpoint": f"unix://{node.workdir / 'containerd.sock'}",
        "address": NODE_IP, "port": port, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1", "healthzPort": healthz,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(pki.ca)}},
        "authorization": {"mode": "Webhook"},
        "failSwapOn": False, "resolvConf": "/etc/resolv.conf",
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%", "imagefs.available": "2%", "nodefs.inodesFree": "2%"},
        "serializeImagePulls": False, "podLogsDir": str(node.workdir / "pod-logs"),
        "nodeStatusUpdateFrequency": "4s", "syncFrequency": "10s", "fileCheckFrequency": "10s",
        "containerLogMaxSize": "50Mi", "maxPods": 30,
    }  # fmt: skip


def start_kubelet(node: Node, labels: dict[str, str]) -> None:
    cp, work = node.cp, node.workdir
    kc = kubeconfig(cp.pki, cp.server, work / "kubelet.kubeconfig", token=cp.pki.node_tokens[node.name])
    config = work / "kubelet.yaml"
    config.write_text(json.dumps(kubelet_config(node, free_port(), free_port()), indent=1))
    cp.start("kubelet", [
        str(build.binary("kubernetes", "kubelet")), "--config", str(config), "--kubeconfig", str(kc),
        "--root-dir", str(work / "kubelet"), "--cert-dir", str(work / "kubelet-pki"), "--hostname-override", node.name,
        "--node-ip", NODE_IP, "--node-labels", ",".join(f"{k}={v}" for k, v in labels.items()), "--v=2",
    ])  # fmt: skip


def start_kube_proxy(node: Node) -> None:
    cp = node.cp
    config = node.workdir / "kube-proxy.yaml"
    config.write_text(json.dumps({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration", "mode": "iptables",
        "clientConnection": {"kubeconfig": str(cp.kubeconfig)}, "clusterCIDR": POD_CIDR, "hostnameOverride": node.name,
        "bindAddress": NODE_IP, "healthzBindAddress": f"127.0.0.1:{free_port()}", "metricsBindAddress": f"127.0.0.1:{free_port()}",
        "conntrack": {"maxPerCore": 0, "min": 0},  # leave the machine's conntrack table as it is
    }, indent=1))  # fmt: skip
    cp.start("kube-proxy", [str(build.binary("kubernetes", "kube-proxy")), "--config", str(config), "--v=1"])


def wait(what: str, ok, node: Node, timeout: float, every: float = 1.0):
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        node.cp.check_alive()
        try:
            if result := ok():
                return result
        except Exception as err:  # noqa: BLE001 - not there yet
            last = err
        time.sleep(every)
    raise AssertionError(
        f"{what}: not within {timeout:.0f} s (last error: {last})\n{node.cp.logs()}\n{node.pod_logs()}"
    )


def start_node(workdir: Path, labels: dict[str, str]) -> Node:
    """Control plane → containerd → kubelet and kube-proxy; returns once the Node is Ready."""
    for tool, wanted in build.parse(
        ["etcd", "kubernetes:kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kube-proxy"]
    ):
        build.build(tool, wanted)
    add_node_address()
    _sh("sysctl", "-w", "net.ipv4.ip_forward=1")
    cp = start_control_plane(workdir / "control-plane", address=NODE_IP, nodes=(NODE_NAME,), kwok=False)
    node = Node(cp, workdir)
    try:
        runtime.start_containerd(cp, workdir)
        start_kubelet(node, labels)
        start_kube_proxy(node)
        wait(f"node {node.name} Ready", node.node_ready, node, 180)
    except BaseException:
        stop_node(node)
        raise
    return node


def stop_node(node: Node) -> None:
    """Delete every pod first (the kubelet stops their containers and tears their network down),
    stop kube-proxy and the kubelet, remove what containerd still holds, then the control plane,
    kube-proxy's iptables rules and the node's links."""
    try:
        for ns in ("inference", "inference-engines", "node-test"):  # controllers first, or they recreate pods
            node.kubectl("delete", "deployments,replicasets", "--all", "-n", ns, "--wait=false", check=False)
            node.kubectl("delete", "pods", "--all", "-n", ns, "--grace-period=1", "--wait=false", check=False)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and node.api("GET", "/api/v1/pods").get("items"):
            time.sleep(2)
    except Exception:  # noqa: BLE001, S110 - best effort: the processes are stopped all the same
        pass
    for proc in [p for p in node.cp.procs if p.name in ("kube-proxy", "kubelet")]:
        if proc.popen.poll() is None:
            proc.popen.terminate()
            try:
                proc.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
    try:
        runtime.remove_leftovers(node.workdir)
    except Exception:  # noqa: BLE001, S110 - containerd may be gone already
        pass
    node.cp.stop()
    subprocess.run(
        [str(build.binary("kubernetes", "kube-proxy")), "--cleanup"], capture_output=True, check=False
    )
    remove_node_network()
    unmount_under(node.workdir)


def unmount_under(directory: Path) -> None:
    """What the kubelet and containerd mounted under the run's directory (volumes, shm, rootfs),
    deepest first, so the directory can be removed."""
    prefix = str(directory.resolve()) + "/"
    points = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for point in sorted({p for p in points if p.startswith(prefix)}, key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)


def process_status(pid: int) -> dict:
    """What the kernel says of a container's process: user, capabilities, no_new_privs, seccomp
    mode, and whether its root filesystem is mounted read-only."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    root_options = next(line.split()[5] for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
                        if line.split()[4] == "/")  # fmt: skip
    return {"uid": int(status["Uid"].split()[1]), "gid": int(status["Gid"].split()[1]),
            "cap_eff": int(status["CapEff"].strip(), 16), "cap_bnd": int(status["CapBnd"].strip(), 16),
            "no_new_privs": int(status["NoNewPrivs"].strip()), "seccomp": int(status["Seccomp"].strip()),
            "root_read_only": "ro" in root_options.split(",")}  # fmt: skip


def in_pod_network(pid: int, url: str, method: str = "GET", body: dict | None = None, headers: dict | None = None) -> tuple[int, str]:
    """An HTTP request from inside a pod's network namespace (its loopback: the router listens on
    127.0.0.1 only), by `nsenter -n` of the host's Python. Returns (status, body)."""
    script = (
        "import json, sys, urllib.request, urllib.error\n"
        "a = json.loads(sys.argv[1])\n"
        "req = urllib.request.Request(a['url'], data=a['body'].encode() if a['body'] else None, method=a['method'], headers=a['headers'])\n"
        "try:\n    r = urllib.request.urlopen(req, timeout=30); print(r.status); print(r.read().decode())\n"
        "except urllib.error.HTTPError as e:\n    print(e.code); print(e.read().decode())\n"
    )
    arg = json.dumps({"url": url, "method": method, "body": json.dumps(body) if body is not None else "",
                      "headers": {"Content-Type": "application/json", **(headers or {})}})  # fmt: skip
    proc = subprocess.run(["nsenter", "-t", str(pid), "-n", "python3", "-c", script, arg], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    if proc.returncode:
        raise RuntimeError(f"nsenter -t {pid} -n: {proc.stderr.strip()}")
    status, _, text = proc.stdout.partition("\n")
    return int(status), text


def http(url: str, method: str = "GET", body: dict | None = None, headers: dict | None = None) -> tuple[int, str]:
    """An HTTP request from the node (the host): to a pod IP or a ClusterIP."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:  # noqa: S310 - the test's own pods
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
