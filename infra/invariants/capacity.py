"""Capacity: what the plan pins to each pool fits its nodes; storage holds what is written to it.

Each node pool is a group of identical nodes (its size from the catalog: vCPUs, RAM, GPUs, boot
disk; the system pool's from its slug). Every pod template is placed where the scheduler could put
it (node selector ⊆ the pool's labels, every taint tolerated): DaemonSets take their requests
from every node of the pools they land on, the other pods (at their maximum count: a
ScaledObject's maxReplicaCount, a pool's max_nodes) are packed first-fit-decreasing onto the
pool's nodes at its maximum size; a Job runs to completion, so it may wait for room but must fit
beside the long-running pods once. A pod that fits nowhere is a broken plan, named by the pool key
and the pods' key.

Allocatable is what the kubelet leaves after its reservations, which DOKS does not publish: the
usual managed-Kubernetes formula is assumed (memory: 25 % of the first 4 GiB, 20 % of the next 4,
10 % of the next 8, 6 % up to 128 GiB, 2 % above, plus 100 MiB for eviction; CPU: 6 % of the first
core, 1 % of the next, 0.5 % of the next two, 0.25 % above). Node disk for pods is the boot disk
less the kubelet's 10 % eviction threshold and ~60 GiB of system and images.

Disk-backed emptyDirs count their sizeLimit against the node's disk; one without a limit on a
model's pod is where that model's weights are downloaded (no cache), so it counts the weights.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from infra.errors import Problem
from infra.invariants.keypaths import MODEL_LABEL, POOL_LABEL, KeyPaths
from infra.invariants.objects import (
    PodTemplate,
    all_pod_templates,
    describe,
    identity,
    pod_requests,
    quantity,
)
from infra.stack_plan import StackPlan

GIB = float(2**30)
DISK_SYSTEM_GIB = 60.0  # OS, kubelet, container images on a node's boot disk (assumed)
DISK_EVICTION_FRACTION = 0.10  # kubelet's default nodefs.available<10 %
WEIGHTS_SCRATCH_FACTOR = 1.05  # a download holds the checkpoint plus partial files
COMPILE_CACHE_GIB_PER_MODEL = 20.0  # torch.compile / Triton / AITER caches on a shared cache (assumed)
_CPU_SLUG = re.compile(r"-(\d+)vcpu-(\d+)gb")
RESOURCES = ("cpu", "memory", "ephemeral-storage")
RUN_TO_COMPLETION = frozenset({"Job", "CronJob"})
# Labels the kubelet and DOKS put on every node (kubernetes.io/docs/reference/labels-annotations-
# taints): DOKS nodes are x86-64 Linux. The per-node ones have a different value on each node, so a
# selector on one pins a pod to one node of the pool; for capacity any node may be it.
NODE_OS_ARCH = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
REGION_LABEL = "topology.kubernetes.io/region"
PER_NODE_LABELS = frozenset({"kubernetes.io/hostname", "doks.digitalocean.com/node-id"})


def well_known_labels(size: str, region: str) -> dict[str, str]:
    """The labels every node of a pool of `size` droplets in `region` carries besides its pool's."""
    return {**NODE_OS_ARCH, INSTANCE_TYPE_LABEL: size, REGION_LABEL: region}


def _tiered(amount: float, tiers: tuple[tuple[float, float], ...], base: float = 0.0) -> float:
    """`base` plus each tier's share of the part of `amount` that falls in it (the managed-Kubernetes
    kubelet reservation formula: a falling share of each further slice of the node)."""
    left, reserved = amount, base
    for size, share in tiers:
        part = min(left, size)
        reserved += part * share
        left -= part
        if left <= 0:
            break
    return reserved


def reserved_memory(total: float) -> float:
    return _tiered(total, ((4 * GIB, 0.25), (4 * GIB, 0.20), (8 * GIB, 0.10), (112 * GIB, 0.06), (math.inf, 0.02)),
                   base=100 * 2**20)


def reserved_cpu(cores: float) -> float:
    return _tiered(cores, ((1, 0.06), (1, 0.01), (2, 0.005), (math.inf, 0.0025)))


@dataclass
class NodeGroup:
    """A pool's nodes: what each can hold, how many there are at most, and what pins pods there."""

    name: str  # as the user wrote it (pool name), for messages
    key: str  # the stack key of its size
    size: str
    nodes: int
    labels: dict[str, str]
    taints: tuple[str, ...]
    allocatable: dict[str, float]
    per_node: dict[str, float] = field(default_factory=dict)  # DaemonSet requests on every node
    daemonsets: list[str] = field(default_factory=list)

    def free(self) -> dict[str, float]:
        return {k: v - self.per_node.get(k, 0.0) for k, v in self.allocatable.items()}


