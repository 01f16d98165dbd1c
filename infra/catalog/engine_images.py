"""Which GPU vendor a vLLM engine image is built for, for the image families the catalog knows.

A vLLM image carries one vendor's GPU stack (CUDA or ROCm); on the other vendor's node it finds no
GPU and its engines crash-loop. The families, as published:

- `vllm/vllm-openai`: vLLM's release image, built from docker/Dockerfile on an `nvidia/cuda` base
  (CUDA, NVIDIA GPUs); the pinned NVIDIA image (versions.VLLM_IMAGE_CUDA).
- `vllm/vllm-openai-rocm`: vLLM's ROCm release image, built from docker/Dockerfile.rocm (AMD
  GPUs); the pinned AMD image (versions.VLLM_IMAGE_ROCM).
- `rocm/vllm`, `rocm/vllm-dev`: AMD's ROCm vLLM images (tags `rocm<ver>_..._vllm_<ver>`).
- `lmcache/vllm-openai`: LMCache's vLLM image, vLLM's CUDA image with LMCache installed
  (infra/catalog/lmcache.py).

A tag of `vllm/vllm-openai` that names another build (`...-rocm`, `...-cpu`) is read by its
suffix. Any other repository is the user's build: nothing can be told from its name, and like the
project's other image checks (the Spaces streamer's vLLM version, the programs an exec probe runs)
it is not judged.
"""

from __future__ import annotations

from infra.catalog import versions

VENDOR_NAMES = {"amd": "AMD", "nvidia": "NVIDIA"}
STACKS = {"amd": "ROCm", "nvidia": "CUDA"}

# Repository → (vendor, what the image is).
FAMILIES: dict[str, tuple[str, str]] = {
    "vllm/vllm-openai": ("nvidia", "vLLM's CUDA image"),
    "vllm/vllm-openai-rocm": ("amd", "vLLM's ROCm image"),
    "rocm/vllm": ("amd", "AMD's ROCm vLLM image"),
    "rocm/vllm-dev": ("amd", "AMD's ROCm vLLM image"),
    "lmcache/vllm-openai": ("nvidia", "LMCache's vLLM image, built on vLLM's CUDA image"),
}

# The pinned image of each vendor: what a model without `image` runs.
PINNED = {"amd": versions.VLLM_IMAGE_ROCM, "nvidia": versions.VLLM_IMAGE_CUDA}


def repository(image: str) -> str:
    """`docker.io/vllm/vllm-openai:v0.33.0` → `vllm/vllm-openai`; a digest and a registry port kept apart."""
    name = image.partition("@")[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: len(name) - len(last[-1]) + last[-1].index(":")]
    for registry in ("docker.io/library/", "docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        name = name.removeprefix(registry)
    return name


def _tag(image: str) -> str:
    name = image.partition("@")[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


def image_vendor(image: str) -> tuple[str | None, str]:
    """(the GPU vendor `image` is built for — None when the catalog cannot tell —, what it is)."""
    repo = repository(image)
    family = FAMILIES.get(repo)
    if family is None:
        return None, "an image the catalog does not know"
    vendor, what = family
    tag = _tag(image).lower()
    if repo == "vllm/vllm-openai" and "rocm" in tag:
        return "amd", "a ROCm build of vLLM's image (its tag says rocm)"
    if repo == "vllm/vllm-openai" and any(other in tag for other in ("cpu", "xpu", "tpu", "hpu")):
        return None, "a vllm/vllm-openai tag for another accelerator"
    return vendor, what
