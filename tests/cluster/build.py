"""Build the control plane the cluster tests run (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kubelet, kwok, the LeaderWorkerSet controller) from Go modules, once per machine.

    python3 -m tests.cluster.build [TOOL[:BINARY,...] ...]   # default: every tool, every binary
    scripts/build_control_plane.sh                            # the same, what .ci/run calls

Each tool is built at its version from tests/cluster/versions.py into
`${INFRA_TOOLS_CACHE:-~/.cache/inference-platform-tools}/<tool>-<version>/bin/`, in a throwaway
Go module written beside it (k8s.io/kubernetes with its v0.0.0 staging modules replaced by their
published versions; a three-line main for etcd). A stamp file written last marks a finished
build, so a present stamp means nothing is rebuilt; a file lock serialises concurrent builders
(two pytest sessions, or CI and a developer). Nothing here is committed. Standard library only:
it runs before any venv exists.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster import versions

STAMP = ".built.json"


@dataclass(frozen=True)
class Tool:
    """One Go module's programs: binary name → package path, built in one `go build`."""

    name: str
    module: str
    version: str
    binaries: dict[str, str]
    replaces: dict[str, str] = field(default_factory=dict)
    extra_requires: dict[str, str] = field(default_factory=dict)
    main_shims: dict[str, str] = field(default_factory=dict)  # binary → Go source of a local main
    ldflags: str = "-s -w"

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


