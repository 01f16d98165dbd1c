"""Fixtures of the Pulumi-engine tests (marker `engine`, issue 38): the real Pulumi CLI and
kubernetes provider built from Go modules (scripts/pulumi_toolchain.py), the stand-in Python
language host (language_host.py: the one piece of the engine the Go module proxy does not serve),
and the control plane of the control-plane tests (tests/cluster: etcd, kube-apiserver,
controller-manager, scheduler and kwok, built from Go modules), so that `pulumi preview`, `up` and
`destroy` run for real against a Kubernetes API.

Opt-in: they run with `INFRA_ENGINE=1` or when `-m` names `engine`; otherwise each is skipped:

    scripts/build_control_plane.sh && scripts/build_pulumi.sh && ./dev.sh test -m engine tests/pulumi_engine

A failing test gets the tails of the control plane's logs and of the Pulumi commands it ran.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

# One control plane per session, the control-plane tests' own fixture (not a copy of it).
from tests.cluster.conftest import control_plane  # noqa: F401
from tests.opt_in import mark_opt_in

HERE = Path(__file__).resolve().parent
_STATE: dict = {}


def pytest_collection_modifyitems(config, items):
    mark_opt_in(config, items, HERE, "engine", "INFRA_ENGINE", "Pulumi-engine test")


@pytest.fixture(scope="session")
def engine_toolchain(tmp_path_factory):
    """The CLI and the kubernetes provider (built once per machine, reused when stamped) and the
    language host's wrapper, in the order they go on PATH."""
    from tests.pulumi_engine.workspace import prepare_toolchain

    return prepare_toolchain(tmp_path_factory.mktemp("language-host") / "bin")


@pytest.fixture(scope="session")
def engine_kubeconfig(control_plane, tmp_path_factory):  # noqa: F811 - the imported fixture
    """An admin kubeconfig with everything inline, as a cluster's downloaded one is: the CA, a
    client certificate and key (group system:masters) and a token. Each of them must stay out of
    the backend's files in plain text. Returns (path, the secret strings in it)."""
    from tests.cluster.pki import client_certificate

    pki = control_plane.pki
    cert, key = client_certificate(pki, "engine-admin", "system:masters")
    b64 = {name: base64.b64encode(path.read_bytes()).decode() for name, path in
           (("ca", pki.ca), ("cert", cert), ("key", key))}  # fmt: skip
    path = tmp_path_factory.mktemp("kubeconfig") / "engine.kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: engine\n"
        f"clusters:\n- name: engine\n  cluster:\n    server: {control_plane.server}\n"
        f"    certificate-authority-data: {b64['ca']}\n"
        f"users:\n- name: engine-admin\n  user:\n    client-certificate-data: {b64['cert']}\n"
        f"    client-key-data: {b64['key']}\n    token: {pki.admin_token}\n"
        "contexts:\n- name: engine\n  context: {cluster: engine, user: engine-admin}\n"
    )
    path.chmod(0o600)
    key_body = "".join(line for line in key.read_text().splitlines() if not line.startswith("-----"))
    secrets = {"client-key-data": b64["key"], "client key (PEM body)": key_body,
               "client-certificate-data": b64["cert"], "token": pki.admin_token}  # fmt: skip
    return path, secrets


@pytest.fixture
def workspace(engine_toolchain, tmp_path):
    """A project copy, PULUMI_HOME and a file backend of its own, logged in."""
    from tests.pulumi_engine.workspace import Workspace

    ws = Workspace.create(tmp_path, engine_toolchain)
    _STATE["workspace"] = ws
    ws.login()
    return ws


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    from tests.cluster import conftest as cluster_conftest

    cp = cluster_conftest._STATE.get("cp")
    if cp is not None:
        report.sections.append(("control-plane logs", cp.logs(30)))
    ws = _STATE.get("workspace")
    if ws is not None and ws.log.exists():
        report.sections.append(("pulumi commands", "\n".join(ws.log.read_text().splitlines()[-120:])))
