"""A stand-in for `pulumi-language-python`, the one piece of the Pulumi engine the Go module proxy
does not serve (scripts/pulumi_toolchain.py `UNBUILDABLE`), so that `pulumi preview` / `pulumi up`
run here as the README writes them. Tests only: a user's Pulumi CLI ships the real one.

It is what the Go host does, in Python: the CLI starts it with the engine's address and reads the
port it prints; it answers the LanguageRuntime gRPC service (`pulumi.runtime.proto`, the SDK's own
stubs), and runs a program — the project's, or a policy pack — with the upstream exec script
`python/cmd/pulumi-language-python-exec` of the served `github.com/pulumi/pulumi/sdk/v3` module
(read from the Go module cache at run time, never copied here), under the Python of the program's
`virtualenv` runtime option. The required plugins are the `pulumi-plugin.json` files of the
provider SDKs installed there, as the Go host reports them.

    <python> -m tests.pulumi_engine.language_host --exec-script PATH [host flags] ENGINE_ADDRESS
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc
from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2

# Lists the provider SDKs installed in a Python environment, by their pulumi-plugin.json.
_PLUGINS_PROBE = (
    "import json, importlib.metadata as m\n"
    "out = []\n"
    "for d in m.distributions():\n"
    "    for f in d.files or []:\n"
    "        if f.name == 'pulumi-plugin.json':\n"
    "            out.append(json.loads(f.read_text()))\n"
    "print(json.dumps(out))\n"
)
# What the exec script's exit code 32 means: the program already showed the user an error.
_USER_ERROR_EXIT = 32


def program_python(info) -> str:
    """The Python of the program: its `virtualenv` runtime option (relative to the project's root),
    else this interpreter."""
    venv = info.options["virtualenv"] if info is not None and info.options and "virtualenv" in info.options else None
    if not venv:
        return sys.executable
    root = Path(info.root_directory or os.getcwd())
    return str((Path(venv) if os.path.isabs(venv) else root / venv) / "bin" / "python")


class LanguageHost(language_pb2_grpc.LanguageRuntimeServicer):
    def __init__(self, engine: str, exec_script: str) -> None:
        self.engine = engine
        self.exec_script = exec_script

    def Handshake(self, request, context):  # noqa: N802 - gRPC method names
        self.engine = request.engine_address or self.engine
        return language_pb2.LanguageHandshakeResponse()

    def GetPluginInfo(self, request, context):  # noqa: N802
        import pulumi

        return plugin_pb2.PluginInfo(version=getattr(pulumi, "__version__", "") or "3.0.0")

    def _plugins(self, info) -> list[dict]:
        out = subprocess.run([program_python(info), "-c", _PLUGINS_PROBE], capture_output=True, text=True, check=True)
        return [p for p in json.loads(out.stdout) if p.get("resource")]

    def GetRequiredPackages(self, request, context):  # noqa: N802
        return language_pb2.GetRequiredPackagesResponse(packages=[
            plugin_pb2.PackageDependency(kind="resource", name=p["name"], version=f"v{p['version']}", server=p.get("server", ""))
            for p in self._plugins(request.info)
        ])  # fmt: skip

    def GetRequiredPlugins(self, request, context):  # noqa: N802
        return language_pb2.GetRequiredPluginsResponse(plugins=[
            plugin_pb2.PluginDependency(kind="resource", name=p["name"], version=f"v{p['version']}", server=p.get("server", ""))
            for p in self._plugins(request.info)
        ])  # fmt: skip

    def InstallDependencies(self, request, context):  # noqa: N802
        """The program's virtualenv from its requirements.txt when it is missing (the README's
        "Pulumi creates .venv on its first run"); nothing when it exists."""
        python = Path(program_python(request.info))
        if python.exists() or python == Path(sys.executable):
            return
        root = Path(request.info.root_directory or request.directory)
        for cmd in ([sys.executable, "-m", "venv", str(python.parent.parent)],
                    [str(python), "-m", "pip", "install", "-r", str(root / "requirements.txt")]):  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, cwd=root, check=False)
            yield language_pb2.InstallDependenciesResponse(stdout=proc.stdout, stderr=proc.stderr)
            if proc.returncode:
                context.abort(grpc.StatusCode.UNKNOWN, f"{' '.join(cmd)} exited {proc.returncode}")

    def Run(self, request, context):  # noqa: N802
        info = request.info
        program = info.entry_point or "."
        if not os.path.isabs(program):
            program = os.path.join(info.program_directory or request.pwd, program)
        args = [program_python(info), "-u", self.exec_script, "--monitor", request.monitor_address, "--engine", self.engine,
                "--project", request.project, "--stack", request.stack, "--pwd", request.pwd,
                "--dry_run", str(request.dryRun).lower(), "--parallel", str(request.parallel),
                "--organization", request.organization, "--root_directory", info.root_directory, program, *request.args]  # fmt: skip
        env = {**os.environ, "PULUMI_CONFIG": json.dumps(dict(request.config)),
               "PULUMI_CONFIG_SECRET_KEYS": json.dumps(list(request.configSecretKeys))}  # fmt: skip
        code = subprocess.run(args, env=env, check=False).returncode
        if code == 0:
            return language_pb2.RunResponse()
        if code == _USER_ERROR_EXIT:
            return language_pb2.RunResponse(bail=True)
        return language_pb2.RunResponse(error=f"Program exited with non-zero exit code: {code}")

    def RunPlugin(self, request, context):  # noqa: N802
        """A plugin written in Python (a policy pack): its program run with the arguments and
        environment the engine gives, stdout and stderr streamed back, then its exit code."""
        info = request.info
        # The plugin's directory (python runs its __main__.py); `program` is the deprecated field.
        program = info.program_directory or request.program or "."
        if info.entry_point and info.entry_point != ".":
            program = os.path.join(program, info.entry_point)
        if not os.path.isabs(program):
            program = os.path.join(request.pwd, program)
        env = dict(os.environ)
        env.update(dict(e.split("=", 1) for e in request.env if "=" in e))
        proc = subprocess.Popen([program_python(info), "-u", program, *request.args], cwd=request.pwd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        chunks: list = []
        lock = threading.Lock()

        def pump(stream, field):
            for line in iter(stream.readline, b""):
                with lock:
                    chunks.append((field, line))

        pumps = [threading.Thread(target=pump, args=(proc.stdout, "stdout"), daemon=True),
                 threading.Thread(target=pump, args=(proc.stderr, "stderr"), daemon=True)]  # fmt: skip
        for t in pumps:
            t.start()
        while proc.poll() is None or any(t.is_alive() for t in pumps) or chunks:
            with lock:
                batch, chunks[:] = list(chunks), []
            for field, data in batch:
                yield language_pb2.RunPluginResponse(**{field: data})
            if not batch:
                threading.Event().wait(0.05)
        yield language_pb2.RunPluginResponse(exitcode=proc.returncode)

    def RuntimeOptionsPrompts(self, request, context):  # noqa: N802
        return language_pb2.RuntimeOptionsResponse()

    def About(self, request, context):  # noqa: N802
        return language_pb2.AboutResponse(executable=sys.executable, version=sys.version.split()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exec-script", required=True, help="upstream pulumi-language-python-exec")
    args, rest = parser.parse_known_args(argv)
    engine = [a for a in rest if not a.startswith("-")]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageHost(engine[-1] if engine else "", args.exec_script), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        server.stop(grace=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
