"""The `vllm serve` command line for one replica of a layout, checked against the pinned release.

The vLLM images' entrypoint is `vllm serve`, so this list is the container's `args` verbatim: the
model (positional), then flags derived from the layout, then the user's `extra_args`. Every flag
is checked against `infra/catalog/vllm_flags.json`, which `scripts/extract_vllm_flags.py`
extracts from the pinned vLLM wheel: a misspelt or removed flag is a config error at plan time
instead of a crash-looping pod after a 20-minute model load.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.catalog.vllm_flags import VLLM_PORT, canonical_flag, flag_tokens, unknown_flags, vllm_flags
from infra.domain import KvOffload, Layout
from infra.errors import Problem, UserError

# Endpoints hit every few seconds by kubelet probes and Prometheus; logging them buries real traffic.
_QUIET_ENDPOINTS = "/health,/metrics"


@dataclass(frozen=True)
class ServeOptions:
    """What the command line needs beyond the layout.

    source: Hugging Face repo id (or a path) passed as the positional model.
    served_model_name: the name clients send in `"model"`.
    max_model_len: context length; None lets vLLM take it from the model config.
    moe: Mixture-of-Experts model (expert parallelism is only valid for these).
    vendor: "amd" | "nvidia" — DP on ROCm needs extra synchronisation settings.
    quantization: passed as `--quantization` when set (pre-quantized checkpoints are detected
        automatically, so this is usually None).
    revision: pin the checkpoint revision (a commit hash) so a re-push upstream cannot change
        what a replica loads.
    drain_seconds: `--shutdown-timeout`: how long vLLM keeps serving in-flight requests after
        SIGTERM (0 would abort them).
    load_args: how weights are loaded when not the default loader (`--load-format runai_streamer
        --model-loader-extra-config ...` for a Spaces bucket); checked like every flag.
    extra_args: user flags appended verbatim (validated against the pinned release).
    node_role: for a layout that spans nodes, "leader" (node 0: serves the API) or "worker"
        (`--headless`, rank offsets from LWS_WORKER_INDEX); None for a single-node replica.
    kv_offload: a host-memory KV tier (`kv_offload_args`); None: the GPU prefix cache only.
    """

    source: str
    served_model_name: str
    max_model_len: int | None = None
    moe: bool = False
    vendor: str = "amd"
    quantization: str | None = None
    revision: str | None = None
    drain_seconds: int = 120
    load_args: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    node_role: str | None = None
    kv_offload: KvOffload | None = None


# Multi-node rendezvous ports (vLLM 0.33 defaults spelt out): the DP coordinator's RPC port on the
# leader, and torch.distributed's master port for TP/PP across nodes.
DP_RPC_PORT = 13345
MASTER_PORT = 29500
# Filled in by the LeaderWorkerSet controller in every container's env (lws api/leaderworkerset/v1
# @ v0.10.0); the kubelet expands `$(VAR)` in args from the container's env.
LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"
WORKER_INDEX = "$(LWS_WORKER_INDEX)"
# The DP rank a worker's first engine takes; the engine container's shell wrapper appends it
# (render/multi_node.py): LWS_WORKER_INDEX × dp ranks per node needs arithmetic the kubelet lacks.
DP_START_RANK_FLAG = "--data-parallel-start-rank"


def multi_node_args(layout: Layout, role: str) -> list[str]:
    """The flags that join one node's pod to a replica over `layout.nodes_per_replica` nodes
    (vLLM's native multi-node, no Ray): with ep, DP ranks over the nodes (`--data-parallel-size-local`
    per node, the leader's address and RPC port; workers `--headless`, their start rank appended by
    the wrapper); without ep, one TP group over the nodes (`--nnodes`, `--node-rank`, `--master-addr`)."""
    nodes = layout.nodes_per_replica
    if layout.ep:
        args = [
            "--data-parallel-size-local", str(layout.dp // nodes),
            "--data-parallel-address", LEADER_ADDRESS,
            "--data-parallel-rpc-port", str(DP_RPC_PORT),
        ]
    else:
        args = [
            "--nnodes", str(nodes),
            "--node-rank", "0" if role == "leader" else WORKER_INDEX,
            "--master-addr", LEADER_ADDRESS,
            "--master-port", str(MASTER_PORT),
        ]
    if role == "worker":
        args += ["--headless"]
    return args


def all2all_backend(layout: Layout, vendor: str) -> str:
    """MoE dispatch/combine kernels. Inside a node: allgather_reducescatter (AMD's DP+EP guidance
    for ROCm, and vLLM 0.33's default). Across nodes on AMD: MoRI EP (`mori_high_throughput`, the
    InterNodeV1 kernels: a colocated replica mixes long prefill chunks into every step, which the
    high-throughput kernels serve; `mori_low_latency` suits decode-only engines)."""
    if layout.multi_node and vendor == "amd":
        return "mori_high_throughput"
    return "allgather_reducescatter"


def kv_offload_args(offload: KvOffload | None) -> list[str]:
    """vLLM's own offloading switch: `--kv-offloading-backend native|lmcache` with
    `--kv-offloading-size` GiB per engine, which turns offloading on (vLLM 0.32.0 wheel,
    vllm/config/vllm.py `_post_init_kv_transfer_config`: native → OffloadingConnector with
    `cpu_bytes_to_use` = the size, summed over the engine's TP ranks; lmcache → LMCacheMPConnector,
    whose capacity is the LMCache server's, render/lmcache_server.py). vLLM writes the connector into
    `--kv-transfer-config` itself, `kv_role: kv_both`: which is why it cannot be combined with a P/D
    layout's connector."""
    if offload is None:
        return []
    return ["--kv-offloading-backend", offload.backend, "--kv-offloading-size", f"{offload.size_gib:g}"]


def vllm_serve_args(layout: Layout, opts: ServeOptions, *, path: str = "") -> list[str]:
    """The argument list after `vllm serve` for one replica of `layout`.

    Raises UserError (naming `path`) for expert parallelism on a dense model, for `extra_args`
    that repeat a flag the layout already sets, and for flags the pinned vLLM does not accept.
    """
    problems: list[Problem] = []
    if layout.ep and not opts.moe:
        problems.append(Problem(f"{path}.layout.ep", "expert parallelism needs a Mixture-of-Experts model"))

    args: list[str] = [opts.source]
    if opts.revision:
        # The tokenizer is read from the same checkpoint; left unset it would be looked up at
        # `main`, which an offline replica (HF_HUB_OFFLINE) with a pinned snapshot does not have.
        args += ["--revision", opts.revision, "--tokenizer-revision", opts.revision]
    args += [
        "--served-model-name",
        opts.served_model_name,
        "--host",
        "0.0.0.0",
        "--port",
        str(VLLM_PORT),
        "--tensor-parallel-size",
        str(layout.tp),
    ]
    if layout.dp > 1:
        args += ["--data-parallel-size", str(layout.dp)]
    if layout.ep:
        args += ["--enable-expert-parallel"]
    if layout.gpus_per_replica > 1:
        # One process per GPU inside the pod; Ray is neither installed nor wanted here.
        args += ["--distributed-executor-backend", "mp"]
    user_flags = {canonical_flag(f) for f in flag_tokens(list(opts.extra_args))}
    if layout.dp > 1 and layout.ep and "--all2all-backend" not in user_flags:
        # Passing the backend keeps the choice explicit should vLLM's default change again; an
        # `--all2all-backend` in extra_args replaces it (MoRI EP needs a NIC its userspace
        # supports: allgather_reducescatter is the fallback over RCCL).
        args += ["--all2all-backend", all2all_backend(layout, opts.vendor)]
    if layout.multi_node:
        if opts.node_role not in ("leader", "worker"):
            problems.append(Problem(f"{path}.layout", f"{layout.name} spans nodes: its pods are rendered as a LeaderWorkerSet leader or worker"))
        else:
            args += multi_node_args(layout, opts.node_role)
    if layout.dp > 1 and opts.vendor == "amd":
        args += ["--disable-nccl-for-dp-synchronization"]
    max_model_len = layout.max_model_len or opts.max_model_len
    if max_model_len:
        args += ["--max-model-len", str(max_model_len)]
    args += [
        "--max-num-seqs",
        str(layout.max_num_seqs),
        "--max-num-batched-tokens",
        str(layout.max_num_batched_tokens),
        "--gpu-memory-utilization",
        f"{layout.gpu_memory_utilization:g}",
        "--kv-cache-dtype",
        layout.kv_cache_dtype,
        "--enable-prefix-caching",
        "--shutdown-timeout",
        str(opts.drain_seconds),
        "--disable-access-log-for-endpoints",
        _QUIET_ENDPOINTS,
    ]
    if opts.quantization:
        args += ["--quantization", opts.quantization]
    args += list(opts.load_args)
    args += kv_offload_args(opts.kv_offload)
    for flag in unknown_flags(list(opts.load_args)):
        problems.append(Problem(f"{path}.load_args", f"{flag} is not a `vllm serve` option in vLLM {vllm_flags()['vllm_version']}"))

    if opts.kv_offload is not None and "--kv-transfer-config" in user_flags:
        # vLLM's offloading switch writes the connector into the transfer config, replacing this one
        problems.append(Problem(f"{path}.extra_args", "--kv-transfer-config cannot be combined with kv_offload (vLLM sets the connector from --kv-offloading-backend)"))
    generated = {canonical_flag(a) for a in args if a.startswith("--")}
    for flag in flag_tokens(list(opts.extra_args)):
        canonical = canonical_flag(flag)
        if canonical in generated:
            problems.append(
                Problem(
                    f"{path}.extra_args", f"{flag} is set from the layout/model spec; change it there instead"
                )
            )
    for flag in unknown_flags(list(opts.extra_args)):
        data = vllm_flags()
        problems.append(
            Problem(
                f"{path}.extra_args", f"{flag} is not a `vllm serve` option in vLLM {data['vllm_version']}"
            )
        )
    if problems:
        raise UserError(problems)
    return args + list(opts.extra_args)
