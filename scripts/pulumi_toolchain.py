"""The Pulumi engine and its resource plugins, built here from Go modules and cached by version.

The program has only run under Pulumi's mock runtime; a real `pulumi preview` needs the CLI (the
engine), the Python language host and one resource plugin per provider SDK. None of them may be
downloaded at run time (no network but the package registries), so this module builds what the Go
module proxy serves, once per version, into

    ${INFRA_TOOLS_CACHE:-~/.cache/inference-platform-tools}/<binary>-<version>/bin/<binary>

and says exactly what it cannot build. Every pin lives in PIECES and UNBUILDABLE below.

    python3 scripts/pulumi_toolchain.py build     # builds what is missing, prints the bin dirs
    python3 scripts/pulumi_toolchain.py env       # `export PATH=...` lines for a shell
    python3 scripts/pulumi_toolchain.py status    # what each SDK asks for, what is built, what not
    python3 scripts/pulumi_toolchain.py probe     # asks the proxy again for what could not be built

How the CLI finds the plugins: on PATH ("ambient" plugins). The plugin cache under PULUMI_HOME
only matches a plugin whose directory version EQUALS the version the SDK asks for
(workspace.SelectCompatiblePlugin), and the kubernetes provider served here is not the version the
SDK asks for; a binary named pulumi-resource-<name> on PATH is used whatever its version (the CLI
warns "using pulumi-resource-<name> from $PATH"), unless PULUMI_IGNORE_AMBIENT_PLUGINS is set.
So `env` puts every built bin dir on PATH and sets PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION
(without it a plugin missing from PATH is downloaded from Pulumi's servers); the plugin cache stays
empty, so a download would show up as a new directory under $PULUMI_HOME/plugins.

Each binary is built in its own directory: a file lock serialises concurrent builders, a stamp file
written last (with the timings) marks a finished build, and a directory without one is removed and
built again.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

STAMP = "build.json"


@dataclass(frozen=True)
class Piece:
    """One binary built from one module version on the Go module proxy."""

    binary: str  # the executable's name, as the CLI looks it up
    module: str
    version: str  # the module version the proxy serves
    package: str  # the main package inside the module
    label: str  # the version the binary reports, and the cache directory's suffix
    version_var: str  # the linker variable that carries `label`
    why: str  # why this module and version (for `status` and the docs)
    # The module's own replace directives that still matter when it is built as a dependency.
    replaces: tuple[tuple[str, str], ...] = ()
    # Files the main package embeds but the module zip lacks (upstream generates them with
    # `go generate`): (generated file, source file), written with `label` as the schema version.
    embeds: tuple[tuple[str, str], ...] = ()
    # Replace directives of the module that must be dropped to build it as the main module.
    drop_replaces: tuple[str, ...] = field(default=())


PULUMI_VERSION = "3.277.0"
KUBERNETES_PROVIDER_COMMIT = "v4.0.0-20260115033456-f47bc2d6f199"

PIECES = (
    Piece(
        binary="pulumi",
        module="github.com/pulumi/pulumi/pkg/v3",
        version=f"v{PULUMI_VERSION}",
        package="github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",
        label=PULUMI_VERSION,
        version_var="github.com/pulumi/pulumi/sdk/v3/go/common/version.Version",
        why="the newest CLI the proxy serves; newer than the Python SDK (pulumi 3.272.0), which it accepts",
        # pkg/go.mod swaps the clipboard library for a fork; a dependency's replaces do not apply.
        replaces=(("github.com/atotto/clipboard",
                   "github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e"),),
    ),
    Piece(
        binary="pulumi-resource-kubernetes",
        module="github.com/pulumi/pulumi-kubernetes/provider/v4",
        version=KUBERNETES_PROVIDER_COMMIT,
        package="./cmd/pulumi-resource-kubernetes",
        # The commit of 2026-01-15, one day before the sdk/v4.25.0 tag: main between 4.24.0 and 4.25.0.
        label="4.25.0-dev.20260115033456.f47bc2d6f199",
        version_var="github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version",
        why="the only version of the provider module the proxy serves (its list); 4.34.2 itself: 403",
        embeds=(("cmd/pulumi-resource-kubernetes/schema-embed.json", "cmd/pulumi-resource-kubernetes/schema.json"),
                ("cmd/pulumi-resource-kubernetes/terraform-mapping-embed.json",
                 "cmd/pulumi-resource-kubernetes/terraform-mapping.json")),
        drop_replaces=("github.com/pulumi/pulumi-kubernetes/sdk/v4",),
    ),
)


@dataclass(frozen=True)
class Unbuildable:
    """A piece the proxy does not serve: what was asked and what the proxy answered."""

    binary: str
    module: str
    version: str
    error: str
    note: str


UNBUILDABLE = (
    Unbuildable(
        binary="pulumi-language-python",
        module="github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3",
        version=f"v{PULUMI_VERSION}",
        error="403 Forbidden: This module version is not available (the list; v3.277.0, v3.276.0, v3.275.0, "
              "v3.274.1, v3.274.0, v3.260.0, v3.248.0, v3.229.0, v3.200.0, v3.193.0; also without /v3)",
        note="its own go.mod, so the sdk/v3 module (served) leaves the directory out; sdk/v3 does carry "
             "python/cmd/pulumi-language-python-exec, the script the host runs",
    ),
    Unbuildable(
        binary="pulumi-resource-random",
        module="github.com/pulumi/pulumi-random/provider/v4",
        version="v4.21.4",
        error="403 Forbidden: This module version is not available (list, v4.21.4, v4.21.2, v4.21.0, v4.18.0)",
        note="upstream github.com/terraform-providers/terraform-provider-random is served "
             "(v1.3.2-0.20260824155315-e1092b0cfc07) and so is pulumi-terraform-bridge/v3 v3.120.0; "
             "the Pulumi wrapper (its shim module and ProviderInfo) is not",
    ),
    Unbuildable(
        binary="pulumi-resource-digitalocean",
        module="github.com/pulumi/pulumi-digitalocean/provider/v4",
        version="v4.84.1",
        error="403 Forbidden: This module version is not available (list, v4.84.1, v4.84.0, v4.80.1)",
        note="upstream github.com/digitalocean/terraform-provider-digitalocean: 403 on list and on "
             "v2.60.0-v2.70.0; the provider module replaces it with a local ../upstream checkout anyway",
    ),
)


def cache_root() -> Path:
    return Path(os.environ.get("INFRA_TOOLS_CACHE") or Path.home() / ".cache" / "inference-platform-tools")


def piece_dir(piece: Piece, root: Path | None = None) -> Path:
    return (root or cache_root()) / f"{piece.binary}-{piece.label}"


def bin_dirs(root: Path | None = None) -> list[Path]:
    """The bin directories of every piece, CLI first (what goes on PATH)."""
    return [piece_dir(p, root) / "bin" for p in PIECES]


def go_env() -> dict[str, str]:
    """The Go environment of a build: modules from the machine's GOPROXY, the installed toolchain
    only (no toolchain download), go.mod updated as needed."""
    env = dict(os.environ)
    env["GOFLAGS"] = "-mod=mod"
    env["GOTOOLCHAIN"] = "local"
    return env


def run(cmd: list[str], cwd: Path, log) -> None:
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    done = subprocess.run(cmd, cwd=cwd, env=go_env(), stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise BuildError(f"`{' '.join(cmd)}` failed in {cwd} (exit {done.returncode}); see {log.name}")


class BuildError(RuntimeError):
    pass


@contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ldflags(piece: Piece) -> str:
    return f"-s -w -X {piece.version_var}={'v' if piece.binary == 'pulumi' else ''}{piece.label}"


def prepare_wrapper(piece: Piece, work: Path, log) -> tuple[Path, str]:
    """A throwaway main module that requires the piece's module (its main package is built as a
    dependency); returns the directory to build in and the package path to build."""
    work.mkdir(parents=True)
    lines = ["module local/build-" + piece.binary, "", "go 1.26", ""]
    lines += [f"replace {old} => {new}" for old, new in piece.replaces]
    (work / "go.mod").write_text("\n".join(lines) + "\n")
    run(["go", "get", f"{piece.package}@{piece.version}"], work, log)
    return work, piece.package


def prepare_source(piece: Piece, work: Path, log) -> tuple[Path, str]:
    """A writable copy of the module as the main module, with the files upstream's `go generate`
    would write (the schema with its version set), for a main package that embeds them."""
    run(["go", "mod", "download", f"{piece.module}@{piece.version}"], work.parent, log)
    listed = subprocess.run(["go", "mod", "download", "-json", f"{piece.module}@{piece.version}"],
                            cwd=work.parent, env=go_env(), capture_output=True, text=True, check=True)
    shutil.copytree(json.loads(listed.stdout)["Dir"], work)
    for path in work.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)
    for module in piece.drop_replaces:
        run(["go", "mod", "edit", f"-dropreplace={module}"], work, log)
    for generated, source in piece.embeds:
        document = json.loads((work / source).read_text())
        if generated.endswith("schema-embed.json"):
            document["version"] = piece.label
        (work / generated).write_text(json.dumps(document, separators=(",", ":")))
    run(["go", "mod", "download"], work, log)
    return work, piece.package


def build_piece(piece: Piece, root: Path | None = None, rebuild: bool = False) -> Path:
    """Build one piece unless its stamp says it is built; returns its bin directory."""
    target = piece_dir(piece, root)
    with locked(target.with_name(target.name + ".lock")):
        stamp = target / STAMP
        if stamp.exists() and not rebuild:
            return target / "bin"
        shutil.rmtree(target, ignore_errors=True)
        (target / "bin").mkdir(parents=True)
        started = time.monotonic()
        with open(target / "build.log", "w") as log:
            prepare = prepare_source if piece.embeds else prepare_wrapper
            cwd, package = prepare(piece, target / "src", log)
            fetched = time.monotonic()
            run(["go", "build", "-trimpath", "-ldflags", ldflags(piece), "-o",
                 str(target / "bin" / piece.binary), package], cwd, log)
        built = time.monotonic()
        shutil.rmtree(target / "src")
        stamp.write_text(json.dumps({
            "binary": piece.binary, "module": piece.module, "version": piece.version, "label": piece.label,
            "go": subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True).stdout.strip(),
            "fetch_seconds": round(fetched - started, 1), "build_seconds": round(built - fetched, 1),
            "load_average": os.getloadavg()[0],
        }, indent=2) + "\n")
        return target / "bin"


def requested_plugins(python: str) -> dict[str, str]:
    """The resource plugin versions the installed provider SDKs ask for (their pulumi-plugin.json)."""
    probe = (
        "import json, importlib.resources as r\n"
        "out = {}\n"
        "for pkg in ('pulumi_kubernetes', 'pulumi_random', 'pulumi_digitalocean'):\n"
        "    try:\n"
        "        spec = json.loads(r.files(pkg).joinpath('pulumi-plugin.json').read_text())\n"
        "    except ModuleNotFoundError:\n"
        "        continue\n"
        "    out[spec['name']] = spec['version']\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def status(python: str, root: Path | None = None) -> list[str]:
    asked = requested_plugins(python)
    lines = []
    for piece in PIECES:
        name = piece.binary.removeprefix("pulumi-resource-")
        built = (piece_dir(piece, root) / STAMP).exists()
        want = asked.get(name, "-") if piece.binary != "pulumi" else "-"
        lines.append(f"{piece.binary}: {piece.module}@{piece.version} reports {piece.label}; SDK asks {want}; "
                     f"{'built' if built else 'not built yet'} ({piece.why})")
    for gap in UNBUILDABLE:
        name = gap.binary.removeprefix("pulumi-resource-")
        lines.append(f"{gap.binary}: NOT BUILDABLE {gap.module}@{gap.version}: {gap.error}; SDK asks "
                     f"{asked.get(name, '-')}; {gap.note}")
    return lines


def probe(gap: Unbuildable) -> str:
    """Ask the proxy again for a piece recorded as unbuildable (it may be served one day)."""
    configured = subprocess.run(["go", "env", "GOPROXY"], capture_output=True, text=True).stdout.strip()
    proxy = configured.split(",")[0].split("|")[0]
    if not proxy.startswith(("https://", "http://")):
        return f"{gap.module}@{gap.version}: not asked (GOPROXY is {configured!r}, no proxy URL first)"
    url = f"{proxy}/{gap.module}/@v/{gap.version}.info"
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return f"{gap.module}@{gap.version}: served now ({answer.status}): build it and move it to PIECES"
    except urllib.error.HTTPError as err:
        return f"{gap.module}@{gap.version}: {err.code} {err.reason}: {err.read().decode(errors='replace').strip()}"
    except OSError as err:
        return f"{gap.module}@{gap.version}: no answer ({err})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("build", "env", "status", "probe"))
    parser.add_argument("--rebuild", action="store_true", help="build again even when stamped")
    parser.add_argument("--python", default=str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python"),
                        help="the Python whose provider SDKs `status` reads (default: the project's .venv)")
    args = parser.parse_args(argv)
    if args.command == "build":
        for piece in PIECES:
            started = time.monotonic()
            try:
                where = build_piece(piece, rebuild=args.rebuild)
            except BuildError as err:
                print(f"error: {piece.binary}: {err}", file=sys.stderr)
                return 1
            print(f"{piece.binary} {piece.label}: {where} ({time.monotonic() - started:.0f} s)")
        return 0
    if args.command == "env":
        missing = [p.binary for p in PIECES if not (piece_dir(p) / STAMP).exists()]
        if missing:
            print(f"error: not built: {', '.join(missing)} (run scripts/build_pulumi.sh)", file=sys.stderr)
            return 1
        print(f"export PATH={':'.join(str(d) for d in bin_dirs())}:$PATH")
        print("export PULUMI_SKIP_UPDATE_CHECK=true")
        # A plugin missing from PATH is then an error, not a download attempt from Pulumi's servers.
        print("export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true")
        print("unset PULUMI_IGNORE_AMBIENT_PLUGINS")
        return 0
    if args.command == "probe":
        print("\n".join(probe(gap) for gap in UNBUILDABLE))
        return 0
    print("\n".join(status(args.python)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
