"""The ROCm GPU runtime on the cluster's AMD nodes, in one of three modes.

- `doks-managed` (default): DOKS runs the device plugin (cluster flag, components/cluster.py);
  here only the optional node-tuning DaemonSet.
- `device-plugin`: our own ROCm/k8s-device-plugin and node labeller DaemonSets (pinned images,
  manifests/), with the DOKS flag off so there is never a second plugin.
- `gpu-operator`: cert-manager + the AMD GPU Operator (Helm releases, because the operator relies
  on Helm hooks) and a `DeviceConfig` using the inbox driver, created after the release that
  installs its CRD.

With no AMD pool nothing is declared: there is no node for any of it to run on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.chart_source import chart_args
from components.custom_resources import custom_resource
from infra.catalog import versions
from infra.render import gpu_runtime as render
from infra.specs import GpuRuntimeSpec

RUNTIME_MODES = ("doks-managed", "device-plugin", "gpu-operator")


@dataclass(frozen=True)
class GpuRuntimeArgs:
    """The runtime as planned, and where it goes."""

    spec: GpuRuntimeSpec
    provider: k8s.Provider
    depends_on: Sequence[pulumi.Resource] = ()  # e.g. the GPU node pools
    deleted_with: pulumi.Resource | None = None  # the cluster: skip per-object deletes on teardown


# (apiVersion, kind) → typed pulumi-kubernetes class, for objects rendered from manifests/.
_KINDS: dict[tuple[str, str], Any] = {
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
}


def declare_object(resource_name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """Declare a rendered object as its typed pulumi-kubernetes resource."""
    cls = _KINDS[(obj["apiVersion"], obj["kind"])]
    fields = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    rename = {"roleRef": "role_ref"}
    return cls(resource_name, opts=opts, **{rename.get(k, k): v for k, v in fields.items()})


class GpuRuntime(pulumi.ComponentResource):
    """Device plugin (self-managed or operator) and node tuning for the AMD GPU pools."""

    objects: list[pulumi.Resource]
    cert_manager: k8s.helm.v3.Release | None
    gpu_operator: k8s.helm.v3.Release | None
    device_config: k8s.apiextensions.CustomResource | None

    def __init__(self, name: str, args: GpuRuntimeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:gpu_runtime:GpuRuntime", name, None, opts)
        if args.spec.mode not in RUNTIME_MODES:
            raise ValueError(f"unknown gpu runtime mode {args.spec.mode!r}; expected one of {RUNTIME_MODES}")
        self.objects = []
        self.cert_manager = self.gpu_operator = self.device_config = None

        if args.spec.amd_pools:
            if args.spec.disable_numa_balancing:
                tuning = render.render_node_tuning_daemonset(args.spec.node_tuning_image)
                self.objects.append(declare_object(f"{name}-node-tuning", tuning, self._opts(args)))
            if args.spec.mode == "device-plugin":
                self._declare_device_plugin(name, args)
            elif args.spec.mode == "gpu-operator":
                self._declare_gpu_operator(name, args)

        self.register_outputs({"mode": args.spec.mode, "objects": len(self.objects)})

    def _opts(
        self, args: GpuRuntimeArgs, depends_on: Sequence[pulumi.Resource] = ()
    ) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(
            parent=self,
            provider=args.provider,
            depends_on=[*args.depends_on, *depends_on],
            deleted_with=args.deleted_with,
        )

    def _declare_device_plugin(self, name: str, args: GpuRuntimeArgs) -> None:
        rendered = [
            *render.render_device_plugin(args.spec.device_plugin_image),
            *render.render_node_labeller(args.spec.node_labeller_image),
        ]
        for obj in rendered:
            suffix = f"{obj['kind'].lower()}-{obj['metadata']['name']}"
            self.objects.append(declare_object(f"{name}-{suffix}", obj, self._opts(args)))

    def _declare_gpu_operator(self, name: str, args: GpuRuntimeArgs) -> None:
        self.cert_manager = k8s.helm.v3.Release(
            f"{name}-cert-manager",
            name="cert-manager",
            **chart_args(versions.CERT_MANAGER_CHART, args.spec.cert_manager_chart_version, versions.CERT_MANAGER_CHART_REPO),
            namespace=render.CERT_MANAGER_NAMESPACE,
            create_namespace=True,
            values=render.render_cert_manager_values(),
            opts=self._opts(args),
        )
        self.gpu_operator = k8s.helm.v3.Release(
            f"{name}-amd-gpu-operator",
            name="amd-gpu-operator",
            **chart_args(versions.AMD_GPU_OPERATOR_CHART, args.spec.gpu_operator_chart_version,
                         versions.AMD_GPU_OPERATOR_CHART_REPO),
            namespace=render.GPU_OPERATOR_NAMESPACE,
            create_namespace=True,
            values=render.render_gpu_operator_values(),
            opts=self._opts(args, depends_on=[self.cert_manager]),
        )
        device_config = render.render_device_config(
            device_plugin_image=args.spec.device_plugin_image,
            node_labeller_image=args.spec.node_labeller_image,
            metrics_exporter_image=args.spec.metrics_exporter_image,
            metrics_exporter_enabled=args.spec.metrics_exporter,
        )
        # The DeviceConfig CRD arrives with the operator release: create the CR after it.
        self.device_config = custom_resource(
            f"{name}-device-config", device_config, self._opts(args, depends_on=[self.gpu_operator])
        )
