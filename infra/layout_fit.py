"""Whether each model's layout fits its model and node: a planning question, so it lives beside
plan_stack (which asks it before planning) and not in the config, which knows no planner.

Every problem is reported at the key the user wrote (`models[i].layout`, `...nodes_per_replica`,
`gpu_pools[j].nodes`), with the same words the config used to give.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.catalog import versions
from infra.catalog.gpus import GPU_SIZES
from infra.catalog.models import resolve_model
from infra.config import (
    NS,
    GpuPoolConfig,
    ModelConfig,
    PdLayoutConfig,
    StackConfig,
    hf_config_path,
    load_stack_file,
)
from infra.config.model_keys import ModelKeys, candidate_as_model, candidate_keys, candidate_only, model_keys
from infra.domain import longest_prompt_tokens
from infra.errors import ConfigError, Problem
from infra.planner import check_layout
from infra.planner.disaggregation import CONNECTORS, pd_problems
from infra.planner.memory import memory_per_gpu


def require_layouts_fit(cfg: StackConfig, *, source: str | None = None) -> StackConfig:
    """`cfg` itself when every model's context and layout fit; else one ConfigError with every misfit
    (`source` names the stack file in it)."""
    misfits = layout_fit_problems(cfg)
    if misfits:
        raise ConfigError(misfits, source=source)
    return cfg


def load_plannable_stack_file(stack: str, root: Path) -> StackConfig:
    """`stacks/Pulumi.<stack>.yaml` validated and its layouts fitting: what a command that acts on a
    stack without planning all of it (`infra doctor`, `infra tune calibrate`) refuses, as `infra plan` does."""
    return require_layouts_fit(load_stack_file(stack, root), source=f"stacks/Pulumi.{stack}.yaml")


def layout_fit_problems(cfg: StackConfig) -> list[Problem]:
    """Every model's context and layout against its architecture and pool, in model order."""
    problems: list[Problem] = []
    names = [p.name for p in cfg.gpu_pools]
    for i, model in enumerate(cfg.models):
        pool, pool_at = cfg.pool(model.pool), f"{NS}gpu_pools[{names.index(model.pool)}]"
        own = model_layout_problems(model, pool, model_keys(i), cfg.base_dir, pool_at)
        problems += own
        candidate = candidate_as_model(model)
        if candidate is not None and candidate.layout.nodes_per_replica == 1:  # one over nodes: the config refuses it
            keys = candidate_keys(i, model.rollout.candidate)
            problems += candidate_only(model_layout_problems(candidate, pool, keys, cfg.base_dir, pool_at), own)
    return problems


def model_layout_problems(model: ModelConfig, pool: GpuPoolConfig, keys: ModelKeys, base_dir: Path | None, pool_at: str = "") -> list[Problem]:
    """Check the model's context and an explicit layout against model and node (the config has
    already made sure the architecture resolves). `keys`: where the model's keys are written — a
    model's, or those of the model a rollout candidate would become."""
    hf_path = hf_config_path(model, base_dir)
    arch = resolve_model(model.source, str(hf_path) if hf_path else None)
    problems = _context_problems(model, arch, keys)
    if model.layout is None:
        return problems
    if isinstance(model.layout, PdLayoutConfig):
        return problems + _pd_layout_problems(model, pool, arch, keys, pool_at)
    if model.layout.nodes_per_replica > 1:
        multi = _multi_node_layout_problems(model, pool, keys, pool_at)
        if multi:
            return problems + multi
    return problems + [Problem(keys("layout"), msg) for msg in check_layout(arch, pool.gpu, model.layout.to_layout())]


def _whole_groups_problems(pool: GpuPoolConfig, pool_at: str, nodes: int, what) -> list[Problem]:
    """The pool's node count (or min/max) in whole groups of `nodes` (a replica or a P/D unit over
    nodes): one problem at the first count that is not, `what(count)` saying what it is not."""
    for name, count in (("min_nodes", pool.min_node_count), ("max_nodes", pool.max_node_count)):
        if count % nodes:
            label = "nodes" if pool.nodes is not None else name
            return [Problem(f"{pool_at}.{label}", f"{what(count)} ({', '.join(str(nodes * k) for k in range(1, 4))}, ...)")]
    return []