def _kubernetes() -> Tool:
    staging = (
        "api", "apiextensions-apiserver", "apimachinery", "apiserver", "cli-runtime", "client-go",
        "cloud-provider", "cluster-bootstrap", "code-generator", "component-base", "component-helpers",
        "controller-manager", "cri-api", "cri-client", "csi-translation-lib", "dynamic-resource-allocation",
        "endpointslice", "externaljwt", "kms", "kube-aggregator", "kube-controller-manager", "kube-proxy",
        "kube-scheduler", "kubectl", "kubelet", "metrics", "mount-utils", "pod-security-admission",
        "sample-apiserver",
    )  # fmt: skip
    v, minor = versions.KUBERNETES, versions.KUBERNETES.split(".")[1]
    stamp = " ".join(
        f"-X {pkg}.{var}={val}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for var, val in (("gitVersion", v), ("gitMajor", "1"), ("gitMinor", minor), ("gitTreeState", "clean"))
    )
    return Tool(
        "kubernetes", "k8s.io/kubernetes", v,
        {b: f"k8s.io/kubernetes/cmd/{b}" for b in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy")},
        replaces={f"k8s.io/{m}": versions.KUBERNETES_STAGING for m in staging},
        ldflags=f"-s -w {stamp}",
    )  # fmt: skip


ETCD_MAIN = """package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        _kubernetes(),
        Tool("etcd", "go.etcd.io/etcd/server/v3", versions.ETCD, {"etcd": "./cmd/etcd"}, main_shims={"etcd": ETCD_MAIN}),
        Tool("kwok", "sigs.k8s.io/kwok", versions.KWOK, {"kwok": "sigs.k8s.io/kwok/cmd/kwok"}),
        Tool("lws", "sigs.k8s.io/lws", versions.LWS, {"lws-manager": "sigs.k8s.io/lws/cmd"}),
    )
}


def cache_root() -> Path:
    return Path(os.environ.get("INFRA_TOOLS_CACHE") or Path.home() / ".cache" / "inference-platform-tools")


def tool_dir(tool: Tool) -> Path:
    return cache_root() / tool.key


def binary(tool_name: str, name: str | None = None) -> Path:
    """Where a built binary lives (built or not)."""
    tool = TOOLS[tool_name]
    return tool_dir(tool) / "bin" / (name or next(iter(tool.binaries)))


def built(tool: Tool, wanted: list[str]) -> bool:
    stamp = tool_dir(tool) / STAMP
    if not stamp.exists():
        return False
    have = set(json.loads(stamp.read_text()).get("binaries", []))
    return all(b in have and (tool_dir(tool) / "bin" / b).exists() for b in wanted)


def go_mod(tool: Tool) -> str:
    lines = ["module local/inference-platform-tools", "", "go 1.24.0", "", f"require {tool.module} {tool.version}"]
    lines += [f"require {m} {v}" for m, v in tool.extra_requires.items()]
    lines += [f"replace {m} => {m} {v}" for m, v in sorted(tool.replaces.items())]
    return "\n".join(lines) + "\n"


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false", "GOWORK": "off"})
    env.setdefault("GOTOOLCHAIN", "local")  # this machine's Go; CI runners with an older one set auto
    return env


def _run(cmd: list[str], cwd: Path, log) -> None:
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    proc = subprocess.run(cmd, cwd=cwd, env=_env(cwd), stdout=log, stderr=subprocess.STDOUT, check=False)
    if proc.returncode:
        raise SystemExit(f"build failed: {' '.join(cmd)} (exit {proc.returncode}); log: {log.name}")


def build(tool: Tool, wanted: list[str] | None = None, *, out=sys.stderr) -> float:
    """Build `wanted` binaries of `tool` (default: all) unless a finished build has them. Returns
    the seconds spent building (0 when reused)."""
    wanted = wanted or list(tool.binaries)
    unknown = [b for b in wanted if b not in tool.binaries]
    if unknown:
        raise SystemExit(f"{tool.name}: unknown binaries {unknown}; known: {', '.join(tool.binaries)}")
    if built(tool, wanted):
        return 0.0
    root = tool_dir(tool)
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{tool.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another builder may finish it while we wait
        if built(tool, wanted):
            return 0.0
        start = time.monotonic()
        previous = root / STAMP
        had = json.loads(previous.read_text()).get("binaries", []) if previous.exists() else []
        previous.unlink(missing_ok=True)
        src = root / "src"
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        (src / "go.mod").write_text(go_mod(tool))
        for name, source in tool.main_shims.items():
            (src / "cmd" / name).mkdir(parents=True)
            (src / "cmd" / name / "main.go").write_text(source)
        (root / "bin").mkdir(exist_ok=True)
        print(f"building {tool.key}: {', '.join(wanted)} (log: {root / 'build.log'})", file=out, flush=True)
        with open(root / "build.log", "w") as log:
            _run(["go", "get", f"{tool.module}@{tool.version}"], src, log)  # the module graph and go.sum
            packages = [tool.binaries[b] for b in wanted]
            _run(["go", "build", "-ldflags", tool.ldflags, "-o", str(root / "bin") + "/", *packages], src, log)
            for b in wanted:  # `go build -o DIR/` names each binary after its package's last element
                made = root / "bin" / Path(tool.binaries[b]).name
                if made.name != b and made.exists():
                    made.rename(root / "bin" / b)
        seconds = time.monotonic() - start
        stamp = {"tool": tool.name, "version": tool.version, "binaries": sorted(set(had) | set(wanted)),
                 "seconds": round(seconds, 1), "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (root / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")  # last: marks the build finished
        print(f"built {tool.key} in {seconds:.0f} s", file=out, flush=True)
        return seconds


def parse(args: list[str]) -> list[tuple[Tool, list[str] | None]]:
    """`kubernetes:kube-apiserver,kubelet etcd` → [(tool, [binaries]), (tool, None)]."""
    chosen = []
    for arg in args or list(TOOLS):
        name, _, bins = arg.partition(":")
        if name not in TOOLS:
            raise SystemExit(f"unknown tool {name!r}; known: {', '.join(TOOLS)}")
        chosen.append((TOOLS[name], bins.split(",") if bins else None))
    return chosen


def main(argv: list[str] | None = None) -> int:
    chosen = parse(sys.argv[1:] if argv is None else argv)
    if shutil.which("go") is None:
        raise SystemExit("go is not on PATH: the control plane is built from Go modules (Go 1.24 or newer)")
    start = time.monotonic()
    for tool, wanted in chosen:
        seconds = build(tool, wanted)
        if not seconds:
            print(f"{tool.key}: reused {tool_dir(tool)}", file=sys.stderr)
    print(f"control plane ready in {time.monotonic() - start:.0f} s ({cache_root()})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
