"""Where replicas read weights from and how long a replica takes to be ready (issue 20): the NFS
cache, the Spaces bucket, the load model's weight source, and what the Spaces source still needs.
"""

from __future__ import annotations

from infra.catalog import versions
from infra.config import StackConfig
from infra.domain import Provenance
from infra.planner import ReadinessPlan, WeightSource, plan_readiness
from infra.render.warm_start import SPACES_READ_SECRET, SPACES_WRITE_SECRET, SpacesWeights
from infra.specs import ModelCacheSpec, WeightBucketSpec, standard_tags
from infra.stack_plan.facts import ModelFacts
from infra.stack_plan.namespaces import ENGINES_NAMESPACE


def weight_source(cfg: StackConfig) -> WeightSource:
    """Where the stack's replicas read weights from, in the load model's terms."""
    mc = cfg.model_cache
    kind = {"nfs": "nfs", "spaces": "spaces", "none": "huggingface"}[mc.kind]
    return WeightSource(kind, nfs_tier=mc.tier, streamer_concurrency=mc.streamer_concurrency)


def readiness_plan(cfg: StackConfig, model: ModelFacts, provenance: Provenance | None) -> ReadinessPlan:
    """The load model for this model's layout and source; a bench measurement of the same source
    (provenance ready_seconds + weights_source) replaces its new-replica figure."""
    source = weight_source(cfg)
    measured = None
    if provenance is not None and provenance.ready_seconds is not None and provenance.weights_source == source.kind:
        measured = float(provenance.ready_seconds)
    layout = model.layout
    return plan_readiness(
        model.arch,
        source,
        gpus_per_replica=layout.gpus_per_replica,
        replicas_per_node=layout.replicas_per_node,
        first_rollout_replicas=layout.replicas_for_nodes(model.pool.min_node_count),
        measured_ready_seconds=measured,
        nodes_per_replica=layout.nodes_per_replica if layout.multi_node else 1,
    )


def weight_bucket_spec(cfg: StackConfig) -> tuple[WeightBucketSpec | None, SpacesWeights | None]:
    """The Spaces bucket and how replicas reach it; (None, None) unless model_cache.kind is spaces."""
    mc = cfg.model_cache
    if mc.kind != "spaces" or mc.bucket is None:
        return None, None
    spec = WeightBucketSpec(
        name=f"{cfg.stack}-weights",
        bucket=mc.bucket,
        region=cfg.spaces_region,
        namespace=ENGINES_NAMESPACE,
        read_secret=SPACES_READ_SECRET,
        write_secret=SPACES_WRITE_SECRET,
        protect=cfg.protect,
    )
    weights = SpacesWeights(
        bucket=mc.bucket, region=cfg.spaces_region, prefix=mc.prefix, concurrency=mc.streamer_concurrency
    )
    return spec, weights


def cold_start_notes(cfg: StackConfig) -> list[str]:
    """What the Spaces source still needs (the time-to-ready itself is in each model's entry)."""
    notes: list[str] = []
    if cfg.model_cache.kind != "spaces":
        return notes
    if not cfg.spaces_credentials_set:
        notes.append(
            "model_cache.kind spaces: the DigitalOcean provider creates the bucket with a Spaces key: "
            "`pulumi config set digitalocean:spacesAccessId ...` and `pulumi config set --secret "
            "digitalocean:spacesSecretKey ...` (or SPACES_ACCESS_KEY_ID / SPACES_SECRET_ACCESS_KEY) before `pulumi up`"
        )
    for m in cfg.models:
        if m.image and versions.vllm_version_of_image(m.image) is None:
            notes.append(
                f"model {m.name}: cannot tell the vLLM version of image {m.image!r}; streaming from Spaces needs "
                f"vLLM ≥ {versions.VLLM_RUNAI_STREAMER_MIN_VERSION} with the runai-model-streamer s3 extra"
            )
    return notes


def model_cache_spec(cfg: StackConfig) -> ModelCacheSpec | None:
    """The NFS weight cache (model_cache.kind nfs), else None."""
    if cfg.model_cache.kind != "nfs":
        return None
    return ModelCacheSpec(
        name=f"{cfg.stack}-weights",
        region=cfg.region,
        size_gib=cfg.model_cache.size_gib,
        tier=cfg.model_cache.tier,
        namespace=ENGINES_NAMESPACE,
        protect=cfg.protect,
        tags=tuple(standard_tags(cfg.environment)),
    )
