"""`cluster:` — the DOKS cluster: version, HA, protection, system pool, maintenance window, API
allow-list. (Whether the version suits the pinned charts and images the stack deploys reads every
other section: infra/config/cross_checks.py `pinned_version_problems`.)"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from infra.catalog import doks
from infra.catalog.cpu_sizes import CPU_USD_PER_MONTH
from infra.config.allow_lists import AllowedCidr
from infra.config.base import NS, StrictModel, label_map
from infra.errors import Problem

_HHMM = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
# DigitalOcean's CPU Droplet slugs: `c-<vcpus>` (CPU-optimized), else `<family>-<n>vcpu-<ram>`
# with an optional disk size (`s-2vcpu-8gb-160gb-intel`), then an optional CPU-vendor suffix.
_CPU_SLUG = re.compile(
    r"^(c-[0-9]+|(s|g|gd|m|m3|m6|so|so1_5|c2)-[0-9]+vcpu-[0-9]+(mb|gb)(-[0-9]+gb)?)(-amd|-intel)?$"
)


def _cpu_slug(value: str) -> str:
    if not _CPU_SLUG.match(value):
        close = difflib.get_close_matches(value, sorted(CPU_USD_PER_MONTH), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"{value!r} is not a CPU Droplet size slug{hint}; use e.g. s-4vcpu-8gb, g-4vcpu-16gb, c-8, "
            "m-2vcpu-16gb, optionally with -amd or -intel"
        )
    return value


def _hhmm(value: str) -> str:
    if not _HHMM.match(value):
        raise ValueError(f"{value!r} is not a time of day; use HH:MM in UTC, e.g. 04:00")
    return value


def _k8s_prefix(value: str) -> str:
    if not (doks.VERSION_PREFIX.match(value) or doks.VERSION_SLUG.match(value)):
        raise ValueError(
            f"{value!r} is neither a Kubernetes version prefix (e.g. \"1.33\") nor an exact DOKS version "
            "slug (e.g. \"1.33.1-do.5\", as `doctl kubernetes options versions` lists)"
        )
    return value


CpuSlug = Annotated[str, AfterValidator(_cpu_slug)]
TimeOfDay = Annotated[str, AfterValidator(_hhmm)]
K8sPrefix = Annotated[str, AfterValidator(_k8s_prefix)]


class SystemPoolConfig(StrictModel):
    """The cluster's default node pool: CPU nodes for system workloads (router, Prometheus, operators)."""

    size: CpuSlug = Field(
        "s-4vcpu-8gb",
        description="CPU Droplet size slug, e.g. s-4vcpu-8gb, g-4vcpu-16gb, c-8. Changing it REPLACES THE CLUSTER (DOKS default pool); pick once.",
    )
    nodes: int = Field(2, ge=1, le=100, description="Node count of the system pool.")


class MaintenanceConfig(StrictModel):
    """When DOKS may apply patch upgrades."""

    day: Literal["any", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"] = Field(
        "sunday", description="Day of the week for the maintenance window."
    )
    start_time: TimeOfDay = Field("04:00", description="Start of the window, HH:MM UTC.")


def _system_selector(selector: dict[str, str]) -> dict[str, str]:
    if not selector:
        raise ValueError("an empty selector pins nothing; leave system_node_selector out (system pods are then not pinned) or give the labels of the nodes for system workloads")
    return label_map(selector, reserved=())


def _context(value: str) -> str:
    if not value.strip():
        raise ValueError("an empty context name; leave context out to use the kubeconfig's current-context")
    return value


SystemSelector = Annotated[dict[str, str], AfterValidator(_system_selector)]
KubeContext = Annotated[str, AfterValidator(_context)]


class ExistingClusterConfig(StrictModel):
    """A cluster the stack does not create (DOKS or any conformant Kubernetes): the stack deploys onto
    it with the `kubeconfig` secret and manages no VPC, cluster, node pool or node label
    (docs/existing-cluster.md)."""

    context: KubeContext | None = Field(
        None, description="Context of the `kubeconfig` secret to use; unset: the kubeconfig's current-context."
    )
    system_node_selector: SystemSelector | None = Field(
        None,
        description=(
            "Labels of the nodes where system workloads run (router, P/D routers, Prometheus, operators, cert-manager, KEDA, "
            "the gateway); unset: system pods are not pinned (the plan notes it) and may land on GPU nodes. Refused: labels "
            "a GPU pool's nodes carry, only labels every node carries (kubernetes.io/arch, kubernetes.io/os), a GPU size "
            "as instance type."
        ),
    )


