"""Fixtures of the control-plane tests (marker `cluster`): a real etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok on loopback, built from Go modules by
tests/cluster/build.py (cached per machine).

Opt-in: they run with `INFRA_CLUSTER=1` or when `-m` names `cluster`; otherwise each is skipped,
so the default `./dev.sh test` stays offline and fast:

    scripts/build_control_plane.sh && ./dev.sh test -m cluster tests/cluster

One control plane serves the session; each stack gets a clean slate (tests/cluster/harness.py
deletes what the previous stack left). Every process's log is a file under the session's tmp dir,
and a failing test gets their tails in its report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.opt_in import mark_opt_in

HERE = Path(__file__).resolve().parent
_STATE: dict = {}


def pytest_collection_modifyitems(config, items):
    mark_opt_in(config, items, HERE, "cluster", "INFRA_CLUSTER", "control-plane test")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory):
    from tests.cluster import build
    from tests.cluster.control_plane import start_control_plane

    for tool, wanted in build.parse(["etcd", "kubernetes:kube-apiserver,kube-controller-manager,kube-scheduler", "kwok"]):
        build.build(tool, wanted)
    cp = start_control_plane(tmp_path_factory.mktemp("control-plane"))
    _STATE["cp"] = cp
    yield cp
    cp.stop()


@pytest.fixture(scope="session")
def cluster(control_plane):
    """A Cluster helper (tests/cluster/harness.py) bound to the running control plane."""
    from tests.cluster.harness import Cluster

    return Cluster.connect(control_plane)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cp = _STATE.get("cp")
    if report.when == "call" and report.failed and cp is not None:
        report.sections.append(("control-plane logs", cp.logs(40)))
