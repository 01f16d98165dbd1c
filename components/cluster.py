"""The DOKS cluster: control plane, a small system node pool, GPU add-ons, and a Kubernetes provider.

Safety choices (each explained in docs/architecture.md):

- The default node pool is the *system* pool and must stay stable. The DO provider treats the
  cluster's `node_pool.size` as create-time: changing it replaces the whole cluster (every node
  pool, every workload, the API endpoint). GPU capacity therefore lives in separate
  `KubernetesNodePool` resources (components/gpu_pool.py) that can change without touching the
  cluster.
- `version` is a prefix (`1.33`) or an exact DOKS slug (`1.33.1-do.5`). A prefix only picks the
  version at creation (`get_kubernetes_versions(prefix).latest_version`) and is then ignored
  (`ignore_changes=["version"]`): following the lookup, an unrelated `pulumi up` after DO publishes
  a patch would upgrade the control plane and recycle every GPU node outside the maintenance
  window, and a lookup behind what runs would plan a downgrade, i.e. a replacement. With
  `auto_upgrade` DOKS then moves the patch; without it the cluster stays put until an exact slug is
  set, which is managed verbatim so that editing it is the explicit upgrade. A retired prefix
  (empty lookup) is an error naming `cluster.version`, never an empty version sent to DO.
- The Kubernetes provider's kubeconfig comes from `get_kubernetes_cluster` on every run, not from
  the cluster resource: the DO provider refreshes the stored `kube_configs` only on `pulumi
  refresh`, and DOKS tokens expire (7 days by default, `kubeconfig_expire_seconds`), so a plain
  `pulumi up` a week later would fail Unauthorized. It is a secret, and `cluster_identifier` is the
  cluster id, so the kubeconfig changing on every run updates the provider and never replaces it
  (and with it every Kubernetes object). `delete_unreachable` stays off: with an expired token the
  cluster looks unreachable and the provider would silently drop every object from state.
- An empty `control_plane_allowed_cidrs` sends the firewall explicitly disabled: left unset, the
  provider keeps whatever firewall exists.
- `destroy_all_associated_resources` (set outside prod): DOKS leaves the load balancers and block
  volumes that Kubernetes created (Service type LoadBalancer, the Prometheus claim) billing after
  the cluster is destroyed unless told to delete them.
- `protect=True` in prod on the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_digitalocean as digitalocean
import pulumi_kubernetes as k8s

from infra.config import NS, is_exact_version
from infra.errors import ConfigError, Problem

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
    """`1.33` → `1.33.` so the lookup cannot match a hypothetical `1.330`; `1.33.1` → `1.33.1-`
    (DOKS slugs continue a patch with `-do.N`, never with a dot). The config validates the prefix."""
    return f"{version_prefix}-" if version_prefix.count(".") == 2 else f"{version_prefix}."


class ConfigRunError(ConfigError, pulumi.RunError):
    """A config error found while the Pulumi program runs (e.g. once DO answered, or by the planner):
    printed as one line by the CLI (a UserError) and by the Pulumi language host (a RunError)."""


def looked_up_version(version_prefix: str, latest: str) -> str:
    """The lookup's latest version, or an error naming the key: an empty version would reach DO."""
    if latest:
        return latest
    raise ConfigRunError(
        [
            Problem(
                f"{NS}cluster.version",
                f"{version_prefix!r}: DigitalOcean offers no Kubernetes release starting with "
                f"{version_prefix_for_lookup(version_prefix)!r} (retired or not yet released); use a minor "
                "that `doctl kubernetes options versions` lists, e.g. \"1.33\", or an exact DOKS slug "
                "such as \"1.33.1-do.5\" (a prefix only picks the version of a new cluster: an existing one "
                "keeps what it runs)",
            )
        ]
    )


@dataclass(frozen=True)
class DoksClusterArgs:
    """Inputs of the DOKS cluster and its system pool."""

    environment: str
    region: str
    version: str  # "1.33": latest 1.33.x-do.y at creation, then ignored; "1.33.1-do.5": verbatim
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
    destroy_all_associated_resources: bool = False  # on destroy, also delete LBs/volumes Kubernetes made
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

        exact = is_exact_version(args.version)
        if exact:
            version: pulumi.Input[str] = args.version
        else:
            # A plain (blocking) invoke: a retired prefix stops the program here, before the
            # cluster is declared, with one line instead of a failed apply deep in the engine.
            versions = digitalocean.get_kubernetes_versions(
                version_prefix=version_prefix_for_lookup(args.version),
                opts=pulumi.InvokeOptions(parent=self),
            )
            version = looked_up_version(args.version, versions.latest_version)

        self.cluster = digitalocean.KubernetesCluster(
            name,
            name=name,
            region=args.region,
            version=version,
            vpc_uuid=args.vpc_id,
            cluster_subnet=args.cluster_subnet,
            service_subnet=args.service_subnet,
            ha=args.ha,
            auto_upgrade=args.auto_upgrade,
            surge_upgrade=args.surge_upgrade,
            maintenance_policy=digitalocean.KubernetesClusterMaintenancePolicyArgs(
                day=args.maintenance_day, start_time=args.maintenance_start_time
            ),
            # Always sent: None would leave an existing firewall on with its old list.
            control_plane_firewall=digitalocean.KubernetesClusterControlPlaneFirewallArgs(
                enabled=bool(args.control_plane_allowed_cidrs),
                allowed_addresses=list(args.control_plane_allowed_cidrs),
            ),
            kubeconfig_expire_seconds=args.kubeconfig_expire_seconds,
            destroy_all_associated_resources=args.destroy_all_associated_resources,
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
                # A prefix only chooses the version at creation (see module docstring).
                ignore_changes=None if exact else ["version"],
            ),
        )
        self.system_pool_name = f"{name}-system"  # DOKS labels its nodes doks.digitalocean.com/node-pool=<this>
        self.cluster_id = self.cluster.id
        self.version = self.cluster.version  # what runs, not what the lookup says
        # Fresh credentials on every run (see module docstring); waits for the cluster to exist.
        live = digitalocean.get_kubernetes_cluster_output(
            name=self.cluster.name,
            kubeconfig_expire_seconds=args.kubeconfig_expire_seconds,
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[self.cluster]),
        )
        self.kubeconfig = pulumi.Output.secret(live.kube_configs.apply(lambda configs: configs[0].raw_config))
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