# The keys only a DOKS cluster the stack creates reads: refused next to cluster.existing.
DOKS_ONLY_CLUSTER_KEYS = (
    "version", "ha", "protect", "auto_upgrade", "surge_upgrade", "system_pool", "maintenance",
    "control_plane_allowed_cidrs", "kubeconfig_expire_seconds",
)


class ClusterConfig(StrictModel):
    """The DOKS cluster. Unset booleans take the environment's defaults (prod: HA and protected)."""

    version: K8sPrefix = Field(
        "1.33",
        description=(
            "Kubernetes version: a prefix (1.33) picks the latest DOKS release at creation and is then ignored "
            "(auto_upgrade moves patches; otherwise the cluster stays on its version), or an exact DOKS slug "
            "(1.33.1-do.5) managed verbatim, so editing it upgrades the cluster (requires auto_upgrade: false; "
            "lowering it replaces the cluster)."
        ),
    )
    ha: bool | None = Field(None, description="Highly available control plane. Default: true in prod, false elsewhere.")
    protect: bool | None = Field(None, description="Pulumi `protect` on the cluster, node pools and weight cache. Default: true in prod.")
    auto_upgrade: bool = Field(
        True, description="Let DOKS apply patch upgrades in the maintenance window. Must be false with an exact version slug."
    )
    surge_upgrade: bool = Field(True, description="Upgrade by adding new nodes before draining old ones.")
    system_pool: SystemPoolConfig = Field(default_factory=SystemPoolConfig, description="The default (system) node pool.")
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig, description="Maintenance window.")
    control_plane_allowed_cidrs: list[AllowedCidr] = Field(
        default_factory=list,
        description=(
            "Allow-list for the Kubernetes API (control-plane firewall), IPv4; must include the machine running Pulumi "
            "(CI runner too). Empty: firewall explicitly off (API open to the internet, token-protected; refused in prod). "
            "Judged by the address space its entries open together: half the IPv4 space or more is refused like 0.0.0.0/0; "
            "documentation and other unreachable ranges are noted (a prod list of only those blocks `pulumi up`)."
        ),
    )
    kubeconfig_expire_seconds: int = Field(
        7 * 24 * 3600, ge=3600, le=7 * 24 * 3600, description="Lifetime of the kubeconfig token DOKS issues (1 h to 7 days)."
    )


    existing: ExistingClusterConfig | None = Field(
        None,
        description=(
            "Deploy onto a cluster that already exists instead of creating a VPC, DOKS cluster and node pools: "
            "needs the `kubeconfig` secret and gpu_pools[].node_selector; every other cluster key and `network` "
            "are refused (docs/existing-cluster.md)."
        ),
    )

    @property
    def api_allow_list(self) -> list[str] | None:
        """The Kubernetes API's allow-list the stack sets; None on an existing cluster (not the stack's)."""
        return None if self.existing is not None else self.control_plane_allowed_cidrs


def check_cluster(cluster: ClusterConfig) -> list[Problem]:
    """An exact version with auto-upgrade: DOKS moves the patch past the slug, and the next `pulumi
    up` would plan the slug again, a downgrade, which replaces the cluster."""
    version = cluster.version
    problems = []
    if cluster.existing is not None:
        return [
            Problem(f"{NS}cluster.{key}", (
                f"{_shown(getattr(cluster, key))} is given, but cluster.existing deploys onto a cluster the stack does not "
                "create, and this key configures only a DOKS cluster the stack creates (the existing cluster's owner "
                f"manages it); remove cluster.{key}"))
            for key in DOKS_ONLY_CLUSTER_KEYS if key in cluster.model_fields_set
        ]
    if doks.VERSION_SLUG.match(version) and cluster.auto_upgrade:
        problems.append(
            Problem(
                f"{NS}cluster.version",
                f"{version!r} is an exact DOKS version, which requires cluster.auto_upgrade: false (DOKS would "
                "upgrade past it and the next `pulumi up` would plan a downgrade, i.e. a cluster replacement); "
                "set auto_upgrade: false, or give a prefix such as \"1.33\"",
            )
        )
    return problems



def _shown(value: object) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump(exclude_unset=True)
    return repr(value)