def _multi_node_layout_problems(model: ModelConfig, pool: GpuPoolConfig, keys: ModelKeys, pool_at: str) -> list[Problem]:
    """A replica over several nodes against its pool: a fabric pool, big enough, node counts in whole
    replicas, every GPU of its nodes used. One problem each, before the shape checks."""
    lay = model.layout
    n, gpus = lay.nodes_per_replica, pool.gpu.gpus
    key = keys("layout.nodes_per_replica")
    if not pool.fabric and pool.node_selector is not None:  # an existing cluster's pool (cluster.existing)
        return [
            Problem(
                key,
                f"{n} spans nodes, which needs DigitalOcean's RDMA fabric pools; multi-node replicas are not available in "
                f"existing-cluster mode (cluster.existing: the stack does not attach a fabric). Allowed: 1",
            )
        ]
    if not pool.fabric:
        fabric_sizes = sorted(slug for slug, size in GPU_SIZES.items() if size.fabric)
        return [
            Problem(
                key,
                f"{n} spans nodes, which needs an RDMA fabric pool; pool {pool.name!r} ({pool.size}) has fabric: false. "
                f"Allowed: 1, or a pool of a fabric size ({', '.join(fabric_sizes)}) with fabric: true",
            )
        ]
    if n > pool.max_node_count:
        return [
            Problem(
                key,
                f"{n}: one replica is larger than pool {pool.name!r}, which has at most {pool.max_node_count} node(s); "
                f"allowed: at most {pool.max_node_count}, or more nodes in the pool",
            )
        ]
    problems = []
    if lay.tp * lay.dp != n * gpus:
        problems.append(
            Problem(
                keys("layout"),
                f"gpus_per_replica tp × dp = {lay.tp}×{lay.dp} = {lay.tp * lay.dp} is not nodes_per_replica × GPUs per node = "
                f"{n}×{gpus} = {n * gpus}; a replica over nodes uses every GPU of them (with ep: dp = {n * gpus} / tp; without: tp = {n * gpus})",
            )
        )
    if lay.replicas_per_node != 1:
        problems.append(Problem(keys("layout.replicas_per_node"), f"{lay.replicas_per_node} with nodes_per_replica {n}; allowed: 1 (a replica over nodes is the only one on each)"))
    problems += _whole_groups_problems(
        pool, pool_at, n, lambda count: f"{count} is not a multiple of models[{model.name!r}].layout.nodes_per_replica {n}; allowed: whole replicas"
    )
    return problems


# MoRI is bundled in vllm/vllm-openai-rocm from v0.21.0 (MoRIIOConnector itself from vLLM 0.14.0);
# vllm docs/features/moriio_connector_usage.md, serving-research B1.
MORIIO_MIN_ROCM_IMAGE = (0, 21, 0)


