"""The typed, validated stack configuration: the toolkit's user interface.

Everything a stack file can say is declared here, one module per section of the file (network,
cluster, gpu_pools, gpu_runtime, model_cache, models and their layout, router, observability,
secrets), with a type, a default and a description; the configuration reference
(docs/configuration.md) is generated from these declarations so the two cannot drift. Validation
happens in two passes before a single resource is declared (stack.py `load_config`):

1. structure (pydantic, strict, on stack_input.py `StackInput`): unknown keys, wrong types, bad enum
   values, out-of-range numbers, unknown regions / GPU slugs, malformed CIDRs, Droplet slugs and
   model ids, `vllm serve` flags and VLLM_* variables the pinned vLLM does not know — all collected
   in one pass (errors.py turns them into Problems);
2. checks (only once the structure is sound): each section's own, in its module (node-count ranges,
   CIDR overlaps, duplicates, a model's flags), and the checks that read more than one section — the
   pools models name, the front door a rollout needs, the pins the cluster version must suit — all in
   cross_checks.py, in a table keyed by the key each reports. A section imports no other section.

Whether a layout fits its model and node is a planning question (infra/layout_fit.py, asked by
plan_stack): the config imports no planner. Reading the YAML (duplicate keys, `secure:` values,
unknown namespaces) is load.py.

Every problem is reported together, as `inference-platform:<key path>: <what is wrong>; <what is
allowed>`, via `ConfigError`. Secrets are never read here as values: only whether each is set and
whether it was set as a secret.
"""

from infra.config.base import (
    ENVIRONMENTS,
    NS,
    PROJECT,
    STACK_NAME_RULE,
    Name,
    StrictModel,
    stack_name_problem,
)
from infra.config.cluster import ClusterConfig, MaintenanceConfig, SystemPoolConfig
from infra.config.cross_checks import install_gateway_api_crds, pins_in_use
from infra.config.layout import LayoutConfig, PdLayoutConfig
from infra.config.load import OTHER_NAMESPACES, parse_stack_text, read_stack_file, stack_file
from infra.config.model_cache import ModelCacheConfig
from infra.config.models import (
    AutoscalingConfig,
    ModelConfig,
    RolloutCandidateConfig,
    RolloutConfig,
    SloConfig,
    WorkloadConfig,
    gated_models,
    hf_config_path,
)
from infra.config.network import NetworkConfig
from infra.config.observability import AlertReceiverConfig, ObservabilityConfig
from infra.config.pools import RESERVED_LABEL_PREFIXES, GpuPoolConfig
from infra.config.router import GatewayConfig, GatewayObjectiveConfig, RouterConfig
from infra.config.runtime import GpuRuntimeConfig
from infra.config.secrets import PROVIDER_SECRET_KEYS, SECRET_KEYS, SPACES_PROVIDER_KEYS
from infra.config.stack import (
    StackConfig,
    load_config,
    load_stack_file,
    rollout_autoscaling_notes,
    zero_replica_notes,
)
from infra.config.stack_input import StackInput

__all__ = [
    "ENVIRONMENTS", "NS", "OTHER_NAMESPACES", "PROJECT", "PROVIDER_SECRET_KEYS", "RESERVED_LABEL_PREFIXES",
    "SECRET_KEYS", "SPACES_PROVIDER_KEYS", "STACK_NAME_RULE", "AlertReceiverConfig", "AutoscalingConfig",
    "ClusterConfig", "GatewayConfig", "GatewayObjectiveConfig", "GpuPoolConfig", "GpuRuntimeConfig",
    "LayoutConfig", "MaintenanceConfig", "ModelCacheConfig", "ModelConfig", "Name", "NetworkConfig",
    "ObservabilityConfig", "PdLayoutConfig", "RolloutCandidateConfig", "RolloutConfig", "RouterConfig", "SloConfig", "StackConfig", "StackInput",
    "StrictModel", "SystemPoolConfig", "WorkloadConfig", "gated_models", "hf_config_path", "install_gateway_api_crds",
    "load_config", "load_stack_file", "parse_stack_text", "pins_in_use", "read_stack_file", "stack_file",
    "rollout_autoscaling_notes", "stack_name_problem", "zero_replica_notes",
]
