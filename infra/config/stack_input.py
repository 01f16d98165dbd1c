"""`StackInput`: every `inference-platform:*` key of a stack file (secrets excluded), as declared by
the sections — the shape of the whole file and nothing more. pydantic checks it (structure: types,
ranges, allowed values, unknown keys); what one section says against another is
infra/config/cross_checks.py, which reads a `StackInput`; infra/config/stack.py runs both.

No section imports this module: a section knows its own keys only."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from infra.catalog.regions import REGIONS
from infra.config.base import StrictModel, one_of
from infra.config.cluster import ClusterConfig
from infra.config.model_cache import ModelCacheConfig
from infra.config.models import ModelConfig
from infra.config.network import NetworkConfig
from infra.config.observability import ObservabilityConfig
from infra.config.pools import GpuPoolConfig
from infra.config.router import RouterConfig
from infra.config.runtime import GpuRuntimeConfig


def _region(value: str) -> str:
    return one_of(value, sorted(REGIONS), "DigitalOcean region")


Region = Annotated[str, AfterValidator(_region)]


class StackInput(StrictModel):
    """All `inference-platform:*` keys of a stack file (secrets excluded)."""

    environment: Literal["dev", "staging", "prod"] = Field(description="Environment; drives safe defaults (prod: HA, protect, observability).")
    region: Region = Field(description="DigitalOcean region slug, e.g. atl1.")
    network: NetworkConfig | None = Field(
        None, description="VPC and cluster networks (required, unless cluster.existing: then refused — the stack creates no VPC)."
    )
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="DOKS cluster.")
    gpu_pools: list[GpuPoolConfig] = Field(min_length=1, description="GPU node pools.")
    gpu_runtime: GpuRuntimeConfig = Field(default_factory=GpuRuntimeConfig, description="AMD GPU runtime (device plugin).")
    model_cache: ModelCacheConfig = Field(default_factory=ModelCacheConfig, description="Shared weight cache.")
    models: list[ModelConfig] = Field(default_factory=list, description="Served models.")
    router: RouterConfig = Field(default_factory=RouterConfig, description="Request router.")
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig, description="Monitoring and alerting.")
