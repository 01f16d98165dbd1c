"""Which GPU vendor an engine image is built for (infra/catalog/engine_images.py)."""

from __future__ import annotations

import pytest

from infra.catalog import versions
from infra.catalog.engine_images import PINNED, image_vendor


@pytest.mark.parametrize(("image", "vendor"), [
    ("vllm/vllm-openai:v0.33.0", "nvidia"),
    ("docker.io/vllm/vllm-openai:v0.33.0", "nvidia"),
    ("registry-1.docker.io/vllm/vllm-openai@sha256:" + "a" * 64, "nvidia"),
    ("lmcache/vllm-openai:v0.3.9", "nvidia"),
    ("vllm/vllm-openai-rocm:v0.33.0", "amd"),
    ("docker.io/library/vllm/vllm-openai-rocm:v0.33.0", "amd"),
    ("rocm/vllm:rocm7.0_mi30x_ubuntu22.04_py3.12_vllm_0.10.1", "amd"),
    ("rocm/vllm-dev:nightly_main_20260101", "amd"),
    ("vllm/vllm-openai:v0.33.0-rocm", "amd"),  # a tag that says which build it is
    ("vllm/vllm-openai:v0.33.0-cpu", None),
    ("registry.example.com/ml/vllm-rocm-lmcache:v0.33.0", None),  # a user's build: not judged
    ("localhost:5000/vllm/vllm-openai", None),
])
def test_the_vendor_of_a_known_family(image, vendor):
    assert image_vendor(image)[0] == vendor


def test_each_vendor_s_pinned_image_is_of_its_own_family():
    assert PINNED == {"amd": versions.VLLM_IMAGE_ROCM, "nvidia": versions.VLLM_IMAGE_CUDA}
    assert all(image_vendor(image)[0] == vendor for vendor, image in PINNED.items())
