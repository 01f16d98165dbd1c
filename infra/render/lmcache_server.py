"""The LMCache server `kv_offload: lmcache` runs beside vLLM, inside the engine container.

vLLM's `--kv-offloading-backend lmcache` configures LMCache's multi-process connector
(`LMCacheMPConnector`) and does not pass `--kv-offloading-size` on: the tier's capacity is the
standalone LMCache server's, which the connector reaches at tcp://localhost:5555 (vLLM 0.32.0
wheel, vllm/config/vllm.py `_post_init_kv_transfer_config`; LMCache docs, "Multi-process mode").
The server maps the engine's KV caches through GPU IPC handles, so it must see the GPUs: it runs
in the engine container (which holds them, with hostIPC on AMD) rather than in a sidecar that has
none. A shell starts `lmcache server` in the background with an L1 (host memory) buffer of the
tier's size, then execs `vllm serve "$@"`: the container's args stay the checked flag list.

The server's flags are those of the vLLM ROCm image built with LMCache (vLLM PR #51208,
`docker/Dockerfile.rocm --build-arg INSTALL_LMCACHE=true`: `lmcache server --host --port
--l1-size-gb`); an image with another LMCache release may name them differently, which is why
`kv_offload: lmcache` needs `models[].image` to be set deliberately.
"""

from __future__ import annotations

from infra.domain import KvOffload

LMCACHE_PORT = 5555  # LMCacheMPConnector's default server address: tcp://localhost:5555


def uses_lmcache_server(offload: KvOffload | None) -> bool:
    return offload is not None and offload.kind == "lmcache"


def engine_command_with_lmcache(offload: KvOffload) -> list[str]:
    """`/bin/sh -c 'lmcache server ... & exec vllm serve "$@"'` for the engine container."""
    script = (
        f"lmcache server --host 127.0.0.1 --port {LMCACHE_PORT} --l1-size-gb {offload.size_gib:g} & "
        'exec vllm serve "$@"'
    )
    return ["/bin/sh", "-c", script, "vllm-serve"]
