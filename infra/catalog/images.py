"""What the project knows is inside the images it runs: the programs a kubelet `exec` may start.

An exec probe or lifecycle hook whose program is not in the image fails on every period, and the
API server cannot know (infra/invariants/kubelet.py checks it). Listed only for the images the
project pins and whose contents are documented by their base: programs by bare name (what `exec`
finds on the image's PATH) and by absolute path. An image not listed (a user's `router.image`, a
chart's) is not checked.
"""

from __future__ import annotations

_COREUTILS = ("sh", "cat", "sleep", "test", "[", "echo", "true", "false", "ls")
_BUSYBOX = (*_COREUTILS, "sysctl", "wget", "nc")  # busybox applets, each also under /bin


def _paths(names: tuple[str, ...], *dirs: str) -> frozenset[str]:
    return frozenset(names) | {f"{d}/{n}" for d in dirs for n in names}


# Repository (without tag or digest) → its programs.
IMAGE_EXECUTABLES: dict[str, frozenset[str]] = {
    # busybox: one binary, every applet linked under /bin.
    "busybox": _paths(_BUSYBOX, "/bin"),
    # Debian bookworm slim + CPython in /usr/local/bin: coreutils and dash, no curl or wget.
    "python": _paths((*_COREUTILS, "bash", "python", "python3", "pip"), "/bin", "/usr/bin", "/usr/local/bin"),
    # Alpine: busybox applets plus nginx (the image's entrypoint scripts use both).
    "nginxinc/nginx-unprivileged": _paths((*_BUSYBOX, "nginx"), "/bin", "/usr/sbin"),
    # Ubuntu with vLLM installed into the system Python.
    "vllm/vllm-openai-rocm": _paths((*_COREUTILS, "bash", "python3", "vllm"), "/bin", "/usr/bin", "/usr/local/bin"),
    "vllm/vllm-openai": _paths((*_COREUTILS, "bash", "python3", "vllm"), "/bin", "/usr/bin", "/usr/local/bin"),
    # Kubernetes' pause image: one static binary, no shell.
    "registry.k8s.io/pause": frozenset({"/pause"}),
}


def repository_of(image: str) -> str:
    """`busybox:1.37.0` → `busybox`; `ghcr.io/a/b@sha256:…` → `ghcr.io/a/b`; a registry port kept."""
    name = image.partition("@")[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: len(name) - len(last[-1]) + last[-1].index(":")]
    return name.removeprefix("docker.io/").removeprefix("library/")


def executables_of(image: str) -> frozenset[str] | None:
    """The programs `image` has, or None when the project does not know its contents."""
    return IMAGE_EXECUTABLES.get(repository_of(image))
