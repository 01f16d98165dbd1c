"""What makes a replica start fast: weights streamed from Spaces, warm compile caches, pre-pulled images.

Pure functions and plain dicts; `infra/render/model_service.py` places them in the engine pod and
the prefetch Job, `components/warm_start.py` declares the pre-pull DaemonSets. docs/cold-start.md
explains the choices.

Weights from Spaces (`model_cache.kind: spaces`). The prefetch Job copies the checkpoint from
Hugging Face into the bucket once, file by file (download one file to scratch, upload it, delete
it: the system node never holds the whole checkpoint), with the `huggingface_hub` and `boto3`
packages of the vLLM image itself (`boto3` comes with `runai-model-streamer-s3`, which the ROCm
image installs with `runai-model-streamer[s3,gcs,azure]`). Multipart uploads use at most 8 parts
at once: Spaces allows 10 concurrent PUTs per object. A `.complete` object written last marks the
checkpoint as whole; a rerun skips files already uploaded with the right size. The engine then
serves `s3://<bucket>/<key prefix>` with `--load-format runai_streamer`: vLLM pulls the config
and tokenizer files of that prefix to local disk (VLLM_ASSETS_CACHE) and streams the safetensors
into GPU memory; with several GPU ranks, `"distributed": true` lets each rank read its part and
share it over the GPU collective instead of every rank reading the whole checkpoint (vLLM 0.33
`model_loader/runai_streamer_loader.py`, `weight_utils.runai_safetensors_weights_iterator`).

Compile caches. vLLM's torch.compile cache (VLLM_CACHE_ROOT), Triton's (TRITON_CACHE_DIR) and
AITER's JIT modules (AITER_JIT_DIR, ROCm) are kept in a directory keyed by everything that changes
the compiled code — image, checkpoint, revision, layout, engine flags and env — so a new image or
layout starts a new directory instead of reading a stale one. With the NFS cache the directory is
on the share (every replica of the same key reuses it, on any node); without NFS (kind spaces or
none) it is a hostPath on the node's disk, reused by every restart on that node.

No serving container writes that keyed directory (issue 30): a replica answers untrusted prompts,
and a kernel it planted in a shared cache would run in every later replica. Two init containers
of the engine pod do the writing before the engine sees any traffic: `compile-cache-warmup` runs
the engine's own command bound to 127.0.0.1 with the directory read-write until /health answers
(compilation, AITER JIT and graph capture are done by then), marks it warm and exits — at once
when it is already warm; `compile-cache-seed` copies it, mounted read-only, into a per-pod
emptyDir, which is where the engine's VLLM_CACHE_ROOT / TRITON_CACHE_DIR / AITER_JIT_DIR point,
at the same path, so kernels compiled on first use (shapes the warm-up did not meet) land in the
pod's own copy (vLLM documents copying `torch_compile_cache` between machines as supported). The
engine container does not mount the keyed directory at all. A warm-up that does not reach
/health within the startup budget leaves no mark and the pod starts anyway (it compiles, as
cold). Not a Job: GPU pools have no spare GPUs (maxSurge 0), so a warm-up Job would wait for a
replica's GPUs or hold a rollout; the init container uses the GPUs its own pod already holds.
Multi-node replicas cannot warm up alone (one pod is one node's share of a replica): their
engines keep the per-node directory read-write, so what one of them writes reaches only the
later engines of that node (docs/security.md).

Image pre-pull: a DaemonSet per GPU pool whose init containers are the pool's vLLM images
(each runs `true` and exits), kept alive by a pause container, so an image upgrade is pulled on
every node in parallel before the model's rolling update replaces replicas one by one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infra.catalog import doks, versions
from infra.catalog.spaces import endpoint_url
from infra.catalog.vllm_flags import VLLM_PORT
from infra.render import scan_exceptions
from infra.render.pod_security import restricted_container, restricted_pod
from infra.render.scan_exceptions import accept

COMPILE_CACHE_MOUNT = "/compile-cache"
COMPILE_CACHE_SUBDIR = "compile-cache"  # on the NFS share
NODE_CACHE_ROOT = "/var/lib/inference-platform/compile-cache"  # hostPath on the node
COMPILE_CACHE_SEED_MOUNT = "/compile-cache-seed"  # the keyed directory, read-only, in the seed container
COMPILE_CACHE_WARM_MARKER = ".warm"  # written by the warm-up once the engine answered /health
WARMUP_CONTAINER = "compile-cache-warmup"
SEED_CONTAINER = "compile-cache-seed"
SPACES_ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"  # keys inside the Spaces key Secrets
SPACES_SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"  # noqa: S105 - a key name, not a value
SPACES_READ_SECRET = "spaces-weights-read"
SPACES_WRITE_SECRET = "spaces-weights-write"
COMPLETE_OBJECT = ".complete"
PREFETCH_SCRATCH_GIB = 64  # one checkpoint file at a time
UPLOAD_PART_BYTES = 64 * 1024 * 1024
UPLOAD_CONCURRENCY = 8  # Spaces: at most 10 concurrent PUTs per object
PREPULL_LABEL = "inference-platform/image-prepull"


# --- weights in Spaces -------------------------------------------------------------------------


@dataclass(frozen=True)
class SpacesWeights:
    """A checkpoint in a Spaces bucket, and the Secrets holding the keys that read and write it."""

    bucket: str
    region: str
    prefix: str  # the stack's key prefix (model_cache.prefix)
    concurrency: int = 16  # streamer threads per vLLM process
    read_secret: str = SPACES_READ_SECRET
    write_secret: str = SPACES_WRITE_SECRET

    @property
    def endpoint(self) -> str:
        return endpoint_url(self.region)

    def key_prefix(self, source: str, revision: str | None) -> str:
        """`<prefix>/<org>/<name>/<revision or main>`: one directory per checkpoint version."""
        return f"{self.prefix}/{source}/{revision or 'main'}"

    def model_uri(self, source: str, revision: str | None) -> str:
        return f"s3://{self.bucket}/{self.key_prefix(source, revision)}/"


def s3_env(weights: SpacesWeights, secret: str) -> list[dict]:
    """What an S3 client (boto3, the Run:ai streamer) needs to reach the bucket path-style."""
    plain = {
        "AWS_ENDPOINT_URL": weights.endpoint,
        # DO's boto3 example signs with the Spaces region as region_name.
        "AWS_DEFAULT_REGION": weights.region,
        "AWS_REGION": weights.region,
        # No instance metadata service to ask for credentials (streamer docs: a multi-second delay).
        "AWS_EC2_METADATA_DISABLED": "true",
        "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0",
    }
    env = [{"name": k, "value": v} for k, v in sorted(plain.items())]
    env += [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
        for key in (SPACES_ACCESS_KEY_ID, SPACES_SECRET_ACCESS_KEY)
    ]
    return env


def streamer_args(weights: SpacesWeights, gpus_per_replica: int) -> list[str]:
    """`--load-format runai_streamer` and its extra config (keys vLLM 0.33 accepts: distributed,
    concurrency, memory_limit)."""
    extra: dict = {"concurrency": weights.concurrency}
    if gpus_per_replica > 1:
        extra["distributed"] = True
    return ["--load-format", "runai_streamer", "--model-loader-extra-config", json.dumps(extra, separators=(",", ":"))]


# Runs in the vLLM image: huggingface_hub and boto3 are installed there (see the module doc).
PREFETCH_TO_SPACES_PY = """\
import os, sys, tempfile
import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError
from huggingface_hub import HfApi, hf_hub_download

