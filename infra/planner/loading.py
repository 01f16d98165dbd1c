"""How long vLLM takes from container start to serving: the budget for its startup probe.

A conservative estimate, deliberately on the slow side (a startup probe that gives up too early
kills a healthy pod in a loop; one that waits too long only delays noticing a broken one):

    download (Hugging Face: first pull; NFS: read from the shared cache)  bytes / source throughput
  + copy to GPU memory (safetensors → HBM, each rank its shard in parallel) bytes per GPU / 1.5 GB/s
  + engine warm-up: kernel JIT/compile and graph capture                 fixed, longer for MoE
  × 1.5 safety factor

Assumed sustained throughputs per pod: Hugging Face 150 MB/s (public internet into one Droplet;
published runs of ~240 GB models take tens of minutes), NFS 350 MB/s shared by the pods loading at
the same moment (DO NFS over 25 Gbps private networking, far below line rate for one NFSv4.1
client), a local disk 1.5 GB/s.
"""

from __future__ import annotations

from infra.catalog.models import ModelArch

SOURCE_BYTES_PER_S = {"huggingface": 150e6, "nfs": 350e6, "local": 1.5e9}
HBM_COPY_BYTES_PER_S = 1.5e9
WARMUP_S_DENSE = 180.0
WARMUP_S_MOE = 300.0
SAFETY_FACTOR = 1.5


def estimated_load_seconds(
    arch: ModelArch, *, source: str = "huggingface", concurrent_loaders: int = 1, gpus_per_replica: int = 1
) -> int:
    """Conservative seconds from container start to a healthy `/health` for one replica.

    source: "huggingface" (no cache), "nfs" (shared weight cache) or "local" (weights on node disk).
    concurrent_loaders: pods reading the same NFS share at once (they split its throughput).
    """
    if source not in SOURCE_BYTES_PER_S:
        raise ValueError(f"source must be one of {sorted(SOURCE_BYTES_PER_S)}, got {source!r}")
    total = arch.weight_bytes_total
    throughput = SOURCE_BYTES_PER_S[source]
    if source == "nfs":
        throughput /= max(1, concurrent_loaders)
    download_s = total / throughput
    copy_s = total / max(1, gpus_per_replica) / HBM_COPY_BYTES_PER_S
    warmup_s = WARMUP_S_MOE if arch.is_moe else WARMUP_S_DENSE
    return int(round((download_s + copy_s + warmup_s) * SAFETY_FACTOR))
