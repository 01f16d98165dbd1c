"""Where the engines' weights and images come from: the NFS weight cache, the Spaces weight bucket
and the image pre-pull DaemonSets (whichever the plan has).

- The NFS share is stateful and slow to refill: `protect` (prod) blocks a `pulumi up` that would
  replace or delete it; `retain_on_delete` keeps it in DigitalOcean if it ever leaves the program
  (say `model_cache.kind` switched to `none` by mistake); the PersistentVolume's reclaim policy is
  `Retain`; growing the share grows the PV in place but leaves the claim's request as created
  (`PVC_IGNORE_CHANGES`): changing it would replace the claim every model pod mounts.
- The Spaces bucket (`model_cache.kind: spaces`): engines get a key with a `read` grant on this
  bucket only, the prefetch Job one with `readwrite`; both keys are secrets end to end (the access
  key id too), and the bucket is protected in prod and never `force_destroy`ed.
- The pre-pull DaemonSets make pulumi-kubernetes wait until every node of a pool holds the model's
  (new) image before a Deployment's rolling update starts, so no wave waits for a multi-GB pull.
"""

from __future__ import annotations

from infra.render.model_cache import (
    MODEL_CACHE_MOUNT_PATH,
    MODEL_CACHE_PVC_NAME,
    PVC_IGNORE_CHANGES,
    render_model_cache_pv,
    render_model_cache_pvc,
)
from infra.render.model_service import IMAGE_PULL_ALLOWANCE_SECONDS, render_secret_shape
from infra.render.secret_keys import with_keys
from infra.render.warm_start import SPACES_ACCESS_KEY_ID, SPACES_SECRET_ACCESS_KEY
from infra.resource_graph.graph import GraphBuilder, Options
from infra.resource_graph.values import Ref, Secret
from infra.specs import ImagePrepullSpec, ModelCacheSpec, WeightBucketSpec
from infra.stack_resources.kube import SECRET_OUTPUTS, open_group

NFS_MIN_SIZE_GIB = 50  # DO NFS minimum; shares grow but never shrink


def plan_model_cache(b: GraphBuilder, spec: ModelCacheSpec, vpc: str, provider: str, namespace: str) -> str:
    """NFS share → static PersistentVolume → PersistentVolumeClaim (the group's key)."""
    if spec.size_gib < NFS_MIN_SIZE_GIB:
        raise ValueError(f"NFS share size {spec.size_gib} GiB is below the {NFS_MIN_SIZE_GIB} GiB minimum")
    retain = spec.protect if spec.retain_on_delete is None else spec.retain_on_delete
    group = b.group("inference-platform:model_cache:ModelCache", spec.name)
    share = b.resource(
        "digitalocean:index/nfs:Nfs", f"{spec.name}-nfs",
        {"name": f"{spec.name}-nfs", "region": spec.region, "vpcId": Ref(vpc, "id"), "size": spec.size_gib,
         "performanceTier": spec.tier, "tags": list(spec.tags)},
        parent=group, options=Options(protect=spec.protect, retain_on_delete=retain), outputs=("host", "mountPath"),
    )  # fmt: skip
    pv = render_model_cache_pv(
        server=Ref(share, "host"), path=Ref(share, "mountPath"), size_gib=spec.size_gib, namespace=spec.namespace
    )
    volume = b.resource("kubernetes:core/v1:PersistentVolume", f"{spec.name}-pv", pv, parent=group,
                        options=Options(provider=provider, depends_on=(namespace,)))  # fmt: skip
    pvc = render_model_cache_pvc(size_gib=spec.size_gib, namespace=spec.namespace)
    b.resource("kubernetes:core/v1:PersistentVolumeClaim", f"{spec.name}-pvc", pvc, parent=group,
               options=Options(provider=provider, depends_on=(namespace, volume), ignore_changes=tuple(PVC_IGNORE_CHANGES)))  # fmt: skip
    b.set_group_outputs(group, {"nfs_host": Ref(share, "host"), "nfs_path": Ref(share, "mountPath"),
                                "pvc_name": MODEL_CACHE_PVC_NAME, "mount_path": MODEL_CACHE_MOUNT_PATH})  # fmt: skip
    return group


def plan_weight_bucket(b: GraphBuilder, spec: WeightBucketSpec, provider: str, namespace: str) -> str:
    """SpacesBucket + read and readwrite SpacesKeys + one Secret per key (the group's key)."""
    retain = spec.protect if spec.retain_on_delete is None else spec.retain_on_delete
    group = b.group("inference-platform:weight_bucket:WeightBucket", spec.name)
    bucket = b.resource(
        "digitalocean:index/spacesBucket:SpacesBucket", f"{spec.name}-bucket",
        {"name": spec.bucket, "region": spec.region, "acl": "private", "forceDestroy": spec.force_destroy},
        parent=group, options=Options(protect=spec.protect, retain_on_delete=retain), outputs=("name", "endpoint"),
    )  # fmt: skip
    for suffix, permission, secret_name in (("read", "read", spec.read_secret), ("write", "readwrite", spec.write_secret)):
        logical = f"{spec.name}-{suffix}-key"
        key = b.resource(
            "digitalocean:index/spacesKey:SpacesKey", logical,
            {"name": logical, "grants": [{"bucket": Ref(bucket, "name"), "permission": permission}]},
            # the secret key is a secret output (the provider's own marking)
            parent=group, options=Options(additional_secret_outputs=("secretKey",)), outputs=("accessKey", "secretKey"),
        )  # fmt: skip
        shape = render_secret_shape(secret_name, spec.namespace, SPACES_ACCESS_KEY_ID)
        b.resource(
            "kubernetes:core/v1:Secret", f"{spec.name}-{suffix}-secret",
            {**shape, "metadata": with_keys(shape["metadata"], [SPACES_ACCESS_KEY_ID, SPACES_SECRET_ACCESS_KEY]),
             "stringData": Secret({SPACES_ACCESS_KEY_ID: Secret(Ref(key, "accessKey")),
                                            SPACES_SECRET_ACCESS_KEY: Secret(Ref(key, "secretKey", secret=True))})},
            parent=group,
            options=Options(provider=provider, depends_on=(namespace,), additional_secret_outputs=SECRET_OUTPUTS),
        )  # fmt: skip
    b.set_group_outputs(group, {"bucket": Ref(bucket, "name"), "endpoint": Ref(bucket, "endpoint")})
    return group


def plan_image_prepull(b: GraphBuilder, spec: ImagePrepullSpec, provider: str, depends_on: list[str], cluster: str) -> str:
    """One DaemonSet per GPU pool that pulls its models' images onto every node (the group's key)."""
    group = open_group(b, "inference-platform:warm_start:ImagePrepull", spec.name, provider=provider, depends_on=depends_on,
                       deleted_with=cluster)  # fmt: skip
    timeout = f"{IMAGE_PULL_ALLOWANCE_SECONDS + 600}s"
    for ds in spec.daemonsets:
        group.object(f"{spec.name}-{ds['metadata']['name']}", ds, custom_timeouts={"create": timeout, "update": timeout})
    b.set_group_outputs(group.key, {"daemonsets": [d["metadata"]["name"] for d in spec.daemonsets]})
    return group.key
