"""`models:` — the served models: source, pool, layout, workload, SLOs, engine flags and env,
autoscaling; with the checks whose key is a model's (pools they name, flags the layout or the
weight source owns, names the gateway would reuse, plain-text credentials)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from infra.catalog import versions
from infra.catalog.engine_images import PINNED, STACKS, VENDOR_NAMES, image_vendor
from infra.catalog.vllm_flags import (
    canonical_flag,
    clashes_with_service_env,
    unknown_env_vars,
    unknown_flags,
    vllm_flags,
)
from infra.config.admin_switches import admin_switch_problems
from infra.config.base import NS, Name, StrictModel, dns_label, duplicates
from infra.config.engine_flags import extra_args_problems, platform_switch_problems
from infra.config.kv_offload import KvOffloadConfig, kv_offload_problems, lmcache_image_problems
from infra.config.layout import AnyLayout, LayoutConfig, PdLayoutConfig, auto_or_layout
from infra.config.model_env import endpoint_problems, platform_env_problems
from infra.config.model_keys import ModelKeys, candidate_as_model, candidate_keys, candidate_only, model_keys
from infra.config.observability import observability_on
from infra.config.pools import GpuPoolConfig
from infra.config.router import EPP_SUFFIX
from infra.domain import (
    MAX_INPUT_TOKENS,
    MAX_OUTPUT_TOKENS,
    MAX_PEAK_RPS,
    MAX_TPOT_P90_MS,
    MAX_TTFT_P90_MS,
    MAX_TURNS_PER_SESSION,
    Slo,
    Workload,
)
from infra.errors import Problem, UserError

if TYPE_CHECKING:
    from infra.config.stack import StackInput

_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_COMMIT_HASH = re.compile(r"^[0-9a-f]{40}$")


def _hf_id(value: str) -> str:
    if not _HF_ID.match(value) or ".." in value or value.endswith((".", "-")):
        raise ValueError(
            f"{value!r} is not a Hugging Face model id; expected <org>/<name>, e.g. Qwen/Qwen3-8B"
        )
    return value


def _commit_hash(value: str) -> str:
    if not _COMMIT_HASH.match(value):
        raise ValueError(
            f"{value!r} is not a commit hash; pin the checkpoint by its full 40-character commit id "
            "(shown in the model's 'Files and versions' history), not a branch or tag that can move"
        )
    return value


def _model_name(value: str) -> str:
    if clashes_with_service_env(value):
        raise ValueError(
            f"{value!r} is reserved: the model's Service takes its name, and Kubernetes turns a Service named "
            "`vllm` or `vllm-*` into VLLM_* env vars that clash with vLLM's own; choose another name"
        )
    return value


def _vllm_env_name(name: str) -> str:
    if unknown_env_vars({name: ""}):
        close = difflib.get_close_matches(name, vllm_flags()["env_vars"], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"{name!r} is not read by vLLM {vllm_flags()['vllm_version']}{hint}; it would be silently ignored "
            "(known VLLM_* variables: infra/catalog/vllm_flags.json)"
        )
    return name


def _vllm_serve_flags(args: list[str]) -> list[str]:
    """Each unknown flag as its own error at its index: pydantic merges a ValidationError raised here
    into the stack file's, so it is reported with every other problem."""
    data = vllm_flags()
    errors = []
    index = 0
    for flag in unknown_flags(args):
        index = args.index(flag, index)
        close = difflib.get_close_matches(canonical_flag(flag), data["accepted"], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        message = (
            f"{flag!r} is not a `vllm serve` option in vLLM {data['vllm_version']}{hint}; "
            "accepted flags: infra/catalog/vllm_flags.json"
        )
        errors.append(
            InitErrorDetails(type=PydanticCustomError("value_error", "{message}", {"message": message}), loc=(index,), input=flag)
        )
        index += 1
    if errors:
        raise ValidationError.from_exception_data("extra_args", errors)
    return args


HfId = Annotated[str, AfterValidator(_hf_id)]
CommitHash = Annotated[str, AfterValidator(_commit_hash)]
ModelName = Annotated[str, AfterValidator(dns_label), AfterValidator(_model_name)]
VllmEnvName = Annotated[str, AfterValidator(_vllm_env_name)]
VllmServeArgs = Annotated[list[str], AfterValidator(_vllm_serve_flags)]


class WorkloadConfig(StrictModel):
    """The traffic a model serves: it drives the planner."""

    input_tokens: int = Field(
        ge=1, le=MAX_INPUT_TOKENS, description="Typical prompt length in tokens; input + output must fit the model's context."
    )
    output_tokens: int = Field(ge=1, le=MAX_OUTPUT_TOKENS, description="Typical completion length in tokens.")
    peak_rps: float | None = Field(
        None, gt=0, le=MAX_PEAK_RPS, description="Peak requests per second the model must sustain (sizes the node count)."
    )
    prefix_cache_hit_rate: float = Field(
        0.0, ge=0, lt=1,
        description="Share of prompt tokens expected from the prefix cache, taken as given; with turns_per_session the session model predicts it instead (set one, not both).",
    )
    turns_per_session: int = Field(
        1, ge=1, le=MAX_TURNS_PER_SESSION,
        description="Turns per conversation (multi-turn chat): each prompt re-sends the history, which the prefix cache serves while it holds it; the plan then predicts the hit rate from the KV cache and the sessions (docs/planner.md). 1: single prompts.",
    )
    think_time_s: float = Field(
        60.0, gt=0, le=86400,
        description="Mean seconds between a conversation's turns (the user reading and typing); longer: more histories evicted before they are reused.",
    )
    new_tokens_per_turn: int | None = Field(
        None, ge=1, le=MAX_INPUT_TOKENS,
        description="New user tokens per turn; unset: derived so the mean prompt over a session is input_tokens.",
    )

    def to_workload(self) -> Workload:
        return Workload(
            self.input_tokens, self.output_tokens, self.peak_rps, self.prefix_cache_hit_rate,
            self.turns_per_session, self.think_time_s, self.new_tokens_per_turn,
        )


class SloConfig(StrictModel):
    """Latency objectives at the 90th percentile."""

    ttft_p90_ms: float = Field(gt=0, le=MAX_TTFT_P90_MS, description="p90 time to first token, ms.")
    tpot_p90_ms: float = Field(gt=0, le=MAX_TPOT_P90_MS, description="p90 time per output token, ms.")

    def to_slo(self) -> Slo:
        return Slo(self.ttft_p90_ms, self.tpot_p90_ms)


class AutoscalingConfig(StrictModel):
    """Replica autoscaling (KEDA) of a model on an autoscaling GPU pool, on in-flight load and the queue.

    Pods scale on requests in flight per replica (and on the queue); pending pods make the DOKS
    autoscaler add GPU nodes. Without it an autoscaling pool never grows: nothing asks for a pod
    beyond the minimum. vLLM's metrics exist only while a vLLM pod runs, so a pool with min_nodes 0
    can never be scaled up from nothing.
    """

    enabled: bool | None = Field(
        None,
        description="Default: on when the model's pool autoscales (1 ≤ min_nodes < max_nodes), serves only this model, and observability is on; off for a P/D layout whose unit spans nodes (not autoscaled). A P/D unit within one node scales its prefill and decode Deployments apart (one ScaledObject each). A replica over nodes (nodes_per_replica > 1) scales in whole LeaderWorkerSet groups.",
    )
    target_running_per_replica: int | None = Field(
        None, gt=0,
        description="Target requests in flight (vllm:num_requests_running + num_requests_waiting) per replica, the primary scaling signal; above it replicas are added, below it removed. Unset: 0.8 × the running requests per replica at the plan's SLO goodput (`infra plan` shows it). Set it from measurements (`infra tune`); at most max_num_seqs × dp of the layout.",
    )
    waiting_per_replica: float = Field(
        4.0, gt=0, le=1000,
        description="Target queued requests (vllm:num_requests_waiting) per replica, the second trigger (the larger wins): adds replicas when a queue builds even below the in-flight target, up to replicas_per_node × max_nodes (max_nodes / nodes_per_replica for a replica over nodes).",
    )
    scale_down_delay_seconds: int = Field(
        1800, ge=300, le=86400,
        description="How long the load must stay below target before a replica is removed (a GPU replica takes tens of minutes to come back).",
    )


class RolloutCandidateConfig(StrictModel):
    """The layout (and optionally image and vLLM arguments) a rollout tries beside the current one."""

    layout: LayoutConfig = Field(
        description="The candidate's colocated layout (a mapping like the model's own explicit layout; one node per replica at most)."
    )
    image: str | None = Field(None, description="The candidate's vLLM image (explicit tag, built for the pool's GPU vendor, checked like the model's); unset: the model's image.")
    extra_args: VllmServeArgs | None = Field(
        None, description="The candidate's extra `vllm serve` arguments, replacing the model's; unset: the model's extra_args."
    )


class RolloutConfig(StrictModel):
    """A candidate layout running beside the model's current one, taking a weighted share of its requests.

    The front door splits the model's requests by `weight`; `infra rollout status` compares the two
    variants' SLO series and says promote / hold / roll back; `infra rollout promote` moves `weight`
    to the next step (from the last one the candidate becomes the model's layout) and `infra rollout
    abort` removes this block. Needs an explicit colocated current layout, a router kind that
    splits (session, prefix or round-robin: vllm-router splits by engine count, so the plan sizes
    the candidate to the weight) and no replica autoscaling (docs/serving.md#layout-rollouts).
    Checks: infra/config/rollout.py.
    """

    candidate: RolloutCandidateConfig = Field(description="What is rolled out: layout, and optionally image and extra_args.")
    steps: list[int] = Field(
        min_length=1, max_length=10,
        description="Candidate weights in percent of the model's requests, increasing, each 1-99 (e.g. [10, 25, 50]); after the last one `promote` makes the candidate the layout.",
    )
    weight: int = Field(description="The candidate's share now, in percent: one of `steps` (`infra rollout promote` advances it).")


class ModelConfig(StrictModel):
    """One served model: what, where, how laid out, for which traffic and SLOs."""

    name: ModelName = Field(description="Service name of the model (Kubernetes names, labels, metrics); not `vllm` or `vllm-*`.")
    source: HfId = Field(description="Hugging Face model id, e.g. Qwen/Qwen3-235B-A22B-Instruct-2507-FP8.")
    revision: CommitHash | None = Field(
        None,
        description="Pin the checkpoint to one Hugging Face commit (40 hex characters): the prefetch, vLLM's weights and tokenizer all use it. Unset: `main` as of the first prefetch.",
    )
    pool: Name = Field(description="Name of the GPU pool that serves it.")
    layout: Annotated[AnyLayout | None, BeforeValidator(auto_or_layout)] = Field(
        None, description="'auto' (the planner chooses), an explicit layout mapping, or a prefill/decode layout (p1tp4-d1tp4 or {disaggregated: p1tp4-d1tp4, ...})."
    )
    workload: WorkloadConfig = Field(description="Traffic shape.")
    slo: SloConfig = Field(description="p90 latency objectives.")
    served_model_name: str | None = Field(None, description="Name clients use in the OpenAI API; default: the source id.")
    hf_config: str | None = Field(None, description="Path (relative to the repo) to a local Hugging Face config.json for models not in the catalog.")
    image: str | None = Field(
        None,
        description="Override the pinned vLLM image (must carry an explicit tag, and be built for the pool's GPU vendor: an image family the catalog knows for the other vendor, e.g. the CUDA vllm/vllm-openai on an AMD pool, is refused; infra/catalog/engine_images.py).",
    )
    extra_args: VllmServeArgs = Field(
        default_factory=list,
        description="Extra `vllm serve` arguments, appended verbatim; each flag must exist in the pinned vLLM, read by its effective value (the last element that sets it wins): settings a layout key, another key or the platform owns are refused naming the owner, as are switches contradicting what the plan assumes (docs/serving.md) and vLLM's development switches where others reach the engines (docs/security.md).",
    )
    env: dict[VllmEnvName, str] = Field(
        default_factory=dict,
        description="Extra container environment variables; VLLM_* names must be read by the pinned vLLM; names the platform sets (HF_HOME, HF_HUB_OFFLINE, the compile and S3 settings: infra/catalog/engine_env.py) are refused naming their owner, and an endpoint (HF_ENDPOINT, OTEL_EXPORTER_OTLP_*) must be a URL outside link-local space. vLLM's development switches (VLLM_SERVER_DEV_MODE, VLLM_ALLOW_RUNTIME_LORA_UPDATING) are refused in prod and under router.kind service or gateway, noted elsewhere (docs/security.md).",
    )
    autoscaling: AutoscalingConfig = Field(default_factory=AutoscalingConfig, description="Replica autoscaling on in-flight requests and the queue (KEDA).")
    kv_offload: KvOffloadConfig = Field(
        default_factory=KvOffloadConfig,
        description="KV cache offload tier in host memory, e.g. {kind: auto} or {kind: cpu, size_gib: 256}; default none.",
    )
    rollout: RolloutConfig | None = Field(
        None, description="A candidate layout beside the current one, with its traffic steps (`infra rollout status|promote|abort`)."
    )

    @property
    def api_model_name(self) -> str:
        return self.served_model_name or self.source


def hf_config_path(model: ModelConfig, base_dir: Path | None) -> Path | None:
    if not model.hf_config:
        return None
    path = Path(model.hf_config)
    return base_dir / path if not path.is_absolute() and base_dir is not None else path


def _duplicate_api_names(models: list[ModelConfig]) -> list[Problem]:
    """Two models clients would name alike, reported at the key the user wrote: served_model_name,
    or source when served_model_name is unset (it defaults to the source)."""
    seen: dict[str, int] = {}
    problems = []
    for i, model in enumerate(models):
        value = model.api_model_name
        if value in seen:
            key = "served_model_name" if model.served_model_name else "source"
            problems.append(Problem(f"{NS}models[{i}].{key}", (
                f"{value!r} is already the API model name of models[{seen[value]}] (served_model_name, else the source); "
                "clients could not tell them apart: give each a distinct served_model_name")))
        else:
            seen[value] = i
    return problems


def check_models(raw: StackInput, base_dir: Path | None) -> list[Problem]:
    # Under router.kind gateway a duplicate name is worse than a clash: the InferencePool selects
    # engine pods by their model label, so one model's pool would take in the other's engines.
    pool_hint = " (with router.kind gateway, one model's InferencePool would select the other's engine pods)"
    problems = duplicates(raw.models, "name", "models", pool_hint if raw.router.kind == "gateway" else "")
    problems += _duplicate_api_names(raw.models)
    pools = {p.name: p for p in raw.gpu_pools}
    by_pool: dict[str, list[int]] = {}
    for i, model in enumerate(raw.models):
        at = f"{NS}models[{i}]"
        pool = pools.get(model.pool)
        if pool is None:
            close = difflib.get_close_matches(model.pool, list(pools), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(Problem(f"{at}.pool", f"{model.pool!r} is not a pool{hint}; defined pools: {', '.join(pools)}"))
            continue
        by_pool.setdefault(model.pool, []).append(i)
        context = {"environment": raw.environment, "router_kind": raw.router.kind}
        own = model_problems(model, model_keys(i), pool, raw.model_cache.kind, **context)
        problems += own
        problems += model_source_problems(model, at, base_dir)
        candidate = candidate_as_model(model)
        if candidate is not None:  # the model the rollout would promote, judged by the same checks
            problems += candidate_only(
                model_problems(candidate, candidate_keys(i, model.rollout.candidate), pool, raw.model_cache.kind, **context), own)
    for pool_name, indices in by_pool.items():
        if len(indices) > 1:
            models = [raw.models[i] for i in indices]
            if any(m.layout is None for m in models):
                problems.append(
                    Problem(
                        f"{NS}models[{indices[1]}].pool",
                        f"pool {pool_name!r} is shared by several models; shared pools need explicit layouts "
                        "(layout: auto plans a whole node per model)",
                    )
                )
            else:
                gpus = pools[pool_name].gpu.gpus
                used = sum(m.layout.to_layout(gpus).gpus_per_node_used for m in models)
                if used > gpus:
                    problems.append(
                        Problem(f"{NS}models[{indices[-1]}].layout", f"models on pool {pool_name!r} use {used} GPUs per node; it has {gpus}")
                    )
    problems += _check_autoscaling(raw, pools, by_pool)
    return problems


def unpinned_image(image: str | None) -> bool:
    """No tag, an empty tag (`vllm/vllm-openai:`) or `latest`; a digest (`@sha256:...`) pins."""
    if image is None:
        return False
    if "@" in image:
        return not image.rsplit("@", 1)[1]
    name, _, tag = image.rsplit("/", 1)[-1].partition(":")
    return not tag or tag == "latest"


def model_problems(
    model: ModelConfig, keys: ModelKeys, pool: GpuPoolConfig, cache_kind: str, *, environment: str, router_kind: str,
) -> list[Problem]:
    """The checks of one model as it runs — run for each model and for the model its rollout
    candidate would become (infra/config/model_keys.py), each problem at the key as written."""
    problems = admin_switch_problems(model, keys, environment, router_kind)
    if unpinned_image(model.image):
        problems.append(Problem(keys("image"), f"{model.image!r} is not pinned; give an explicit tag other than latest"))
    problems += extra_args_problems(model, keys) + platform_switch_problems(model, keys, pool.gpu.vendor)
    if model.kv_offload.kind != "none":
        for j, arg in enumerate(model.extra_args):
            if canonical_flag(arg) == "--kv-transfer-config":
                problems.append(Problem(keys(f"extra_args[{j}]"), (
                    f"{arg!r} cannot be combined with kv_offload kind {model.kv_offload.kind}: vLLM writes the offload "
                    "connector into the KV transfer config from --kv-offloading-backend, replacing this one")))
    problems += kv_offload_problems(model, keys)
    problems += image_vendor_problems(model, keys, pool)
    problems += lmcache_image_problems(model, keys, pool.gpu.vendor)
    problems += streamer_problems(model, keys, cache_kind)
    problems += platform_env_problems(model, keys) + endpoint_problems(model, keys)
    return problems


def image_vendor_problems(model: ModelConfig, keys: ModelKeys, pool: GpuPoolConfig) -> list[Problem]:
    """An image built for the other GPU vendor finds no GPU on the pool's nodes and its engines
    crash-loop: refused for the families the catalog knows (infra/catalog/engine_images.py); a
    build the catalog cannot tell about is the user's."""
    if model.image is None:
        return []
    vendor, what = image_vendor(model.image)
    want = pool.gpu.vendor
    if vendor is None or vendor == want:
        return []
    instead = (f"e.g. {PINNED[want]}; unset, the candidate runs its model's image" if keys.candidate
               else f"e.g. the pinned {PINNED[want]}: remove {keys.short('image')}")
    return [Problem(keys("image"), (
        f"{model.image!r} is {what}, built for {VENDOR_NAMES[vendor]} GPUs ({STACKS[vendor]}), and pool {pool.name!r} has "
        f"{VENDOR_NAMES[want]} GPUs ({pool.size}): its engines would find no GPU and crash-loop; give a {STACKS[want]} build "
        f"({instead})"))]


def model_source_problems(model: ModelConfig, at: str, base_dir: Path | None) -> list[Problem]:
    """The model's architecture must be known: a catalog id, or an hf_config file that parses
    (layout_fit.py then checks the layout against it)."""
    from infra.catalog.models import resolve_model  # local import: the catalog is large

    hf_path = hf_config_path(model, base_dir)
    if hf_path is not None:
        if not hf_path.is_file():
            return [Problem(f"{at}.hf_config", f"{model.hf_config!r} is not a file (paths are relative to the repository root)")]
    try:
        arch = resolve_model(model.source, str(hf_path) if hf_path else None)
    except (UserError, ValueError, OSError) as err:
        detail = err.render() if isinstance(err, UserError) else str(err)
        return [Problem(f"{at}.hf_config", f"cannot use {model.hf_config!r}: {detail}")]
    if arch is None:
        return [
            Problem(
                f"{at}.source",
                f"{model.source!r} is not in the model catalog; add hf_config: <path to its config.json> "
                "so the planner knows its architecture (see `infra layout --help` for catalog models)",
            )
        ]
    return []


def _check_autoscaling(raw: StackInput, pools: dict[str, GpuPoolConfig], by_pool: dict[str, list[int]]) -> list[Problem]:
    """`autoscaling.enabled: true` needs a pool range to scale in, a running replica to read the queue
    from (min_nodes ≥ 1), the pool to itself, and Prometheus."""
    problems = []
    for i, model in enumerate(raw.models):
        pool = pools.get(model.pool)
        if model.autoscaling.enabled is not True or pool is None:
            continue
        at = f"{NS}models[{i}].autoscaling.enabled"
        if model.rollout is not None:
            problems.append(Problem(at, "true cannot run with a rollout: KEDA scales the current engines only, which moves the traffic split; set it to false until the rollout is promoted or aborted"))
        if pool.min_node_count >= pool.max_node_count:
            problems.append(Problem(at, f"true needs pool {pool.name!r} to autoscale; give it min_nodes < max_nodes instead of a fixed count"))
        elif pool.min_node_count == 0:
            problems.append(
                Problem(
                    at,
                    f"true cannot start pool {pool.name!r} from min_nodes 0: the queue metric KEDA scales on exists only "
                    "while a vLLM pod runs; give the pool min_nodes ≥ 1 or set it to false",
                )
            )
        elif len(by_pool.get(model.pool, [])) > 1:
            problems.append(Problem(at, f"true needs pool {pool.name!r} to itself; models sharing a pool would compete for its nodes"))
        if not observability_on(raw):
            problems.append(Problem(at, "true needs observability (the queue metric comes from Prometheus); enable observability or set it to false"))
    return problems


def pd_spans_nodes(layout: PdLayoutConfig, pool: GpuPoolConfig | None) -> bool:
    """Whether a P/D unit spans nodes of its pool (True when that cannot be told: the layout or
    pool is itself in error, reported elsewhere)."""
    try:
        return pool is None or layout.to_layout(pool.gpu.gpus).spans_nodes
    except (KeyError, ValueError):
        return True


def autoscaling_default(raw: StackInput, model: ModelConfig) -> tuple[bool, str]:
    """Whether a model autoscales when `autoscaling.enabled` is not written, and why not when it
    does not (the words a note or an error gives the reader)."""
    pools = {p.name: p for p in raw.gpu_pools}
    pool = pools[model.pool]
    if isinstance(model.layout, PdLayoutConfig) and pd_spans_nodes(model.layout, pool):
        return False, "its P/D unit spans nodes and grows in whole units only"
    if not 1 <= pool.min_node_count < pool.max_node_count:
        return False, (f"pool {pool.name!r} has min_nodes 0" if pool.min_node_count == 0 and pool.max_node_count > 0
                       else f"pool {pool.name!r} has a fixed node count")
    if sum(1 for n in raw.models if n.pool == model.pool) > 1:
        return False, f"pool {pool.name!r} is shared with other models"
    if not observability_on(raw):
        return False, "observability is off (KEDA reads the queue from Prometheus)"
    return True, ""


def suspended_by_rollout(raw: StackInput, model: ModelConfig) -> bool:
    """The model would autoscale by default, but its rollout turns autoscaling off while it runs."""
    return (model.rollout is not None and model.autoscaling.enabled is not True
            and "enabled" not in model.autoscaling.model_fields_set and autoscaling_default(raw, model)[0])


ROLLOUT_SUSPENDS = ("KEDA would scale the current engines only and move the traffic split the rollout sets; it is "
                    "back once `infra rollout promote` from the last step or `infra rollout abort` removes the rollout")


def resolve_autoscaling(raw: StackInput) -> list[ModelConfig]:
    """Each model with `autoscaling.enabled` decided (never None afterwards)."""
    out = []
    for model in raw.models:
        enabled = model.autoscaling.enabled
        if enabled is None:
            # A rollout suspends it: KEDA would scale the current engines only and move the split.
            enabled = model.rollout is None and autoscaling_default(raw, model)[0]
        out.append(model.model_copy(update={"autoscaling": model.autoscaling.model_copy(update={"enabled": enabled})}))
    return out


# Flags the Spaces source sets on every replica.
_STREAMER_FLAGS = ("--load-format", "--model-loader-extra-config")


def streamer_problems(model: ModelConfig, keys: ModelKeys, cache_kind: str) -> list[Problem]:
    """Under model_cache.kind spaces every engine streams its weights: an image too old for the
    Run:ai Model Streamer, or extra_args that set the streamer's own flags, is refused."""
    if cache_kind != "spaces":
        return []
    problems = []
    minimum = versions.parse_version(versions.VLLM_RUNAI_STREAMER_MIN_VERSION)
    found = versions.vllm_version_of_image(model.image) if model.image else None
    if found is not None and found < minimum:
        problems.append(
            Problem(
                keys("image"),
                f"{model.image!r} is vLLM {'.'.join(map(str, found))}; model_cache.kind spaces streams weights with "
                f"the Run:ai Model Streamer, which needs vLLM ≥ {versions.VLLM_RUNAI_STREAMER_MIN_VERSION} "
                "(infra/catalog/versions.py); use a newer image or another model_cache.kind",
            )
        )
    for j, arg in enumerate(model.extra_args):
        if canonical_flag(arg) in _STREAMER_FLAGS:
            problems.append(Problem(keys(f"extra_args[{j}]"), f"{arg!r} is set by model_cache.kind spaces (the streamer's load format and concurrency)"))
    return problems


def endpoint_picker_name_problems(raw: StackInput) -> list[Problem]:
    """Under router.kind gateway each model gets an endpoint picker `<model>-epp` (infra/render/epp.py),
    whose Service, Deployment and labels must not be another model's."""
    if raw.router.kind != "gateway":
        return []
    problems = []
    names = {m.name: i for i, m in enumerate(raw.models)}
    for i, model in enumerate(raw.models):
        if model.name.endswith(EPP_SUFFIX) and model.name.removesuffix(EPP_SUFFIX) in names:
            other = names[model.name.removesuffix(EPP_SUFFIX)]
            problems.append(
                Problem(
                    f"{NS}models[{i}].name",
                    f"{model.name!r} is the name of the endpoint picker of models[{other}] under router.kind gateway; choose another name",
                )
            )
    return problems
