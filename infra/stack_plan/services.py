"""The model-service renderer's input from a planned model, and the image pre-pull DaemonSets of
the pools that serve them.
"""

from __future__ import annotations

from infra.config import NS, StackConfig
from infra.render.model_service import (
    CacheSpec,
    ModelServiceSpec,
    api_key_secret_name,
    engine_key_secret_name,
    hf_token_secret_name,
)
from infra.render.warm_start import PrepullSpec, SpacesWeights, render_prepull_daemonset
from infra.specs import ImagePrepullSpec
from infra.stack_plan.facts import ModelFacts
from infra.stack_plan.namespaces import ENGINES_NAMESPACE, INFERENCE_NAMESPACE


def model_service_spec(
    model: ModelFacts,
    cache_pvc: str | None,
    *,
    secrets: frozenset[str] | set[str] = frozenset(),
    weights: SpacesWeights | None = None,
    compile_cache: str | None = None,
    key_path: str = "",
    behind_front_door: bool = False,
    node_selector: dict[str, str] | None = None,
    system_node_selector: dict[str, str] | None = None,
) -> ModelServiceSpec:
    """Config + planned layout → the model-service renderer's input.

    `secrets`: the secret keys the stack stores; each becomes a Kubernetes Secret the pods read.
    `weights`: the Spaces bucket (model_cache.kind spaces); `compile_cache`: "shared" (NFS) or
    "node"; `node_selector`: the pool's nodes (StackConfig.pool_selector). The startup probe's budget is the readiness plan's: every replica of the first
    rollout loading at once, caches cold.
    """
    layout = model.layout
    load_s = model.readiness.probe_budget_s if model.readiness is not None else 600
    return ModelServiceSpec(
        name=model.config.name,
        source=model.config.source,
        revision=model.config.revision,
        served_model_name=model.config.api_model_name,
        layout=layout,
        nodes_min=model.pool.min_node_count,
        nodes_max=model.pool.max_node_count,
        gpu=model.pool.gpu,
        pool_name=model.pool.name,
        node_selector=node_selector,
        system_node_selector=system_node_selector,
        namespace=ENGINES_NAMESPACE,
        image=model.config.image,
        extra_args=tuple(model.config.extra_args),
        env=dict(model.config.env),
        cache=CacheSpec(pvc_name=cache_pvc) if cache_pvc else None,
        hf_token_secret=hf_token_secret_name(model.config.name) if "huggingface_token" in secrets else None,
        # issue 30: every engine checks a key in every environment: the engine key behind a front
        # door (client keys rotate there), else the client key
        api_key_secret=(engine_key_secret_name if behind_front_door else api_key_secret_name)(model.config.name),
        estimated_load_seconds=load_s,
        max_model_len=layout.max_model_len,
        moe=bool(model.arch.is_moe),
        autoscaled=bool(model.config.autoscaling.enabled),
        weights=weights,
        compile_cache=compile_cache,
        kv_offload=model.kv_offload,
        key_path=key_path,
    )


def image_prepull_spec(prefix: str, services: tuple[ModelServiceSpec, ...]) -> ImagePrepullSpec | None:
    """One pre-pull DaemonSet per GPU pool that serves a model, with the images its models run."""
    by_pool: dict[str, tuple[str, set[str]]] = {}
    selectors: dict[str, dict[str, str]] = {}
    for s in services:
        taint, images = by_pool.setdefault(s.pool_name, (s.gpu.taint_key, set()))
        images.add(s.resolved_image)
        selectors[s.pool_name] = s.pool_selector
    if not by_pool:
        return None
    daemonsets = tuple(
        render_prepull_daemonset(PrepullSpec(pool_name=pool, images=tuple(sorted(images)), taint_key=taint, namespace=INFERENCE_NAMESPACE,
                                             node_selector=selectors[pool]))
        for pool, (taint, images) in sorted(by_pool.items())
    )
    return ImagePrepullSpec(name=f"{prefix}-image-prepull", daemonsets=daemonsets)


def model_service_specs(
    cfg: StackConfig, models: list[ModelFacts], cache_pvc: str | None, weights: SpacesWeights | None
) -> tuple[ModelServiceSpec, ...]:
    """Every model's engines, in the models' order. The offline plan and `pulumi up` store a secret
    that is set, or required (offline: a placeholder); the compile cache is shared on NFS, else per node."""
    secrets = cfg.secrets_set | set(cfg.secrets_required)
    existing = cfg.cluster.existing
    system_selector = dict(existing.system_node_selector) if existing is not None and existing.system_node_selector else None
    return tuple(
        model_service_spec(
            m, cache_pvc, secrets=secrets, weights=weights, compile_cache="shared" if cache_pvc else "node",
            key_path=f"{NS}models[{[c.name for c in cfg.models].index(m.config.name)}]",
            behind_front_door=cfg.router.kind != "service", node_selector=cfg.pool_selector(m.pool),
            system_node_selector=system_selector,
        )
        for m in models
    )
