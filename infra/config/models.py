"""`models:` — the served models as declared: source, pool, layout, workload, SLOs, engine flags
and env, autoscaling, kv_offload and rollout, each key with its type, default and description.

The models section's own checks (the flags a layout or another key owns, a model's sessions, its
source) are infra/config/model_checks.py; the checks that read another section too (the pool a
model names, the front door, the weight cache) are infra/config/cross_checks.py."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from infra.catalog import versions
from infra.catalog.vllm_flags import (
    canonical_flag,
    clashes_with_service_env,
    unknown_env_vars,
    unknown_flags,
    vllm_flags,
)
from infra.config.base import Name, StrictModel, dns_label
from infra.config.kv_offload import KvOffloadConfig
from infra.config.layout import AnyLayout, LayoutConfig, auto_or_layout
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
    Checks: infra/config/rollout.py; against the front door and the pool, infra/config/cross_checks.py.
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


def gated_models(models: list[ModelConfig]) -> list[ModelConfig]:
    """The models whose Hugging Face repo is gated (infra/catalog/models.py `is_gated`)."""
    from infra.catalog.models import is_gated  # local import: the catalog is large

    return [m for m in models if is_gated(m.source)]


def engine_image(model: ModelConfig, vendor: str) -> str:
    """The image a model's engines run: its own, else the pinned vLLM image of its GPU vendor."""
    if model.image:
        return model.image
    return versions.VLLM_IMAGE_ROCM if vendor == "amd" else versions.VLLM_IMAGE_CUDA
