"""How long a vLLM replica takes from container start to serving, per weight source.

One model for three jobs: the startup probe's budget (deliberately slow: a probe that gives up
early kills a healthy pod in a loop), the autoscaler's scale-up policy (a replica that needs 25
minutes must be asked for earlier and in larger steps than one that needs 5), and the plan's line
"a new replica serves after ~N min from <source>". A measured time-to-ready (`infra bench` →
provenance `ready_seconds`) replaces the model when it was measured from the same source.

    fetch   weights / the replica's share of the source's throughput (below)
    copy    weights per GPU / HBM_COPY_BYTES_PER_S (safetensors → HBM, ranks in parallel); the
            Run:ai streamer copies while it reads, so for Spaces only the slower of the two counts
    warm-up kernel JIT, torch.compile and graph capture: COLD_WARMUP_S, or WARM_WARMUP_FACTOR of
            it when the compile caches (VLLM_CACHE_ROOT, AITER, Triton) already hold this
            image + model + layout
    total   fetch (+ copy) + warm-up: the median the plan shows; × SAFETY_FACTOR for the probe

Throughput of one replica by source, with what it is shared by (`concurrent_loaders`: replicas
of the model loading at the same moment, e.g. the first rollout or a scale-up step; those on the
same node, at most `replicas_per_node`, also share its network and its NFS client):

- Hugging Face: HF_BYTES_PER_S per pod, at most the node's public network. Assumed (no public
  figure for Hub → DO): published pulls of ~240 GB checkpoints take tens of minutes.
- NFS: one NFSv4.1 client per node, NFS_CLIENT_BYTES_PER_S, shared by the node's loaders; and the
  share's NFS_SHARE_BYTES_PER_S[tier], shared by every loader. DigitalOcean publishes no
  throughput per tier ("sustained higher throughput and multi-node scaling" for high,
  docs.digitalocean.com/products/nfs/details/features): both figures are ASSUMPTIONS, the client
  one the same as before this model; measure with `infra bench` and the plan uses the measurement.
- Spaces: the Run:ai streamer opens `streamer_concurrency` connections per GPU rank (distributed
  streaming: every rank of the replica reads its part, run-ai/runai-model-streamer and vLLM 0.33
  `runai_streamer_loader.py`) at SPACES_BYTES_PER_S_PER_CONNECTION each, at most the node's public
  network (Spaces endpoints are public), and the bucket's request limit × the streamer's 8 MiB
  object-store chunk (500 req/s, docs.digitalocean.com/products/spaces/details/limits;
  RUNAI_STREAMER_CHUNK_BYTESIZE default, streamer docs/src/env-vars.md), shared by every loader.
  The streamer's published S3 figure is 15 GB in 4.88 s at concurrency 32 (≈ 3 GB/s, ≈ 96 MB/s
  per connection; docs/src/benchmarks.md, AWS same region); no Spaces figure is published, so
  the per-connection rate is an ASSUMPTION at about half of that.
- local disk: LOCAL_BYTES_PER_S.

A replica over N nodes (a LeaderWorkerSet group, `nodes_per_replica`) loads on its N pods at once,
one per node: each pod reads the checkpoint through its own node (its public network, its NFS
client) in parallel with the others, and the group serves when all have loaded — in about one
pod's time — but all N count as loaders of what the whole fleet shares (the NFS share, the Spaces
bucket's request limit). A group's scale-up is one step of N new nodes provisioned together.

A scale-up onto a new node adds the node's provisioning and the image pull (NODE_PROVISION_S,
IMAGE_PULL_S: ASSUMPTIONS; the pre-pull DaemonSet cannot help a node that does not exist yet).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.catalog.models import ModelArch

SOURCES = ("huggingface", "nfs", "spaces", "local")
SOURCE_LABELS = {
    "huggingface": "Hugging Face",
    "nfs": "the NFS cache",
    "spaces": "the Spaces bucket",
    "local": "local disk",
}

HF_BYTES_PER_S = 150e6  # ASSUMED, per pod
NFS_CLIENT_BYTES_PER_S = 350e6  # ASSUMED, one NFSv4.1 mount per node (no nconnect)
NFS_SHARE_BYTES_PER_S = {"standard": 350e6, "high": 1.0e9}  # ASSUMED, the whole share
SPACES_BYTES_PER_S_PER_CONNECTION = 50e6  # ASSUMED; AWS S3 ≈ 96 MB/s in the streamer's benchmark
STREAMER_OBJECT_CHUNK_BYTES = 8 * 1024 * 1024  # RUNAI_STREAMER_CHUNK_BYTESIZE default for object stores
SPACES_BUCKET_REQUESTS_PER_S = 500  # documented per-bucket floor
SPACES_BUCKET_BYTES_PER_S = SPACES_BUCKET_REQUESTS_PER_S * STREAMER_OBJECT_CHUNK_BYTES  # ≈ 4.2 GB/s
NODE_PUBLIC_BYTES_PER_S = 10e9 / 8  # ASSUMED 10 Gbps public network per GPU Droplet (private: 25 Gbps)
LOCAL_BYTES_PER_S = 1.5e9
HBM_COPY_BYTES_PER_S = 1.5e9  # per GPU
COLD_WARMUP_S = {"dense": 180.0, "moe": 300.0}
WARM_WARMUP_FACTOR = 0.4  # ASSUMED: a compile-cache hit skips torch.compile and AITER JIT, not graph capture
SAFETY_FACTOR = 1.5
NODE_PROVISION_S = 600  # ASSUMED: GPU Droplet creation + DOKS join
IMAGE_PULL_S = 300  # ASSUMED: the multi-GB vLLM ROCm image on a fresh node


@dataclass(frozen=True)
class WeightSource:
    """Where a replica reads its weights, with what decides its throughput."""

    kind: str  # one of SOURCES
    nfs_tier: str = "high"
    streamer_concurrency: int = 16

    def __post_init__(self):
        if self.kind not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {self.kind!r}")

    @property
    def label(self) -> str:
        return SOURCE_LABELS[self.kind]


@dataclass(frozen=True)
class LoadEstimate:
    """One replica's load from `source` under the given contention, in seconds."""

    source: str
    weight_gb: float
    bytes_per_s: float  # this replica's share of the source
    limited_by: str  # what caps bytes_per_s
    fetch_s: float
    copy_s: float
    warmup_s: float
    compile_cache_warm: bool
    concurrent_loaders: int
    overlapped: bool  # the copy runs while the weights stream (Spaces)

    @property
    def total_s(self) -> float:
        """The median estimate: what the plan shows."""
        body = max(self.fetch_s, self.copy_s) if self.overlapped else self.fetch_s + self.copy_s
        return body + self.warmup_s

    @property
    def budget_s(self) -> int:
        """The conservative estimate (× SAFETY_FACTOR) the startup probe starts from."""
        return int(round(self.total_s * SAFETY_FACTOR))

    def scale_up_s(self) -> int:
        """A new replica on a new node: node provisioning + image pull + this load."""
        return int(round(NODE_PROVISION_S + IMAGE_PULL_S + self.total_s))

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "weights_gb": round(self.weight_gb, 1),
            "gb_per_s": round(self.bytes_per_s / 1e9, 3),
            "limited_by": self.limited_by,
            "fetch_s": round(self.fetch_s),
            "copy_s": round(self.copy_s),
            "warmup_s": round(self.warmup_s),
            "compile_cache_warm": self.compile_cache_warm,
            "concurrent_loaders": self.concurrent_loaders,
            "seconds": round(self.total_s),
        }


