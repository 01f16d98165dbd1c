"""Node objects shaped like the nodes DOKS would create for a plan's pools.

Read from what the plan sends to DigitalOcean (the cluster's default pool and each
KubernetesNodePool: size, count, labels, taints), the catalog (GPU sizes: vCPUs, RAM, boot disk,
GPUs; CPU sizes from their slug) and what DOKS adds itself (FACTS: the node-pool / node-id /
version labels on every node, `gpu-brand` / `gpu-model` and the `<vendor>.com/gpu:NoSchedule`
taint on GPU nodes, the kubelet's well-known labels). Allocatable is capacity less the kubelet
reservation the capacity invariant assumes (infra/invariants/capacity.py: DOKS publishes none),
so the scheduler here and the offline invariant judge the same node.

How many nodes: a fixed pool's node_count; an autoscaled pool's min_nodes — what DOKS creates at
`pulumi up`, before any cluster-autoscaler decision: a pod that only fits once the autoscaler has
added nodes is Pending here, as it is for the minutes a real scale-up takes (the plan starts
each model at its minimum replicas, which must fit on the minimum nodes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from infra.catalog.gpus import gpu_size
from infra.invariants.capacity import (
    DISK_EVICTION_FRACTION,
    DISK_SYSTEM_GIB,
    GIB,
    reserved_cpu,
    reserved_memory,
)

POOL_LABEL = "doks.digitalocean.com/node-pool"
MAX_PODS = 110  # the kubelet's default; DOKS keeps it
RDMA_SHARES = 1000  # rdma/fabricN shares per NIC: k8s-rdma-shared-dev-plugin's rdmaHcaMax default
# Boot disks of the CPU sizes the system pool uses (DO's Droplet pricing page), GiB.
CPU_DISK_GIB = {"s-2vcpu-4gb": 80, "s-4vcpu-8gb": 160, "s-8vcpu-16gb": 320, "g-2vcpu-8gb": 25, "g-4vcpu-16gb": 50,
                "g-8vcpu-32gb": 100, "c-4": 50, "c-8": 100, "s-4vcpu-16gb-amd": 200, "s-8vcpu-32gb-amd": 400}  # fmt: skip
_CPU_SLUG = re.compile(r"-(\d+)vcpu-(\d+)gb")


@dataclass
class Pool:
    """One node pool as DOKS would create it."""

    name: str  # the DOKS pool name (doks.digitalocean.com/node-pool)
    size: str
    nodes: int
    labels: dict[str, str]
    taints: list[dict[str, str]]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    system: bool = False
    gpus: int = 0
    fabric: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _quantities(cpu: float, memory_gib: float, disk_gib: float, extra: dict[str, int]) -> tuple[dict, dict]:
    mem = memory_gib * GIB
    capacity = {"cpu": f"{int(cpu)}", "memory": f"{int(mem // 2**10)}Ki", "ephemeral-storage": f"{int(disk_gib)}Gi",
                "pods": str(MAX_PODS), **{k: str(v) for k, v in extra.items()}}  # fmt: skip
    disk = disk_gib * (1 - DISK_EVICTION_FRACTION) - DISK_SYSTEM_GIB
    allocatable = {"cpu": f"{int((cpu - reserved_cpu(cpu)) * 1000)}m", "memory": f"{int((mem - reserved_memory(mem)) // 2**10)}Ki",
                   "ephemeral-storage": f"{int(disk * GIB // 2**10)}Ki", "pods": str(MAX_PODS),
                   **{k: str(v) for k, v in extra.items()}}  # fmt: skip
    return capacity, allocatable


def _count(inputs: dict) -> int:
    if inputs.get("autoScale"):
        return int(inputs.get("minNodes") or 0)
    return int(inputs.get("nodeCount") or 0)


def plan_pools(resources: list[dict]) -> list[Pool]:
    """The system pool and every GPU pool of a plan's resources."""
    cluster = next(r["inputs"] for r in resources if r["type"] == "digitalocean:index/kubernetesCluster:KubernetesCluster")
    region = cluster["region"]
    pools = []
    default = cluster["nodePool"]
    pools.append(system_pool(default["name"], default["size"], _count(default), dict(default.get("labels") or {}),
                             list(default.get("taints") or [])))  # fmt: skip
    for res in resources:
        if res["type"] != "digitalocean:index/kubernetesNodePool:KubernetesNodePool":
            continue
        inputs = res["inputs"]
        pools.append(gpu_pool(inputs["name"], inputs["size"], _count(inputs), dict(inputs.get("labels") or {}),
                              list(inputs.get("taints") or [])))  # fmt: skip
    for pool in pools:
        pool.labels.update(region_labels(region, pool.size))
    return pools


def system_pool(name: str, size_slug: str, count: int, labels: dict[str, str], taints: list[dict]) -> Pool:
    """A pool of CPU nodes (vCPUs and memory read from the size slug)."""
    match = _CPU_SLUG.search(size_slug)
    if not match:
        raise ValueError(f"system pool size {size_slug!r}: no vCPU / memory in the slug")
    cap, alloc = _quantities(float(match[1]), float(match[2]), CPU_DISK_GIB.get(size_slug, 100), {})
    return Pool(name, size_slug, count, labels, taints, cap, alloc, system=True)


def gpu_pool(name: str, size_slug: str, count: int, labels: dict[str, str], taints: list[dict]) -> Pool:
    """A pool of GPU nodes of a catalog size, with the labels and the taint DOKS adds to GPU nodes."""
    size = gpu_size(size_slug)
    if size is None:
        raise ValueError(f"pool {name}: size {size_slug!r} is not in the GPU catalog")
    extra = {size.gpu_resource_name: size.gpus}
    if size.fabric:
        extra.update({f"rdma/fabric{i}": RDMA_SHARES for i in range(8)})
    cap, alloc = _quantities(float(size.vcpus), float(size.ram_gib), float(size.boot_disk_gib or 0), extra)
    labels = {"doks.digitalocean.com/gpu-brand": size.vendor, "doks.digitalocean.com/gpu-model": size.accelerator.model, **labels}
    taints = list(taints)
    if not any(t["key"] == size.taint_key and t["effect"] == "NoSchedule" for t in taints):
        taints.append({"key": size.taint_key, "value": "", "effect": "NoSchedule"})  # DOKS adds it on GPU nodes
    return Pool(name, size_slug, count, labels, taints, cap, alloc, gpus=size.gpus, fabric=size.fabric)


def region_labels(region: str, size: str) -> dict[str, str]:
    return {"topology.kubernetes.io/region": region, "failure-domain.beta.kubernetes.io/region": region,
            "node.kubernetes.io/instance-type": size, "beta.kubernetes.io/instance-type": size,
            "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64"}  # fmt: skip


def node_objects(pool: Pool, version: str) -> list[dict]:
    """`pool.nodes` Node objects (status included: kwok keeps capacity and allocatable as given and
    reports them Ready)."""
    out = []
    for i in range(pool.nodes):
        name = f"{pool.name}-{i:03d}"
        labels = {**pool.labels, POOL_LABEL: pool.name, "doks.digitalocean.com/node-pool-id": f"{pool.name}-id",
                  "doks.digitalocean.com/node-id": f"{name}-id", "doks.digitalocean.com/version": version,
                  "kubernetes.io/hostname": name}  # fmt: skip
        out.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": [{k: v for k, v in t.items() if v != "" or k != "value"} for t in pool.taints]},
            "status": {"capacity": pool.capacity, "allocatable": pool.allocatable},
        })  # fmt: skip
    return out
