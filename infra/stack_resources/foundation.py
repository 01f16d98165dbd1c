"""What every other resource stands on: the VPC, the DOKS cluster and its Kubernetes provider, the
GPU pools, the GPU runtime, the serving namespaces, and the DigitalOcean project.

Why each option is what it is (docs/architecture.md has the long form):

- The VPC is the blast-radius boundary: the cluster and the NFS share join it; its CIDR is
  create-time only, so prod protects it.
- The default node pool is the *system* pool and must stay stable: the DO provider treats its
  `size` as create-time, so changing it replaces the whole cluster. GPU capacity lives in separate
  node pools that change without touching the cluster.
- `cluster.version` is a prefix (`1.33`) or an exact DOKS slug (`1.33.1-do.5`). A prefix only
  picks the version at creation (DigitalOcean's latest release of it) and is then ignored
  (`ignore_changes: version`): following the lookup, an unrelated `pulumi up` after DO publishes a
  patch would upgrade the control plane and recycle every GPU node outside the maintenance window,
  and a lookup behind what runs would plan a downgrade, i.e. a replacement. A retired prefix (no
  release) is an error naming `cluster.version`, never an empty version sent to DO.
- The Kubernetes provider's kubeconfig comes from `get_kubernetes_cluster` on every run, not from
  the cluster resource: DO refreshes the stored `kube_configs` only on `pulumi refresh`, and DOKS
  tokens expire (7 days by default), so a plain `pulumi up` a week later would fail Unauthorized.
  It is a secret, and `cluster_identifier` is the cluster id, so a new kubeconfig updates the
  provider and never replaces it (and with it every Kubernetes object). `delete_unreachable` stays
  off: with an expired token the cluster looks unreachable and the provider would silently drop
  every object from state.
- An empty `control_plane_allowed_cidrs` sends the firewall explicitly disabled: left unset, the
  provider keeps whatever firewall exists.
- `destroy_all_associated_resources` (set outside prod): DOKS leaves the load balancers and block
  volumes that Kubernetes created billing after the cluster is destroyed unless told to delete them.
- GPU pools: `size` and `gpu_partition_mode` are create-time (a change replaces every node of the
  pool, which `infra diff` flags); an autoscaled pool's node count belongs to the autoscaler.
"""

from __future__ import annotations

from typing import Any

from infra.catalog import versions
from infra.catalog.doks import is_exact_version
from infra.errors import ConfigError, Problem
from infra.render import gpu_runtime as render_runtime
from infra.resource_graph.graph import GraphBuilder, Options
from infra.resource_graph.offline_values import KUBERNETES_CLUSTER_TOKEN, KUBERNETES_VERSIONS_TOKEN
from infra.resource_graph.values import Invoke, Ref, SecretInput
from infra.specs import ClusterSpec, GpuPoolSpec, GpuRuntimeSpec, NetworkSpec, ProjectSpec
from infra.stack_resources.gpu_pools import gpu_pool_inputs, pool_ignore_changes
from infra.stack_resources.kube import Group, chart_inputs, open_group

CLUSTER_TYPE = "digitalocean:index/kubernetesCluster:KubernetesCluster"
K8S_PROVIDER_TYPE = "pulumi:providers:kubernetes"
SYSTEM_POOL_LABEL = "inference-platform/pool"
# DigitalOcean project environments accept exactly these three values.
PROJECT_ENVIRONMENT = {"dev": "Development", "staging": "Staging", "prod": "Production"}
RUNTIME_MODES = ("doks-managed", "device-plugin", "gpu-operator")


def plan_network(b: GraphBuilder, spec: NetworkSpec) -> str:
    """The VPC (its key) inside group `Network`."""
    group = b.group("inference-platform:network:Network", spec.name)
    name = f"{spec.name}-vpc"
    vpc = b.resource(
        "digitalocean:index/vpc:Vpc", name,
        {"name": name, "region": spec.region, "ipRange": spec.vpc_cidr, "description": spec.description},
        parent=group, options=Options(protect=spec.protect), outputs=("id",),
    )  # fmt: skip
    b.set_group_outputs(group, {"vpc_id": Ref(vpc, "id")})
    return vpc


