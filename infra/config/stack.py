"""The validated stack: `load_config` checks a stack file's values — structure first (pydantic, on
`StackInput`, infra/config/stack_input.py), then each section's own checks and the checks that span
sections (infra/config/cross_checks.py), every problem together in one fixed order — and returns
the `StackConfig` with the environment's defaults applied.

Whether each model's layout fits its model and node is not decided here: plan_stack asks
infra/layout_fit.py, which needs the planner."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from infra.catalog import doks
from infra.config import cross_checks as cross
from infra.config.allow_lists import stack_exposure
from infra.config.base import NS, stack_name_problems
from infra.config.client_keys import ClientKeys, client_keys_from_config
from infra.config.cluster import ClusterConfig, check_cluster
from infra.config.credentials import credential_problems
from infra.config.errors import problem_from_pydantic
from infra.config.load import foreign_key_problems, read_stack_file, stack_file
from infra.config.model_cache import ModelCacheConfig, check_model_cache
from infra.config.model_checks import (
    duplicate_api_names,
    image_and_flag_problems,
    model_source_problems,
    offload_problems,
    switch_value_problems,
)
from infra.config.model_env import endpoint_problems, platform_env_problems
from infra.config.model_keys import ModelKeys, candidate_as_model, candidate_keys, candidate_only, model_keys
from infra.config.models import ModelConfig, hf_config_path
from infra.config.network import NetworkConfig, check_network
from infra.config.observability import ObservabilityConfig, observability_on
from infra.config.pools import GpuPoolConfig, check_pools
from infra.config.rollout import rollout_problems
from infra.config.router import (
    RouterConfig,
    check_gateway,
    check_router,
    client_keys_checked,
    objective_name_problems,
)
from infra.config.runtime import GpuRuntimeConfig
from infra.config.secrets import (
    PROVIDER_SECRET_KEYS,
    SECRET_KEYS,
    SPACES_PROVIDER_KEYS,
    plain_secret_problems,
)
from infra.config.stack_input import StackInput
from infra.errors import ConfigError, Problem


class StackConfig(BaseModel):
    """A validated stack: the input with environment defaults applied, plus what the program needs."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    stack: str
    environment: Literal["dev", "staging", "prod"]
    region: str
    network: NetworkConfig | None  # None: cluster.existing (the stack creates no VPC)
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
    digitalocean_token_set: bool = False  # digitalocean:token is in the stack file (unread on an existing cluster: noted)
    # models whose replica autoscaling would be on but is suspended while their rollout runs
    rollout_suspends_autoscaling: frozenset[str] = frozenset()

    @property
    def spaces_region(self) -> str:
        """The region of the Spaces weight bucket (model_cache.region, else the stack's)."""
        return self.model_cache.region or self.region

    @property
    def protect(self) -> bool:
        return bool(self.cluster.protect)

    @property
    def existing_cluster(self) -> bool:
        """Deploys onto a cluster the stack does not create (cluster.existing)."""
        return self.cluster.existing is not None

    def pool(self, name: str) -> GpuPoolConfig:
        return next(p for p in self.gpu_pools if p.name == name)

    def pool_selector(self, pool: GpuPoolConfig | str) -> dict[str, str]:
        """The labels that select a pool's nodes, in both modes: the DOKS node-pool label of a pool
        the stack creates, or the labels an existing cluster's nodes carry (gpu_pools[].node_selector)."""
        pool = self.pool(pool) if isinstance(pool, str) else pool
        if self.existing_cluster and pool.node_selector is not None:
            return dict(pool.node_selector)
        return doks.pool_node_selector(pool.name)

    @property
    def missing_secrets(self) -> list[str]:
        return [k for k in self.secrets_required if k not in self.secrets_set]

    def hf_config_path(self, model: ModelConfig) -> Path | None:
        """A model's `hf_config`, relative paths taken from the project root."""
        return hf_config_path(model, self.base_dir)


def environment_defaults(raw: StackInput) -> tuple[ClusterConfig, ObservabilityConfig]:
    prod = raw.environment == "prod" and raw.cluster.existing is None  # nothing of an existing cluster's is the stack's to protect
    cluster = raw.cluster.model_copy(
        update={
            "ha": prod if raw.cluster.ha is None else raw.cluster.ha,
            "protect": prod if raw.cluster.protect is None else raw.cluster.protect,
        }
    )
    obs = raw.observability.model_copy(update={"enabled": observability_on(raw.environment, raw.observability)})
    return cluster, obs


