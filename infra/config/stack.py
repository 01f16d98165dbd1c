"""The whole stack file: `StackInput` (every `inference-platform:*` key), its validation by
`load_config` (structure first, then each section's cross-checks, every problem together), and the
validated `StackConfig` with the environment's defaults applied.

Whether each model's layout fits its model and node is not decided here: plan_stack asks
infra/layout_fit.py, which needs the planner."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from infra.catalog.regions import REGIONS
from infra.config.allow_lists import stack_exposure
from infra.config.base import NS, StrictModel, one_of, stack_name_problems
from infra.config.client_keys import ClientKeys, client_keys_from_config, front_door_problems
from infra.config.cluster import ClusterConfig, check_cluster
from infra.config.credentials import credential_problems
from infra.config.errors import problem_from_pydantic
from infra.config.load import foreign_key_problems, read_stack_file, stack_file
from infra.config.model_cache import ModelCacheConfig, check_model_cache
from infra.config.models import (
    ROLLOUT_SUSPENDS,
    ModelConfig,
    check_models,
    endpoint_picker_name_problems,
    hf_config_path,
    resolve_autoscaling,
    suspended_by_rollout,
)
from infra.config.network import NetworkConfig, check_network
from infra.config.observability import ObservabilityConfig, observability_on
from infra.config.pools import GpuPoolConfig, check_pools
from infra.config.rollout import rollout_problems
from infra.config.router import RouterConfig, check_gateway, check_router, client_keys_checked
from infra.config.runtime import GpuRuntimeConfig, check_runtime
from infra.config.secrets import PROVIDER_SECRET_KEYS, SECRET_KEYS, SPACES_PROVIDER_KEYS, check_secrets
from infra.errors import ConfigError, Problem


def _region(value: str) -> str:
    return one_of(value, sorted(REGIONS), "DigitalOcean region")


Region = Annotated[str, AfterValidator(_region)]


class StackInput(StrictModel):
    """All `inference-platform:*` keys of a stack file (secrets excluded)."""

    environment: Literal["dev", "staging", "prod"] = Field(description="Environment; drives safe defaults (prod: HA, protect, observability).")
    region: Region = Field(description="DigitalOcean region slug, e.g. atl1.")
    network: NetworkConfig = Field(description="VPC and cluster networks.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="DOKS cluster.")
    gpu_pools: list[GpuPoolConfig] = Field(min_length=1, description="GPU node pools.")
    gpu_runtime: GpuRuntimeConfig = Field(default_factory=GpuRuntimeConfig, description="AMD GPU runtime (device plugin).")
    model_cache: ModelCacheConfig = Field(default_factory=ModelCacheConfig, description="Shared weight cache.")
    models: list[ModelConfig] = Field(default_factory=list, description="Served models.")
    router: RouterConfig = Field(default_factory=RouterConfig, description="Request router.")
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig, description="Monitoring and alerting.")


class StackConfig(BaseModel):
    """A validated stack: the input with environment defaults applied, plus what the program needs."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    stack: str
    environment: Literal["dev", "staging", "prod"]
    region: str
    network: NetworkConfig
    cluster: ClusterConfig  # ha/protect resolved (never None)
    gpu_pools: list[GpuPoolConfig]
    gpu_runtime: GpuRuntimeConfig
    model_cache: ModelCacheConfig
    models: list[ModelConfig]  # autoscaling.enabled resolved (never None)
    router: RouterConfig
    observability: ObservabilityConfig  # enabled resolved (never None)
    secrets_set: frozenset[str]  # secret keys that are set (as secrets)
    client_keys: ClientKeys  # the names of the API keys clients may send (infra/config/client_keys.py)
    secrets_required: tuple[str, ...]  # secret keys this stack needs for `pulumi up`
    base_dir: Path | None = None  # the project root that relative paths (hf_config) start from
    spaces_credentials_set: bool = False  # digitalocean:spacesAccessId and spacesSecretKey are in the stack file
    # models whose replica autoscaling would be on but is suspended while their rollout runs
    rollout_suspends_autoscaling: frozenset[str] = frozenset()

    @property
    def spaces_region(self) -> str:
        """The region of the Spaces weight bucket (model_cache.region, else the stack's)."""
        return self.model_cache.region or self.region

    @property
    def protect(self) -> bool:
        return bool(self.cluster.protect)

    def pool(self, name: str) -> GpuPoolConfig:
        return next(p for p in self.gpu_pools if p.name == name)

    @property
    def missing_secrets(self) -> list[str]:
        return [k for k in self.secrets_required if k not in self.secrets_set]

    def hf_config_path(self, model: ModelConfig) -> Path | None:
        """A model's `hf_config`, relative paths taken from the project root."""
        return hf_config_path(model, self.base_dir)


def environment_defaults(raw: StackInput) -> tuple[ClusterConfig, ObservabilityConfig]:
    prod = raw.environment == "prod"
    cluster = raw.cluster.model_copy(
        update={
            "ha": prod if raw.cluster.ha is None else raw.cluster.ha,
            "protect": prod if raw.cluster.protect is None else raw.cluster.protect,
        }
    )
    obs = raw.observability.model_copy(update={"enabled": observability_on(raw)})
    return cluster, obs


