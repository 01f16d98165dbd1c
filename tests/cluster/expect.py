"""What the plan says the cluster should end up with, read from the plan (not from the rendered
objects the cluster tests check): the GPUs its models hold at their starting replica counts, the
pool each model's engines belong on, and the pools each of the plan's DaemonSets is meant for."""

from __future__ import annotations

import re

from tests.cluster.nodes import Pool


def _unit_gpus(layout: dict) -> int:
    if layout.get("disaggregated"):
        return sum(side["instances"] * side["tp"] * side.get("dp", 1) for side in (layout["prefill"], layout["decode"]))
    return layout["tp"] * layout.get("dp", 1)


def plan_gpus(plan) -> dict[str, int]:
    """model → GPUs its engines hold once every starting replica runs (a rollout's candidate
    engines included)."""
    out = {}
    for m in plan.models:
        rollout = m.get("rollout")
        replicas = rollout["current_replicas"] if rollout else m["replicas"]["min"]
        gpus = replicas * _unit_gpus(m["layout"])
        if rollout:
            gpus += rollout["candidate"]["replicas"] * _unit_gpus(rollout["candidate"]["layout"])
        out[m["name"]] = gpus
    return out


def model_pools(plan) -> dict[str, str]:
    """model → the DOKS pool name its engines belong on (a GPU pool's DOKS name is its config name)."""
    return {m["name"]: m["pool"] for m in plan.models}


def daemonset_pools(name: str, pools: list[Pool]) -> set[str] | None:
    """The pools a DaemonSet of the plan is meant to run on, by what it is for (None: unknown)."""
    gpu = {p.name for p in pools if p.gpus}
    if m := re.fullmatch(r"image-prepull-(.+)", name):
        return {m[1]}
    if name == "gpu-node-tuning":
        return {p.name for p in pools if p.gpus and p.labels.get("doks.digitalocean.com/gpu-brand") == "amd"}
    if name == "kube-multus-ds":
        return {p.name for p in pools if p.fabric}
    if name in ("amd-device-metrics-exporter", "device-metrics-exporter"):
        return gpu
    return None
