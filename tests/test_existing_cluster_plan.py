"""The plan of an existing-cluster stack (issue 38): no DigitalOcean resource, one Kubernetes
provider on the `kubeconfig` secret, every pod on its pool's (or the system) selector, no random
resource when the keys are given, and the kubeconfig nowhere in the plan."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
import yaml

from infra.config import NS, load_config, parse_stack_text
from infra.errors import UserError
from infra.invariants.objects import all_pod_templates
from infra.offline import kubernetes_objects, offline_plan
from infra.stack_plan import plan_stack
from tests.conftest import ROOT, make_project
from tests.test_entry_point import _RUN

FIXTURE = ROOT / "tests" / "fixtures" / "existing_cluster" / "Pulumi.gpu-shared.yaml"
CIPHERTEXT = "v1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
SYSTEM = {"example.com/role": "system"}
POOLS = {"mi300x": {"example.com/gpu-pool": "mi300x"}, "mi300x-small": {"example.com/gpu-pool": "mi300x-small"}}


def _values(mutate=None) -> tuple[dict, set[str]]:
    values, secret_keys = parse_stack_text(FIXTURE.read_text(), FIXTURE)
    values = copy.deepcopy(values)
    if mutate is not None:
        mutate(values, secret_keys)
    return values, secret_keys


def _plan(mutate=None):
    values, secret_keys = _values(mutate)
    cfg = load_config(values, stack="gpu-shared", secret_keys=secret_keys, base_dir=ROOT)
    stack_plan = plan_stack(cfg)
    return stack_plan, offline_plan(stack_plan, ROOT)


@pytest.fixture(scope="module")
def planned():
    return _plan()


def test_no_digitalocean_resource_and_one_provider_on_the_secret(planned):
    _, plan = planned
    types = {r["type"] for r in plan.resources}
    assert not [t for t in types if t.startswith("digitalocean:")]
    (provider,) = [r for r in plan.resources if r["type"] == "pulumi:providers:kubernetes"]
    assert provider["inputs"] == {"kubeconfig": "[secret]", "context": "platform-admin"}
    assert "clusterIdentifier" not in provider["inputs"] and "deleteUnreachable" not in provider["inputs"]
    urn = f"{provider['type']}::{provider['name']}"
    for res in plan.resources:
        if res["type"].startswith("kubernetes:") and res["custom"]:
            assert res["options"].get("provider") == urn, res["name"]
            assert not res["options"].get("deletedWith"), f"{res['name']}: deleted with a cluster the stack does not destroy"


def test_the_outputs_name_no_cluster_and_never_the_kubeconfig(planned):
    stack_plan, _ = planned
    outputs = stack_plan.resources.outputs
    assert not {"kubeconfig", "cluster_id", "vpc_id", "kubernetes_version"} & set(outputs)
    assert {"environment", "region", "layouts", "endpoints", "front_door", "api_key"} <= set(outputs)


def test_the_kubeconfig_is_nowhere_in_the_plan_json_or_yaml(tmp_path, monkeypatch):
    root = make_project(tmp_path / "project")
    marker = "kubeconfig-marker-ZQX"
    text = FIXTURE.read_text().replace(CIPHERTEXT, marker, 1)  # the kubeconfig's ciphertext, first secure: value
    assert marker in text.split("kubeconfig:")[1].splitlines()[0]
    (root / "stacks" / "Pulumi.gpu-shared.yaml").write_text(text)
    from infra.cli import main

    monkeypatch.chdir(root)
    assert main(["plan", "gpu-shared", "--quiet", "--json", str(tmp_path / "p.json"), "--out", str(tmp_path / "out")]) == 0
    written = [tmp_path / "p.json", *(tmp_path / "out").glob("*.yaml")]
    assert len(written) > 50
    for path in written:
        assert marker not in path.read_text(), path.name


def _node_placement(pod: dict) -> list[dict[str, str]]:
    """The label sets a pod may land on: its nodeSelector, ANDed with each required affinity term
    (In with one value only, as the plan writes them)."""
    selector = dict(pod.get("nodeSelector") or {})
    terms = ((((pod.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
             .get("nodeSelectorTerms") or [])
    if not terms:
        return [selector]
    out = []
    for term in terms:
        labels = dict(selector)
        for expr in term["matchExpressions"]:
            assert expr["operator"] == "In" and len(expr["values"]) == 1, expr
            labels[expr["key"]] = expr["values"][0]
        out.append(labels)
    return out


def test_every_pod_template_selects_a_pool_or_the_system_nodes(planned):
    _, plan = planned
    objects = kubernetes_objects(plan)
    templates = all_pod_templates(objects)
    assert len(templates) >= 8
    seen_pools = set()
    for t in templates:
        spec = t.template.get("spec") or {}
        text = json.dumps(spec)
        assert "doks.digitalocean.com/node-pool" not in text and "doks.digitalocean.com/gpu-brand" not in text, t.owner["metadata"]
        gpu_pod = any(tol.get("key") in ("amd.com/gpu", "nvidia.com/gpu") for tol in spec.get("tolerations") or [])
        placements = _node_placement(spec)
        if gpu_pod:
            for labels in placements:
                pool = [name for name, sel in POOLS.items() if sel.items() <= labels.items()]
                assert pool, f"{t.owner['metadata']['name']}: {labels} selects no pool"
                seen_pools.update(pool)
        else:
            assert placements == [SYSTEM], f"{t.owner['metadata']['name']}: {placements}"
    assert seen_pools == set(POOLS)


def test_the_amd_runtime_daemonsets_select_exactly_the_amd_pools(planned):
    _, plan = planned
    daemonsets = {o["metadata"]["name"]: o for o in kubernetes_objects(plan) if o["kind"] == "DaemonSet" and o["metadata"]["namespace"] == "kube-system"}
    assert set(daemonsets) == {"amdgpu-device-plugin", "amdgpu-node-labeller", "gpu-node-tuning"}
    for ds in daemonsets.values():
        placements = _node_placement(ds["spec"]["template"]["spec"])
        assert sorted(p["example.com/gpu-pool"] for p in placements) == sorted(POOLS)


def test_chart_values_pin_system_pods_and_use_the_default_storage_class(planned):
    _, plan = planned
    (release,) = [r for r in plan.resources if r["type"] == "kubernetes:helm.sh/v3:Release"]
    values = release["inputs"]["values"]
    assert values["prometheus"]["prometheusSpec"]["nodeSelector"] == SYSTEM
    claim = values["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert "storageClassName" not in claim  # the cluster's default class: it need not have do-block-storage
    assert values["kube-state-metrics"]["metricLabelsAllowlist"][1] == "nodes=[example.com/gpu-pool]"


def test_no_random_resource_with_api_key_and_engine_key(planned):
    _, plan = planned
    assert not [r for r in plan.resources if r["type"].startswith("random:")]


def test_without_engine_key_the_engine_key_is_generated():
    def drop(values, secret_keys):
        del values[NS + "engine_key"]
        secret_keys.discard(NS + "engine_key")

    _, plan = _plan(drop)
    assert [r["name"] for r in plan.resources if r["type"].startswith("random:")] == ["gpu-shared-engine-key"]


def test_engine_key_replaces_the_generated_one_in_a_doks_stack_too(tmp_path):
    values, secret_keys = parse_stack_text((ROOT / "stacks" / "Pulumi.dev.yaml").read_text(), "dev")
    values[NS + "router"] = {"kind": "session"}  # a front door: with router.kind service (dev's) nothing reads engine_key
    values[NS + "engine_key"] = None
    values[NS + "api_key"] = None
    cfg = load_config(values, stack="dev", secret_keys=secret_keys | {NS + "engine_key", NS + "api_key"}, base_dir=ROOT)
    plan = offline_plan(plan_stack(cfg), ROOT)
    assert not [r for r in plan.resources if r["type"].startswith("random:")]
    assert [r for r in plan.resources if r["type"].startswith("digitalocean:")], "the DOKS mode is unchanged"


def test_gpu_operator_mode_gets_one_device_config_per_amd_pool():
    def operator(values, _):
        values[NS + "gpu_runtime"] = {"mode": "gpu-operator"}

    _, plan = _plan(operator)
    configs = [o for o in kubernetes_objects(plan) if o["kind"] == "DeviceConfig"]
    assert {o["metadata"]["name"]: o["spec"]["selector"] for o in configs} == {
        "amd-gpu-mi300x": POOLS["mi300x"], "amd-gpu-mi300x-small": POOLS["mi300x-small"]}


def test_unpinned_system_pods_are_noted():
    def unpinned(values, _):
        del values[NS + "cluster"]["existing"]["system_node_selector"]

    _, plan = _plan(unpinned)
    assert any("system pods are not pinned" in n for n in plan.summary["notes"])


def test_a_public_front_door_notes_the_load_balancer_controller_it_needs():
    """pulumi-kubernetes waits for a LoadBalancer Service's address, which only a load-balancer
    controller writes (DOKS has DigitalOcean's; another cluster may have none): seen for real in
    tests/pulumi_engine, where `pulumi up` fails with "Service was not allocated an IP address"."""
    def public(values, _):
        values[NS + "router"] = {"kind": "session", "public": True, "allowed_source_cidrs": ["81.2.69.0/24"]}

    _, private = _plan()
    assert not any("load-balancer controller" in n for n in private.summary["notes"])
    _, plan = _plan(public)
    assert [o["spec"]["type"] for o in kubernetes_objects(plan) if o["kind"] == "Service" and o["spec"].get("type") == "LoadBalancer"]
    assert any("LoadBalancer Service, which needs the cluster's load-balancer controller" in n for n in plan.summary["notes"])


def test_the_capacity_invariant_reads_the_pools_by_their_selectors():
    """Two models on a one-node pool with explicit layouts that together fill more GPUs than it has
    are refused by the config; a pool too small for its model's weights on disk by the capacity check."""
    def crowded(values, _):
        values[NS + "gpu_pools"][1]["size"] = "gpu-mi300x1-192gb"
        values[NS + "models"][1]["layout"] = {"tp": 1, "replicas_per_node": 1}
        values[NS + "models"].append({**values[NS + "models"][1], "name": "second", "layout": {"tp": 1, "replicas_per_node": 1}})

    with pytest.raises(UserError) as err:
        _plan(crowded)
    assert "gpu_pools" in err.value.render() or "models[" in err.value.render()


def test_the_entry_point_declares_what_the_offline_plan_records(tmp_path):
    """`pulumi up`'s program under the mock runtime registers exactly the offline plan's resources."""
    root = tmp_path / "project"
    make_project(root)
    os.symlink(ROOT / "infra", root / "infra")
    os.symlink(ROOT / "components", root / "components")
    text = yaml.safe_load(FIXTURE.read_text())
    (root / "stacks" / "Pulumi.gpu-shared.yaml").write_text(yaml.safe_dump(text))
    # Each secret as a value the key checks accept (the engine key and api_key are checked at `pulumi up`).
    run = _RUN.replace('"[secret]"', '"secret-placeholder-of-40-characters-0000"')
    assert run != _RUN
    proc = subprocess.run([sys.executable, "-c", run, str(root), "gpu-shared"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "error" not in answer, answer
    _, plan = _plan()
    assert answer["resources"] == json.loads(plan.to_json())["resources"]




def test_gpu_operator_and_cert_manager_releases_run_on_the_system_nodes():
    """Audit t32: the operator's controller and cert-manager's Deployments and Job are system pods."""
    def operator(values, _):
        values[NS + "gpu_runtime"] = {"mode": "gpu-operator"}

    _, plan = _plan(operator)
    releases = {r["inputs"]["name"]: r["inputs"]["values"] for r in plan.resources if r["type"] == "kubernetes:helm.sh/v3:Release"}
    assert releases["amd-gpu-operator"]["controllerManager"]["nodeSelector"] == SYSTEM
    cert_manager = releases["cert-manager"]
    assert cert_manager["nodeSelector"] == SYSTEM
    assert all(cert_manager[part]["nodeSelector"] == SYSTEM for part in ("webhook", "cainjector", "startupapicheck"))


def test_gpu_operator_releases_are_not_pinned_without_a_system_selector():
    def operator_unpinned(values, _):
        values[NS + "gpu_runtime"] = {"mode": "gpu-operator"}
        del values[NS + "cluster"]["existing"]["system_node_selector"]

    _, plan = _plan(operator_unpinned)
    releases = {r["inputs"]["name"]: r["inputs"]["values"] for r in plan.resources if r["type"] == "kubernetes:helm.sh/v3:Release"}
    assert "controllerManager" not in releases["amd-gpu-operator"]
    assert releases["cert-manager"] == {"crds": {"enabled": True}}


def test_the_pd_router_runs_on_the_system_nodes():
    """Audit t58: a P/D layout's router is a system pod (its engines select their pool)."""
    def pd(values, _):
        values[NS + "models"][0]["layout"] = "p1tp4-d1tp4"

    _, plan = _plan(pd)
    (router,) = [o for o in kubernetes_objects(plan) if o["kind"] == "Deployment" and o["metadata"]["name"] == "qwen3-32b-pd-router"]
    assert router["spec"]["template"]["spec"]["nodeSelector"] == SYSTEM


def test_a_digitalocean_token_on_an_existing_cluster_is_noted_as_unread():
    """Audit t46: nothing reads digitalocean:token when the stack creates no DigitalOcean resource."""
    def token(values, secret_keys):
        values["digitalocean:token"] = None
        secret_keys.add("digitalocean:token")

    _, plan = _plan(token)
    assert any("digitalocean:token is set, but the stack creates no DigitalOcean resource" in n for n in plan.summary["notes"])
    _, plain = _plan()
    assert not any("digitalocean:token" in n for n in plain.summary["notes"])