def load_config(
    values: dict[str, Any],
    *,
    stack: str,
    secret_keys: set[str] | frozenset[str] = frozenset(),
    base_dir: Path | None = None,
    source: str | None = None,
) -> StackConfig:
    """Validate raw config values (project keys without the namespace, parsed from YAML/JSON).

    `secret_keys` names the keys (full `ns:key` form) that were given as secrets. Secret values are
    never passed in: only their presence matters here.
    """
    plain_secrets = set()
    secrets_set = set()
    project_values = {}
    early = stack_name_problems(stack)
    api_keys_raw, api_keys_secret = None, False
    for key, value in values.items():
        if key in PROVIDER_SECRET_KEYS:
            if key not in secret_keys:
                plain_secrets.add(key)
            continue
        if ":" in key and not key.startswith(NS):
            early += foreign_key_problems(key)
            continue  # other providers' keys (kubernetes:*, pulumi:*) are theirs to validate
        short = key.removeprefix(NS)
        if short == "api_keys":  # a map of secrets: its names are read, never its keys
            api_keys_raw, api_keys_secret = value, f"{NS}{short}" in secret_keys or short in secret_keys
            continue
        if short in SECRET_KEYS:
            if f"{NS}{short}" in secret_keys or short in secret_keys:
                secrets_set.add(short)
            else:
                plain_secrets.add(short)
            continue
        project_values[short] = value

    # One scan over every string of the file, every namespace (keys that are secrets by declaration aside).
    early += credential_problems(values, skip={*PROVIDER_SECRET_KEYS, *(f"{NS}{k}" for k in SECRET_KEYS)})
    client_keys, key_problems = client_keys_from_config(
        api_keys_raw, api_keys_path=f"{NS}api_keys", api_key_set="api_key" in secrets_set, api_keys_secret=api_keys_secret
    )
    early += key_problems
    try:
        raw = StackInput.model_validate(project_values)
    except ValidationError as err:
        problems = [problem_from_pydantic(e, StackInput) for e in err.errors(include_url=False)]
        problems += [Problem(NS + k if ":" not in k else k, "given in plain text; set it with `pulumi config set --secret`") for k in sorted(plain_secrets)]
        raise ConfigError(early + problems, source=source) from None

    problems = early + check_network(raw) + check_pools(raw) + check_runtime(raw) + check_models(raw, base_dir)
    problems += rollout_problems(raw)
    problems += check_cluster(raw)
    problems += list(stack_exposure(raw.environment, raw.cluster.control_plane_allowed_cidrs, raw.router).problems)
    problems += check_model_cache(raw)
    problems += check_gateway(raw) + endpoint_picker_name_problems(raw)
    secret_problems, required = check_secrets(raw, secrets_set, plain_secrets)
    problems += secret_problems + check_router(raw) + front_door_problems(
        client_keys, raw.router.kind, f"{NS}api_keys" if api_keys_raw is not None or api_keys_secret else f"{NS}api_key",
        checked=client_keys_checked(raw.router))
    if problems:
        raise ConfigError(problems, source=source)

    cluster, obs = environment_defaults(raw)
    return StackConfig(
        stack=stack,
        environment=raw.environment,
        region=raw.region,
        network=raw.network,
        cluster=cluster,
        gpu_pools=raw.gpu_pools,
        gpu_runtime=raw.gpu_runtime,
        model_cache=raw.model_cache,
        models=resolve_autoscaling(raw),
        router=raw.router,
        observability=obs,
        secrets_set=frozenset(secrets_set),
        client_keys=client_keys,
        secrets_required=required,
        base_dir=base_dir,
        spaces_credentials_set=all(k in values for k in SPACES_PROVIDER_KEYS),
        rollout_suspends_autoscaling=frozenset(m.name for m in raw.models if suspended_by_rollout(raw, m)),
    )


def rollout_autoscaling_notes(cfg: StackConfig) -> list[str]:
    """A rollout suspends replica autoscaling the model would otherwise have: said in the plan,
    with what it costs while the rollout runs (infra/config/models.py `suspended_by_rollout`)."""
    notes = []
    for i, model in enumerate(cfg.models):
        if model.name not in cfg.rollout_suspends_autoscaling:
            continue
        pool = cfg.pool(model.pool)
        notes.append(
            f"model {model.name}: replica autoscaling is off while models[{i}].rollout runs ({ROLLOUT_SUSPENDS}); "
            f"meanwhile pool {pool.name} stays at min_nodes {pool.min_node_count} plus the candidate's nodes and does not grow "
            f"toward max_nodes {pool.max_node_count} with the load"
            + (f", so a peak of {model.workload.peak_rps:g} req/s is served by the floor only" if model.workload.peak_rps else "")
        )
    return notes


def zero_replica_notes(cfg: StackConfig) -> list[str]:
    """A parked pool (min_nodes 0) is valid, but a model on it silently serves nothing: the plan says so."""
    notes = []
    for model in cfg.models:
        pool = cfg.pool(model.pool)
        if pool.min_node_count == 0 and not model.autoscaling.enabled:
            notes.append(
                f"model {model.name}: pool {pool.name} has min_nodes 0, so the model gets 0 replicas and serves "
                "nothing until min_nodes ≥ 1"
            )
    return notes


def load_stack_file(stack: str, root: Path) -> StackConfig:
    """Load and validate `stacks/Pulumi.<stack>.yaml`."""
    path = stack_file(stack, root)
    if not path.is_file():
        available = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in path.parent.glob("Pulumi.*.yaml"))
        raise ConfigError(f"no stack file {path}; stacks: {', '.join(available) or 'none'}")
    values, secret_keys = read_stack_file(path)
    return load_config(values, stack=stack, secret_keys=secret_keys, base_dir=path.parent.parent, source=str(path.relative_to(path.parent.parent)))
