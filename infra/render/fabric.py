"""The platform pieces a fabric cluster needs for replicas that span nodes: pure dicts, no Pulumi.

Declared only when a GPU pool is a fabric pool (`gpu_pools[].fabric: true`), by
components/fabric.py:

- LeaderWorkerSet (Helm chart `oci://registry.k8s.io/lws/charts/lws`, versions.LWS_CHART_VERSION,
  namespace lws-system): the controller and CRD the multi-node model services' LeaderWorkerSets
  need (render/multi_node.py). The chart's values default the manager image to tag `main` with
  pullPolicy Always (charts/lws/values.yaml @ v0.10.0): both are set here to the release.
- Multus CNI, thick plugin (versions.MULTUS_IMAGE): the NetworkAttachmentDefinition CRD, its RBAC,
  the daemon config and the DaemonSet, structured as upstream's deployments/multus-daemonset-thick.yml
  @ v4.3.0 (its RBAC rules, host mounts and daemon config), with the image pinned and the DaemonSet
  kept to the fabric pools' nodes: the system pool never needs a second network, and DOKS keeps
  eth0/eth1 on Cilium either way (DO how-to "configure multinode GPUs").
- One host-device NetworkAttachmentDefinition per fabric NIC (fabric0..7) in the engines'
  namespace (render/multi_node.py `render_fabric_attachments`).

What DOKS provides and this does not install: the fabric NICs themselves and the Mellanox
k8s-rdma-shared-dev-plugin that exposes them as `rdma/fabric0..7` (installed with a fabric pool).
"""

from __future__ import annotations

import json
from typing import Any

from infra.catalog import versions
from infra.render import scan_exceptions
from infra.render.multi_node import render_fabric_attachments
from infra.render.scan_exceptions import accept

MULTUS_NAMESPACE = "kube-system"
MULTUS_NAME = "multus"
MULTUS_DAEMONSET = "kube-multus-ds"
NAD_CRD_NAME = "network-attachment-definitions.k8s.cni.cncf.io"
DOKS_POOL_LABEL = "doks.digitalocean.com/node-pool"
LABELS = {"app.kubernetes.io/part-of": "inference-platform", "app.kubernetes.io/managed-by": "pulumi"}


def lws_values(image_repository: str = versions.LWS_IMAGE_REPOSITORY, image_tag: str = versions.LWS_IMAGE_TAG) -> dict[str, Any]:
    """Helm values of the LWS release: the manager image pinned to the release, never `main`."""
    return {"image": {"manager": {"repository": image_repository, "tag": image_tag, "pullPolicy": "IfNotPresent"}}}


def render_nad_crd() -> dict[str, Any]:
    """The NetworkAttachmentDefinition CRD (k8s.cni.cncf.io/v1): `spec.config` is the CNI JSON."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAD_CRD_NAME, "labels": dict(LABELS)},
        "spec": {
            "group": "k8s.cni.cncf.io",
            "scope": "Namespaced",
            "names": {
                "plural": "network-attachment-definitions",
                "singular": "network-attachment-definition",
                "kind": "NetworkAttachmentDefinition",
                "shortNames": ["nad", "net-attach-def"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": {"type": "object", "properties": {"config": {"type": "string"}}},
                            },
                        }
                    },
                }
            ],
        },
    }


def _daemon_config() -> str:
    """The thick plugin's daemon config: it wraps the node's first CNI config (Cilium on DOKS)."""
    return json.dumps(
        {
            "chrootDir": "/hostroot",
            "cniVersion": "0.3.1",
            "logLevel": "verbose",
            "logToStderr": True,
            "cniConfigDir": "/host/etc/cni/net.d",
            "multusAutoconfigDir": "/host/etc/cni/net.d",
            "multusConfigFile": "auto",
            "socketDir": "/host/run/multus/",
        },
        indent=2,
    )


# The thick plugin's host paths: (volume, host path, mount path, mount propagation).
_MULTUS_HOST_PATHS = (
    ("cni", "/etc/cni/net.d", "/host/etc/cni/net.d", None),
    ("cnibin", "/opt/cni/bin", "/opt/cni/bin", None),  # must be the same path as on the host
    ("host-run", "/run", "/host/run", None),
    ("host-var-lib-cni-multus", "/var/lib/cni/multus", "/var/lib/cni/multus", None),
    ("host-var-lib-kubelet", "/var/lib/kubelet", "/var/lib/kubelet", "HostToContainer"),
    ("host-run-k8s-cni-cncf-io", "/run/k8s.cni.cncf.io", "/run/k8s.cni.cncf.io", None),
    ("host-run-netns", "/run/netns/", "/run/netns", "HostToContainer"),
    ("hostroot", "/", "/hostroot", "HostToContainer"),
    ("multus-conf-dir", "/etc/cni/multus/net.d", "/etc/cni/multus/net.d", None),
)


def render_multus(fabric_pools: tuple[str, ...], image: str = versions.MULTUS_IMAGE) -> list[dict[str, Any]]:
    """Multus thick plugin objects, in apply order (CRD first)."""
    labels = {**LABELS, "app": MULTUS_NAME, "tier": "node"}
    daemonset = _multus_daemonset(fabric_pools, image, labels)
    accept(daemonset, scan_exceptions.MULTUS)
    return [
        render_nad_crd(),
        *_multus_rbac(labels),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "multus-daemon-config", "namespace": MULTUS_NAMESPACE, "labels": labels},
            "data": {"daemon-config.json": _daemon_config()},
        },
        daemonset,
    ]


def _multus_volumes() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the daemon's volume mounts, the pod's volumes): the host paths and the daemon config."""
    mounts = []
    for volume, _path, mount, propagation in _MULTUS_HOST_PATHS:
        m = {"name": volume, "mountPath": mount}
        if propagation:
            m["mountPropagation"] = propagation
        mounts.append(m)
    mounts.append({"name": "multus-daemon-config", "mountPath": "/etc/cni/net.d/multus.d", "readOnly": True})
    volumes = [{"name": v, "hostPath": {"path": p}} for v, p, _m, _prop in _MULTUS_HOST_PATHS]
    volumes.append(
        {"name": "multus-daemon-config", "configMap": {"name": "multus-daemon-config", "items": [{"key": "daemon-config.json", "path": "daemon-config.json"}]}}
    )
    return mounts, volumes


