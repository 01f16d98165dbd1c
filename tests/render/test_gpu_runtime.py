"""The GPU-runtime renderers: Kubernetes 1.33 schema validity and the fields that matter."""

import re

import kubernetes_validate
import pytest

from infra.catalog import versions
from infra.charts.values import committed_index, unknown_paths
from infra.render import gpu_runtime as render

K8S_VERSION = "1.33"
GPU_TOLERATION = {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _all_builtin_objects():
    return [
        *render.render_device_plugin(versions.ROCM_DEVICE_PLUGIN_IMAGE),
        *render.render_node_labeller(versions.ROCM_NODE_LABELLER_IMAGE),
        render.render_node_tuning_daemonset(versions.BUSYBOX_IMAGE),
    ]


@pytest.mark.parametrize("obj", _all_builtin_objects(), ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_validates_against_kubernetes_1_33(obj):
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_invalid_object_is_rejected_by_the_validator():
    broken = render.render_node_tuning_daemonset(versions.BUSYBOX_IMAGE)
    broken["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def _daemonsets(objs):
    return [o for o in objs if o["kind"] == "DaemonSet"]


def test_every_daemonset_tolerates_the_gpu_taint_and_targets_amd_nodes():
    for ds in _daemonsets(_all_builtin_objects()):
        pod = ds["spec"]["template"]["spec"]
        assert GPU_TOLERATION in pod["tolerations"], ds["metadata"]["name"]
        assert pod["nodeSelector"]["doks.digitalocean.com/gpu-brand"] == "amd"
        assert pod["priorityClassName"] == "system-node-critical"
        assert (
            ds["spec"]["selector"]["matchLabels"].items()
            <= ds["spec"]["template"]["metadata"]["labels"].items()
        )


def test_images_are_pinned_from_the_catalog():
    plugin = _daemonsets(render.render_device_plugin("registry.example/plugin:1.2.3"))[0]
    assert plugin["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example/plugin:1.2.3"
    for ds in _daemonsets(_all_builtin_objects()):
        for c in ds["spec"]["template"]["spec"]["containers"]:
            assert ":" in c["image"] and not c["image"].endswith(":latest")
            assert "IMAGE_SET_BY_RENDERER" not in c["image"]


def test_device_plugin_mode_leaves_the_exporter_to_doks_and_stays_out_of_its_scrape():
    """device-plugin mode renders no metrics exporter: the DOKS add-on runs it in the same namespace,
    and the exporter PodMonitor keeps pods there by image, so none of ours may match."""
    from infra.render.observability import EXPORTER_IMAGE_REGEX, EXPORTER_NAMESPACE_BY_MODE

    assert EXPORTER_NAMESPACE_BY_MODE["device-plugin"] == render.RUNTIME_NAMESPACE == "kube-system"
    assert re.fullmatch(EXPORTER_IMAGE_REGEX, versions.ROCM_DEVICE_METRICS_EXPORTER_IMAGE)
    for ds in _daemonsets(_all_builtin_objects()):
        assert "exporter" not in ds["metadata"]["name"]
        pod = ds["spec"]["template"]["spec"]
        for c in pod["containers"] + pod.get("initContainers", []):
            assert not re.fullmatch(EXPORTER_IMAGE_REGEX, c["image"]), c["image"]


def test_rendering_does_not_mutate_the_manifest_or_accumulate_tolerations():
    first = render.render_device_plugin("a:1")
    second = render.render_device_plugin("b:2")
    assert first[0]["spec"]["template"]["spec"]["containers"][0]["image"] == "a:1"
    tolerations = second[0]["spec"]["template"]["spec"]["tolerations"]
    assert tolerations.count(GPU_TOLERATION) == 1


def test_labeller_rbac_grants_node_updates_to_its_service_account():
    objs = {o["kind"]: o for o in render.render_node_labeller("l:1", namespace="gpu-system")}
    assert objs["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update"]}
    ]
    subject = objs["ClusterRoleBinding"]["subjects"][0]
    assert subject == {"kind": "ServiceAccount", "name": "amdgpu-node-labeller", "namespace": "gpu-system"}
    pod = objs["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == objs["ServiceAccount"]["metadata"]["name"]
    assert objs["DaemonSet"]["metadata"]["namespace"] == "gpu-system"
    assert "-compute-memory-partition" in pod["containers"][0]["args"]


def test_node_tuning_disables_numa_balancing_privileged():
    ds = render.render_node_tuning_daemonset(versions.BUSYBOX_IMAGE)
    container = ds["spec"]["template"]["spec"]["containers"][0]
    script = container["command"][-1]
    assert "/proc/sys/kernel/numa_balancing" in script and 'echo 0 > "$knob"' in script
    assert container["securityContext"]["privileged"] is True
    assert "numa_balancing" in " ".join(container["readinessProbe"]["exec"]["command"])


def test_device_config_uses_the_inbox_driver_and_tolerates_the_taint():
    dc = render.render_device_config("p:1", "l:1", "m:1", metrics_exporter_enabled=False)
    assert dc["apiVersion"] == "amd.com/v1alpha1" and dc["kind"] == "DeviceConfig"
    assert dc["metadata"]["namespace"] == render.GPU_OPERATOR_NAMESPACE
    spec = dc["spec"]
    assert spec["driver"] == {"enable": False}
    assert spec["selector"] == {"doks.digitalocean.com/gpu-brand": "amd"}
    assert spec["devicePlugin"]["devicePluginImage"] == "p:1"
    assert spec["devicePlugin"]["nodeLabellerImage"] == "l:1"
    assert spec["devicePlugin"]["devicePluginTolerations"] == [GPU_TOLERATION]
    assert spec["devicePlugin"]["nodeLabellerTolerations"] == [GPU_TOLERATION]
    assert spec["metricsExporter"]["enable"] is False and spec["metricsExporter"]["image"] == "m:1"
    assert spec["metricsExporter"]["tolerations"] == [GPU_TOLERATION]
    # Only fields present in the operator's DeviceConfig reference (v1.4/1.5) are used.
    assert set(spec) == {"driver", "devicePlugin", "metricsExporter", "selector"}


def test_gpu_operator_values_leave_driver_and_discovery_to_doks():
    values = render.render_gpu_operator_values()
    # Both keys: `enabled` skips the KMM subchart, `watch` stops the operator from using KMM.
    assert values["kmm"] == {"enabled": False, "watch": False}
    assert values["node-feature-discovery"] == {"enabled": False}
    assert values["installdefaultNFDRule"] is False
    assert values["crds"]["defaultCR"]["install"] is False
    assert render.render_cert_manager_values() == {"crds": {"enabled": True}}


def test_gpu_operator_and_cert_manager_values_are_keys_the_pinned_charts_read():
    """Checked against the committed value index of each pinned chart (scripts/chart_index.py,
    derived from the chart's own default values and schema): a value the chart does not read is
    silently ignored by Helm, as `controllerManager.nodeAffinity` was."""
    for chart, version, values in (
        (versions.AMD_GPU_OPERATOR_CHART, versions.AMD_GPU_OPERATOR_CHART_VERSION, render.render_gpu_operator_values()),
        (versions.CERT_MANAGER_CHART, versions.CERT_MANAGER_CHART_VERSION, render.render_cert_manager_values()),
    ):
        index = committed_index(chart, version)
        assert index is not None, f"no value index for {chart} {version}: run scripts/chart_index.py on its archive"
        assert unknown_paths(values, index["values"], index["schema"]) == []
    index = committed_index(versions.AMD_GPU_OPERATOR_CHART, versions.AMD_GPU_OPERATOR_CHART_VERSION)
    assert unknown_paths({"kmm": {"wach": False}}, index["values"], index["schema"]) == ["kmm.wach"]
    # The chart's controller affinity only prefers control-plane nodes; nothing to override on DOKS.
    assert "controllerManager" not in render.render_gpu_operator_values()


def test_device_plugin_is_privileged_like_upstream():
    """ROCm/k8s-device-plugin k8s-ds-amdgpu-dp.yaml at v1.31.0.9: privileged, capabilities dropped."""
    (plugin,) = _daemonsets(render.render_device_plugin(versions.ROCM_DEVICE_PLUGIN_IMAGE))
    security = plugin["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert security == {"privileged": True, "capabilities": {"drop": ["ALL"]}}
