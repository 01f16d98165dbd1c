"""The shared weight cache as Kubernetes objects: a static NFS PersistentVolume and its claim.

DO Network File Storage speaks NFSv4.1 inside the VPC. DOKS has no dynamic provisioner for it, so
the volume is static: a PersistentVolume naming the share's host and path, bound one-to-one to a
PVC through `volumeName` + `claimRef` and an empty `storageClassName` (an empty class disables
dynamic provisioning; omitting it would let the default `do-block-storage` class grab the claim
as a ReadWriteOnce block volume). Reclaim policy `Retain`: deleting the claim never deletes
weights.

`server` and `path` may be plain strings or Pulumi Outputs: these functions only place them.

The share grows; the claim's request must not follow it. Kubernetes resizes only claims of an
expandable StorageClass, so a new request fails the update or, where the provider replaces the
claim instead, deletes and recreates `model-cache` under every model pod. The request is therefore
ignored after creation (`PVC_IGNORE_CHANGES`) while the PV's capacity, which is mutable, follows the
share. NFS enforces no capacity, binding only needs request ≤ capacity, and shares never shrink;
ignoring (rather than a fixed nominal request) also leaves already-created claims untouched.
"""

from __future__ import annotations

from typing import Any

MODEL_CACHE_PVC_NAME = "model-cache"
MODEL_CACHE_MOUNT_PATH = "/models"  # where consumers mount the claim; HF_HOME lives below it
NFS_MOUNT_OPTIONS = ["nfsvers=4.1"]
# Fields of the claim Pulumi must leave as created (see the module docstring).
PVC_IGNORE_CHANGES = ["spec.resources"]
LABELS = {
    "app.kubernetes.io/name": "model-cache",
    "app.kubernetes.io/part-of": "inference-platform",
}


def pv_name_for(namespace: str) -> str:
    """PersistentVolumes are cluster-scoped: name them after the namespace that claims them."""
    return f"{namespace}-{MODEL_CACHE_PVC_NAME}"


def render_model_cache_pv(
    server: Any, path: Any, size_gib: int, namespace: str, pvc_name: str = MODEL_CACHE_PVC_NAME
) -> dict[str, Any]:
    """Static ReadWriteMany PersistentVolume for the NFS share, pre-bound to our claim."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name_for(namespace), "labels": dict(LABELS)},
        "spec": {
            "capacity": {"storage": f"{size_gib}Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "volumeMode": "Filesystem",
            "mountOptions": list(NFS_MOUNT_OPTIONS),
            "nfs": {"server": server, "path": path},
            "claimRef": {"namespace": namespace, "name": pvc_name},
        },
    }


def render_model_cache_pvc(
    size_gib: int, namespace: str, pvc_name: str = MODEL_CACHE_PVC_NAME
) -> dict[str, Any]:
    """The claim every model replica mounts (read-mostly; the prefetch Job writes)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": pvc_name, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": pv_name_for(namespace),
            "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": f"{size_gib}Gi"}},
        },
    }
