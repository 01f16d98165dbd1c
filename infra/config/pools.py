"""`gpu_pools:` — the GPU node pools: size, fixed or autoscaling node counts, fabric, labels; on an
existing cluster (cluster.existing) the nodes a pool already has, by their labels (`node_selector`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from infra.catalog.gpus import GPU_SIZES, GpuSize
from infra.config.base import NS, Name, StrictModel, duplicates, label_map, one_of
from infra.errors import Problem


def _gpu_slug(value: str) -> str:
    return one_of(value, sorted(GPU_SIZES), "GPU Droplet size")


# Prefixes whose labels belong to someone else: Kubernetes itself (kubelet refuses most of them on
# nodes), DOKS (it manages doks.digitalocean.com/* on every node) and this program, whose pool and
# GPU labels the model pods select on.
RESERVED_LABEL_PREFIXES = ("kubernetes.io", "k8s.io", "doks.digitalocean.com", "inference-platform")


def _node_labels(labels: dict[str, str]) -> dict[str, str]:
    """Each bad key or value as its own error at its key, reported with every other problem."""
    return label_map(labels, reserved=RESERVED_LABEL_PREFIXES)


def _node_selector(selector: dict[str, str]) -> dict[str, str]:
    """Labels the nodes already carry: any prefix (doks.digitalocean.com/node-pool, node.kubernetes.io/...)."""
    if not selector:
        raise ValueError("an empty selector matches every node; give the labels only this pool's nodes carry, e.g. {doks.digitalocean.com/node-pool: gpu-mi300x}")
    return label_map(selector, reserved=())

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
NodeSelector = Annotated[dict[str, str], AfterValidator(_node_selector)]


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
    node_selector: NodeSelector | None = Field(
        None,
        description=(
            "cluster.existing only (required there): the labels this pool's nodes already carry, e.g. "
            "{doks.digitalocean.com/node-pool: gpu-mi300x} or {node.kubernetes.io/instance-type: gpu-mi300x8-1536gb}; "
            "every pod of the pool selects them, and no node may match two pools' selectors. Refused: only labels every node "
            "carries (kubernetes.io/arch, kubernetes.io/os, beta.kubernetes.io/*), an instance type other than size, "
            "kubernetes.io/hostname with nodes above 1."
        ),
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


def check_pools(pools: list[GpuPoolConfig], region: str, *, existing: bool = False) -> list[Problem]:
    """Names, node counts and limits, fabric, the size's regions (`region`: the stack's) and partition
    mode; on an existing cluster (`existing`: cluster.existing is set) the nodes each pool selects."""
    problems = duplicates(pools, "name", "gpu_pools")
    if existing:
        return problems + existing_pool_problems(pools)
    for i, pool in enumerate(pools):
        at = f"{NS}gpu_pools[{i}]"
        if pool.node_selector is not None:
            problems.append(Problem(f"{at}.node_selector", (
                f"{pool.node_selector!r} is given, but the stack creates this pool (no cluster.existing): its nodes carry "
                "the labels the stack gives them; remove node_selector, or set cluster.existing to deploy onto a cluster "
                "whose nodes you label yourself")))
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


# What only a pool the stack creates reads: refused on an existing cluster, whose nodes the stack
# neither counts, partitions nor labels.
EXISTING_REFUSED_POOL_KEYS = {
    "min_nodes": "the stack does not scale an existing cluster's nodes; give nodes, the number of Ready nodes the selector matches",
    "max_nodes": "the stack does not scale an existing cluster's nodes; give nodes, the number of Ready nodes the selector matches",
    "partition_mode": "the partition mode is set when a DOKS pool is created; the existing nodes run whatever mode their owner set",
    "labels": "the stack cannot label nodes it does not manage; label them yourself and select them with node_selector",
    "fabric": "the stack does not attach the RDMA fabric of an existing cluster's nodes",
    "available_in_region": "the stack creates no node pool, so the size's regions are not checked",
}


# Labels the kubelet puts on every node (https://kubernetes.io/docs/reference/labels-annotations-taints/):
# a selector made only of them matches the GPU nodes and the system nodes alike.
EVERY_NODE_LABELS = ("kubernetes.io/arch", "kubernetes.io/os")
EVERY_NODE_LABEL_PREFIXES = ("beta.kubernetes.io/",)
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
HOSTNAME_LABEL = "kubernetes.io/hostname"


def every_node_selector(selector: dict[str, str]) -> bool:
    """A selector made only of labels every node carries (whatever the values, they are shared by
    GPU and CPU nodes of one architecture and OS)."""
    return bool(selector) and all(
        key in EVERY_NODE_LABELS or (key.startswith(EVERY_NODE_LABEL_PREFIXES) and key not in INSTANCE_TYPE_LABELS)
        for key in selector
    )


def _selector_label_problems(pool: GpuPoolConfig, at: str) -> list[Problem]:
    """What a pool's selector says about its nodes that cannot be true of the pool."""
    selector = pool.node_selector or {}
    problems = []
    if every_node_selector(selector):
        problems.append(Problem(f"{at}.node_selector", (
            f"{selector!r} names only labels every node carries ({', '.join(EVERY_NODE_LABELS)}, beta.kubernetes.io/*): "
            "it matches the system nodes and every other pool's too; give the labels only this pool's nodes carry, "
            "e.g. {doks.digitalocean.com/node-pool: <the DOKS pool>}")))
    for key in INSTANCE_TYPE_LABELS:
        if key in selector and selector[key] != pool.size:
            problems.append(Problem(f"{at}.node_selector", (
                f"{{{key!r}: {selector[key]!r}}} selects nodes of size {selector[key]}, but the pool's size is {pool.size}; "
                f"give {key}: {pool.size}, or set size to the nodes' size")))
    if HOSTNAME_LABEL in selector and (pool.nodes or 0) > 1:
        problems.append(Problem(f"{at}.node_selector", (
            f"{{{HOSTNAME_LABEL!r}: {selector[HOSTNAME_LABEL]!r}}} selects one node, but nodes is {pool.nodes}; "
            "give a label all the pool's nodes carry, or nodes: 1")))
    return problems


