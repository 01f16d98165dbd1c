"""The DOKS cluster: control plane, a small system node pool, GPU add-ons, and a Kubernetes provider.

Safety choices (each explained in docs/architecture.md):

- The default node pool is the *system* pool and must stay stable. The DO provider treats the
  cluster's `node_pool.size` as create-time: changing it replaces the whole cluster (every node
  pool, every workload, the API endpoint). GPU capacity therefore lives in separate
  `KubernetesNodePool` resources (components/gpu_pool.py) that can change without touching the
  cluster.
- The version comes from `get_kubernetes_versions(prefix)`. Lowering `version` replaces the
  cluster. With `auto_upgrade` on, DOKS moves the patch version inside the maintenance window, and
  DO retires old patch releases; a later `pulumi up` would otherwise either upgrade the control
  plane outside the window or, if the looked-up latest is older than what is running, plan a
  replacement. So with auto-upgrade the version is set at creation and then owned by DOKS
  (`ignore_changes=["version"]`); minor upgrades are an explicit runbook step.
- The kubeconfig is a secret Output, and the Kubernetes provider has `cluster_identifier` set to
  the cluster id: DOKS tokens expire (7 days by default, `kubeconfig_expire_seconds` bounds them),
  and without a stable identifier a refreshed kubeconfig would replace the provider and with it
  every Kubernetes object. `delete_unreachable` stays off: with an expired token the cluster looks
  unreachable and the provider would silently drop every object from state.
- `protect=True` in prod on the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_digitalocean as digitalocean
import pulumi_kubernetes as k8s

SYSTEM_POOL_LABEL = "inference-platform/pool"


@dataclass(frozen=True)
class GpuAddonFlags:
    """Which DOKS-managed GPU components the cluster enables (each sent explicitly)."""

    amd_device_plugin: bool
    amd_metrics_exporter: bool
    nvidia_device_plugin: bool


def gpu_addon_flags(pool_vendors: set[str], runtime_mode: str, observability_enabled: bool) -> GpuAddonFlags:
    """Derive the cluster's GPU add-on flags from the pools and the ROCm runtime mode.

    - AMD pools + `doks-managed`: DOKS runs ROCm/k8s-device-plugin.
    - `device-plugin` / `gpu-operator`: we run our own plugin, so the DOKS one is explicitly off
      (left unset, DOKS enables it by default on clusters with AMD nodes, and two plugins would
      both advertise `amd.com/gpu`).
    - Metrics exporter: on when observability is on and there is an AMD pool to measure, in
      `doks-managed` and `device-plugin` mode (DOKS's exporter does not need DOKS's plugin); off in
      `gpu-operator` mode, where the DeviceConfig deploys the operator's own exporter.
    - NVIDIA pools: the DOKS NVIDIA device plugin.
    - DOKS's AMD DRA driver is never enabled: model pods request the `amd.com/gpu` extended
      resource, which only a device plugin advertises, and DOKS refuses the driver next to one.
    """
    has_amd = "amd" in pool_vendors
    return GpuAddonFlags(
        amd_device_plugin=has_amd and runtime_mode == "doks-managed",
        amd_metrics_exporter=has_amd and runtime_mode in ("doks-managed", "device-plugin") and observability_enabled,
        nvidia_device_plugin="nvidia" in pool_vendors,
    )


def version_prefix_for_lookup(version_prefix: str) -> str:
    """`1.33` → `1.33.` so the lookup cannot match a hypothetical `1.330`."""
    return version_prefix if version_prefix.endswith(".") else f"{version_prefix}."


@dataclass(frozen=True)
class DoksClusterArgs:
    """Inputs of the DOKS cluster and its system pool."""

    environment: str
    region: str
    version_prefix: str  # "1.33" → latest 1.33.x-do.y
    vpc_id: pulumi.Input[str]
    system_pool_size: str = "s-4vcpu-8gb"  # create-time: a change replaces the cluster
    system_pool_nodes: int = 2
    ha: bool = False
    auto_upgrade: bool = True
    surge_upgrade: bool = True
    maintenance_day: str = "sunday"  # monday..sunday | any
    maintenance_start_time: str = "04:00"  # UTC, HH:MM
    control_plane_allowed_cidrs: Sequence[str] = ()  # empty: control-plane firewall off
    cluster_subnet: str | None = None  # VPC-native pod range
    service_subnet: str | None = None  # VPC-native service range
    kubeconfig_expire_seconds: int | None = None  # None: DOKS default (7 days)
    gpu_flags: GpuAddonFlags = field(
        default_factory=lambda: GpuAddonFlags(
            amd_device_plugin=False, amd_metrics_exporter=False, nvidia_device_plugin=False
        )
    )
    protect: bool = False
    tags: Sequence[str] = ()


class DoksCluster(pulumi.ComponentResource):
    """A DOKS cluster with a stable system pool and a Kubernetes provider bound to it."""

    cluster: digitalocean.KubernetesCluster
    cluster_id: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]  # secret
    provider: k8s.Provider
    version: pulumi.Output[str]  # the cluster's running version

    def __init__(self, name: str, args: DoksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:cluster:DoksCluster", name, None, opts)

        versions = digitalocean.get_kubernetes_versions_output(
            version_prefix=version_prefix_for_lookup(args.version_prefix),
            opts=pulumi.InvokeOutputOptions(parent=self),
        )

        self.cluster = digitalocean.KubernetesCluster(
            name,
            name=name,
            region=args.region,
            version=versions.latest_version,
            vpc_uuid=args.vpc_id,
            cluster_subnet=args.cluster_subnet,
            service_subnet=args.service_subnet,
            ha=args.ha,
            auto_upgrade=args.auto_upgrade,
            surge_upgrade=args.surge_upgrade,
            maintenance_policy=digitalocean.KubernetesClusterMaintenancePolicyArgs(
                day=args.maintenance_day, start_time=args.maintenance_start_time
            ),
            control_plane_firewall=(
                digitalocean.KubernetesClusterControlPlaneFirewallArgs(
                    enabled=True, allowed_addresses=list(args.control_plane_allowed_cidrs)
                )
                if args.control_plane_allowed_cidrs
                else None
            ),
            kubeconfig_expire_seconds=args.kubeconfig_expire_seconds,
            node_pool=digitalocean.KubernetesClusterNodePoolArgs(
                name=f"{name}-system",  # keep in sync with system_pool_name below
                size=args.system_pool_size,
                node_count=args.system_pool_nodes,
                auto_scale=False,
                labels={SYSTEM_POOL_LABEL: "system"},
                tags=list(args.tags),
            ),
            amd_gpu_device_plugin=digitalocean.KubernetesClusterAmdGpuDevicePluginArgs(
                enabled=args.gpu_flags.amd_device_plugin
            ),
            amd_gpu_device_metrics_exporter_plugin=(
                digitalocean.KubernetesClusterAmdGpuDeviceMetricsExporterPluginArgs(
                    enabled=args.gpu_flags.amd_metrics_exporter
                )
            ),
            nvidia_gpu_device_plugin=digitalocean.KubernetesClusterNvidiaGpuDevicePluginArgs(
                enabled=args.gpu_flags.nvidia_device_plugin
            ),
            tags=list(args.tags),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=args.protect,
                # DOKS owns the patch version once auto-upgrade is on (see module docstring).
                ignore_changes=["version"] if args.auto_upgrade else None,
            ),
        )
        self.system_pool_name = f"{name}-system"  # DOKS labels its nodes doks.digitalocean.com/node-pool=<this>
        self.cluster_id = self.cluster.id
        self.version = self.cluster.version  # what runs, not what the lookup says
        self.kubeconfig = pulumi.Output.secret(
            self.cluster.kube_configs.apply(lambda configs: configs[0].raw_config)
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            cluster_identifier=self.cluster.id,
            # delete_unreachable deliberately unset (defaults to false): see module docstring.
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs(
            {"cluster_id": self.cluster_id, "kubeconfig": self.kubeconfig, "version": self.version}
        )
