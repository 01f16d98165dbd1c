"""The Spaces weight bucket: a DO Spaces bucket, two keys scoped to it, and their Kubernetes Secrets.

`model_cache.kind: spaces` keeps the checkpoints in an S3-compatible bucket that vLLM streams
from. The engines get a key with a `read` grant on this bucket only, the prefetch Job one with
`readwrite` (pulumi-digitalocean `SpacesKey`, first in 4.41.0; `SpacesBucket` far older; the
project requires ≥ 4.50). Both keys' values are Pulumi secrets end to end: the provider marks
`secret_key` secret, the access key id is wrapped as one too, and the Secrets' data is declared
an additional secret output, so neither value appears in state, plan or logs in plain text.

Like the NFS share, the bucket is stateful and slow to refill: `protect` in prod, kept in
DigitalOcean on delete when protected, and never `force_destroy`ed (a bucket that still holds
objects is not deleted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_digitalocean as digitalocean
import pulumi_kubernetes as k8s

from infra.render.model_service import render_secret_shape
from infra.render.secret_keys import with_keys
from infra.render.warm_start import SPACES_ACCESS_KEY_ID, SPACES_SECRET_ACCESS_KEY
from infra.specs import WeightBucketSpec


@dataclass(frozen=True)
class WeightBucketArgs:
    spec: WeightBucketSpec
    provider: k8s.Provider  # the cluster's, for the Secrets
    depends_on: Sequence[pulumi.Resource] = ()  # e.g. the namespace


class WeightBucket(pulumi.ComponentResource):
    """SpacesBucket + read and readwrite SpacesKeys + one Secret per key."""

    bucket: digitalocean.SpacesBucket
    read_key: digitalocean.SpacesKey
    write_key: digitalocean.SpacesKey
    read_secret: k8s.core.v1.Secret
    write_secret: k8s.core.v1.Secret

    def __init__(self, name: str, args: WeightBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:weight_bucket:WeightBucket", name, None, opts)
        spec = args.spec
        retain = spec.protect if spec.retain_on_delete is None else spec.retain_on_delete
        self.bucket = digitalocean.SpacesBucket(
            f"{name}-bucket",
            name=spec.bucket,
            region=spec.region,
            acl="private",
            force_destroy=spec.force_destroy,
            opts=pulumi.ResourceOptions(parent=self, protect=spec.protect, retain_on_delete=retain),
        )
        self.read_key = self._key(f"{name}-read-key", self.bucket, "read")
        self.write_key = self._key(f"{name}-write-key", self.bucket, "readwrite")
        k8s_opts = pulumi.ResourceOptions(
            parent=self,
            provider=args.provider,
            depends_on=list(args.depends_on),
            additional_secret_outputs=["data", "stringData"],
        )
        self.read_secret = self._secret(f"{name}-read-secret", spec.read_secret, spec.namespace, self.read_key, k8s_opts)
        self.write_secret = self._secret(f"{name}-write-secret", spec.write_secret, spec.namespace, self.write_key, k8s_opts)
        self.register_outputs({"bucket": self.bucket.name, "endpoint": self.bucket.endpoint})

    def _key(self, logical: str, bucket: digitalocean.SpacesBucket, permission: str) -> digitalocean.SpacesKey:
        return digitalocean.SpacesKey(
            logical,
            name=logical,
            grants=[digitalocean.SpacesKeyGrantArgs(bucket=bucket.name, permission=permission)],
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _secret(self, logical: str, secret_name: str, namespace: str, key: digitalocean.SpacesKey, opts) -> k8s.core.v1.Secret:
        shape = render_secret_shape(secret_name, namespace, SPACES_ACCESS_KEY_ID)
        return k8s.core.v1.Secret(
            logical,
            metadata=with_keys(shape["metadata"], [SPACES_ACCESS_KEY_ID, SPACES_SECRET_ACCESS_KEY]),
            type=shape["type"],
            string_data={
                SPACES_ACCESS_KEY_ID: pulumi.Output.secret(key.access_key),
                SPACES_SECRET_ACCESS_KEY: pulumi.Output.secret(key.secret_key),
            },
            opts=opts,
        )
