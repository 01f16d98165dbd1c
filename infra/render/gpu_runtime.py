"""Kubernetes objects of the ROCm GPU runtime, as plain dicts (no Pulumi).

Three runtime modes (config `gpu_runtime.mode`):

- `doks-managed`: DOKS deploys ROCm/k8s-device-plugin itself (cluster flag); nothing here except
  the optional node-tuning DaemonSet.
- `device-plugin`: the DOKS flag is off and we run the plugin and node labeller from
  manifests/rocm-*.yaml with pinned images.
- `gpu-operator`: the AMD GPU Operator (Helm) plus one `DeviceConfig` that keeps DOKS's inbox
  driver (`driver.enable: false`) and selects nodes by the label DOKS puts on AMD GPU nodes.

Every pod that must run on GPU nodes tolerates the `amd.com/gpu:NoSchedule` taint DOKS applies.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from infra.render import scan_exceptions
from infra.render.scan_exceptions import accept

MANIFESTS_DIR = Path(__file__).resolve().parents[2] / "manifests"
DEVICE_PLUGIN_MANIFEST = "rocm-device-plugin.yaml"
NODE_LABELLER_MANIFEST = "rocm-node-labeller.yaml"

AMD_GPU_TAINT_KEY = "amd.com/gpu"
# DOKS labels every AMD GPU node with this (DO docs: managed elements, automatic labels).
AMD_NODE_SELECTOR = {"doks.digitalocean.com/gpu-brand": "amd"}
RUNTIME_NAMESPACE = "kube-system"
GPU_OPERATOR_NAMESPACE = "kube-amd-gpu"
CERT_MANAGER_NAMESPACE = "cert-manager"
METRICS_EXPORTER_PORT = 5000  # the DeviceConfig's metricsExporter.port (Prometheus scrapes it)
CERT_MANAGER_WEBHOOK_PORT = 10250  # cert-manager chart `webhook.securePort` default
PART_OF = {"app.kubernetes.io/part-of": "inference-platform"}

NODE_TUNING_NAME = "gpu-node-tuning"
DEVICE_CONFIG_NAME = "amd-gpu"


def gpu_taint_toleration(taint_key: str = AMD_GPU_TAINT_KEY) -> dict[str, str]:
    """Tolerates the DOKS GPU taint whatever its value."""
    return {"key": taint_key, "operator": "Exists", "effect": "NoSchedule"}


def load_manifest(file_name: str) -> list[dict[str, Any]]:
    """All documents of a YAML file under manifests/, in file order."""
    with open(MANIFESTS_DIR / file_name, encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc]


def _pin(objects: list[dict[str, Any]], image: str, namespace: str) -> list[dict[str, Any]]:
    """Set the image, namespace and GPU toleration on the manifest's objects."""
    out = copy.deepcopy(objects)
    for obj in out:
        kind = obj["kind"]
        if kind in ("ServiceAccount", "DaemonSet"):
            obj["metadata"]["namespace"] = namespace
        if kind == "ClusterRoleBinding":
            for subject in obj["subjects"]:
                subject["namespace"] = namespace
        if kind == "DaemonSet":
            pod = obj["spec"]["template"]["spec"]
            for container in pod["containers"]:
                container["image"] = image
            tolerations = pod.setdefault("tolerations", [])
            if gpu_taint_toleration() not in tolerations:
                tolerations.append(gpu_taint_toleration())
    return out