def version_prefix_for_lookup(version_prefix: str) -> str:
    """`1.33` → `1.33.` so the lookup cannot match a hypothetical `1.330`; `1.33.1` → `1.33.1-`
    (DOKS slugs continue a patch with `-do.N`, never with a dot). The config validates the prefix."""
    return f"{version_prefix}-" if version_prefix.count(".") == 2 else f"{version_prefix}."


def looked_up_version(spec: ClusterSpec):
    """The check of the lookup's answer: its latest version, or an error naming the key (an empty
    version would reach DO)."""

    def check(latest: str) -> str:
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

    return check


def cluster_inputs(spec: ClusterSpec, vpc: str) -> dict[str, Any]:
    exact = is_exact_version(spec.version)
    version: Any = spec.version if exact else Invoke(
        KUBERNETES_VERSIONS_TOKEN, {"versionPrefix": version_prefix_for_lookup(spec.version)}, ("latestVersion",),
        blocking=True, check=looked_up_version(spec),
    )  # fmt: skip
    return {
        "name": spec.name,
        "region": spec.region,
        "version": version,
        "vpcUuid": Ref(vpc, "id"),
        "clusterSubnet": spec.cluster_subnet,
        "serviceSubnet": spec.service_subnet,
        "ha": spec.ha,
        "autoUpgrade": spec.auto_upgrade,
        "surgeUpgrade": spec.surge_upgrade,
        "maintenancePolicy": {"day": spec.maintenance_day, "startTime": spec.maintenance_start_time},
        # Always sent: unset would leave an existing firewall on with its old list.
        "controlPlaneFirewall": {"enabled": bool(spec.control_plane_allowed_cidrs), "allowedAddresses": list(spec.control_plane_allowed_cidrs)},
        "kubeconfigExpireSeconds": spec.kubeconfig_expire_seconds,
        "destroyAllAssociatedResources": spec.destroy_all_associated_resources,
        "nodePool": {
            "name": spec.system_pool_name, "size": spec.system_pool_size, "nodeCount": spec.system_pool_nodes,
            "autoScale": False, "labels": {SYSTEM_POOL_LABEL: "system"}, "tags": list(spec.tags),
        },  # fmt: skip
        "amdGpuDevicePlugin": {"enabled": spec.gpu_flags.amd_device_plugin},
        "amdGpuDeviceMetricsExporterPlugin": {"enabled": spec.gpu_flags.amd_metrics_exporter},
        "nvidiaGpuDevicePlugin": {"enabled": spec.gpu_flags.nvidia_device_plugin},
        "tags": list(spec.tags),
    }


def plan_cluster(b: GraphBuilder, spec: ClusterSpec, vpc: str) -> tuple[str, str]:
    """The cluster and its Kubernetes provider (their keys) inside group `DoksCluster`."""
    group = b.group("inference-platform:cluster:DoksCluster", spec.name)
    cluster = b.resource(
        CLUSTER_TYPE, spec.name, cluster_inputs(spec, vpc), parent=group,
        options=Options(
            protect=spec.protect,
            ignore_changes=() if is_exact_version(spec.version) else ("version",),  # a prefix only picks at creation
            additional_secret_outputs=("kubeConfigs",),  # credentials: secret in state (the provider's own marking)
        ),
        outputs=("id", "name", "version", "clusterUrn"),
    )  # fmt: skip
    # Fresh credentials on every run (module docstring); after the cluster exists.
    kubeconfig = Invoke(
        KUBERNETES_CLUSTER_TOKEN, {"name": Ref(cluster, "name"), "kubeconfigExpireSeconds": spec.kubeconfig_expire_seconds},
        ("kubeConfigs", 0, "rawConfig"), depends_on=(cluster,), secret=True,
    )  # fmt: skip
    provider = b.resource(
        K8S_PROVIDER_TYPE, f"{spec.name}-k8s",
        # delete_unreachable deliberately unset (defaults to false): see module docstring.
        {"kubeconfig": kubeconfig, "clusterIdentifier": Ref(cluster, "id")}, parent=group,
    )  # fmt: skip
    b.set_group_outputs(group, {"cluster_id": Ref(cluster, "id"), "kubeconfig": kubeconfig, "version": Ref(cluster, "version")})
    return cluster, provider


