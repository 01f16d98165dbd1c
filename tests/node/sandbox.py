"""What this machine lets a kubelet do, checked one step at a time and stopped at the first hard
wall with the exact error (issue 40, stage 1).

    python3 -m tests.node.sandbox          # prints the report as JSON; exit 1 at a wall

The node tests (tests/node) need, in order: root with the capabilities runc uses; cgroups (v1 with
the cpu, cpuacct, cpuset, memory, pids and devices controllers, or v2); the namespaces a pod sandbox
is made of (mount, UTS, IPC, PID, network); overlayfs (containerd's snapshotter); a veth pair and a
bridge (the CNI bridge plugin); and containerd, runc and the CNI plugins on the machine. Each check
runs a real operation (unshare, mount, ip link add), never a guess from /proc alone. Standard
library only: it runs before any venv exists.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Capability numbers (linux/capability.h) a container runtime and a kubelet use.
CAPABILITIES = {0: "CAP_CHOWN", 1: "CAP_DAC_OVERRIDE", 5: "CAP_KILL", 6: "CAP_SETGID", 7: "CAP_SETUID",
                8: "CAP_SETPCAP", 12: "CAP_NET_ADMIN", 13: "CAP_NET_RAW", 18: "CAP_SYS_CHROOT",
                21: "CAP_SYS_ADMIN", 24: "CAP_SYS_RESOURCE", 27: "CAP_MKNOD"}  # fmt: skip
V1_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
CNI_DIRS = ("/usr/lib/cni", "/opt/cni/bin")


def _run(*argv: str) -> tuple[int, str]:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def capabilities() -> dict:
    """Effective capabilities: which of CAPABILITIES are missing. CAP_SYS_RESOURCE alone missing is
    survivable (containerd must not raise its own OOM score: `restrict_oom_score_adj`)."""
    eff = next(int(line.split()[1], 16) for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("CapEff:"))  # fmt: skip
    missing = [name for bit, name in CAPABILITIES.items() if not eff >> bit & 1]
    return {"uid": os.geteuid(), "missing": missing}


def cgroups() -> dict:
    """cgroup v2 (one unified mount) or v1 (a mount per controller): the kubelet's driver is
    cgroupfs either way (no systemd here)."""
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    if any(m[1] == "/sys/fs/cgroup" and m[2] == "cgroup2" for m in mounts):
        controllers = Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
        return {"version": 2, "controllers": controllers, "missing": []}
    v1 = sorted({opt for m in mounts if m[2] == "cgroup" for opt in m[3].split(",") if opt in V1_CONTROLLERS})
    return {"version": 1, "controllers": v1, "missing": [c for c in V1_CONTROLLERS if c not in v1]}


def namespaces() -> tuple[dict, str | None]:
    code, out = _run("unshare", "--mount", "--uts", "--ipc", "--net", "--pid", "--fork", "true")
    return {"unshare mount,uts,ipc,net,pid": "ok" if code == 0 else out}, (
        None if code == 0 else f"unshare: {out}"
    )


def overlayfs() -> tuple[dict, str | None]:
    with tempfile.TemporaryDirectory(prefix="node-probe-") as tmp:
        t = Path(tmp)
        for d in ("lower", "upper", "work", "merged"):
            (t / d).mkdir()
        (t / "lower" / "f").write_text("x")
        code, out = _run("mount", "-t", "overlay", "overlay", "-o",
                         f"lowerdir={t / 'lower'},upperdir={t / 'upper'},workdir={t / 'work'}", str(t / "merged"))  # fmt: skip
        if code == 0:
            ok = (t / "merged" / "f").read_text() == "x"
            _run("umount", str(t / "merged"))
            return {"overlay mount": "ok" if ok else "mounted but lower file not visible"}, None
        return {"overlay mount": out}, f"mount -t overlay: {out}"


def network() -> tuple[dict, str | None]:
    """A veth pair and a bridge, made and removed at once (the CNI bridge plugin's operations)."""
    name = f"probe{os.getpid() % 10000}"
    code, out = _run("ip", "link", "add", f"{name}a", "type", "veth", "peer", "name", f"{name}b")
    if code:
        return {"veth": out}, f"ip link add veth: {out}"
    _run("ip", "link", "del", f"{name}a")
    code, out = _run("ip", "link", "add", f"{name}br", "type", "bridge")
    if code:
        return {"veth": "ok", "bridge": out}, f"ip link add bridge: {out}"
    _run("ip", "link", "del", f"{name}br")
    return {"veth": "ok", "bridge": "ok"}, None


def programs() -> tuple[dict, str | None]:
    found = {p: shutil.which(p) for p in ("containerd", "runc", "ctr", "iptables", "conntrack")}
    cni = next((d for d in CNI_DIRS if all(Path(d, p).exists() for p in CNI_PLUGINS)), None)
    found["cni plugins"] = cni
    missing = [k for k, v in found.items() if not v]
    wall = None
    if missing:
        wall = f"missing {', '.join(missing)}: apt-get install containerd runc containernetworking-plugins iptables conntrack"
    return found, wall


def probe() -> dict:
    """Every check in order; `wall` is the first that makes a node impossible (None: none)."""
    report: dict = {"kernel": os.uname().release}
    report["capabilities"] = capabilities()
    wall = None
    if report["capabilities"]["uid"] != 0:
        wall = "not root: containerd and the kubelet need root"
    report["cgroups"] = cgroups()
    if wall is None and report["cgroups"]["missing"]:
        wall = f"cgroup v1 controllers missing: {report['cgroups']['missing']}"
    for name, check in (
        ("namespaces", namespaces),
        ("overlayfs", overlayfs),
        ("network", network),
        ("programs", programs),
    ):
        report[name], error = check()
        wall = wall or error
    report["wall"] = wall
    return report


def main() -> int:
    report = probe()
    print(json.dumps(report, indent=1))
    return 1 if report["wall"] else 0


if __name__ == "__main__":
    sys.exit(main())
