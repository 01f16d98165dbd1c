"""Fixtures of the node tests (marker `node`): one real node on this machine — the control plane of
tests/cluster, containerd and runc from Debian, a CNI bridge, and a kubelet and kube-proxy built
from the same Kubernetes release (tests/node/node.py) — running the stand-in images of
tests/node/images.py.

Opt-in: they run with `INFRA_NODE=1` or when `-m` names `node`; otherwise each is skipped, so the
default `./dev.sh test` stays offline and needs no root:

    scripts/build_control_plane.sh etcd kubernetes:kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kube-proxy
    scripts/build_node_images.sh && ./dev.sh test -m node tests/node

One node serves the session. A failing test's report carries the tails of every process's log
and of every container log the kubelet wrote.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.opt_in import mark_opt_in

HERE = Path(__file__).resolve().parent
_STATE: dict = {}
# The node's pool label: the system pool of the node test stack (tests/node/stack.py).
NODE_LABELS = {"doks.digitalocean.com/node-pool": "node-doks-system"}


def pytest_collection_modifyitems(config, items):
    mark_opt_in(config, items, HERE, "node", "INFRA_NODE", "node test (needs root, containerd, runc)")


@pytest.fixture(scope="session")
def sandbox_report():
    from tests.node import sandbox

    report = sandbox.probe()
    if report["wall"]:
        pytest.fail(f"this machine cannot run a node: {report['wall']}\n{report}")
    return report


@pytest.fixture(scope="session")
def node(sandbox_report, tmp_path_factory):
    from tests.node.node import start_node, stop_node

    n = start_node(tmp_path_factory.mktemp("node"), NODE_LABELS)
    _STATE["node"] = n
    yield n
    stop_node(n)


@pytest.fixture(scope="session")
def image(node):
    """image("python") → its stamp: built (or reused) and imported into the node's containerd once."""
    from tests.node import images as built
    from tests.node import runtime

    done: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in done:
            stand_in = built.IMAGES[name]
            info = dict(built.ensure_built(stand_in))
            seconds = runtime.import_image(
                node.workdir, info["ref"], info["digest"], stand_in.dir / "image.oci.tar"
            )
            info["import_seconds"] = round(seconds, 1)
            done[name] = info
        return done[name]

    return get


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    n = _STATE.get("node")
    if report.when == "call" and report.failed and n is not None:
        report.sections.append(("node logs", n.cp.logs(40)))
        report.sections.append(("container logs", n.pod_logs(40)))
