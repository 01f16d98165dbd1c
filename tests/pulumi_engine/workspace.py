"""Where the real Pulumi engine runs in these tests: the toolchain built from Go modules
(scripts/pulumi_toolchain.py) plus the stand-in Python language host (language_host.py), and a
workspace — a copy of the repository, PULUMI_HOME and a `file://` backend in temporary directories,
a passphrase for the secrets provider, and HTTP(S)_PROXY pointing at a closed local port so that
any download fails loudly instead of quietly succeeding.

Never the checkout: the passphrase secrets provider writes `encryptionsalt` into the stack file,
and `pulumi stack init` writes the stack file itself. The copy is `git ls-files` (tracked and
untracked-but-not-ignored files, as they are on disk); its `.venv` is a symlink to the checkout's,
so nothing is installed.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST_WRAPPER = "pulumi-language-python"
PASSPHRASE = "engine-tests-passphrase"  # a throwaway stack in a temporary backend


def toolchain_module():
    """scripts/pulumi_toolchain.py (the pins and the cached builds), imported by path."""
    if "pulumi_toolchain" in sys.modules:
        return sys.modules["pulumi_toolchain"]
    spec = importlib.util.spec_from_file_location("pulumi_toolchain", ROOT / "scripts" / "pulumi_toolchain.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["pulumi_toolchain"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Toolchain:
    bin_dirs: tuple[Path, ...]  # the CLI's and each plugin's bin dir, then the language host wrapper's
    exec_script: Path  # upstream python/cmd/pulumi-language-python-exec of sdk/v3 at the CLI's version


def exec_script(version: str) -> Path:
    """The upstream exec script, read from the Go module cache (`go mod download` of the served
    github.com/pulumi/pulumi/sdk/v3 at the CLI's version; cached after the CLI's build)."""
    module = f"github.com/pulumi/pulumi/sdk/v3@v{version}"
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    done = subprocess.run(["go", "mod", "download", "-json", module], capture_output=True, text=True, env=env,
                          cwd="/", check=False)  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"go mod download {module}: {done.stdout or done.stderr}")
    script = Path(json.loads(done.stdout)["Dir"]) / "python" / "cmd" / "pulumi-language-python-exec"
    if not script.exists():
        raise RuntimeError(f"{module} has no {script}")
    return script


def language_host_wrapper(bin_dir: Path, python: Path, script: Path) -> Path:
    """An executable named `pulumi-language-python` (what the CLI looks for on PATH) that runs the
    stand-in host under `python` (a Python with grpcio and the pulumi SDK: the project's .venv)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / HOST_WRAPPER
    host = Path(__file__).resolve().parent / "language_host.py"
    wrapper.write_text(f'#!/bin/sh\nexec "{python}" "{host}" --exec-script "{script}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def prepare_toolchain(host_bin: Path) -> Toolchain:
    """Build (or reuse, when stamped) the CLI and the plugins, and write the host wrapper."""
    tc = toolchain_module()
    dirs = [tc.build_piece(piece) for piece in tc.PIECES]
    script = exec_script(tc.PULUMI_VERSION)
    language_host_wrapper(host_bin, ROOT / ".venv" / "bin" / "python", script)
    return Toolchain((*dirs, host_bin), script)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): a proxy there refuses at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_repository(dest: Path) -> Path:
    """The checkout's files as `git ls-files` lists them (tracked, and untracked but not ignored),
    with `.venv` a symlink to the checkout's."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        src = ROOT / name
        if not src.is_file():  # deleted in the working tree
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    (dest / ".venv").symlink_to(ROOT / ".venv")
    return dest


@dataclass
class Run:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass
class Workspace:
    """A project copy with its own PULUMI_HOME and file backend; every command is logged."""

    root: Path
    home: Path
    backend: Path
    env: dict[str, str]
    log: Path
    runs: list[Run] = field(default_factory=list)

    @classmethod
    def create(cls, base: Path, toolchain: Toolchain, project: Path | None = None) -> Workspace:
        """A workspace for `project` (a directory with a Pulumi.yaml), by default a copy of this
        repository."""
        home, backend = base / "pulumi-home", base / "backend"
        for d in (home, backend):
            d.mkdir(parents=True)
        root = project or copy_repository(base / "project")
        proxy = f"http://127.0.0.1:{closed_port()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_") and k.lower() not in
               ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "kubeconfig")}  # fmt: skip
        env.update({
            "PATH": os.pathsep.join([*map(str, toolchain.bin_dirs), env.get("PATH", "")]),
            "PULUMI_HOME": str(home),
            # The copy's own code first: the symlinked .venv's editable install points at the checkout.
            "PYTHONPATH": str(root),
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
            "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy,
            # Loopback stays direct: Go never proxies it, but gRPC's C core (the Python program's
            # connection to the engine's resource monitor) honours a lowercase https_proxy for
            # 127.0.0.1 too, unless no_proxy names it.
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        })  # fmt: skip
        return cls(root, home, backend, env, base / "commands.log")

    def run(self, *argv: str, stdin: str | None = None, check: bool = True, timeout: float = 1800) -> Run:
        started = time.monotonic()
        done = subprocess.run(list(argv), cwd=self.root, env=self.env, input=stdin, capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip
        run = Run(list(argv), done.returncode, done.stdout, done.stderr, time.monotonic() - started)
        self.runs.append(run)
        with open(self.log, "a") as log:
            log.write(f"$ {' '.join(argv)}   # exit {run.returncode}, {run.seconds:.1f} s\n{run.stdout}{run.stderr}\n")
        if check and run.returncode:
            raise AssertionError(f"`{' '.join(argv)}` exited {run.returncode} after {run.seconds:.0f} s:\n"
                                 f"{tail(run.output, 80)}")  # fmt: skip
        return run

    def pulumi(self, *args: str, **kwargs) -> Run:
        return self.run("pulumi", *args, **kwargs)

    def login(self) -> Run:
        return self.pulumi("login", f"file://{self.backend}")

    def plugins(self) -> list[str]:
        """What is in the plugin cache: anything here was downloaded (the toolchain is on PATH)."""
        cache = self.home / "plugins"
        return sorted(p.name for p in cache.iterdir()) if cache.exists() else []

    def backend_files(self) -> list[Path]:
        return sorted(p for p in self.backend.rglob("*") if p.is_file())

    def dev_sh_ready(self) -> None:
        """`./dev.sh infra` in the copy reuses the symlinked .venv: dev.sh reinstalls when its stamp
        for the base install is missing, and that would point the checkout's editable install at
        the copy. The test extras' stamp (same pyproject checksum) covers the base install."""
        venv = ROOT / ".venv"
        for stamp in venv.glob(".installed-test-*"):
            base = venv / stamp.name.replace("-test-", "-base-")
            if not base.exists():
                base.touch()


def tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


def preview_resources(preview_json: str) -> dict[tuple[str, str], int]:
    """(type, name) → count of what `pulumi preview --json` would create (its steps), without the
    stack itself and the default providers the engine adds for resources with no explicit one."""
    doc = json.loads(preview_json)
    out: dict[tuple[str, str], int] = {}
    for step in doc.get("steps", []):
        urn = step["urn"]
        type_, name = urn.split("::")[-2].split("$")[-1], urn.split("::")[-1]
        if type_ == "pulumi:pulumi:Stack" or type_.startswith("pulumi:providers:") and name.startswith("default"):
            continue
        out[(type_, name)] = out.get((type_, name), 0) + 1
    return out


def plan_resources(plan_json: dict) -> dict[tuple[str, str], int]:
    """(type, name) → count of `infra plan --json`'s `resources`."""
    out: dict[tuple[str, str], int] = {}
    for res in plan_json["resources"]:
        key = (res["type"], res["name"])
        out[key] = out.get(key, 0) + 1
    return out


def encodings(secret: str) -> set[str]:
    """How a secret could sit in a file unencrypted: itself, and its base64 at each of the three
    byte alignments it can have inside a longer base64 string (the characters that depend only on
    the secret's own bytes), so a secret embedded in a base64 blob (a kubeconfig's data fields, a
    Kubernetes Secret's `data`) is found too."""
    raw = secret.encode()
    found = {secret}
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw).decode()
        start = (0, 2, 3)[pad]  # the first characters carry bits of the bytes before the secret
        end = len(encoded) - 4  # and the last quantum (padding, the next bytes' bits)
        if end - start >= 16:
            found.add(encoded[start:end])
    return found