repo, revision, bucket, prefix, scratch = sys.argv[1:6]
revision = revision or None
s3 = boto3.client("s3", config=Config(retries={"max_attempts": 10, "mode": "adaptive"}))
transfer = TransferConfig(multipart_chunksize=int(sys.argv[6]), max_concurrency=int(sys.argv[7]))


def stored_size(key):
    try:
        return s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise


marker = prefix + "/.complete"
if stored_size(marker) is not None:
    print("weights already in the bucket", flush=True)
    sys.exit(0)
info = HfApi().model_info(repo, revision=revision, files_metadata=True)
for entry in info.siblings:
    name = entry.rfilename
    if name.startswith("original/"):
        continue
    key = prefix + "/" + name
    if entry.size is not None and stored_size(key) == entry.size:
        print("already uploaded", name, flush=True)
        continue
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        path = hf_hub_download(repo, name, revision=revision, local_dir=tmp)
        s3.upload_file(path, bucket, key, Config=transfer)
    print("uploaded", name, flush=True)
s3.put_object(Bucket=bucket, Key=marker, Body=(info.sha or "").encode())
print("checkpoint", info.sha, "complete", flush=True)
"""


def prefetch_to_spaces_command(weights: SpacesWeights, source: str, revision: str | None, scratch: str) -> list[str]:
    return [
        "python3", "-c", PREFETCH_TO_SPACES_PY,
        source, revision or "", weights.bucket, weights.key_prefix(source, revision), scratch,
        str(UPLOAD_PART_BYTES), str(UPLOAD_CONCURRENCY),
    ]  # fmt: skip


# --- compile caches ----------------------------------------------------------------------------


def compile_cache_key(
    *, image: str, source: str, revision: str | None, layout_fields: Mapping, args: Sequence[str], env: Mapping[str, str]
) -> str:
    """12 hex digits over everything that changes the compiled kernels of a replica."""
    material = json.dumps(
        {
            "image": image,
            "source": source,
            "revision": revision,
            "layout": dict(layout_fields),
            "args": list(args),
            "env": dict(sorted(env.items())),
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()[:12]


def compile_cache_env(amd: bool) -> dict[str, str]:
    env = {
        "VLLM_CACHE_ROOT": f"{COMPILE_CACHE_MOUNT}/vllm",
        "TRITON_CACHE_DIR": f"{COMPILE_CACHE_MOUNT}/triton",
    }
    if amd:
        env["AITER_JIT_DIR"] = f"{COMPILE_CACHE_MOUNT}/aiter"
    return env


def compile_cache_volume(kind: str, key: str, pvc_name: str | None) -> tuple[dict, dict]:
    """(volume, mount) of the compile cache: a keyed subPath of the NFS claim ("shared"), or a
    keyed hostPath directory on the node ("node")."""
    if kind == "shared":
        if pvc_name is None:
            raise ValueError("a shared compile cache needs the weight cache's claim")
        volume = {"name": "compile-cache", "persistentVolumeClaim": {"claimName": pvc_name}}
        mount = {"name": "compile-cache", "mountPath": COMPILE_CACHE_MOUNT, "subPath": f"{COMPILE_CACHE_SUBDIR}/{key}"}
        return volume, mount
    if kind == "node":
        volume = {"name": "compile-cache", "hostPath": {"path": f"{NODE_CACHE_ROOT}/{key}", "type": "DirectoryOrCreate"}}
        return volume, {"name": "compile-cache", "mountPath": COMPILE_CACHE_MOUNT}
    raise ValueError(f"compile cache kind must be shared or node, got {kind!r}")


# Runs the engine's command (in "$@") on loopback until /health answers; python3 is in every
# vLLM image, curl is not.
WARMUP_SH = f"""\
budget=$1; shift
marker={COMPILE_CACHE_MOUNT}/{COMPILE_CACHE_WARM_MARKER}
if [ -f "$marker" ]; then echo "compile cache already warm"; exit 0; fi
"$@" &
engine=$!
waited=0
while kill -0 "$engine" 2>/dev/null && [ "$waited" -lt "$budget" ]; do
  if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:{VLLM_PORT}/health', timeout=5)" 2>/dev/null; then
    touch "$marker"
    echo "compile cache written after ${{waited}}s"
    exit 0
  fi
  sleep 10
  waited=$((waited + 10))