def plan_existing_cluster(b: GraphBuilder, spec: ClusterSpec) -> str:
    """The Kubernetes provider of a cluster the stack does not create (its key), inside group
    `ExistingCluster`: the `kubeconfig` secret, and the context when one is named. No
    `clusterIdentifier` (the kubeconfig is the cluster's identity: a new one for another cluster
    replaces every object, as it should); `deleteUnreachable` unset (off), as for DOKS."""
    assert spec.existing is not None
    group = b.group("inference-platform:cluster:ExistingCluster", spec.name)
    inputs: dict[str, Any] = {"kubeconfig": SecretInput("kubeconfig")}
    if spec.existing.context is not None:
        inputs["context"] = spec.existing.context
    provider = b.resource(K8S_PROVIDER_TYPE, f"{spec.name}-k8s", inputs, parent=group)
    b.set_group_outputs(group, {"context": spec.existing.context or ""})
    return provider


def plan_gpu_pool(b: GraphBuilder, spec: GpuPoolSpec, cluster: str) -> str:
    """One GPU node pool inside its group `GpuNodePool` (the group's key)."""
    group = b.group("inference-platform:gpu_pool:GpuNodePool", spec.name, options=Options(protect=spec.protect))
    pool = b.resource(
        "digitalocean:index/kubernetesNodePool:KubernetesNodePool", spec.name, gpu_pool_inputs(spec, Ref(cluster, "id")),
        parent=group,
        options=Options(
            protect=spec.protect,  # the group's protect, which Pulumi hands its members
            ignore_changes=tuple(pool_ignore_changes(spec.autoscaled, spec.gpu.vendor, spec.partition_mode)),
            # Creating 8-GPU nodes can take longer than the provider's 30-minute default.
            custom_timeouts={"create": "60m"},
        ),
        outputs=("id",),
    )  # fmt: skip
    b.set_group_outputs(group, {"node_pool_id": Ref(pool, "id")})
    return group


def plan_gpu_runtime(b: GraphBuilder, spec: GpuRuntimeSpec, provider: str, pools: list[str], cluster: str | None) -> tuple[str, str | None, str | None]:
    """The GPU runtime on the AMD pools (infra/render/gpu_runtime.py): the node-tuning DaemonSet,
    and our own device plugin or the AMD GPU operator. Its group's key and the cert-manager and
    operator releases (gpu-operator mode)."""
    if spec.mode not in RUNTIME_MODES:
        raise ValueError(f"unknown gpu runtime mode {spec.mode!r}; expected one of {RUNTIME_MODES}")
    group = open_group(b, "inference-platform:gpu_runtime:GpuRuntime", spec.name, provider=provider, depends_on=pools, deleted_with=cluster)
    cert_manager = operator = None
    objects = 0
    if spec.amd_pools:
        on = spec.amd_pool_selectors  # an existing cluster's AMD pools; None: DOKS's gpu-brand label
        if spec.disable_numa_balancing:
            group.object(f"{spec.name}-node-tuning", render_runtime.render_node_tuning_daemonset(spec.node_tuning_image, pool_selectors=on))
            objects += 1
        if spec.mode == "device-plugin":
            for obj in (*render_runtime.render_device_plugin(spec.device_plugin_image, pool_selectors=on),
                        *render_runtime.render_node_labeller(spec.node_labeller_image, pool_selectors=on)):  # fmt: skip
                group.object(f"{spec.name}-{obj['kind'].lower()}-{obj['metadata']['name']}", obj)
                objects += 1
        elif spec.mode == "gpu-operator":
            cert_manager, operator = _plan_gpu_operator(group, spec)
    b.set_group_outputs(group.key, {"mode": spec.mode, "objects": objects})
    return group.key, cert_manager, operator


