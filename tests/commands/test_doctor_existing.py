"""`infra doctor` of an existing-cluster stack: the verdicts from fake API answers, the kubeconfig
reader, and the command wiring (no DigitalOcean token asked). The same checks against a real
API server: tests/cluster/test_doctor_existing.py."""

from __future__ import annotations

import base64
import shutil

import pytest

from infra.cli import main
from infra.cluster_doctor import (
    ClusterAnswers,
    ClusterExpectation,
    PoolExpectation,
    cluster_checks,
    expectation_from_config,
    kubeconfig_path,
    read_kubeconfig,
)
from infra.config import load_stack_file
from infra.errors import UserError
from tests.conftest import ROOT, make_project

FIXTURE = ROOT / "tests" / "fixtures" / "existing_cluster" / "Pulumi.gpu-shared.yaml"
VERSION = {"major": "1", "minor": "33", "gitVersion": "v1.33.13"}


def node(name: str, labels: dict, *, gpus: int = 0, resource: str = "amd.com/gpu", ready: bool = True, cordoned: bool = False) -> dict:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {"allocatable": {resource: str(gpus), "cpu": "8"}, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def expectation(*, system=None, plugin_by_stack=False) -> ClusterExpectation:
    return ClusterExpectation(
        context=None, system_node_selector=system if system is not None else {"role": "system"},
        pools=(PoolExpectation("mi300x", {"pool": "mi300x"}, 2, "amd.com/gpu", 8, plugin_by_stack),),
    )


def healthy_nodes() -> list[dict]:
    return [node("g1", {"pool": "mi300x"}, gpus=8), node("g2", {"pool": "mi300x"}, gpus=8), node("s1", {"role": "system"})]


def verdicts(expect, nodes, **answers) -> dict[str, tuple[str, str]]:
    checks = cluster_checks(expect, ClusterAnswers(version=answers.get("version", VERSION), nodes=nodes, cilium=answers.get("cilium", True)))
    return {c.name: (c.status, c.detail) for c in checks}


def test_a_healthy_cluster_passes_every_check():
    out = verdicts(expectation(), healthy_nodes())
    assert {k: v[0] for k, v in out.items()} == {
        "api server": "pass", "pinned versions": "pass", "pool mi300x": "pass", "system nodes": "pass", "pool overlap": "pass", "cilium": "pass"}
    assert "v1.33.13" in out["api server"][1]


def test_too_few_ready_nodes_fail_naming_the_rest():
    nodes = healthy_nodes()
    nodes[1] = node("g2", {"pool": "mi300x"}, gpus=8, ready=False)
    status, detail = verdicts(expectation(), nodes)["pool mi300x"]
    assert status == "fail" and "pool=mi300x matches 1 Ready node(s)" in detail and "g2" in detail and "nodes is 2" in detail


def test_a_cordoned_node_does_not_count():
    nodes = healthy_nodes()
    nodes[0] = node("g1", {"pool": "mi300x"}, gpus=8, cordoned=True)
    assert verdicts(expectation(), nodes)["pool mi300x"][0] == "fail"


def test_fewer_gpus_than_the_size_fail_unless_the_stack_installs_the_plugin():
    nodes = healthy_nodes()
    nodes[0] = node("g1", {"pool": "mi300x"}, gpus=4)
    status, detail = verdicts(expectation(), nodes)["pool mi300x"]
    assert status == "fail" and "g1: 4" in detail and "amd.com/gpu" in detail
    status, detail = verdicts(expectation(plugin_by_stack=True), nodes)["pool mi300x"]
    assert status == "warn" and "installs the device plugin" in detail


def test_no_system_node_fails_and_no_system_selector_warns():
    assert verdicts(expectation(), healthy_nodes()[:2])["system nodes"][0] == "fail"
    assert verdicts(expectation(system={}), healthy_nodes())["system nodes"][0] == "warn"


def test_a_node_matching_two_selectors_fails():
    nodes = healthy_nodes()
    nodes[0] = node("g1", {"pool": "mi300x", "role": "system"}, gpus=8)
    status, detail = verdicts(expectation(), nodes)["pool overlap"]
    assert status == "fail" and "g1: gpu_pools mi300x and system" in detail


def test_an_unreachable_api_is_one_failure_and_nothing_else():
    checks = cluster_checks(expectation(), ClusterAnswers(errors={"version": "cannot connect to https://x"}))
    assert [(c.name, c.status) for c in checks] == [("api server", "fail")]
    assert "cannot connect" in checks[0].detail


def test_an_old_cluster_warns_about_the_pins_and_a_cluster_without_cilium_fails():
    out = verdicts(expectation(), healthy_nodes(), version={"major": "1", "minor": "27+", "gitVersion": "v1.27.3"}, cilium=False)
    assert out["pinned versions"][0] == "warn" and "1.27" in out["pinned versions"][1]
    assert out["cilium"][0] == "fail"


def test_nodes_not_listable_fail():
    checks = cluster_checks(expectation(), ClusterAnswers(version=VERSION, nodes=None, errors={"nodes": "HTTP 403"}))
    assert ("nodes", "fail") in [(c.name, c.status) for c in checks]


def test_the_expectation_of_the_fixture(tmp_path):
    cfg = load_stack_file("gpu-shared", _project(tmp_path / "project"))
    expect = expectation_from_config(cfg)
    assert expect.context == "platform-admin" and expect.system_node_selector == {"example.com/role": "system"}
    assert [(p.name, p.nodes, p.gpus_per_node, p.plugin_installed_by_stack) for p in expect.pools] == [
        ("mi300x", 2, 8, True), ("mi300x-small", 1, 1, True)]


def _project(root):
    make_project(root)
    shutil.copy(FIXTURE, root / "stacks" / FIXTURE.name)
    return root


KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: a
clusters:
- name: c
  cluster: {{server: "https://127.0.0.1:6443/", certificate-authority-data: {ca}}}
users:
- name: u
  user: {{token: t0ken-value}}
contexts:
- name: a
  context: {{cluster: c, user: u}}
- name: platform-admin
  context: {{cluster: c, user: u}}
"""


def test_the_kubeconfig_reader_picks_the_context_and_never_quotes_a_credential(tmp_path):
    path = tmp_path / "kc"
    path.write_text(KUBECONFIG.format(ca=base64.b64encode(b"CA").decode()))
    access = read_kubeconfig(path, "--kubeconfig kc", "platform-admin")
    assert (access.server, access.context, access.token, access.ca_data) == ("https://127.0.0.1:6443", "platform-admin", "t0ken-value", b"CA")
    assert read_kubeconfig(path, "x", None).context == "a"
    with pytest.raises(UserError) as err:
        read_kubeconfig(path, "--kubeconfig kc", "other")
    assert "has no context 'other'" in err.value.render() and "t0ken" not in err.value.render()


def test_without_a_kubeconfig_doctor_says_how_to_give_one():
    with pytest.raises(UserError, match="pass --kubeconfig FILE"):
        kubeconfig_path(None, {})


def test_doctor_of_an_existing_stack_needs_no_digitalocean_token(tmp_path, monkeypatch, capsys):
    """An unreachable server: the run reaches the cluster's API (not DigitalOcean's) and fails there."""
    root = _project(tmp_path / "project")
    path = tmp_path / "kc"
    path.write_text(KUBECONFIG.format(ca=base64.b64encode(b"CA").decode()).replace("127.0.0.1:6443", "127.0.0.1:9"))
    for name in ("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(root)
    code = main(["doctor", "gpu-shared", "--kubeconfig", str(path), "--connect-timeout", "2"])
    out = capsys.readouterr()
    assert code == 1, out
    assert "existing cluster, API https://127.0.0.1:9, context platform-admin" in out.out
    assert "api server" in out.out and "token" not in out.out.lower().replace("t0ken", "")
    assert "t0ken-value" not in out.out + out.err


def test_kubeconfig_is_refused_for_a_doks_stack(tmp_path, monkeypatch, capsys):
    root = make_project(tmp_path / "project")
    shutil.copy(ROOT / "stacks" / "Pulumi.dev.yaml", root / "stacks")
    monkeypatch.chdir(root)
    code = main(["doctor", "dev", "--kubeconfig", str(tmp_path / "kc")])
    assert code == 2 and "applies to an existing-cluster stack (cluster.existing) only" in capsys.readouterr().err