done
echo "the warm-up engine did not answer /health within ${{budget}}s; the replica compiles what it needs" >&2
exit 0
"""

# A failed copy (disk full) must not leave truncated cache files behind: start empty instead.
SEED_SH = f"""\
if cp -R {COMPILE_CACHE_SEED_MOUNT}/. {COMPILE_CACHE_MOUNT}/; then
  echo "compile cache copied: $(du -sh {COMPILE_CACHE_MOUNT} | cut -f1)"
else
  echo "copying the compile cache failed; the engine starts with an empty one" >&2
  find {COMPILE_CACHE_MOUNT} -mindepth 1 -delete
fi
"""


def loopback_args(args: Sequence[str]) -> list[str]:
    """The engine's arguments with `--host 127.0.0.1`: the warm-up answers nobody but itself."""
    out = list(args)
    at = out.index("--host")
    out[at + 1] = "127.0.0.1"
    return out


@dataclass(frozen=True)
class CompileCacheWarmup:
    """What the warm-up needs of the engine: the same image, command, arguments, environment,
    GPUs and securityContext, so that it compiles exactly what the engine will load."""

    kind: str  # "shared" | "node"
    key: str
    pvc_name: str | None
    image: str
    command: Sequence[str]
    args: Sequence[str]
    env: Sequence[Mapping]
    resources: Mapping
    security: Mapping
    budget_seconds: int
    mounts: Sequence[Mapping] = ()  # the engine's other mounts (/dev/shm for RCCL, weights, scratch)