def _allocatable(cpu: float, memory_gib: float, disk_gib: float | None, extra: dict[str, float]) -> dict[str, float]:
    mem = memory_gib * GIB
    out = {"cpu": cpu - reserved_cpu(cpu), "memory": mem - reserved_memory(mem), **extra}
    if disk_gib:
        out["ephemeral-storage"] = (disk_gib * (1 - DISK_EVICTION_FRACTION) - DISK_SYSTEM_GIB) * GIB
    return out


def node_groups(plan: StackPlan, paths: KeyPaths) -> list[NodeGroup]:
    cfg = plan.config
    groups = []
    # A Droplet slug's "8gb" is 8192 MB of memory as DO counts it: 8 GiB.
    # An existing cluster's system nodes are its owner's (their size unknown): not modelled, and
    # the pods pinned to them are not checked here (`infra doctor` checks that they exist).
    match = _CPU_SLUG.search(cfg.cluster.system_pool.size) if plan.cluster.existing is None else None
    if match:
        groups.append(NodeGroup(
            "system pool", paths.system_pool("size"), cfg.cluster.system_pool.size, cfg.cluster.system_pool.nodes,
            {**well_known_labels(cfg.cluster.system_pool.size, cfg.region), **plan.cluster.system_node_selector},
            (), _allocatable(float(match.group(1)), float(match.group(2)), None, {}),
        ))
    for spec in plan.pools:
        gpu = spec.gpu
        nodes = spec.max_nodes if spec.node_count is None else spec.node_count
        # DOKS labels the nodes of the pools the stack creates; an existing cluster's carry its selector.
        doks_labels = {POOL_LABEL: spec.pool_name, "doks.digitalocean.com/gpu-brand": gpu.vendor,
                       "doks.digitalocean.com/gpu-model": gpu.accelerator.model} if spec.managed else {}
        labels = {**well_known_labels(gpu.slug, cfg.region), **doks_labels, **spec.selector, **dict(spec.labels)}
        extra = {gpu.gpu_resource_name: float(gpu.gpus)}
        groups.append(NodeGroup(spec.pool_name, paths.pool(spec.pool_name, "size") or paths.section("gpu_pools"), gpu.slug,
                                int(nodes or 0), labels, (gpu.taint_key,),
                                _allocatable(float(gpu.vcpus), float(gpu.ram_gib), gpu.boot_disk_gib, extra)))
    return groups


def _tolerates(template: PodTemplate, taint: str) -> bool:
    for tol in template.spec.get("tolerations") or []:
        if tol.get("operator") == "Exists" and not tol.get("key"):
            return True
        if tol.get("key") == taint and tol.get("effect", "NoSchedule") in ("NoSchedule", ""):
            return True
    return False


def _fits(template: PodTemplate, group: NodeGroup) -> bool:
    selector = template.spec.get("nodeSelector") or {}
    # A per-node label is judged only on a group that carries one: an existing cluster's pool selected
    # by its one node's hostname (elsewhere any node of the pool may be the one named).
    if any((k not in PER_NODE_LABELS or k in group.labels) and group.labels.get(k) != str(v) for k, v in selector.items()):
        return False
    if not _affinity_admits(template.spec, group.labels):
        return False
    return all(_tolerates(template, t) for t in group.taints)