def _limit(candidates: dict[str, float]) -> tuple[float, str]:
    name = min(candidates, key=lambda k: candidates[k])
    return candidates[name], name


def source_bytes_per_s(
    source: WeightSource, *, gpus_per_replica: int = 1, replicas_per_node: int = 1, concurrent_loaders: int = 1
) -> tuple[float, str]:
    """(bytes/s one replica reads, what limits it) while `concurrent_loaders` replicas load."""
    fleet = max(1, concurrent_loaders)
    on_node = max(1, min(replicas_per_node, fleet))
    node_net = NODE_PUBLIC_BYTES_PER_S / on_node
    if source.kind == "huggingface":
        return _limit({"Hugging Face download per pod": HF_BYTES_PER_S, "node public network": node_net})
    if source.kind == "nfs":
        return _limit(
            {
                "NFS client per node": NFS_CLIENT_BYTES_PER_S / on_node,
                f"NFS share ({source.nfs_tier} tier)": NFS_SHARE_BYTES_PER_S[source.nfs_tier] / fleet,
            }
        )
    if source.kind == "spaces":
        connections = source.streamer_concurrency * max(1, gpus_per_replica)
        return _limit(
            {
                f"{connections} Spaces connections": connections * SPACES_BYTES_PER_S_PER_CONNECTION,
                "node public network": node_net,
                "Spaces bucket request limit": SPACES_BUCKET_BYTES_PER_S / fleet,
            }
        )
    return LOCAL_BYTES_PER_S, "local disk"


def estimate_load(
    arch: ModelArch,
    source: WeightSource,
    *,
    gpus_per_replica: int = 1,
    replicas_per_node: int = 1,
    concurrent_loaders: int = 1,
    compile_cache_warm: bool = False,
) -> LoadEstimate:
    """Seconds from container start to a healthy `/health` for one replica (see the module doc)."""
    total = arch.weight_bytes_total
    rate, limited_by = source_bytes_per_s(
        source, gpus_per_replica=gpus_per_replica, replicas_per_node=replicas_per_node, concurrent_loaders=concurrent_loaders
    )
    cold = COLD_WARMUP_S["moe" if arch.is_moe else "dense"]
    return LoadEstimate(
        source=source.kind,
        weight_gb=total / 1e9,
        bytes_per_s=rate,
        limited_by=limited_by,
        fetch_s=total / rate,
        copy_s=total / max(1, gpus_per_replica) / HBM_COPY_BYTES_PER_S,
        warmup_s=cold * (WARM_WARMUP_FACTOR if compile_cache_warm else 1.0),
        compile_cache_warm=compile_cache_warm,
        concurrent_loaders=max(1, concurrent_loaders),
        overlapped=source.kind == "spaces",
    )