def amd_pools_affinity(pool_selectors: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """A pod's node affinity for the nodes of any of the given pools (name → node selector): one
    nodeSelectorTerm per pool (terms are ORed, a term's expressions ANDed). For an existing cluster,
    whose AMD nodes need not carry DOKS's gpu-brand label."""
    terms = [
        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]} for key, value in sorted(selector.items())]}
        for _, selector in sorted(pool_selectors.items())
    ]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def place_on_amd_pools(objects: list[dict[str, Any]], pool_selectors: Mapping[str, Mapping[str, str]] | None) -> list[dict[str, Any]]:
    """The DaemonSets among `objects` on the given AMD pools' nodes instead of every node DOKS labels
    gpu-brand=amd (None: unchanged). Other node-selector entries (kubernetes.io/arch) stay."""
    if pool_selectors is None:
        return objects
    out = copy.deepcopy(objects)
    for obj in out:
        if obj["kind"] != "DaemonSet":
            continue
        pod = obj["spec"]["template"]["spec"]
        selector = {k: v for k, v in (pod.pop("nodeSelector", None) or {}).items() if k not in AMD_NODE_SELECTOR}
        if selector:
            pod["nodeSelector"] = selector
        pod["affinity"] = amd_pools_affinity(pool_selectors)
    return out


def render_device_plugin(image: str, namespace: str = RUNTIME_NAMESPACE, pool_selectors: Mapping[str, Mapping[str, str]] | None = None) -> list[dict[str, Any]]:
    """ROCm/k8s-device-plugin DaemonSet (self-managed mode); on `pool_selectors`' nodes when given."""
    return place_on_amd_pools(_pin(load_manifest(DEVICE_PLUGIN_MANIFEST), image, namespace), pool_selectors)


def render_node_labeller(image: str, namespace: str = RUNTIME_NAMESPACE, pool_selectors: Mapping[str, Mapping[str, str]] | None = None) -> list[dict[str, Any]]:
    """ROCm node labeller: ServiceAccount, ClusterRole, ClusterRoleBinding, DaemonSet."""
    return place_on_amd_pools(_pin(load_manifest(NODE_LABELLER_MANIFEST), image, namespace), pool_selectors)


# Re-applied every few minutes: a node reboot or an OS reconcile resets the sysctl, and the
# readiness probe makes a node where it did not stick visible in `kubectl get ds`.
_NUMA_SCRIPT = """\
set -eu
knob=/proc/sys/kernel/numa_balancing
while true; do
  if [ -e "$knob" ] && [ "$(cat "$knob")" != "0" ]; then
    echo 0 > "$knob"
    echo "kernel.numa_balancing set to 0 on $NODE_NAME"
  fi
  sleep 300
done
"""


def render_node_tuning_daemonset(
    image: str,
    namespace: str = RUNTIME_NAMESPACE,
    node_selector: dict[str, str] | None = None,
    pool_selectors: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """Privileged DaemonSet that disables automatic NUMA balancing on AMD GPU nodes (`pool_selectors`:
    an existing cluster's AMD pools, else every node DOKS labels gpu-brand=amd).

    AMD's vLLM guidance: NUMA balancing migrates pages between sockets behind the GPU's back and
    causes latency spikes; `kernel.numa_balancing` is not namespaced, so a privileged container
    writing /proc/sys changes the host.
    """
    labels = {"app.kubernetes.io/name": NODE_TUNING_NAME, **PART_OF}
    daemonset = accept({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NODE_TUNING_NAME, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": NODE_TUNING_NAME}},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "automountServiceAccountToken": False,  # it never calls the API
                    "priorityClassName": "system-node-critical",
                    "nodeSelector": dict(node_selector or AMD_NODE_SELECTOR),
                    "tolerations": [gpu_taint_toleration()],
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "numa-balancing-off",
                            "image": image,
                            "command": ["/bin/sh", "-c", _NUMA_SCRIPT],
                            "env": [
                                {
                                    "name": "NODE_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                }
                            ],
                            "securityContext": {"privileged": True},
                            "readinessProbe": {
                                "exec": {
                                    "command": [
                                        "/bin/sh",
                                        "-c",
                                        "[ ! -e /proc/sys/kernel/numa_balancing ] || "
                                        '[ "$(cat /proc/sys/kernel/numa_balancing)" = 0 ]',
                                    ]
                                },
                                "periodSeconds": 60,
                            },
                            "resources": {
                                "requests": {"cpu": "1m", "memory": "8Mi"},
                                "limits": {"memory": "32Mi"},
                            },
                        }
                    ],
                },
            },
        },
    }, scan_exceptions.NODE_AGENT)
    return place_on_amd_pools([daemonset], pool_selectors)[0]


