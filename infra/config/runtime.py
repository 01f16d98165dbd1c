"""`gpu_runtime:` — how AMD GPUs are exposed to Kubernetes. (That a mode other than doks-managed
needs an AMD pool reads gpu_pools: infra/config/cross_checks.py.)"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from infra.config.base import StrictModel


class GpuRuntimeConfig(StrictModel):
    """How GPUs are exposed to Kubernetes on AMD pools."""

    mode: Literal["doks-managed", "device-plugin", "gpu-operator"] = Field(
        "doks-managed",
        description="doks-managed: the DOKS cluster flag installs ROCm/k8s-device-plugin (on an existing cluster: the stack installs none, the cluster already runs a device plugin); device-plugin: our own pinned DaemonSets; gpu-operator: AMD GPU Operator (Helm) with cert-manager.",
    )
    disable_numa_balancing: bool = Field(True, description="Run a DaemonSet on AMD GPU nodes that sets kernel.numa_balancing=0 (AMD's vLLM guidance).")