def _plan_gpu_operator(group: Group, spec: GpuRuntimeSpec) -> tuple[str, str]:
    """cert-manager → the AMD GPU operator (Helm: it relies on hooks) → the DeviceConfig its CRD
    brings (inbox driver)."""
    cert_manager = group.release(f"{spec.name}-cert-manager", {
        "name": "cert-manager",
        **chart_inputs(versions.CERT_MANAGER_CHART, spec.cert_manager_chart_version, versions.CERT_MANAGER_CHART_REPO),
        "namespace": render_runtime.CERT_MANAGER_NAMESPACE, "createNamespace": True,
        "values": render_runtime.render_cert_manager_values(spec.system_node_selector),
    })  # fmt: skip
    operator = group.release(f"{spec.name}-amd-gpu-operator", {
        "name": "amd-gpu-operator",
        **chart_inputs(versions.AMD_GPU_OPERATOR_CHART, spec.gpu_operator_chart_version, versions.AMD_GPU_OPERATOR_CHART_REPO),
        "namespace": render_runtime.GPU_OPERATOR_NAMESPACE, "createNamespace": True,
        "values": render_runtime.render_gpu_operator_values(spec.system_node_selector),
    }, depends_on=[cert_manager])  # fmt: skip
    images = {"device_plugin_image": spec.device_plugin_image, "node_labeller_image": spec.node_labeller_image,
              "metrics_exporter_image": spec.metrics_exporter_image, "metrics_exporter_enabled": spec.metrics_exporter}  # fmt: skip
    if spec.amd_pool_selectors is None:
        device_config = render_runtime.render_device_config(**images)
        group.object(f"{spec.name}-device-config", device_config, depends_on=[operator])  # its CRD comes with the operator
        return cert_manager, operator
    # An existing cluster: a DeviceConfig's selector is one label map, so one DeviceConfig per AMD pool.
    for pool, selector in sorted(spec.amd_pool_selectors.items()):
        device_config = render_runtime.render_device_config(
            **images, name=f"{render_runtime.DEVICE_CONFIG_NAME}-{pool}", node_selector=selector)  # fmt: skip
        group.object(f"{spec.name}-device-config-{pool}", device_config, depends_on=[operator])
    return cert_manager, operator


def plan_namespaces(b: GraphBuilder, stack: str, namespaces: list[dict], provider: str, cluster: str | None) -> list[str]:
    """The serving namespaces (top level, no group)."""
    return [
        b.resource("kubernetes:core/v1:Namespace", f"{stack}-ns-{ns['metadata']['name']}",
                   {"apiVersion": "v1", "kind": "Namespace", "metadata": ns["metadata"]}, parent=None,
                   options=Options(provider=provider, deleted_with=cluster))  # fmt: skip
        for ns in namespaces
    ]


def plan_project(b: GraphBuilder, spec: ProjectSpec, cluster: str) -> str:
    """One DO project per stack, holding the cluster. DO projects accept only some resource types:
    VPCs and NFS shares cannot be assigned, and the provider exposes DO URNs (`cluster_urn`)."""
    group = b.group("inference-platform:network:EnvironmentProject", spec.name)
    project = b.resource(
        "digitalocean:index/project:Project", f"{spec.name}-project",
        {
            "name": spec.project_name, "description": spec.description, "purpose": "Machine learning / AI / Data processing",
            "environment": PROJECT_ENVIRONMENT[spec.environment], "resources": [Ref(cluster, "clusterUrn")],
        },
        parent=group, outputs=("id",),
    )  # fmt: skip
    b.set_group_outputs(group, {"project_id": Ref(project, "id")})
    return project