def render_cert_manager_values(node_selector: Mapping[str, str] | None = None) -> dict[str, Any]:
    """cert-manager chart values: install its CRDs with the release (chart ≥ 1.15 key); on an
    existing cluster with system nodes, every one of its Deployments and its startup Job on them
    (the jetstack chart's `nodeSelector`, `webhook.`, `cainjector.`, `startupapicheck.nodeSelector`)."""
    values: dict[str, Any] = {"crds": {"enabled": True}}
    if node_selector:
        values["nodeSelector"] = dict(node_selector)
        for part in ("webhook", "cainjector", "startupapicheck"):
            values[part] = {"nodeSelector": dict(node_selector)}
    return values


def render_gpu_operator_values(node_selector: Mapping[str, str] | None = None) -> dict[str, Any]:
    """AMD GPU Operator chart values for DOKS (chart keys as in ROCm/gpu-operator
    helm-charts-k8s/values.yaml at tag v1.5.0).

    DOKS installs the amdgpu driver and labels AMD nodes itself, so the operator's driver
    machinery (KMM), Node Feature Discovery and its NFD rule are not needed; we create our own
    DeviceConfig instead of the chart's default one so its spec is visible in the plan.

    KMM is skipped with both `kmm.enabled: false` (do not install the KMM subchart) and
    `kmm.watch: false` (the operator's KMM_WATCH_ENABLED: do not watch or use KMM resources):
    upstream's "Skip KMM for alternative driver management" (docs/installation/kubernetes-helm.md
    at v1.5.0). `enabled: false` alone means "use an existing KMM installation".

    The controller manager needs no placement override: the chart's `controllerManager.affinity`
    only *prefers* control-plane nodes (weight 1), so on DOKS, which has none in the cluster, it
    schedules on the system pool (the GPU taint keeps it off GPU nodes). On an existing cluster
    with system nodes, `controllerManager.nodeSelector` pins it to them.
    """
    values: dict[str, Any] = {
        "node-feature-discovery": {"enabled": False},
        "installdefaultNFDRule": False,
        "kmm": {"enabled": False, "watch": False},
        "remediation": {"enabled": False},
        "crds": {"defaultCR": {"install": False, "upgrade": False}},
    }
    if node_selector:
        values["controllerManager"] = {"nodeSelector": dict(node_selector)}
    return values


def render_device_config(
    device_plugin_image: str,
    node_labeller_image: str,
    metrics_exporter_image: str,
    metrics_exporter_enabled: bool,
    namespace: str = GPU_OPERATOR_NAMESPACE,
    name: str = DEVICE_CONFIG_NAME,
    node_selector: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The operator's `DeviceConfig` (amd.com/v1alpha1) using the inbox (DOKS) driver."""
    toleration = [gpu_taint_toleration()]
    return {
        "apiVersion": "amd.com/v1alpha1",
        "kind": "DeviceConfig",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {
            # false: skip driver installation, use the inbox / pre-installed driver.
            "driver": {"enable": False},
            "devicePlugin": {
                "devicePluginImage": device_plugin_image,
                "devicePluginTolerations": toleration,
                "enableNodeLabeller": True,
                "nodeLabellerImage": node_labeller_image,
                "nodeLabellerTolerations": toleration,
                "nodeLabellerArguments": [
                    "compute-memory-partition",
                    "compute-partitioning-supported",
                    "memory-partitioning-supported",
                ],
            },
            "metricsExporter": {
                "enable": metrics_exporter_enabled,
                "image": metrics_exporter_image,
                "serviceType": "ClusterIP",
                "port": METRICS_EXPORTER_PORT,
                "tolerations": toleration,
            },
            "selector": dict(node_selector if node_selector is not None else AMD_NODE_SELECTOR),
        },
    }
