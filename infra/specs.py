"""What each component is asked to build, as plain frozen values (no Pulumi).

`plan_stack` decides every one of these from the validated config; `declare` hands each to its
component together with the Pulumi handles it needs (the VPC id, the cluster's provider, the
resources to wait for), so a component makes no decision of its own and reads no config. The
Kubernetes-heavy components take their shapes from the renderers instead (`ModelServiceSpec`,
`RouterSpec`, `MonitoringSettings`, `ScalingSpec`); these are the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from infra.catalog import doks, versions
from infra.catalog.gpus import GpuSize

APP_TAG = "app:inference-platform"


def standard_tags(environment: str) -> list[str]:
    """Tags every taggable DO resource carries, for cost attribution.

    DO tag names may contain letters, numbers, colons, dashes and underscores (max 255 chars), so
    `env:prod` and `app:inference-platform` are valid as written.
    Source: DO API reference, Tags → create ("Tags may contain letters, numbers, colons, dashes,
    and underscores").
    """
    return [f"env:{environment}", APP_TAG]


@dataclass(frozen=True)
class NetworkSpec:
    """The environment's VPC (`<name>-vpc`)."""

    name: str  # logical name; the VPC is `<name>-vpc`
    region: str
    vpc_cidr: str  # RFC 1918, /16../28; create-time only
    description: str = "inference-platform private network"
    protect: bool = False  # prod: a VPC replacement would orphan the cluster and the NFS share


@dataclass(frozen=True)
class ProjectSpec:
    """The DigitalOcean project that groups the stack's resources (`<project_name>`)."""

    name: str  # logical name
    project_name: str  # DO project name, unique per account
    environment: str  # dev | staging | prod (DO's Development | Staging | Production)
    description: str = "LLM inference platform (managed by Pulumi)"


@dataclass(frozen=True)
class GpuAddonFlags:
    """Which DOKS-managed GPU components the cluster enables (each sent explicitly)."""

    amd_device_plugin: bool = False
    amd_metrics_exporter: bool = False
    nvidia_device_plugin: bool = False


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


@dataclass(frozen=True)
class ExistingClusterSpec:
    """A cluster the stack does not create (cluster.existing): reached with the `kubeconfig` secret.

    context: the kubeconfig context to use (None: its current-context).
    system_node_selector: where system workloads run; empty: not pinned.
    """

    context: str | None = None
    system_node_selector: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterSpec:
    """The DOKS cluster and its system (default) pool.

    version: an exact DOKS slug (`1.33.1-do.5`, managed verbatim) or a prefix (`1.33`) that picks
    the latest matching release at creation and is then ignored (see components/cluster.py).
    version_key: the config key the version came from, for the error when a prefix matches no
    release (the lookup happens when the program runs).
    """

    name: str  # logical and DOKS name
    region: str
    version: str
    version_key: str = "cluster.version"
    system_pool_size: str = "s-4vcpu-8gb"  # create-time: a change replaces the cluster
    system_pool_nodes: int = 2
    ha: bool = False
    auto_upgrade: bool = True
    surge_upgrade: bool = True
    maintenance_day: str = "sunday"  # monday..sunday | any
    maintenance_start_time: str = "04:00"  # UTC, HH:MM
    control_plane_allowed_cidrs: tuple[str, ...] = ()  # empty: control-plane firewall off
    cluster_subnet: str | None = None  # VPC-native pod range
    service_subnet: str | None = None  # VPC-native service range
    kubeconfig_expire_seconds: int | None = None  # None: DOKS default (7 days)
    destroy_all_associated_resources: bool = False  # on destroy, also delete LBs/volumes Kubernetes made
    gpu_flags: GpuAddonFlags = field(default_factory=GpuAddonFlags)
    protect: bool = False
    tags: tuple[str, ...] = ()
    existing: ExistingClusterSpec | None = None  # deploy onto this cluster instead of creating one

    @property
    def system_pool_name(self) -> str:
        """The default pool's DOKS name; DOKS labels its nodes doks.digitalocean.com/node-pool=<this>."""
        return f"{self.name}-system"

    @property
    def system_node_selector(self) -> dict[str, str]:
        """Where system workloads run: the system pool, or an existing cluster's nodes for them."""
        if self.existing is not None:
            return dict(self.existing.system_node_selector)
        return doks.pool_node_selector(self.system_pool_name)


@dataclass(frozen=True)
class GpuPoolSpec:
    """One GPU node pool. Either `node_count`, or `min_nodes` and `max_nodes` (autoscaling)."""

    name: str  # logical name
    pool_name: str  # config name; the DO pool name and the `inference-platform/pool` label
    gpu: GpuSize
    node_count: int | None = None
    min_nodes: int | None = None  # autoscaling; GPU pools may scale to zero
    max_nodes: int | None = None
    partition_mode: str | None = None  # AMD only: AMD_PARTITION_MODE_SPX_NPS1 | _DPX_NPS2
    labels: Mapping[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    protect: bool = False
    node_selector: Mapping[str, str] | None = None  # the pool's nodes; None: the DOKS pool's (its node-pool label)
    managed: bool = True  # the stack creates the pool (false: an existing cluster's nodes)

    @property
    def selector(self) -> dict[str, str]:
        """The labels that select this pool's nodes."""
        return dict(self.node_selector) if self.node_selector is not None else doks.pool_node_selector(self.pool_name)

    @property
    def autoscaled(self) -> bool:
        return self.node_count is None


@dataclass(frozen=True)
class GpuRuntimeSpec:
    """How AMD GPUs reach Kubernetes, and the node tuning on AMD pools."""

    name: str  # logical name
    mode: str  # doks-managed | device-plugin | gpu-operator
    amd_pools: tuple[str, ...] = ()  # names of the AMD GPU pools; empty → nothing to run
    # An existing cluster's AMD pools, name → node selector: the runtime's pods select those nodes
    # (None: DOKS labels every AMD node doks.digitalocean.com/gpu-brand=amd).
    amd_pool_selectors: Mapping[str, Mapping[str, str]] | None = None
    # An existing cluster's system nodes (cluster.existing.system_node_selector): where the operator's
    # controller and cert-manager run. None: not pinned (on DOKS the GPU taints keep them on the system pool).
    system_node_selector: Mapping[str, str] | None = None
    disable_numa_balancing: bool = True  # AMD's vLLM recommendation
    metrics_exporter: bool = False  # gpu-operator mode: exporter via the DeviceConfig
    device_plugin_image: str = versions.ROCM_DEVICE_PLUGIN_IMAGE
    node_labeller_image: str = versions.ROCM_NODE_LABELLER_IMAGE
    metrics_exporter_image: str = versions.ROCM_DEVICE_METRICS_EXPORTER_IMAGE
    node_tuning_image: str = versions.BUSYBOX_IMAGE
    gpu_operator_chart_version: str = versions.AMD_GPU_OPERATOR_CHART_VERSION
    cert_manager_chart_version: str = versions.CERT_MANAGER_CHART_VERSION


@dataclass(frozen=True)
class FabricSpec:
    """What a fabric cluster adds for replicas that span nodes (infra/render/fabric.py): the
    LeaderWorkerSet controller (Helm), Multus on the fabric pools' nodes, and one
    NetworkAttachmentDefinition per fabric NIC in the engines' namespace."""

    name: str  # logical name
    fabric_pools: tuple[str, ...]  # DOKS node pool names of the fabric pools (Multus runs there)
    namespace: str  # where the engines and their NetworkAttachmentDefinitions live
    lws_chart_version: str = versions.LWS_CHART_VERSION
    lws_image_tag: str = versions.LWS_IMAGE_TAG
    multus_image: str = versions.MULTUS_IMAGE


@dataclass(frozen=True)
class ModelCacheSpec:
    """The shared weight cache: an NFS share (`<name>-nfs`) and its PV/PVC in `namespace`."""

    name: str  # logical name
    region: str  # must be the cluster's region
    size_gib: int
    tier: str  # standard | high (DO NFS performance tier; high cannot be downgraded)
    namespace: str  # where the PVC lives
    protect: bool = False
    retain_on_delete: bool | None = None  # None: same as protect
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class WeightBucketSpec:
    """The Spaces bucket that holds the weights (model_cache.kind spaces), its two scoped keys and
    the Kubernetes Secrets that hand them to pods: read (engines) and readwrite (prefetch Job)."""

    name: str  # logical name
    bucket: str  # the bucket's name, unique across Spaces
    region: str  # a region with Spaces
    namespace: str  # where the key Secrets live
    read_secret: str
    write_secret: str
    protect: bool = False  # prod: refilling ~240 GB per model takes an hour
    retain_on_delete: bool | None = None  # None: same as protect
    force_destroy: bool = False  # never delete a bucket that still holds objects


@dataclass(frozen=True)
class ImagePrepullSpec:
    """The image pre-pull DaemonSets, one per GPU pool (rendered by infra/render/warm_start.py)."""

    name: str  # logical name
    daemonsets: tuple[dict, ...]
