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

from dataclasses import dataclass

import pulumi
import pulumi_digitalocean as digitalocean
import pulumi_kubernetes as k8s

from infra.catalog.doks import is_exact_version
from infra.errors import ConfigError, Problem
from infra.specs import ClusterSpec

SYSTEM_POOL_LABEL = "inference-platform/pool"


def version_prefix_for_lookup(version_prefix: str) -> str:
    """`1.33` → `1.33.` so the lookup cannot match a hypothetical `1.330`; `1.33.1` → `1.33.1-`
    (DOKS slugs continue a patch with `-do.N`, never with a dot). The config validates the prefix."""
    return f"{version_prefix}-" if version_prefix.count(".") == 2 else f"{version_prefix}."


def looked_up_version(spec: ClusterSpec, latest: str) -> str:
    """The lookup's latest version, or an error naming the key: an empty version would reach DO."""
    if latest:
        return latest
    raise ConfigError(
        [
            Problem(
                spec.version_key,
                f"{spec.version!r}: DigitalOcean offers no Kubernetes release starting with "
                f"{version_prefix_for_lookup(spec.version)!r} (retired or not yet released); use a minor "
                "that `doctl kubernetes options versions` lists, e.g. \"1.33\", or an exact DOKS slug "
                "such as \"1.33.1-do.5\" (a prefix only picks the version of a new cluster: an existing one "
                "keeps what it runs)",
            )
        ]
    )


@dataclass(frozen=True)
class DoksClusterArgs:
    """The cluster as planned, and the VPC it joins."""

    spec: ClusterSpec
    vpc_id: pulumi.Input[str]


class DoksCluster(pulumi.ComponentResource):
    """A DOKS cluster with a stable system pool and a Kubernetes provider bound to it."""

    cluster: digitalocean.KubernetesCluster
    cluster_id: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]  # secret
    provider: k8s.Provider
    version: pulumi.Output[str]  # the cluster's running version

    def __init__(self, name: str, args: DoksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:cluster:DoksCluster", name, None, opts)

        spec = args.spec
        exact = is_exact_version(spec.version)
        if exact:
            version: pulumi.Input[str] = spec.version
        else:
            # A plain (blocking) invoke: a retired prefix stops the program here, before the
            # cluster is declared, with one line instead of a failed apply deep in the engine.
            versions = digitalocean.get_kubernetes_versions(
                version_prefix=version_prefix_for_lookup(spec.version),
                opts=pulumi.InvokeOptions(parent=self),
            )
            version = looked_up_version(spec, versions.latest_version)

        self.cluster = digitalocean.KubernetesCluster(
            name,
            name=name,
            region=spec.region,
            version=version,
            vpc_uuid=args.vpc_id,
            cluster_subnet=spec.cluster_subnet,
            service_subnet=spec.service_subnet,
            ha=spec.ha,
            auto_upgrade=spec.auto_upgrade,
            surge_upgrade=spec.surge_upgrade,
            maintenance_policy=digitalocean.KubernetesClusterMaintenancePolicyArgs(
                day=spec.maintenance_day, start_time=spec.maintenance_start_time
            ),
            # Always sent: None would leave an existing firewall on with its old list.
            control_plane_firewall=digitalocean.KubernetesClusterControlPlaneFirewallArgs(
                enabled=bool(spec.control_plane_allowed_cidrs),
                allowed_addresses=list(spec.control_plane_allowed_cidrs),
            ),
            kubeconfig_expire_seconds=spec.kubeconfig_expire_seconds,
            destroy_all_associated_resources=spec.destroy_all_associated_resources,
            node_pool=digitalocean.KubernetesClusterNodePoolArgs(
                name=spec.system_pool_name,
                size=spec.system_pool_size,
                node_count=spec.system_pool_nodes,
                auto_scale=False,
                labels={SYSTEM_POOL_LABEL: "system"},
                tags=list(spec.tags),
            ),
            amd_gpu_device_plugin=digitalocean.KubernetesClusterAmdGpuDevicePluginArgs(
                enabled=spec.gpu_flags.amd_device_plugin
            ),
            amd_gpu_device_metrics_exporter_plugin=(
                digitalocean.KubernetesClusterAmdGpuDeviceMetricsExporterPluginArgs(
                    enabled=spec.gpu_flags.amd_metrics_exporter
                )
            ),
            nvidia_gpu_device_plugin=digitalocean.KubernetesClusterNvidiaGpuDevicePluginArgs(
                enabled=spec.gpu_flags.nvidia_device_plugin
            ),
            tags=list(spec.tags),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=spec.protect,
                # A prefix only chooses the version at creation (see module docstring).
                ignore_changes=None if exact else ["version"],
            ),
        )
        self.system_pool_name = spec.system_pool_name
        self.cluster_id = self.cluster.id
        self.version = self.cluster.version  # what runs, not what the lookup says
        # Fresh credentials on every run (see module docstring); waits for the cluster to exist.
        live = digitalocean.get_kubernetes_cluster_output(
            name=self.cluster.name,
            kubeconfig_expire_seconds=spec.kubeconfig_expire_seconds,
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