def estimated_load_seconds(
    arch: ModelArch, *, source: str = "huggingface", concurrent_loaders: int = 1, gpus_per_replica: int = 1
) -> int:
    """Conservative seconds from container start to a healthy `/health` (cold caches, × SAFETY_FACTOR).

    source: "huggingface" (no cache), "nfs" (shared weight cache, high tier), "spaces" (bucket,
    streamer defaults) or "local" (weights on node disk).
    """
    estimate = estimate_load(
        arch, WeightSource(source), gpus_per_replica=gpus_per_replica, concurrent_loaders=concurrent_loaders
    )
    return estimate.budget_s


def minutes(seconds: float) -> int:
    """Whole minutes for a plan line, never 0 for a positive time."""
    return max(1, math.ceil(seconds / 60)) if seconds > 0 else 0


@dataclass(frozen=True)
class ReadinessPlan:
    """A model's time-to-ready from its weight source, as each consumer needs it.

    first_start: every replica of the first rollout loading at once, caches cold — what the
        startup probe must tolerate.
    new_replica: one more replica, with the compile cache as a scale-up finds it (warm on the
        shared NFS cache, cold on a new node's disk otherwise).
    measured_s: pod start → Ready as `infra bench` measured it from the same source (provenance
        `ready_seconds`), which replaces the model where it is known.
    """

    source: WeightSource
    first_start: LoadEstimate
    new_replica: LoadEstimate
    measured_s: float | None = None

    @property
    def serving_after_s(self) -> int:
        """Seconds from a new replica's pod start to serving: measured, else the model's median."""
        return int(round(self.measured_s if self.measured_s is not None else self.new_replica.total_s))

    @property
    def rollout_s(self) -> int:
        """Seconds a rollout's new pod takes to Ready: measured, else the first start's median
        (caches cold: a new image or layout compiles afresh). The slow-start alert fires at 2×."""
        return int(round(self.measured_s if self.measured_s is not None else self.first_start.total_s))

    @property
    def scale_up_s(self) -> int:
        """A replica that needs a new node: provisioning + image pull + serving_after_s."""
        return NODE_PROVISION_S + IMAGE_PULL_S + self.serving_after_s

    @property
    def probe_budget_s(self) -> int:
        """Conservative load time for the startup probe: the model's, or 1.5× a slower measurement."""
        measured = int(round(self.measured_s * SAFETY_FACTOR)) if self.measured_s is not None else 0
        return max(self.first_start.budget_s, measured)

    def to_json(self) -> dict:
        return {
            "source": self.source.kind,
            "serving_after_seconds": self.serving_after_s,
            "serving_after_source": "measured" if self.measured_s is not None else "model",
            "scale_up_seconds": self.scale_up_s,
            "rollout_seconds": self.rollout_s,
            "startup_budget_seconds": self.probe_budget_s,
            "summary": self.summary(),
            "new_replica": self.new_replica.to_json(),
            "first_start": self.first_start.to_json(),
        }

    def summary(self) -> str:
        """`a new replica serves after ~8 min from the Spaces bucket (1.25 GB/s, node public network); ~23 min with a new node`"""
        rate = self.new_replica
        how = (
            "measured by infra bench"
            if self.measured_s is not None
            else f"{rate.bytes_per_s / 1e9:.2f} GB/s, limited by {rate.limited_by}"
            + ("; compile cache warm" if rate.compile_cache_warm else "; compile cache cold")
        )
        return (
            f"a new replica serves after ~{minutes(self.serving_after_s)} min from {self.source.label} ({how}); "
            f"~{minutes(self.scale_up_s)} min when it needs a new node"
        )


def plan_readiness(
    arch: ModelArch,
    source: WeightSource,
    *,
    gpus_per_replica: int,
    replicas_per_node: int,
    first_rollout_replicas: int,
    measured_ready_seconds: float | None = None,
    nodes_per_replica: int = 1,
) -> ReadinessPlan:
    """The readiness figures of one model (see ReadinessPlan). The compile cache is shared only
    on NFS; elsewhere it lives on each node, so a replica on a new node compiles again. A replica
    over `nodes_per_replica` nodes loads on that many pods at once (see the module doc)."""
    pods = max(1, nodes_per_replica)
    first = estimate_load(
        arch,
        source,
        gpus_per_replica=gpus_per_replica,
        replicas_per_node=replicas_per_node,
        concurrent_loaders=max(1, first_rollout_replicas) * pods,
    )
    new = estimate_load(
        arch,
        source,
        gpus_per_replica=gpus_per_replica,
        replicas_per_node=replicas_per_node,
        concurrent_loaders=pods,
        compile_cache_warm=source.kind == "nfs",
    )
    return ReadinessPlan(source=source, first_start=first, new_replica=new, measured_s=measured_ready_seconds)
