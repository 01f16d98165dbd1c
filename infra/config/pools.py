"""`gpu_pools:` — the GPU node pools: size, fixed or autoscaling node counts, fabric, labels."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from infra.catalog.gpus import GPU_SIZES, GpuSize
from infra.config.base import NS, Name, StrictModel, duplicates, one_of
from infra.errors import Problem


def _gpu_slug(value: str) -> str:
    return one_of(value, sorted(GPU_SIZES), "GPU Droplet size")


# Kubernetes label syntax (kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set):
# a key is an optional DNS-subdomain prefix (≤ 253) and `/`, then a name (≤ 63) of alphanumerics,
# '-', '_', '.', beginning and ending alphanumeric; a value is empty or the same as a name.
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# Prefixes whose labels belong to someone else: Kubernetes itself (kubelet refuses most of them on
# nodes), DOKS (it manages doks.digitalocean.com/* on every node) and this program, whose pool and
# GPU labels the model pods select on.
RESERVED_LABEL_PREFIXES = ("kubernetes.io", "k8s.io", "doks.digitalocean.com", "inference-platform")


def _label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "has more than one '/'; a label key is [prefix/]name"
    if not _LABEL_NAME.match(name):
        return (
            "is not a valid label name: at most 63 characters of letters, digits, '-', '_' and '.', "
            "beginning and ending with a letter or digit (optionally after a DNS prefix and '/')"
        )
    if key.startswith("/") or (prefix and (len(prefix) > 253 or not all(_DNS_SUBDOMAIN_LABEL.match(p) for p in prefix.split(".")))):
        return "has a prefix that is not a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)"
    for reserved in RESERVED_LABEL_PREFIXES:
        if prefix == reserved or prefix.endswith("." + reserved):
            return f"uses the reserved prefix {prefix}/ (reserved: {', '.join(p + '/' for p in RESERVED_LABEL_PREFIXES)}); choose your own prefix, e.g. example.com/team"
    return None


def _node_labels(labels: dict[str, str]) -> dict[str, str]:
    """Each bad key or value as its own error at its key, reported with every other problem."""
    errors = []
    for key, value in labels.items():
        problem = _label_key_problem(key)
        if problem is None and value and not _LABEL_NAME.match(value):
            shown = value if len(value) <= 70 else value[:67] + "..."
            problem = (
                f"value {shown!r} is not a valid label value: at most 63 characters of letters, digits, '-', '_' "
                "and '.', beginning and ending with a letter or digit (or empty)"
            )
        if problem is not None:
            message = f"label {key!r} {problem}" if not problem.startswith("value") else f"label {key!r}: {problem}"
            errors.append(
                InitErrorDetails(type=PydanticCustomError("value_error", "{message}", {"message": message}), loc=(key,), input=key)
            )
    if errors:
        raise ValidationError.from_exception_data("labels", errors)
    return labels

# Node limits of a DOKS node pool: 512 nodes (the `nodes`/`max_nodes` range below), 64 for a pool of
# a fabric size (DigitalOcean's GPU fabric groups). A rollout's extra nodes count against them too.
MAX_POOL_NODES = 512
FABRIC_MAX_NODES = 64


def node_limit(size: GpuSize) -> tuple[int, str]:
    """(the most nodes a pool of `size` may have, what limit that is)."""
    if size.fabric:
        return FABRIC_MAX_NODES, "the node limit for fabric sizes"
    return MAX_POOL_NODES, "the node limit of a DOKS node pool"


GpuSlug = Annotated[str, AfterValidator(_gpu_slug)]
NodeLabels = Annotated[dict[str, str], AfterValidator(_node_labels)]


class GpuPoolConfig(StrictModel):
    """A GPU node pool. Either a fixed `nodes` count or an autoscaling `min_nodes`..`max_nodes` range."""

    name: Name = Field(description="Pool name (DOKS node-pool name and the `inference-platform/pool` label).")
    size: GpuSlug = Field(description="GPU Droplet size slug (see the GPU catalog). Changing it replaces the pool.")
    nodes: int | None = Field(
        None, ge=1, le=MAX_POOL_NODES, description="Fixed node count (≥ 1; to park a pool at zero nodes use min_nodes: 0). Mutually exclusive with min_nodes/max_nodes."
    )
    min_nodes: int | None = Field(
        None,
        ge=0,
        le=MAX_POOL_NODES,
        description="Autoscaling lower bound. 0 parks the pool: its models get 0 replicas and serve nothing (autoscaling cannot start from zero).",
    )
    max_nodes: int | None = Field(None, ge=1, le=MAX_POOL_NODES, description="Autoscaling upper bound.")
    partition_mode: Literal["AMD_PARTITION_MODE_SPX_NPS1", "AMD_PARTITION_MODE_DPX_NPS2"] | None = Field(
        None, description="AMD compute/memory partition mode; create-time only (a change replaces the pool)."
    )
    usd_per_hour: float | None = Field(
        None, gt=0, description="Price per node-hour. Required for cost figures on contract-only sizes; overrides the catalog price."
    )
    fabric: bool = Field(
        False,
        description="The pool's nodes are on DigitalOcean's RDMA GPU fabric (a -fabric- size): P/D units and replicas may span nodes, KV and collectives move over RDMA. Only for fabric sizes.",
    )
    labels: NodeLabels = Field(
        default_factory=dict,
        description="Extra Kubernetes node labels (Kubernetes label syntax; prefixes kubernetes.io/, k8s.io/, doks.digitalocean.com/ and inference-platform/ are reserved).",
    )
    available_in_region: bool = Field(
        False,
        description="true: plan the size in the stack's region although the GPU catalog (infra/catalog/gpu_sizes.json, dated) lists it only in other regions — for a catalog older than DigitalOcean's offer. `infra doctor` confirms it online; `infra catalog sync` refreshes the catalog.",
    )

    @property
    def autoscale(self) -> bool:
        return self.nodes is None

    @property
    def min_node_count(self) -> int:
        return self.nodes if self.nodes is not None else (self.min_nodes or 0)

    @property
    def max_node_count(self) -> int:
        return self.nodes if self.nodes is not None else (self.max_nodes or 0)

    @property
    def gpu(self) -> GpuSize:
        return GPU_SIZES[self.size]

    @property
    def node_usd_per_hour(self) -> float | None:
        return self.usd_per_hour if self.usd_per_hour is not None else self.gpu.usd_per_hour


def check_pools(pools: list[GpuPoolConfig], region: str) -> list[Problem]:
    """Names, node counts and limits, fabric, the size's regions (`region`: the stack's) and partition mode."""
    problems = duplicates(pools, "name", "gpu_pools")
    for i, pool in enumerate(pools):
        at = f"{NS}gpu_pools[{i}]"
        fixed = pool.nodes is not None
        ranged = pool.min_nodes is not None or pool.max_nodes is not None
        if fixed and ranged:
            problems.append(Problem(at, "give either nodes (fixed) or min_nodes/max_nodes (autoscaling), not both"))
        elif not fixed and not ranged:
            problems.append(Problem(at, "missing node count; give nodes (fixed) or min_nodes and max_nodes (autoscaling)"))
        elif ranged:
            if pool.min_nodes is None or pool.max_nodes is None:
                missing = "min_nodes" if pool.min_nodes is None else "max_nodes"
                problems.append(Problem(f"{at}.{missing}", "required for an autoscaling pool (give both min_nodes and max_nodes)"))
            elif pool.min_nodes > pool.max_nodes:
                problems.append(Problem(f"{at}.min_nodes", f"{pool.min_nodes} is greater than max_nodes ({pool.max_nodes})"))
        if pool.fabric and not pool.gpu.fabric:
            fabric_sizes = sorted(slug for slug, size in GPU_SIZES.items() if size.fabric)
            problems.append(
                Problem(f"{at}.fabric", f"true needs a fabric GPU size; {pool.size} has no RDMA fabric. Fabric sizes: {', '.join(fabric_sizes)}")
            )
        problems += _region_listing(region, pool, at)
        if pool.partition_mode and pool.gpu.vendor != "amd":
            problems.append(Problem(f"{at}.partition_mode", f"{pool.partition_mode!r} applies to AMD pools only; {pool.size} is {pool.gpu.vendor}"))
        if pool.gpu.fabric and any(p.gpu.fabric is False for p in pools):
            problems.append(Problem(f"{at}.size", f"{pool.size} is a fabric size; fabric sizes cannot be mixed with other GPU pools in one cluster"))
        limit, what = node_limit(pool.gpu)
        if pool.max_node_count > limit:
            problems.append(Problem(f"{at}.{'nodes' if pool.nodes is not None else 'max_nodes'}", f"{pool.max_node_count} exceeds {limit}, {what}"))
    return problems



def _region_listing(region: str, pool: GpuPoolConfig, at: str) -> list[Problem]:
    """A size the offline catalog lists only in other regions is refused (issue 29): DOKS would fail
    to create the pool mid-`pulumi up`. An empty listing says nothing (regions are per account) and
    contract sizes are not listed at all; `available_in_region` overrides a stale catalog."""
    listed = pool.gpu.regions
    if not listed or region in listed or pool.available_in_region:
        return []
    when = pool.gpu.availability_as_of or "an unrecorded date"
    return [Problem(f"{at}.size", (
        f"{pool.size} is not offered in {region!r} according to the GPU catalog of {when} (listed in: "
        f"{', '.join(listed)}); choose one of those regions or another size, or — if DigitalOcean offers it there "
        f"now — set {at}.available_in_region: true (`infra doctor` checks online; `infra catalog sync` refreshes the catalog)"))]