def existing_pool_problems(pools: list[GpuPoolConfig]) -> list[Problem]:
    """Pools of an existing cluster: each its selector and its node count, none of the keys only a
    created pool reads, and no node matching two pools (identical selectors, or one a subset of
    another's: a node of the narrower pool carries the wider pool's labels too)."""
    problems = []
    for i, pool in enumerate(pools):
        at = f"{NS}gpu_pools[{i}]"
        if pool.node_selector is None:
            problems.append(Problem(f"{at}.node_selector", (
                "required with cluster.existing: the labels this pool's nodes already carry, e.g. "
                "{doks.digitalocean.com/node-pool: <the DOKS pool>} or {node.kubernetes.io/instance-type: <the size>}")))
        if pool.nodes is None:
            problems.append(Problem(f"{at}.nodes", (
                "required with cluster.existing: how many Ready nodes the pool's node_selector matches "
                "(capacity and cost figures; `infra doctor` checks it against the cluster)")))
        problems += _selector_label_problems(pool, at)
        for key, why in EXISTING_REFUSED_POOL_KEYS.items():
            if key in pool.model_fields_set:
                problems.append(Problem(f"{at}.{key}", f"{getattr(pool, key)!r} is given, but cluster.existing is set: {why}; remove {key}"))
    for i, pool in enumerate(pools):
        for j in range(i):
            mine, theirs = pool.node_selector, pools[j].node_selector
            if not mine or not theirs:
                continue
            if mine == theirs:
                why = f"is the node_selector of gpu_pools[{j}] ({pools[j].name}): the same nodes would serve both pools"
            elif mine.items() <= theirs.items() or theirs.items() <= mine.items():
                narrow, wide = (j, i) if mine.items() <= theirs.items() else (i, j)
                why = (f"overlaps gpu_pools[{j}] ({pools[j].name}): every node gpu_pools[{narrow}] selects also carries the labels "
                       f"gpu_pools[{wide}] selects, so one node would match both pools")
            else:
                continue
            problems.append(Problem(f"{NS}gpu_pools[{i}].node_selector", f"{mine!r} {why}; give each pool a selector no other pool's nodes match"))
    return problems