def _multus_daemonset(fabric_pools: tuple[str, ...], image: str, labels: dict[str, str]) -> dict[str, Any]:
    """The thick plugin's DaemonSet on the fabric pools' nodes: privileged, host network and PID."""
    mounts, volumes = _multus_volumes()
    privileged = {"privileged": True}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": MULTUS_DAEMONSET, "namespace": MULTUS_NAMESPACE, "labels": {**labels, "name": MULTUS_NAME}},
        "spec": {
            "selector": {"matchLabels": {"name": MULTUS_NAME}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {**labels, "name": MULTUS_NAME}},
                "spec": {
                    "hostNetwork": True,
                    "hostPID": True,
                    "serviceAccountName": MULTUS_NAME,
                    "priorityClassName": "system-node-critical",
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": DOKS_POOL_LABEL, "operator": "In", "values": list(fabric_pools)}]}
                                ]
                            }
                        }
                    },
                    "tolerations": [
                        {"operator": "Exists", "effect": "NoSchedule"},
                        {"operator": "Exists", "effect": "NoExecute"},
                    ],
                    "initContainers": [
                        {
                            "name": "install-multus-binary",
                            "image": image,
                            "command": ["/usr/src/multus-cni/bin/install_multus", "-d", "/host/opt/cni/bin", "-t", "thick"],
                            "resources": {"requests": {"cpu": "10m", "memory": "15Mi"}},
                            "securityContext": privileged,
                            "terminationMessagePolicy": "FallbackToLogsOnError",
                            "volumeMounts": [{"name": "cnibin", "mountPath": "/host/opt/cni/bin", "mountPropagation": "Bidirectional"}],
                        }
                    ],
                    "containers": [
                        {
                            "name": "kube-multus",
                            "image": image,
                            "command": ["/usr/src/multus-cni/bin/multus-daemon"],
                            "env": [{"name": "MULTUS_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                            "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}, "limits": {"cpu": "100m", "memory": "50Mi"}},
                            "securityContext": privileged,
                            "terminationMessagePolicy": "FallbackToLogsOnError",
                            "volumeMounts": mounts,
                        }
                    ],
                    "terminationGracePeriodSeconds": 10,
                    "volumes": volumes,
                },
            },
        },
    }


def _multus_rbac(labels: dict[str, str]) -> list[dict[str, Any]]:
    """The daemon's ClusterRole (network attachments, pods, events), its binding and ServiceAccount."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": MULTUS_NAME, "labels": labels},
        "rules": [
            {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["*"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "list", "update", "watch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        ],
    }
    return [
        accept(role, scan_exceptions.MULTUS_RBAC),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": MULTUS_NAME, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": MULTUS_NAME},
            "subjects": [{"kind": "ServiceAccount", "name": MULTUS_NAME, "namespace": MULTUS_NAMESPACE}],
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": MULTUS_NAME, "namespace": MULTUS_NAMESPACE, "labels": labels}},
    ]


def render_attachments(namespace: str) -> list[dict[str, Any]]:
    """The eight fabric NIC attachments in the engines' namespace."""
    return render_fabric_attachments(namespace, {**LABELS, "app.kubernetes.io/component": "fabric"})


__all__ = ["lws_values", "render_attachments", "render_multus", "render_nad_crd"]