def provider_kubeconfig_problems(raw: StackInput, provider_kubeconfig_secret: bool) -> list[Problem]:
    """On an existing cluster the program's Kubernetes provider reads the `kubeconfig` secret; the
    kubernetes provider's own `kubernetes:kubeconfig` (a secret here: in plain text the credential
    scan refuses it) is read by no resource, and would leave two answers to "which cluster"."""
    if raw.cluster.existing is None or not provider_kubeconfig_secret:
        return []
    return [Problem("kubernetes:kubeconfig", (
        "is set, but the program's Kubernetes provider reads the inference-platform:kubeconfig secret, not "
        "kubernetes:kubeconfig, so nothing reads it; set the cluster's kubeconfig with "
        "`pulumi config set --secret kubeconfig < FILE` and remove this one (`pulumi config rm kubernetes:kubeconfig`)"))]


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
    early += credential_problems(values, skip={*PROVIDER_SECRET_KEYS, *(f"{NS}{k}" for k in SECRET_KEYS)}, secret_names=tuple(SECRET_KEYS))
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

    raw = cross.mode_defaults(raw)
    keys_path = f"{NS}api_keys" if api_keys_raw is not None or api_keys_secret else f"{NS}api_key"
    problems = early + _problems(raw, base_dir, plain_secrets, client_keys, keys_path)
    problems += cross.kubeconfig_problems(raw, "kubeconfig" in secrets_set)
    problems += cross.engine_key_problems(raw, "engine_key" in secrets_set)
    problems += provider_kubeconfig_problems(raw, "kubernetes:kubeconfig" in secret_keys)
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
        models=cross.resolve_autoscaling(raw),
        router=raw.router,
        observability=obs,
        secrets_set=frozenset(secrets_set),
        client_keys=client_keys,
        secrets_required=cross.required_secrets(raw),
        base_dir=base_dir,
        spaces_credentials_set=all(k in values for k in SPACES_PROVIDER_KEYS),
        digitalocean_token_set="digitalocean:token" in values,
        rollout_suspends_autoscaling=frozenset(m.name for m in raw.models if cross.suspended_by_rollout(raw, m)),
    )


# The checks of a structurally sound input: each section's own (its module) and the cross-checks
# (cross_checks.py), in the order their problems are reported — the order from before the sections
# were split, so every message reads as it did: a model's and an objective's problems together.

def _problems(raw: StackInput, base_dir: Path | None, plain_secrets: set[str], client_keys: ClientKeys, keys_path: str) -> list[Problem]:
    existing = raw.cluster.existing is not None
    problems = cross.network_problems(raw) + (check_network(raw.network) if raw.network is not None and not existing else [])
    problems += check_pools(raw.gpu_pools, raw.region, existing=existing) + cross.system_selector_problems(raw) + cross.runtime_problems(raw)
    problems += _model_problems(raw, base_dir) + _rollout_problems(raw)
    problems += cross.pinned_version_problems(raw) + check_cluster(raw.cluster)
    problems += list(stack_exposure(raw.environment, raw.cluster.api_allow_list, raw.router).problems)
    problems += check_model_cache(raw.model_cache, raw.region) + cross.existing_cache_problems(raw)
    problems += _gateway_problems(raw) + cross.endpoint_picker_name_problems(raw)
    problems += plain_secret_problems(plain_secrets) + check_router(raw.router, raw.environment)
    return problems + cross.front_door_problems(client_keys, raw.router.kind, keys_path, checked=client_keys_checked(raw.router))


def _model_problems(raw: StackInput, base_dir: Path | None) -> list[Problem]:
    """Every model's checks; a model naming no pool is reported at its pool only."""
    problems = cross.duplicate_model_name_problems(raw) + duplicate_api_names(raw.models)
    for i, model in enumerate(raw.models):
        on = cross.placement(raw, model)
        if on is None:
            problems += cross.unknown_pool_problems(raw, i)
            continue
        own = _model_as_run(model, model_keys(i), on)
        problems += own + model_source_problems(model, f"{NS}models[{i}]", base_dir)
        candidate = candidate_as_model(model)
        if candidate is not None:  # the model the rollout would promote, judged by the same checks
            problems += candidate_only(_model_as_run(candidate, candidate_keys(i, model.rollout.candidate), on), own)
    return problems + cross.shared_pool_problems(raw) + cross.autoscaling_problems(raw)


def _model_as_run(model: ModelConfig, keys: ModelKeys, on: cross.Placement) -> list[Problem]:
    """The checks of one model as it runs — for each model and for the model its rollout candidate
    would become (infra/config/model_keys.py), each problem at the key as written."""
    return [
        *switch_value_problems(model, keys), *cross.admin_switch_problems(model, keys, on),
        *image_and_flag_problems(model, keys), *cross.platform_switch_problems(model, keys, on),
        *offload_problems(model, keys), *cross.image_vendor_problems(model, keys, on),
        *cross.lmcache_image_problems(model, keys, on), *cross.streamer_problems(model, keys, on),
        *platform_env_problems(model, keys), *endpoint_problems(model, keys),
    ]


def _rollout_problems(raw: StackInput) -> list[Problem]:
    """Every model's rollout (models whose pool is unknown are reported at their pool)."""
    problems: list[Problem] = []
    for i, model in enumerate(raw.models):
        on = cross.placement(raw, model)
        if model.rollout is None or on is None:
            continue
        at = f"{NS}models[{i}]"
        problems += cross.rollout_front_door_problems(at, on) + rollout_problems(model, at) + cross.rollout_split_problems(model, at, on)
    return problems


def _gateway_problems(raw: StackInput) -> list[Problem]:
    """`router.gateway`, then objective by objective (only under router.kind gateway)."""
    problems = check_gateway(raw.router)
    if raw.router.kind != "gateway":
        return problems
    for model, name in zip(cross.objective_model_problems(raw), objective_name_problems(raw.router.gateway), strict=True):
        problems += model + name
    return problems


def rollout_autoscaling_notes(cfg: StackConfig) -> list[str]:
    """A rollout suspends replica autoscaling the model would otherwise have: said in the plan,
    with what it costs while the rollout runs (infra/config/cross_checks.py `suspended_by_rollout`)."""
    notes = []
    for i, model in enumerate(cfg.models):
        if model.name not in cfg.rollout_suspends_autoscaling:
            continue
        pool = cfg.pool(model.pool)
        notes.append(
            f"model {model.name}: replica autoscaling is off while models[{i}].rollout runs ({cross.ROLLOUT_SUSPENDS}); "
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
