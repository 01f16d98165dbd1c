"""The LMCache server `kv_offload: lmcache` runs beside vLLM, inside the engine container.

vLLM's `--kv-offloading-backend lmcache` configures LMCache's multi-process connector
(`LMCacheMPConnector`) and does not pass `--kv-offloading-size` on: the tier's capacity is the
standalone LMCache server's, which the connector reaches at tcp://localhost:5555 (vLLM 0.32.0
wheel, vllm/config/vllm.py `_post_init_kv_transfer_config`; LMCache docs, "Multi-process mode").
The server maps the engine's KV caches through GPU IPC handles, so it must see the GPUs: it runs
in the engine container (which holds them, with hostIPC on AMD) rather than in a sidecar that has
none. A shell starts `lmcache server` in the background with an L1 (host memory) buffer of the
tier's size, then execs `vllm serve "$@"`: the container's args stay the checked flag list.

One server per engine container, shared by every data-parallel rank of the replica: each rank's
connector reaches the same tcp://localhost:5555, and LMCache's multi-process server exists to
serve several engines. The tier's size is therefore the pod's — one L1 buffer, not one per rank —
and the plan counts it once per pod (infra/planner/kv_offload.py `offload_room_gib`).

The flags are those every LMCache release with `lmcache server` (0.4.3 and later) accepts:
`--host`, `--port` (lmcache/v1/multiprocess/config.py), `--l1-size-gb` and `--eviction-policy`
(lmcache/v1/distributed/config.py), the last two required — without an eviction policy the
server exits at start and vLLM finds no server (infra/catalog/lmcache.py has the evidence).
"""

from __future__ import annotations

from infra.catalog.lmcache import EVICTION_POLICY, SERVER_PORT
from infra.domain import KvOffload

LMCACHE_PORT = SERVER_PORT  # LMCacheMPConnector's default server address: tcp://localhost:5555


def uses_lmcache_server(offload: KvOffload | None) -> bool:
    return offload is not None and offload.kind == "lmcache"


def lmcache_server_args(offload: KvOffload) -> list[str]:
    """`lmcache server` and its flags: bound to the pod's loopback, an L1 of the tier's size."""
    return ["lmcache", "server", "--host", "127.0.0.1", "--port", str(LMCACHE_PORT),
            "--l1-size-gb", f"{offload.size_gib:g}", "--eviction-policy", EVICTION_POLICY]


def engine_command_with_lmcache(offload: KvOffload) -> list[str]:
    """`/bin/sh -c 'lmcache server ... & exec vllm serve "$@"'` for the engine container."""
    script = f"{' '.join(lmcache_server_args(offload))} & exec vllm serve \"$@\""
    return ["/bin/sh", "-c", script, "vllm-serve"]