def _pd_layout_problems(model: ModelConfig, pool: GpuPoolConfig, arch: Any, keys: ModelKeys, pool_at: str) -> list[Problem]:
    """A P/D layout against the pool (connector, nodes, fabric) and the model's engine image."""
    gpu = pool.gpu
    pd = model.layout.to_layout(gpu.gpus)
    problems = []
    if gpu.vendor not in CONNECTORS:
        allowed = ", ".join(f"{v} GPUs ({c})" for v, c in sorted(CONNECTORS.items()))
        return [Problem(keys("layout"), f"{pd.name} needs a KV connector; {gpu.slug} ({gpu.vendor}) has none. Supported: {allowed}")]
    if gpu.vendor == "amd" and model.image is not None:
        version = versions.vllm_version_of_image(model.image)
        if version is not None and version < MORIIO_MIN_ROCM_IMAGE:
            problems.append(
                Problem(
                    keys("image"),
                    f"{model.image!r} (vLLM {'.'.join(map(str, version))}) does not ship MoRIIOConnector for P/D layout {pd.name}; "
                    f"give a vllm/vllm-openai-rocm image of v{'.'.join(map(str, MORIIO_MIN_ROCM_IMAGE))} or later, or a colocated layout",
                )
            )
    for msg in pd_problems(arch, gpu, pd, fabric=pool.fabric, pool_nodes=pool.max_node_count):
        problems.append(Problem(keys("layout"), f"{pd.name}: {msg}"))
    if pd.spans_nodes and not problems:
        k = pd.nodes_per_unit
        problems += _whole_groups_problems(
            pool, pool_at, k, lambda count: f"{count} is not whole units of models[{model.name!r}].layout {pd.name}, which spans {k} nodes; allowed"
        )
    if not problems:
        context = model.workload.input_tokens + model.workload.output_tokens
        kv = pd.with_(kv_cache_dtype="fp8") if pd.kv_cache_dtype.startswith("fp8") else pd
        for role, tokens in (("prefill", model.workload.input_tokens + 1), ("decode", context)):
            mem = memory_per_gpu(arch, gpu, kv.side(role), tokens)
            if not mem.fits:
                problems.append(Problem(keys("layout"), f"{pd.name}: the {role} engine of TP{kv.side(role).tp} does not fit: {mem.problem}"))
    if model.autoscaling.enabled and pd.spans_nodes:
        problems.append(
            Problem(
                keys("autoscaling.enabled"),
                f"true is not supported with P/D layout {pd.name}, whose unit spans {pd.nodes_per_unit} nodes: its engines are whole "
                "nodes paired over the fabric and the pool counts whole units, so one side cannot grow alone; set it to false, "
                "or use a unit within one node",
            )
        )
    return problems


def _context_problems(model: ModelConfig, arch: Any, keys: ModelKeys) -> list[Problem]:
    """A request longer than the model's context (or an explicit max_model_len) is one vLLM
    refuses outright: a typical request, and with sessions the last turn of a conversation, whose
    prompt re-sends the whole history (infra/domain.py `longest_prompt_tokens`)."""
    w = model.workload
    need = w.input_tokens + w.output_tokens
    if need > arch.max_context:
        return [
            Problem(
                keys("workload"),
                f"input_tokens + output_tokens = {w.input_tokens} + {w.output_tokens} = {need} exceeds the "
                f"{arch.max_context}-token context of {arch.id}; vLLM would refuse every such request. Give at most "
                f"{arch.max_context} tokens in total, or serve a long-context variant",
            )
        ]
    limit = model.layout.max_model_len if model.layout is not None else None
    if limit is not None and need > limit:
        return [
            Problem(
                keys("layout.max_model_len"),
                f"{limit} is shorter than a typical request (input_tokens + output_tokens = {need}); vLLM would refuse "
                f"it. Give at least {need} (at most {arch.max_context}), or leave it unset",
            )
        ]
    if not w.turns_per_session > 1:
        return []
    try:
        longest = longest_prompt_tokens(w.to_workload()) + w.output_tokens
    except ValueError:
        return []  # the session shape itself is refused (infra/config/kv_offload.py)
    grows = (f"with turns_per_session {w.turns_per_session} the last turn re-sends the whole conversation: its prompt "
             f"and answer are {longest} tokens (the mean prompt is input_tokens {w.input_tokens})")
    if longest > arch.max_context:
        return [Problem(keys("workload.turns_per_session"), (
            f"{grows}, beyond the {arch.max_context}-token context of {arch.id}; vLLM would refuse the late turns of every "
            "conversation. Lower turns_per_session, input_tokens or output_tokens, or serve a long-context variant"))]
    if limit is not None and longest > limit:
        return [Problem(keys("layout.max_model_len"), (
            f"{limit} is shorter than a conversation's last turn: {grows}; vLLM would refuse the late turns of every "
            f"conversation. Give at least {longest} (at most {arch.max_context}), or leave it unset"))]
    return []
