"""containerd, runc and a CNI bridge for the node tests: their configuration files and the daemon.

What this sandbox needs, found by tests/node/sandbox.py and by running it:
- cgroup v1 without systemd: runc's cgroupfs driver (`SystemdCgroup = false`), the kubelet's too.
- CAP_SYS_RESOURCE is missing, so a process may lower its OOM score but never raise it above its
  parent's: `restrict_oom_score_adj = true` makes the CRI clamp what the kubelet asks for
  (containerd otherwise fails every container with "write /proc/self/oom_score_adj: permission denied").
- the images live in a containerd root kept between runs (INFRA_TOOLS_CACHE/node-containerd), so
  the engine's gigabytes are imported once per machine; state, sockets and CNI files are per run.

The CNI network: one Linux bridge (`infra-cni0`) with the gateway on it, host-local addresses from
POD_SUBNET, IP masquerade for traffic leaving it (the router's installer reaches PyPI), hairpin mode
(a pod can reach itself through a Service) and portmap.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.cluster import build
from tests.cluster.control_plane import ControlPlane, Proc

POD_SUBNET = "10.244.0.0/24"  # one node's share of the cluster's pod network (10.244.0.0/16)
BRIDGE = "infra-cni0"
CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"  # built by tests/node/images.py (the `pause` image)
NAMESPACE = "k8s.io"  # containerd namespace of the CRI


def containerd_root() -> Path:
    return build.cache_root() / "node-containerd"


def cni_bin_dir() -> str:
    for d in CNI_BIN_DIRS:
        if (Path(d) / "bridge").exists():
            return d
    raise RuntimeError(f"no CNI bridge plugin in {CNI_BIN_DIRS}: apt-get install containernetworking-plugins")


def containerd_config(workdir: Path) -> str:
    """containerd 1.6's config (version 2) for the CRI: runc with cgroupfs, overlayfs, our CNI."""
    return f"""version = 2
root = "{containerd_root()}"
state = "{workdir / "containerd-state"}"
oom_score = 0

[grpc]
  address = "{workdir / "containerd.sock"}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{SANDBOX_IMAGE}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin_dir()}"
    conf_dir = "{workdir / "cni"}"
    max_conf_num = 1
"""


def cni_config(workdir: Path) -> dict:
    return {
        "cniVersion": "1.0.0",
        "name": "infra-node",
        "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": True, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]], "routes": [{"dst": "0.0.0.0/0"}],
                      "dataDir": str(workdir / "cni-ipam")}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }  # fmt: skip


def ctr(workdir: Path, *args: str, check: bool = True, timeout: float = 1800) -> str:
    proc = subprocess.run(["ctr", "--address", str(workdir / "containerd.sock"), "--namespace", NAMESPACE, *args],
                          capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip
    if check and proc.returncode:
        raise RuntimeError(f"ctr {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def remove_leftovers(workdir: Path) -> list[str]:
    """Containers an earlier run left in the kept containerd root (a killed session): killed and
    removed, so the kubelet starts from nothing. Returns their ids."""
    ids = ctr(workdir, "containers", "list", "--quiet").split()
    for cid in ids:
        ctr(workdir, "tasks", "kill", "--signal", "SIGKILL", cid, check=False)
        ctr(workdir, "tasks", "delete", "--force", cid, check=False)
        ctr(workdir, "containers", "delete", cid, check=False)
    return ids


def start_containerd(cp: ControlPlane, workdir: Path) -> Proc:
    """containerd with our config, ready when `ctr version` answers."""
    (workdir / "cni").mkdir(parents=True, exist_ok=True)
    (workdir / "cni" / "10-infra-node.conflist").write_text(json.dumps(cni_config(workdir), indent=1))
    config = workdir / "containerd.toml"
    config.write_text(containerd_config(workdir))
    containerd_root().mkdir(parents=True, exist_ok=True)
    proc = cp.start("containerd", ["containerd", "--config", str(config), "--log-level", "info"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        cp.check_alive()
        if subprocess.run(["ctr", "--address", str(workdir / "containerd.sock"), "version"], capture_output=True,
                          check=False).returncode == 0:  # fmt: skip
            remove_leftovers(workdir)
            return proc
        time.sleep(0.5)
    raise RuntimeError(f"containerd did not answer within 60 s\n{cp.logs()}")


def image_present(workdir: Path, ref: str, digest: str) -> bool:
    for line in ctr(workdir, "images", "list").splitlines()[1:]:
        cols = line.split()
        if cols and cols[0] == ref and digest in line:
            return True
    return False


def import_image(workdir: Path, ref: str, digest: str, archive: Path) -> float:
    """Import an OCI archive unless containerd holds that reference at that digest. Seconds spent."""
    if image_present(workdir, ref, digest):
        return 0.0
    start = time.monotonic()
    ctr(workdir, "images", "import", str(archive))
    if not image_present(workdir, ref, digest):
        raise RuntimeError(
            f"imported {archive} but containerd lists no {ref} at {digest}:\n{ctr(workdir, 'images', 'list')}"
        )
    return time.monotonic() - start


def containers(workdir: Path) -> list[dict]:
    """Every running container the CRI made: its pod, namespace, container name and host PID (what
    the security-context checks read /proc of, and what `nsenter` enters for a pod's loopback)."""
    pids = {}
    for line in ctr(workdir, "tasks", "list").splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 3 and cols[2] == "RUNNING":
            pids[cols[0]] = int(cols[1])
    out = []
    for cid, pid in pids.items():
        labels = json.loads(ctr(workdir, "containers", "info", cid)).get("Labels", {})
        if labels.get("io.cri-containerd.kind") != "container":
            continue
        out.append({"id": cid, "pid": pid, "pod": labels.get("io.kubernetes.pod.name"),
                    "namespace": labels.get("io.kubernetes.pod.namespace"), "container": labels.get("io.kubernetes.container.name")})  # fmt: skip
    return out