def render_compile_cache_warmup(w: CompileCacheWarmup) -> tuple[list[dict], list[dict], dict]:
    """(volumes, init containers, the engine's mount): the keyed directory as volume
    `compile-cache-shared`, written only by the warm-up and read by the seed, and the per-pod
    emptyDir `compile-cache` the engine mounts."""
    source, writable = compile_cache_volume(w.kind, w.key, w.pvc_name)
    source = {**source, "name": "compile-cache-shared"}
    writable = {**writable, "name": "compile-cache-shared"}
    read_only = {**writable, "mountPath": COMPILE_CACHE_SEED_MOUNT, "readOnly": True}
    per_pod = {"name": "compile-cache", "mountPath": COMPILE_CACHE_MOUNT}
    warmup = {
        "name": WARMUP_CONTAINER,
        "image": w.image,
        "command": ["/bin/sh", "-c", WARMUP_SH, "warmup", str(w.budget_seconds), *w.command],
        "args": loopback_args(w.args),
        "env": [dict(e) for e in w.env],
        "resources": dict(w.resources),
        "securityContext": dict(w.security),
        "volumeMounts": [*(dict(m) for m in w.mounts), writable],
    }
    seed = {
        "name": SEED_CONTAINER,
        "image": w.image,  # already on the node for the engine
        "command": ["/bin/sh", "-c", SEED_SH],
        "resources": {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
        # Root like the engine, so the engine (root without CAP_DAC_OVERRIDE) owns what it adds to.
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [read_only, per_pod],
    }
    volumes = [source, {"name": "compile-cache", "emptyDir": {}}]
    return volumes, [warmup, seed], per_pod


# --- image pre-pull ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PrepullSpec:
    """The images one GPU pool's models run, to pull onto every node of the pool."""

    pool_name: str  # the pool's name (the DaemonSet's name and label)
    images: tuple[str, ...]
    taint_key: str  # the pool's GPU taint (tolerated)
    namespace: str
    node_selector: Mapping[str, str] | None = None  # the pool's nodes; None: the DOKS pool's

    @property
    def selector(self) -> dict[str, str]:
        return dict(self.node_selector) if self.node_selector is not None else doks.pool_node_selector(self.pool_name)


def prepull_name(pool_name: str) -> str:
    return f"image-prepull-{pool_name}"


def render_prepull_daemonset(spec: PrepullSpec) -> dict:
    """A DaemonSet on the pool's nodes: init containers pull each image and exit, a pause
    container holds the pod (a few MiB); no GPU, no service account, no volumes."""
    labels = {
        "app.kubernetes.io/name": "image-prepull",
        "app.kubernetes.io/part-of": "inference-platform",
        "app.kubernetes.io/managed-by": "pulumi",
        PREPULL_LABEL: spec.pool_name,
    }
    tiny = {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"memory": "32Mi"}}
    init = [
        {
            "name": f"pull-{i}",
            "image": image,
            # Any binary of the image would do; `true` exits at once.
            "command": ["/bin/sh", "-c", "true"],
            "resources": tiny,
            "securityContext": restricted_container(),
        }
        for i, image in enumerate(sorted(set(spec.images)))
    ]
    return accept({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": prepull_name(spec.pool_name), "namespace": spec.namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {PREPULL_LABEL: spec.pool_name}},
            # Every node pulls a new image at once: the point is to have it before the engines roll.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 1,
                    "nodeSelector": spec.selector,
                    "tolerations": [{"key": spec.taint_key, "operator": "Exists", "effect": "NoSchedule"}],
                    "securityContext": restricted_pod(),
                    "initContainers": init,
                    "containers": [{"name": "pause", "image": versions.PAUSE_IMAGE, "resources": tiny,
                                    "securityContext": restricted_container()}],
                },
            },
        },
    }, scan_exceptions.PAUSE)
