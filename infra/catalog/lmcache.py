"""LMCache as `kv_offload: lmcache` uses it: the server's command line, and which images carry it.

`lmcache server` (the multi-process server LMCacheMPConnector talks to) first ships in LMCache
0.4.3 (`lmcache/cli/commands/server.py`; 0.4.2 has only `python -m lmcache.v1.multiprocess.server`).
Every release since needs an eviction policy for its L1 buffer: 0.4.3 to 0.5.x declare
`--eviction-policy` with `required=True` (lmcache/v1/distributed/config.py
`add_storage_manager_args`), 0.5.6 makes it optional on the parser but `parse_args_to_config`
raises "Legacy L1 configuration requires --l1-size-gb and --eviction-policy" — either way a server
started without it exits at once, and vLLM starts anyway and finds no server at tcp://localhost:5555.
Checked in the wheels of 0.4.2, 0.4.3, 0.4.5, 0.5.0 and 0.5.6 from PyPI.

One server serves every engine that connects to it (LMCache's multi-process mode exists for
that): the data-parallel ranks of a replica, which share the engine container, share one server
and its one L1 buffer (infra/render/lmcache_server.py).

Which images carry LMCache: vLLM's CUDA release images are built with INSTALL_KV_CONNECTORS=true
(docker/Dockerfile installs requirements/kv_connectors.txt: `lmcache >= 0.3.9`) from v0.14.0;
docker/Dockerfile.rocm installs no KV connector library, so `vllm/vllm-openai-rocm` and AMD's
`rocm/vllm*` images carry none (vLLM docker/Dockerfile.rocm, final stage); LMCache publishes its
own vLLM image, `lmcache/vllm-openai`. Any other image is the user's build: nothing can be told.
"""

from __future__ import annotations

from infra.catalog import versions
from infra.catalog.engine_images import repository

SERVER_MIN_VERSION = (0, 4, 3)  # the first LMCache release with `lmcache server`
EVICTION_POLICY = "LRU"  # the policy of the server's L1 buffer (choices: LRU, ARC, IsolatedLRU, noop)
SERVER_PORT = 5555  # LMCacheMPConnector's default server address: tcp://localhost:5555

# vLLM's CUDA images bundle the KV connectors (LMCache among them) from this release.
CUDA_IMAGE_BUNDLES_FROM = (0, 14, 0)
_WITHOUT = {
    "vllm/vllm-openai-rocm": "vLLM's ROCm image: docker/Dockerfile.rocm installs no KV connector library",
    "rocm/vllm": "AMD's ROCm vLLM image: built from docker/Dockerfile.rocm, which installs no KV connector library",
    "rocm/vllm-dev": "AMD's ROCm vLLM image: built from docker/Dockerfile.rocm, which installs no KV connector library",
}
_WITH = {
    "lmcache/vllm-openai": "LMCache's own vLLM image",
}


def lmcache_in_image(image: str) -> tuple[bool | None, str]:
    """(whether `image` carries LMCache — None when it cannot be told —, why)."""
    repo = repository(image)
    if repo in _WITH:
        return True, _WITH[repo]
    if repo in _WITHOUT:
        return False, _WITHOUT[repo]
    if repo == "vllm/vllm-openai":
        found = versions.vllm_version_of_image(image)
        if found is None:
            return None, "a vllm/vllm-openai tag that names no vLLM release"
        if found < CUDA_IMAGE_BUNDLES_FROM:
            return False, (f"vLLM {'.'.join(map(str, found))}: vLLM's CUDA images bundle the KV connectors (LMCache) from "
                           f"v{'.'.join(map(str, CUDA_IMAGE_BUNDLES_FROM))}")
        return True, "vLLM's CUDA image, built with INSTALL_KV_CONNECTORS=true (requirements/kv_connectors.txt)"
    return None, "a custom image"