def _affinity_admits(pod: dict, labels: dict[str, str]) -> bool:
    """A required node affinity admits nodes with `labels`: any term whose expressions all hold
    (In, NotIn, Exists, DoesNotExist; per-node labels such as the hostname are not judged)."""
    required = (((pod.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True

    def holds(expr: dict) -> bool:
        key, op, values = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        if key in PER_NODE_LABELS:
            return True
        return {"In": lambda: labels.get(key) in values, "NotIn": lambda: labels.get(key) not in values,
                "Exists": lambda: key in labels, "DoesNotExist": lambda: key not in labels}.get(op, lambda: True)()  # fmt: skip

    return any(all(holds(e) for e in term.get("matchExpressions") or []) for term in terms)


def _max_counts(objects: list[dict]) -> dict[tuple, int]:
    """Workload identity → the most replicas an autoscaler may give it."""
    out = {}
    for obj in objects:
        if obj.get("kind") != "ScaledObject":
            continue
        spec = obj.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        if spec.get("maxReplicaCount") is not None:
            out[(ref.get("kind", "Deployment"), identity(obj)[2], ref.get("name"))] = int(spec["maxReplicaCount"])
    return out


def _disk_demand(template: PodTemplate, weights_gib: dict[str, float]) -> float:
    """Bytes of node disk a pod writes: its disk emptyDirs (an unbounded one on a model's pod holds
    the model's weights) and its containers' ephemeral-storage requests (counted in requests)."""
    total = 0.0
    for vol in template.spec.get("volumes") or []:
        empty = vol.get("emptyDir")
        if empty is None or empty.get("medium") == "Memory":
            continue
        if empty.get("sizeLimit"):
            total += quantity(empty["sizeLimit"])
        else:
            total += weights_gib.get(template.labels.get(MODEL_LABEL, ""), 0.0) * WEIGHTS_SCRATCH_FACTOR * GIB
    return total


def _demand(template: PodTemplate, weights_gib: dict[str, float]) -> dict[str, float]:
    need = pod_requests(template)
    need["ephemeral-storage"] = need.get("ephemeral-storage", 0.0) + _disk_demand(template, weights_gib)
    return need


def _amount(resource: str, value: float) -> str:
    if resource == "cpu":
        return f"{value:.2f} CPU"
    if resource in ("memory", "ephemeral-storage"):
        return f"{value / GIB:.1f} GiB" + (" of disk" if resource == "ephemeral-storage" else "")
    return f"{value:g} {resource}"


def _owner_key(paths: KeyPaths, template: PodTemplate) -> str:
    return paths.model(template.labels.get(MODEL_LABEL), "layout") or ""


def check_capacity(plan: StackPlan, objects: list[dict], paths: KeyPaths) -> list[Problem]:
    """Every pool holds its pods at the declared counts, and with each autoscaled workload at its
    maximum while the others stay at theirs (P/D sides each scale to the whole pool, not both at once)."""
    groups = node_groups(plan, paths)
    weights = {m.config.name: m.arch.weight_gb * 1e9 / GIB for m in plan.models}
    max_counts = _max_counts(objects)
    problems: list[Problem] = []
    placed: dict[str, list[Placed]] = {g.name: [] for g in groups}
    for template in all_pod_templates(objects):
        where = [g for g in groups if _fits(template, g)]
        # A pod pinned by a per-node label that one group carries lands there, not on a group whose
        # node names are unknown.
        pinned = {k for k in template.spec.get("nodeSelector") or {} if k in PER_NODE_LABELS}
        where = [g for g in where if pinned and pinned <= g.labels.keys()] or where
        if template.per_node:
            for g in where:
                for k, v in _demand(template, weights).items():
                    g.per_node[k] = g.per_node.get(k, 0.0) + v
                g.daemonsets.append(describe(template.owner))
            continue
        if not where:
            if plan.cluster.existing is not None and not template.spec.get("tolerations"):
                continue  # bound for an existing cluster's own (system) nodes, not modelled
            problems.append(Problem(_owner_key(paths, template) or paths.release(template.owner) or paths.section("gpu_pools"),
                                    f"pods of {describe(template.owner)} fit no node pool: node selector "
                                    f"{template.spec.get('nodeSelector') or {}}, tolerating {[t.get('key') for t in template.spec.get('tolerations') or []]}"))
            continue
        group = next((g for g in where if not g.taints), where[0])
        _, kind, ns, name = identity(template.owner)
        most = max_counts.get((kind, ns, name))
        if most is not None and kind == "LeaderWorkerSet":
            size = int(((template.owner.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size", 1))
            most *= 1 if template.role == "leader" else size - 1
        placed[group.name].append(Placed(template, _demand(template, weights), template.count, most, (kind, ns, name),
                                         transient=kind in RUN_TO_COMPLETION))
    for group in groups:
        problems += _check_group(group, placed[group.name], paths)
    return problems


@dataclass(frozen=True)
class Placed:
    template: PodTemplate
    need: dict[str, float]
    floor: int
    most: int | None  # an autoscaler's maximum, if one scales the workload
    workload: tuple
    transient: bool = False  # runs to completion (a Job): may wait for room, must fit once


def _check_group(group: NodeGroup, pods: list[Placed], paths: KeyPaths) -> list[Problem]:
    """The long-running pods at their counts, then with each autoscaled workload at its maximum;
    then each run-to-completion Job beside the long-running pods (Jobs may queue for room one after
    another, but each must fit once)."""
    steady = [p for p in pods if not p.transient]
    scenarios: list[list[Placed]] = [[]] + [[p] for p in pods if p.transient]
    for scaled in [None] + sorted({p.workload for p in steady if p.most is not None and p.most > p.floor}):
        counts = [(p.template, p.need, p.most if scaled is not None and p.workload == scaled else p.floor) for p in steady]
        for extra in scenarios if scaled is None else [[]]:
            problems = _pack(group, counts + [(p.template, p.need, p.floor) for p in extra], paths)
            if problems:
                return problems
    return []


def _pack(group: NodeGroup, pods: list[tuple[PodTemplate, dict[str, float], int]], paths: KeyPaths) -> list[Problem]:
    """First-fit-decreasing of `pods` (template, requests, count) onto the group's nodes."""
    free = group.free()
    short = [r for r, v in free.items() if v < 0]
    if short:
        r = short[0]
        return [Problem(group.key, (
            f"{group.size} cannot hold the DaemonSets on every {group.name} node ({', '.join(sorted(set(group.daemonsets)))}): "
            f"they request {_amount(r, group.per_node[r])}, a node has {_amount(r, group.allocatable[r])} allocatable; "
            "choose a larger size" + ("" if group.key.endswith(".size") or group.key.endswith("].size") else
                                      " (set cluster.system_pool.size)")))]
    nodes = [dict(free) for _ in range(group.nodes)]
    expanded = [(t, need) for t, need, count in pods for _ in range(count)]
    order = (*sorted(k for k in free if k not in RESOURCES), *RESOURCES)
    expanded.sort(key=lambda p: tuple(-p[1].get(r, 0.0) for r in order))
    for template, need in expanded:
        target = next((n for n in nodes if all(n.get(r, math.inf) >= v for r, v in need.items() if v > 0)), None)
        if target is None:
            scarce = [r for r, v in need.items() if v > 0 and all(n.get(r, math.inf) < v for n in nodes)] or ["cpu"]
            r = scarce[0]
            total = sum(need_.get(r, 0.0) * count for _, need_, count in pods)
            has = max(0.0, free.get(r, 0.0)) * group.nodes
            largest = sorted(((need_.get(r, 0.0) * count, t) for t, need_, count in pods), key=lambda p: -p[0])[:3]
            owner = _owner_key(paths, template)
            return [Problem(owner or group.key, (
                f"{group.name} ({group.nodes} × {group.size}) cannot hold what is pinned to it: its pods request "
                f"{_amount(r, total)} in total (largest: {', '.join(f'{describe(t.owner)} {_amount(r, v)}' for v, t in largest)}), "
                f"its nodes have {_amount(r, has)} allocatable after DaemonSets, and {describe(template.owner)} "
                f"({_amount(r, need[r])} per pod) "
                + ("fits on no node" if need.get(r, 0.0) > free.get(r, 0.0) else "finds no node with room left")
                + (f"; change {group.key} or its node count, or this layout" if owner else "; choose a larger size or more nodes")
                + ("" if group.key.endswith("size") else " (set cluster.system_pool.size and nodes)")))]
        for r, v in need.items():
            if r in target:
                target[r] -= v
    return []


def check_storage(plan: StackPlan, paths: KeyPaths) -> list[Problem]:
    """The shared weight cache holds every model's checkpoint and the compile caches written there."""
    if plan.model_cache is None:
        return []
    sources = {}
    for m in plan.models:
        sources[(m.config.source, getattr(m.config, "revision", None))] = m.arch.weight_gb * 1e9 / GIB
    need = sum(sources.values()) + COMPILE_CACHE_GIB_PER_MODEL * len(plan.models)
    if need <= plan.model_cache.size_gib:
        return []
    written = "size_gib" in plan.config.model_cache.model_fields_set
    return [Problem(paths.section("model_cache.size_gib" if written else "model_cache"), (
        ("" if written else f"size_gib unset (default {plan.model_cache.size_gib}); set it: ") +
        f"{plan.model_cache.size_gib} GiB cannot hold the weights written to it: {len(sources)} checkpoint(s) of "
        f"{sum(sources.values()):.0f} GiB and ~{COMPILE_CACHE_GIB_PER_MODEL:.0f} GiB of compile cache per model need "
        f"{math.ceil(need)} GiB; allowed: at least {math.ceil(need)}"))]
