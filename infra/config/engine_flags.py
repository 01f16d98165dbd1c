"""Which `vllm serve` settings the plan sets or relies on, and how a model's `extra_args` are read
against them.

The engine's command line is the platform's flags, then `extra_args` (infra/render/vllm_args.py).
vLLM's parser keeps the last occurrence of an option, and `--no-X` writes the same setting as
`--X` (argparse's BooleanOptionalAction), so one `extra_args` element can silently replace what
the plan set or assumed. Each element is read as the setting (`dest`) it writes
(infra/catalog/vllm_flags.py `flag_setting`: aliases, underscores, `=VALUE`, negations):

- **owned** settings get their value from a key of the stack file (the layout's `tp`,
  `served_model_name`, `kv_offload`, ...) or are fixed by the platform (the port every Service,
  probe, scrape and NetworkPolicy uses). An element that sets one is refused at its index, naming
  its true owner: the key to change, or that the platform fixes it.
- **assumed** switches are the ones the plan models without a key: chunked prefill (always: the
  step model splits prompts into chunks of max_num_batched_tokens) and prefix caching (while the
  plan counts prefix-cache hits). Their effective value — the last element that sets them — must
  be the one the plan assumes; the element that sets another is refused, saying what the plan
  assumed and why.

(A switch the platform sets against what the workload asks — a P/D layout on AMD GPUs — reads the
pool: infra/config/cross_checks.py `platform_switch_problems`.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.catalog.vllm_flags import VLLM_PORT, flag_setting, option_indices
from infra.config.layout import PdLayoutConfig
from infra.errors import Problem

if TYPE_CHECKING:
    from infra.config.model_keys import ModelKeys
    from infra.config.models import ModelConfig


@dataclass(frozen=True)
class LayoutOwned:
    """Set from a layout key: `field` of a colocated layout, `pd_field` of a prefill/decode one."""

    field: str
    pd_field: str


@dataclass(frozen=True)
class KeyOwned:
    """Set from another key of the model (`key`, relative to the model); `why` says what reads it."""

    key: str
    why: str


@dataclass(frozen=True)
class PlatformOwned:
    """Fixed by the platform, which nothing in the stack file changes; `why` says what depends on it."""

    why: str


_MULTI_NODE = LayoutOwned("nodes_per_replica", "disaggregated")

# vLLM setting (the parser's dest) → its owner. Every flag infra/render/vllm_args.py writes for a
# colocated or multi-node replica is here (tests/config/test_engine_flags.py checks it).
OWNERS: dict[str, LayoutOwned | KeyOwned | PlatformOwned] = {
    "tensor_parallel_size": LayoutOwned("tp", "disaggregated"),
    "enable_expert_parallel": LayoutOwned("ep", "disaggregated"),
    "data_parallel_size": LayoutOwned("dp", "disaggregated"),
    "max_num_seqs": LayoutOwned("max_num_seqs", "decode_max_num_seqs"),
    "max_num_batched_tokens": LayoutOwned("max_num_batched_tokens", "prefill_max_num_batched_tokens"),
    "gpu_memory_utilization": LayoutOwned("gpu_memory_utilization", "gpu_memory_utilization"),
    "kv_cache_dtype": LayoutOwned("kv_cache_dtype", "kv_cache_dtype"),
    "max_model_len": LayoutOwned("max_model_len", "max_model_len"),
    # a replica over nodes: the LeaderWorkerSet's rendezvous (infra/render/vllm_args.py multi_node_args)
    "data_parallel_size_local": _MULTI_NODE,
    "data_parallel_address": _MULTI_NODE,
    "data_parallel_rpc_port": _MULTI_NODE,
    "data_parallel_start_rank": _MULTI_NODE,
    "headless": _MULTI_NODE,
    "nnodes": _MULTI_NODE,
    "node_rank": _MULTI_NODE,
    "master_addr": _MULTI_NODE,
    "master_port": _MULTI_NODE,
    "served_model_name": KeyOwned(
        "served_model_name",
        "the name clients send, which the router, the gateway's routes and the per-model rules know the model by; "
        "unset: the source id",
    ),
    "model": KeyOwned("source", "the model is `vllm serve`'s positional argument, which vLLM takes over --model"),
    "revision": KeyOwned("revision", "the prefetch Job downloads that commit and the engines load it offline"),
    "tokenizer_revision": KeyOwned("revision", "the tokenizer is read from the same pinned commit as the weights"),
    "kv_offloading_backend": KeyOwned("kv_offload", "the plan sizes the host-memory tier and its hits from it"),
    "kv_offloading_size": KeyOwned("kv_offload", "the plan sizes the host-memory tier and its hits from it"),
    "port": PlatformOwned(
        f"the engines serve on :{VLLM_PORT}, which their Service, probes, PodMonitor, the router's registrar and the "
        "NetworkPolicies all use"
    ),
    "host": PlatformOwned("the engines listen on 0.0.0.0 (the pod's address), which the Service, the probes and Prometheus reach"),
    "uds": PlatformOwned(
        f"the engines serve TCP :{VLLM_PORT}, which the Service, the probes and Prometheus reach; a Unix socket serves none of them"
    ),
    "shutdown_timeout": PlatformOwned(
        "it is the engines' drain time, which the pods' terminationGracePeriodSeconds is sized to"
    ),
    "distributed_executor_backend": PlatformOwned("mp: one process per GPU inside the pod; Ray is not set up"),
    "disable_access_log_for_endpoints": PlatformOwned("it keeps the probes' and Prometheus' requests out of the access log"),
    "disable_nccl_for_dp_synchronization": PlatformOwned("it is set for data-parallel replicas on AMD GPUs"),
}

# Settings that would silently break the SLO rules, which read vLLM's default histogram buckets.
OBSERVABILITY_DESTS = {
    "custom_histogram_buckets": "the SLO rules and alerts select vLLM's default TTFT/TPOT histogram "
    "buckets by their bounds; other buckets would leave them without data and silence the burn-rate alerts",
}


def _owner_message(arg: str, owner: LayoutOwned | KeyOwned | PlatformOwned, model: ModelConfig, keys: ModelKeys) -> str:
    if isinstance(owner, PlatformOwned):
        return f"{arg!r} is fixed by the platform ({owner.why}); no key changes it: remove it"
    if isinstance(owner, KeyOwned):
        if keys.candidate and owner.key.split(".")[0] not in keys.written_at:
            return (f"{arg!r} is set from {keys.short(owner.key)} ({owner.why}), which a rollout candidate shares with its "
                    "model; remove it")
        return f"{arg!r} is set from {keys.short(owner.key)} ({owner.why}); set that key instead and remove this"
    layout = keys.short("layout")
    if model.layout is None:
        return (f"{arg!r} is set by the layout: {layout} is auto, so the planner chooses {owner.field}; write an explicit "
                f"layout to set it (`infra plan` shows the one chosen) and remove this")
    field = owner.pd_field if isinstance(model.layout, PdLayoutConfig) else owner.field
    return f"{arg!r} is set by the layout ({layout}.{field}); change it there and remove this"


def _hits_modelled(model: ModelConfig) -> str | None:
    """Why the plan counts prefix-cache hits for this model (None: it counts none)."""
    w = model.workload
    if model.kv_offload.kind != "none":
        return f"kv_offload kind {model.kv_offload.kind} (a tier of evicted prefix blocks)"
    if w.turns_per_session > 1:
        return f"workload.turns_per_session {w.turns_per_session} (each turn re-sends the conversation, which the cache serves)"
    if w.prefix_cache_hit_rate > 0:
        return f"workload.prefix_cache_hit_rate {w.prefix_cache_hit_rate:g}"
    return None


def _assumed(dest: str, model: ModelConfig) -> tuple[bool, str] | None:
    """(the value the plan assumes for switch `dest`, why), or None when it assumes nothing."""
    if dest == "enable_chunked_prefill":
        return True, ("its step model splits prompts into chunks of at most max_num_batched_tokens; without chunked prefill "
                      "vLLM refuses to start when max_num_batched_tokens is below max_model_len")
    if dest == "enable_prefix_caching":
        why = _hits_modelled(model)
        return (True, f"it predicts prefix-cache hits from {why}") if why else None
    return None


def extra_args_problems(model: ModelConfig, keys: ModelKeys) -> list[Problem]:
    """Each `extra_args` element that sets an owned setting, a switch the plan assumes otherwise
    (by its effective value: the last element wins), or one that would blind the SLO rules."""
    args = list(model.extra_args)
    problems: list[Problem] = []
    last: dict[str, tuple[int, bool]] = {}  # assumed switch → (index, value) of the element that wins
    for j in option_indices(args):
        arg = args[j]
        setting = flag_setting(arg)
        if setting is None:
            continue  # not a flag of the pinned vLLM: refused by the flag check (models.py)
        dest, value = setting
        owner = OWNERS.get(dest)
        if dest == "enable_prefix_caching" and isinstance(model.layout, PdLayoutConfig):
            owner = PlatformOwned("a prefill/decode layout's KV connector decides it: MoRI-IO needs it off")
        if owner is not None:
            problems.append(Problem(keys(f"extra_args[{j}]"), _owner_message(arg, owner, model, keys)))
        elif dest in OBSERVABILITY_DESTS:
            problems.append(Problem(keys(f"extra_args[{j}]"), f"{arg!r} is not allowed: {OBSERVABILITY_DESTS[dest]}"))
        elif value is not None:
            last[dest] = (j, value)
    for dest, (j, value) in last.items():
        if dest == "enable_prefix_caching" and value:
            problems.append(Problem(keys(f"extra_args[{j}]"), (
                f"{args[j]!r} is already set by the platform (every colocated engine runs with prefix caching on); remove it")))
            continue
        assumed = _assumed(dest, model)
        if assumed is not None and value != assumed[0]:
            want, why = assumed
            what = dest.removeprefix("enable_").replace("_", " ")
            problems.append(Problem(keys(f"extra_args[{j}]"), (
                f"{args[j]!r} turns {what} {'on' if value else 'off'} (vLLM keeps the last element that sets it), but the plan "
                f"assumes it {'on' if want else 'off'}: {why}; remove it")))
    return problems
