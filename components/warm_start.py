"""Image pre-pull DaemonSets on the GPU pools (manifests from infra/render/warm_start.py).

The model services depend on them: pulumi-kubernetes waits until every DaemonSet pod is ready,
i.e. every node of the pool holds the model's (new) vLLM image, before a Deployment's rolling
update starts replacing replicas, so no wave of the rollout waits for a multi-GB pull.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.render.model_service import IMAGE_PULL_ALLOWANCE_SECONDS
from infra.specs import ImagePrepullSpec


@dataclass(frozen=True)
class ImagePrepullArgs:
    spec: ImagePrepullSpec
    provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource] = ()
    deleted_with: pulumi.Resource | None = None


class ImagePrepull(pulumi.ComponentResource):
    """One DaemonSet per GPU pool that pulls its models' images onto every node."""

    daemonsets: list[k8s.apps.v1.DaemonSet]

    def __init__(self, name: str, args: ImagePrepullArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:warm_start:ImagePrepull", name, None, opts)
        timeout = f"{IMAGE_PULL_ALLOWANCE_SECONDS + 600}s"
        self.daemonsets = [
            k8s.apps.v1.DaemonSet(
                f"{name}-{ds['metadata']['name']}",
                metadata=ds["metadata"],
                spec=ds["spec"],
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=args.provider,
                    depends_on=list(args.depends_on),
                    deleted_with=args.deleted_with,
                    custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
                ),
            )
            for ds in args.spec.daemonsets
        ]
        self.register_outputs({"daemonsets": [d["metadata"]["name"] for d in args.spec.daemonsets]})
