"""The GPU runtime as planned and as declared under Pulumi mocks: what each mode declares, with
which provider and ordering."""

import pytest

from infra.catalog import versions
from infra.catalog.gpus import gpu_size
from infra.specs import GpuPoolSpec, GpuRuntimeSpec
from infra.stack_resources.foundation import plan_gpu_pool, plan_gpu_runtime
from tests.stack_resources.conftest import run_graph, with_cluster

DS = "kubernetes:apps/v1:DaemonSet"
RELEASE = "kubernetes:helm.sh/v3:Release"
DEVICE_CONFIG = "kubernetes:amd.com/v1alpha1:DeviceConfig"
PROVIDER = "pulumi:providers:kubernetes"
CLUSTER = "digitalocean:index/kubernetesCluster:KubernetesCluster"
POOL = "digitalocean:index/kubernetesNodePool:KubernetesNodePool"
GROUP = "inference-platform:gpu_runtime:GpuRuntime"


def _run(mode, amd_pools=("mi325x",), with_pool=False, **kw):
    def build(b):
        _, cluster, provider = with_cluster(b)
        pools = []
        if with_pool:
            pool = GpuPoolSpec(name="pool-mi325x", pool_name="mi325x", gpu=gpu_size("gpu-mi325x8-2048gb-contracted"), node_count=1)
            pools.append(plan_gpu_pool(b, pool, cluster))
        spec = GpuRuntimeSpec(name="gpu-runtime", mode=mode, amd_pools=tuple(amd_pools), **kw)
        return plan_gpu_runtime(b, spec, provider, pools, cluster)

    return run_graph(build).recording


def _k8s_children(rec):
    return [r for r in rec.registrations if r.type.startswith("kubernetes:")]


def _assert_on_cluster_provider(rec):
    provider = rec.one(PROVIDER)
    children = _k8s_children(rec)
    assert children
    assert all(r.provider_urn == provider.urn for r in children)
    group = rec.one(GROUP)
    assert all(r.parent == group.urn for r in children)
    # Tearing the cluster down skips deleting each object one by one.
    assert all(r.deleted_with == rec.one(CLUSTER).urn for r in children)


def test_doks_managed_declares_only_node_tuning():
    rec = _run("doks-managed")
    assert [r.type for r in _k8s_children(rec)] == [DS]
    ds = rec.one(DS).inputs
    assert ds["metadata"]["name"] == "gpu-node-tuning"
    pod = ds["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == versions.BUSYBOX_IMAGE
    assert pod["containers"][0]["securityContext"] == {"privileged": True}
    assert {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    _assert_on_cluster_provider(rec)


def test_tuning_can_be_turned_off():
    assert _k8s_children(_run("doks-managed", disable_numa_balancing=False)) == []


def test_no_amd_pools_means_nothing_to_run():
    assert _k8s_children(_run("gpu-operator", amd_pools=())) == []


def test_device_plugin_mode_runs_plugin_and_labeller_with_pinned_images():
    rec = _run("device-plugin", disable_numa_balancing=False)
    kinds = sorted(r.type for r in _k8s_children(rec))
    assert kinds == sorted(
        [
            DS,
            DS,
            "kubernetes:core/v1:ServiceAccount",
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
        ]
    )
    images = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]["template"]["spec"]["containers"][0]["image"]
        for r in rec.of_type(DS)
    }
    assert images == {
        "amdgpu-device-plugin": versions.ROCM_DEVICE_PLUGIN_IMAGE,
        "amdgpu-node-labeller": versions.ROCM_NODE_LABELLER_IMAGE,
    }
    crb = rec.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding").inputs
    assert crb["roleRef"]["name"] == "amdgpu-node-labeller"
    _assert_on_cluster_provider(rec)


def test_gpu_operator_mode_orders_cert_manager_operator_and_device_config():
    rec = _run("gpu-operator", metrics_exporter=True)
    cert_manager = rec.one(RELEASE, "gpu-runtime-cert-manager")
    operator = rec.one(RELEASE, "gpu-runtime-amd-gpu-operator")
    device_config = rec.one(DEVICE_CONFIG)
    assert cert_manager.inputs["chart"] == versions.CERT_MANAGER_CHART
    assert cert_manager.inputs["version"] == versions.CERT_MANAGER_CHART_VERSION
    assert cert_manager.inputs["repositoryOpts"] == {"repo": versions.CERT_MANAGER_CHART_REPO}
    assert operator.inputs["chart"] == versions.AMD_GPU_OPERATOR_CHART
    assert operator.inputs["version"] == versions.AMD_GPU_OPERATOR_CHART_VERSION
    assert operator.inputs["repositoryOpts"] == {"repo": versions.AMD_GPU_OPERATOR_CHART_REPO}
    assert operator.inputs["namespace"] == "kube-amd-gpu" and operator.inputs["createNamespace"] is True
    assert operator.inputs["values"]["crds"]["defaultCR"]["install"] is False
    assert cert_manager.urn in operator.dependencies
    assert operator.urn in device_config.dependencies
    spec = device_config.inputs["spec"]
    assert spec["driver"] == {"enable": False}
    assert spec["metricsExporter"]["enable"] is True
    assert spec["selector"] == {"doks.digitalocean.com/gpu-brand": "amd"}
    _assert_on_cluster_provider(rec)


def test_depends_on_reaches_every_object():
    # Every object the runtime declares waits for what it is given to wait for (the GPU pools);
    # depending on a pool's group is depending on its node pool.
    rec = _run("device-plugin", amd_pools=("a",), with_pool=True)
    pool = rec.one(POOL)
    objects = _k8s_children(rec)
    assert objects and all(pool.urn in r.dependencies for r in objects)


def test_unknown_mode_is_a_bug():
    with pytest.raises(ValueError, match="unknown gpu runtime mode"):
        _run("both")
