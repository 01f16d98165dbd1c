"""`infra doctor` of an existing-cluster stack against a real kube-apiserver (issue 38): the
control plane's admin kubeconfig (token, CA file), kwok nodes labelled like the stack's pools."""

from __future__ import annotations

import shutil

import pytest

from infra.cli import main
from tests.conftest import ROOT, make_project

FIXTURE = ROOT / "tests" / "fixtures" / "existing_cluster" / "Pulumi.gpu-shared.yaml"


def _node(name: str, labels: dict, gpus: int) -> dict:
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110", **({"amd.com/gpu": str(gpus)} if gpus else {})}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {**labels, "kubernetes.io/hostname": name}, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": [{"key": "amd.com/gpu", "effect": "NoSchedule"}] if gpus else []},
        "status": {"capacity": resources, "allocatable": resources},
    }  # fmt: skip


@pytest.fixture
def labelled_nodes(cluster):
    """Two MI300X×8 nodes, one MI300X×1 node and one system node, labelled as the fixture selects them."""
    cluster.preinstall()  # DOKS's preinstalled CRDs, Cilium's among them
    nodes = [
        _node("existing-gpu-0", {"example.com/gpu-pool": "mi300x"}, 8),
        _node("existing-gpu-1", {"example.com/gpu-pool": "mi300x"}, 8),
        _node("existing-small-0", {"example.com/gpu-pool": "mi300x-small"}, 1),
        _node("existing-system-0", {"example.com/role": "system"}, 0),
    ]
    for obj in nodes:
        cluster.core.create_node(obj)
    cluster._wait(lambda: all(cluster._ready(cluster.core.read_node(n["metadata"]["name"])) for n in nodes), 60, "nodes Ready")
    yield nodes
    for obj in nodes:
        cluster.core.delete_node(obj["metadata"]["name"])


def _doctor(tmp_path, control_plane, monkeypatch, capsys, stack_text: str) -> tuple[int, str]:
    root = make_project(tmp_path / "project")
    (root / "stacks" / FIXTURE.name).write_text(stack_text)
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copy(control_plane.kubeconfig, kubeconfig)
    # The fixture names the context platform-admin: give the control plane's context that name.
    kubeconfig.write_text(kubeconfig.read_text().replace("name: test\n  context:", "name: platform-admin\n  context:")
                          .replace("current-context: test", "current-context: platform-admin"))
    for name in ("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.chdir(root)
    code = main(["doctor", "gpu-shared"])
    return code, capsys.readouterr().out


def test_doctor_passes_a_cluster_whose_nodes_match_the_stack(labelled_nodes, control_plane, tmp_path, monkeypatch, capsys):
    code, out = _doctor(tmp_path, control_plane, monkeypatch, capsys, FIXTURE.read_text())
    assert code == 0, out
    assert "existing cluster, API https://" in out and "context platform-admin" in out
    assert "reachable, Kubernetes v1.33" in out
    assert "2 Ready node(s) match example.com/gpu-pool=mi300x, each with ≥ 8 amd.com/gpu" in out
    assert "1 Ready node(s) match example.com/role=system" in out and "cilium.io/v2 is served" in out
    assert " 0 fail" in out


def test_doctor_fails_a_pool_short_of_nodes(labelled_nodes, control_plane, tmp_path, monkeypatch, capsys):
    text = FIXTURE.read_text().replace("      nodes: 2\n", "      nodes: 3\n", 1)
    code, out = _doctor(tmp_path, control_plane, monkeypatch, capsys, text)
    assert code == 1, out
    assert "matches 2 Ready node(s)" in out and "nodes is 3" in out
