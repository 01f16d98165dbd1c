"""The stack's infrastructure specs: the DOKS cluster, the GPU pools (with the nodes rollout
candidates add), the GPU runtime, the fabric (LWS, Multus, NIC attachments) and the DO project;
on a created or an existing cluster.
"""

from __future__ import annotations

from infra.config import NS, PROJECT, StackConfig
from infra.specs import (
    ClusterSpec,
    ExistingClusterSpec,
    FabricSpec,
    GpuPoolSpec,
    GpuRuntimeSpec,
    gpu_addon_flags,
    standard_tags,
)
from infra.stack_plan.facts import ModelFacts
from infra.stack_plan.namespaces import ENGINES_NAMESPACE


def _plus(count: int | None, extra: int) -> int | None:
    return None if count is None else count + extra


def fabric_spec(prefix: str, cfg: StackConfig) -> FabricSpec | None:
    """LWS, Multus and the NIC attachments, on clusters with a fabric pool only."""
    fabric = tuple(p.name for p in cfg.gpu_pools if p.fabric)
    if not fabric:
        return None
    return FabricSpec(name=f"{prefix}-fabric", fabric_pools=fabric, namespace=ENGINES_NAMESPACE)


def project_name(stack: str) -> str:
    """The DigitalOcean project of a stack: `inference-platform-<stack>`.

    DO project names are unique per account, so the name follows the stack, not the environment
    (two `dev` stacks of one account would otherwise claim the same project). The shipped stacks are
    named after their environments, so their project names are unchanged.
    """
    return f"{PROJECT}-{stack}"


def cluster_spec(cfg: StackConfig) -> ClusterSpec:
    """The DOKS cluster with its system pool, maintenance window, API allow-list and GPU add-on flags
    (on an existing cluster: only how to reach it and where system workloads run)."""
    existing = cfg.cluster.existing
    if existing is not None:
        return ClusterSpec(
            name=f"{cfg.stack}-cluster", region=cfg.region, version="", version_key=f"{NS}cluster.version",
            existing=ExistingClusterSpec(context=existing.context, system_node_selector=dict(existing.system_node_selector or {})),
        )  # fmt: skip
    return ClusterSpec(
        name=f"{cfg.stack}-doks",
        region=cfg.region,
        version=cfg.cluster.version,
        version_key=f"{NS}cluster.version",
        system_pool_size=cfg.cluster.system_pool.size,
        system_pool_nodes=cfg.cluster.system_pool.nodes,
        ha=bool(cfg.cluster.ha),
        auto_upgrade=cfg.cluster.auto_upgrade,
        surge_upgrade=cfg.cluster.surge_upgrade,
        maintenance_day=cfg.cluster.maintenance.day,
        maintenance_start_time=cfg.cluster.maintenance.start_time,
        control_plane_allowed_cidrs=tuple(cfg.cluster.control_plane_allowed_cidrs),
        cluster_subnet=cfg.network.cluster_subnet,
        service_subnet=cfg.network.service_subnet,
        kubeconfig_expire_seconds=cfg.cluster.kubeconfig_expire_seconds,
        # prod keeps its volumes and load balancers on destroy (docs/architecture.md: manual cleanup).
        destroy_all_associated_resources=cfg.environment != "prod",
        gpu_flags=gpu_addon_flags({p.gpu.vendor for p in cfg.gpu_pools}, cfg.gpu_runtime.mode, bool(cfg.observability.enabled)),
        protect=cfg.protect,
        tags=tuple(standard_tags(cfg.environment)),
    )


def pool_specs(cfg: StackConfig, models: list[ModelFacts]) -> tuple[GpuPoolSpec, ...]:
    """Every GPU pool, its node counts raised by the extra nodes its models' rollout candidates need."""
    extra_nodes = {p.name: sum(m.rollout.extra_nodes for m in models if m.rollout and m.pool.name == p.name) for p in cfg.gpu_pools}
    return tuple(
        GpuPoolSpec(
            name=f"{cfg.stack}-pool-{pool.name}",
            pool_name=pool.name,
            gpu=pool.gpu,
            node_count=_plus(pool.nodes, extra_nodes[pool.name]),
            min_nodes=_plus(pool.min_nodes, extra_nodes[pool.name]),
            max_nodes=_plus(pool.max_nodes, extra_nodes[pool.name]),
            partition_mode=pool.partition_mode,
            labels=dict(pool.labels),
            tags=tuple(standard_tags(cfg.environment)),
            protect=cfg.protect,
            node_selector=cfg.pool_selector(pool),
            managed=not cfg.existing_cluster,
        )
        for pool in cfg.gpu_pools
    )


def gpu_runtime_spec(cfg: StackConfig) -> GpuRuntimeSpec:
    """The GPU runtime (device plugin or operator) of the AMD pools, and its metrics exporter."""
    return GpuRuntimeSpec(
        name=f"{cfg.stack}-gpu-runtime",
        mode=cfg.gpu_runtime.mode,
        amd_pools=tuple(p.name for p in cfg.gpu_pools if p.gpu.vendor == "amd"),
        amd_pool_selectors={p.name: cfg.pool_selector(p) for p in cfg.gpu_pools if p.gpu.vendor == "amd"} if cfg.existing_cluster else None,
        system_node_selector=(dict(cfg.cluster.existing.system_node_selector)
                              if cfg.cluster.existing is not None and cfg.cluster.existing.system_node_selector else None),
        disable_numa_balancing=cfg.gpu_runtime.disable_numa_balancing,
        metrics_exporter=bool(cfg.observability.enabled),
    )
