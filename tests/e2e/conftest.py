"""Fixtures of the real-engine e2e tests (marker `e2e`): CPU vLLM, vllm-router, vllm bench, Prometheus.

Opt-in: they run with `INFRA_E2E=1` or when `-m` names `e2e`; otherwise each is skipped (a
default `./dev.sh test` stays offline and fast):

    INFRA_E2E=1 ./dev.sh test tests/e2e           # or: ./dev.sh test -m e2e tests/e2e

Cost on this 2-core machine: building the engine venv (tests/e2e/engine_env.py, cached between
runs) and 5–7 minutes of tests (more under load). A missing Prometheus is installed with apt-get when running as
root, and is otherwise an error, never a skip.

Session fixtures: `engine_env` (the venv), `procs` (every process started; all stopped at the
end), `tiny_models` (checkpoints built in a tmp dir), `engine_pair` (two engines from the project's
one-GPU Deployment args, API key on), `artifacts` (bench results and logs kept after the run,
under INFRA_E2E_ARTIFACTS or ~/.cache/inference-platform-e2e/runs/<time>/). A failing test gets the
tail of every process log in its report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.e2e import harness, inputs
from tests.e2e.engine_env import EngineEnv, RouterEnv, base_dir, ensure_engine_env, ensure_router_env
from tests.opt_in import mark_opt_in

HERE = Path(__file__).resolve().parent
# Run by the ENGINE venv's Python, never imported here: collecting tests/e2e must not need vLLM or
# torch (the default `./dev.sh test` collects this directory and skips it).
collect_ignore = ["vllm_parsers.py", "tiny_model.py", "engine_env.py", "kv_offload_flags.py"]
TIMINGS: dict[str, float] = {}
_PROCS: list[harness.Processes] = []
ENGINE_START_TIMEOUT = 300


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: real-engine end-to-end tests (CPU vLLM, vllm-router, Prometheus); opt-in")


def pytest_collection_modifyitems(config, items):
    mark_opt_in(config, items, HERE, "e2e", "INFRA_E2E", "real-engine e2e test")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _PROCS:
        tails = "\n".join(p.tails() for p in _PROCS if p.procs)
        if tails:
            report.sections.append(("e2e process logs (tails)", tails))


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_sep("-", "e2e timings (s)")
        for k, v in TIMINGS.items():
            terminalreporter.write_line(f"{k:40s} {v:8.1f}")


def timed(name: str):
    class _T:
        def __enter__(self):
            self.t = time.monotonic()

        def __exit__(self, *exc):
            TIMINGS[name] = round(time.monotonic() - self.t, 1)

    return _T()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    root = Path(os.environ.get("INFRA_E2E_ARTIFACTS") or base_dir() / "runs" / time.strftime("%Y%m%d-%H%M%S"))
    root.mkdir(parents=True, exist_ok=True)
    yield root
    (root / "timings.json").write_text(json.dumps(TIMINGS, indent=2))
    print(f"\ne2e artifacts: {root}", file=sys.stderr)


@pytest.fixture(scope="session")
def engine_env() -> EngineEnv:
    with timed("engine env (build or reuse)"):
        env = ensure_engine_env()
    stamp = env.stamp()
    for k, v in stamp.get("timings", {}).items():
        TIMINGS[f"engine env build: {k} (at {stamp.get('built_at')})"] = v
    return env


@pytest.fixture(scope="session")
def router_env() -> RouterEnv:
    """vllm-router 0.1.17 alone, for tests whose engines are stand-ins (no vLLM build needed)."""
    with timed("router-only env (build or reuse)"):
        return ensure_router_env()


@pytest.fixture()
def stub_router_factory(procs, router_env, tmp_path):
    """Like `router_factory`, with the router-only env: engines may be stand-ins with a `url`."""
    started: list[harness.Proc] = []
    yield router_starter(procs, router_env, started, tmp_path)
    _stop_routers(procs, started)


@pytest.fixture(scope="session")
def procs(artifacts):
    registry = harness.Processes(artifacts / "logs")
    _PROCS.append(registry)
    yield registry
    registry.stop_all()
    _PROCS.remove(registry)


@pytest.fixture(scope="session")
def tiny_models(engine_env, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-models")
    out = {}
    with timed("tiny models (llama + mixtral)"):
        for arch in ("llama", "mixtral"):
            result = subprocess.run([str(engine_env.python), str(HERE / "tiny_model.py"), str(root / arch), "--arch", arch],
                                    capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, f"tiny {arch} model build failed:\n{result.stderr[-3000:]}"
            out[arch] = root / arch
    return out


@pytest.fixture(scope="session")
def prometheus_bin() -> dict[str, str]:
    """prometheus and promtool; apt-get installs them (as root) when missing; never a skip."""
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        if os.geteuid() == 0 and shutil.which("apt-get"):
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            subprocess.run(["apt-get", "update", "-qq"], env=env, check=False, capture_output=True)
            r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus"], env=env,
                               capture_output=True, text=True)
            assert r.returncode == 0, f"apt-get install prometheus failed:\n{r.stderr[-2000:]}"
    missing = [b for b in ("prometheus", "promtool") if not shutil.which(b)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed (Debian: apt-get install prometheus); the e2e tests need it")
    return {"prometheus": shutil.which("prometheus"), "promtool": shutil.which("promtool")}


def engine_process_env(engine_env: EngineEnv, container: dict, *, cpu: str | None) -> dict[str, str]:
    env = harness.literal_env(container["env"], VLLM_API_KEY=inputs.API_KEY)
    env.update(harness.CPU_ENGINE_ENV)
    if os.environ.get("INFRA_E2E_ENGINE_MULTIPROC") != "1":
        env.update(harness.INPROC_ENV)
    env["VLLM_CACHE_ROOT"] = str(engine_env.cache_dir)
    env["HF_HOME"] = str(engine_env.cache_dir / "hf")
    if cpu is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = cpu  # one core per engine: two engines share 2 cores
    return env


def start_engine(procs: harness.Processes, engine_env: EngineEnv, spec, model_path: Path, *, name: str,
                 cpu: str | None = None) -> harness.Proc:
    """Start `vllm serve` with the args model_service.render_deployment(spec) gives the container."""
    container = inputs.engine_container(spec)
    port = harness.free_port()
    args, notes = harness.adapt_engine_args(container["args"], model_path=str(model_path), port=port)
    proc = procs.start(name, [engine_env.vllm, "serve", *args], env=engine_process_env(engine_env, container, cpu=cpu),
                       port=port, meta={"rendered_args": container["args"], "args": args, "notes": notes,
                                        "served": spec.served_model_name})
    return proc


def wait_engines(procs: harness.Processes, engines: list[harness.Proc], label: str) -> None:
    errors: list[BaseException] = []

    def wait(p):
        try:
            TIMINGS[f"{label}: {p.name} healthy after"] = round(
                harness.wait_http(p, "/health", timeout=ENGINE_START_TIMEOUT, extra_tails=procs.tails), 1)
        except BaseException as err:  # noqa: BLE001 - re-raised below
            errors.append(err)

    threads = [threading.Thread(target=wait, args=(p,)) for p in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@pytest.fixture(scope="session")
def engine_pair(procs, engine_env, tiny_models) -> list[harness.Proc]:
    """Two replicas of the dense model (API key on, as for a public router), one core each."""
    spec = inputs.model_service_spec(str(tiny_models["llama"]))
    engines = [start_engine(procs, engine_env, spec, tiny_models["llama"], name=f"engine-{i}", cpu=str(i % (os.cpu_count() or 1)))
               for i in range(2)]
    with timed("engine pair cold start (2 in parallel)"):
        wait_engines(procs, engines, "engine pair")
    return engines


@pytest.fixture(scope="session")
def moe_engine(procs, engine_env, tiny_models, engine_pair) -> harness.Proc:
    """One replica of the tiny Mixtral (expert-parallel args), started after the dense pair."""
    spec = inputs.model_service_spec(str(tiny_models["mixtral"]), moe=True)
    engine = start_engine(procs, engine_env, spec, tiny_models["mixtral"], name="engine-moe", cpu=None)
    with timed("moe engine cold start"):
        wait_engines(procs, [engine], "moe")
    return engine


def router_starter(procs: harness.Processes, engine_env: EngineEnv | RouterEnv, started: list, tmp: Path):
    """start(spec, engines) → a running vllm-router 0.1.17 with the project's rendered args, its
    workers registered by the project's registrar (the repo's file) from a stand-in EndpointSlice
    API. `engines`: a list (all serving the spec's first model) or {platform model name: [engines]}."""

    def start(spec, engines, name: str | None = None) -> harness.Proc:
        by_model = engines if isinstance(engines, dict) else {spec.models[0].name: engines}
        served = {m.name: m.served_model_name for m in spec.models}
        port, metrics_port = harness.free_port(), harness.free_port()
        args = harness.render_router_cli(inputs.project_router_args(spec), port=port, metrics_port=metrics_port,
                                         api_key=inputs.API_KEY)
        proc = procs.start(name or f"router-{spec.kind}", [engine_env.router, *args], port=port,
                           meta={"metrics_port": metrics_port, "args": args})
        started.append(proc)
        harness.wait_http(proc, "/health", timeout=60, extra_tails=procs.tails)
        kube = harness.FakeEndpointSlices(spec.engines_namespace)  # where the registrar reads the engines
        for model, model_engines in by_model.items():
            kube.set(model, [e.url for e in model_engines])
        token = tmp / f"token-{port}"
        token.write_text(kube.TOKEN)
        reg_args = harness.render_registrar_cli(inputs.project_registrar_args(spec), router_url=proc.url,
                                                api_server=kube.url, token_file=str(token),
                                                script=str(inputs.REGISTRAR_SCRIPT))
        registrar = procs.start(f"{proc.name}-registrar", [sys.executable, *reg_args], meta={"args": reg_args})
        proc.meta.update(kube=kube, registrar=registrar)
        started.append(registrar)
        want = {e.url: served[m] for m, es in by_model.items() for e in es}
        TIMINGS[f"{proc.name}: workers registered after"] = round(
            harness.wait_workers(proc.url, want, timeout=30, tails=procs.tails), 1)
        return proc

    return start


def _stop_routers(procs, started):
    for p in started:
        procs.stop(p)
        kube = p.meta.get("kube")
        if kube:
            kube.close()


@pytest.fixture()
def router_factory(procs, engine_env, tmp_path):
    """Routers (with their registrars) started by one test, stopped after it."""
    started: list[harness.Proc] = []
    yield router_starter(procs, engine_env, started, tmp_path)
    _stop_routers(procs, started)


@pytest.fixture(scope="module")
def module_router_factory(procs, engine_env, tmp_path_factory):
    """Routers shared by a module's tests."""
    started: list[harness.Proc] = []
    yield router_starter(procs, engine_env, started, tmp_path_factory.mktemp("router"))
    _stop_routers(procs, started)
