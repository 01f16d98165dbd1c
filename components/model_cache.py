"""The shared model-weight cache: a DO NFS share in the VPC, mounted in DOKS as a static PV + PVC.

Replicas load weights from the share over the private network instead of each pulling hundreds
of GB from Hugging Face. The share is stateful and slow to refill, so:

- `protect` (prod) blocks a `pulumi up` that would replace or delete it (a region or VPC change
  replaces an NFS share; `infra diff` flags that);
- `retain_on_delete` (prod by default) keeps the share in DigitalOcean if the resource ever
  leaves the program, e.g. when `model_cache.kind` is switched to `none` by mistake;
- the PersistentVolume's reclaim policy is `Retain`, so deleting the claim never deletes data;
- growing the share grows the PV's capacity in place but leaves the claim's request as created
  (`PVC_IGNORE_CHANGES`): changing it would replace, or fail to update, the claim every model pod
  mounts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_digitalocean as digitalocean
import pulumi_kubernetes as k8s

from infra.render.model_cache import (
    MODEL_CACHE_MOUNT_PATH,
    MODEL_CACHE_PVC_NAME,
    PVC_IGNORE_CHANGES,
    render_model_cache_pv,
    render_model_cache_pvc,
)
from infra.specs import ModelCacheSpec

NFS_MIN_SIZE_GIB = 50  # DO NFS minimum; shares grow but never shrink


@dataclass(frozen=True)
class ModelCacheArgs:
    """The cache as planned, and the Pulumi handles it needs."""

    spec: ModelCacheSpec
    vpc_id: pulumi.Input[str]  # must be the cluster's VPC
    provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource] = ()  # e.g. the namespace object


class ModelCache(pulumi.ComponentResource):
    """NFS share + static PersistentVolume + PersistentVolumeClaim."""

    share: digitalocean.Nfs
    volume: k8s.core.v1.PersistentVolume
    claim: k8s.core.v1.PersistentVolumeClaim
    pvc_name: str = MODEL_CACHE_PVC_NAME
    mount_path: str = MODEL_CACHE_MOUNT_PATH

    def __init__(self, name: str, args: ModelCacheArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:model_cache:ModelCache", name, None, opts)
        if args.spec.size_gib < NFS_MIN_SIZE_GIB:
            raise ValueError(
                f"NFS share size {args.spec.size_gib} GiB is below the {NFS_MIN_SIZE_GIB} GiB minimum"
            )
        retain = args.spec.protect if args.spec.retain_on_delete is None else args.spec.retain_on_delete

        self.share = digitalocean.Nfs(
            f"{name}-nfs",
            name=f"{name}-nfs",
            region=args.spec.region,
            vpc_id=args.vpc_id,
            size=args.spec.size_gib,
            performance_tier=args.spec.tier,
            tags=list(args.spec.tags),
            opts=pulumi.ResourceOptions(parent=self, protect=args.spec.protect, retain_on_delete=retain),
        )

        pv = render_model_cache_pv(
            server=self.share.host,
            path=self.share.mount_path,
            size_gib=args.spec.size_gib,
            namespace=args.spec.namespace,
        )
        self.volume = k8s.core.v1.PersistentVolume(
            f"{name}-pv",
            metadata=pv["metadata"],
            spec=pv["spec"],
            opts=pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=list(args.depends_on)
            ),
        )
        pvc = render_model_cache_pvc(size_gib=args.spec.size_gib, namespace=args.spec.namespace)
        self.claim = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-pvc",
            metadata=pvc["metadata"],
            spec=pvc["spec"],
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                depends_on=[*args.depends_on, self.volume],
                ignore_changes=list(PVC_IGNORE_CHANGES),
            ),
        )
        self.pvc_name = MODEL_CACHE_PVC_NAME
        self.mount_path = MODEL_CACHE_MOUNT_PATH
        self.register_outputs(
            {"nfs_host": self.share.host, "nfs_path": self.share.mount_path, "pvc_name": self.pvc_name}
        )
