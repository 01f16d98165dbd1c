"""`gpu_runtime:` — how AMD GPUs are exposed to Kubernetes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from infra.config.base import NS, StrictModel
from infra.errors import Problem

if TYPE_CHECKING:
    from infra.config.stack import StackInput


class GpuRuntimeConfig(StrictModel):
    """How GPUs are exposed to Kubernetes on AMD pools."""

    mode: Literal["doks-managed", "device-plugin", "gpu-operator"] = Field(
        "doks-managed",
        description="doks-managed: the DOKS cluster flag installs ROCm/k8s-device-plugin; device-plugin: our own pinned DaemonSets; gpu-operator: AMD GPU Operator (Helm) with cert-manager.",
    )
    disable_numa_balancing: bool = Field(True, description="Run a DaemonSet on AMD GPU nodes that sets kernel.numa_balancing=0 (AMD's vLLM guidance).")


def check_runtime(raw: StackInput) -> list[Problem]:
    rt = raw.gpu_runtime
    amd = any(p.gpu.vendor == "amd" for p in raw.gpu_pools)
    problems = []
    if rt.mode != "doks-managed" and not amd:
        problems.append(Problem(NS + "gpu_runtime.mode", f"{rt.mode!r} manages AMD GPUs but no gpu_pools entry is an AMD size"))
    return problems

