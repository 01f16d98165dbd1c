"""model_cache: the Spaces source's bad input gets one clear line each (issue 20)."""

from __future__ import annotations

import pytest

from infra.catalog import versions
from infra.catalog.spaces import SPACES_REGIONS, bucket_name_problem
from infra.config import NS, load_config
from infra.errors import ConfigError
from tests.conftest import ROOT, stack_values


def _staging(model_cache: dict, *, region: str | None = None, image: str | None = None, extra_args=None):
    values, secrets = stack_values("staging")
    values[NS + "model_cache"] = model_cache
    if region:
        values[NS + "region"] = region
    if image:
        values[NS + "models"][0]["image"] = image
    if extra_args:
        values[NS + "models"][0]["extra_args"] = extra_args
    return load_config(values, stack="staging", secret_keys=secrets, base_dir=ROOT)


def _messages(**kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        _staging(**kwargs)
    return err.value.render() if hasattr(err.value, "render") else str(err.value)


def test_a_spaces_cache_validates():
    cfg = _staging({"kind": "spaces", "bucket": "acme-staging-weights"})
    assert cfg.model_cache.kind == "spaces" and cfg.spaces_region == "atl1"
    assert cfg.model_cache.prefix == "models" and cfg.model_cache.streamer_concurrency == 16


def test_the_bucket_is_required():
    assert "model_cache.bucket: required with kind spaces" in _messages(model_cache={"kind": "spaces"})


@pytest.mark.parametrize(
    "name",
    ["ab", "a" * 64, "Acme-weights", "acme_weights", "-acme", "acme-", "acme.weights", "192.168.1.10"],
)
def test_bucket_names_that_break_s3_rules(name):
    text = _messages(model_cache={"kind": "spaces", "bucket": name})
    assert f"model_cache.bucket: {name!r}" in text
    assert bucket_name_problem(name)


def test_a_region_without_spaces_is_refused_with_the_nearest_one():
    text = _messages(model_cache={"kind": "spaces", "bucket": "acme-weights"}, region="nyc2")
    assert "Spaces is not offered in 'nyc2'; set model_cache.region: nyc3" in text
    assert "atl1" in text and "spaces_entities.go" in text
    cfg = _staging({"kind": "spaces", "bucket": "acme-weights", "region": "nyc3"}, region="nyc2")
    assert cfg.spaces_region == "nyc3"


def test_an_explicit_region_without_spaces_is_refused():
    text = _messages(model_cache={"kind": "spaces", "bucket": "acme-weights", "region": "ric1"})
    assert "model_cache.region: Spaces is not offered in 'ric1'" in text


def test_the_catalog_lists_the_spaces_regions():
    assert SPACES_REGIONS == ("ams3", "atl1", "blr1", "fra1", "lon1", "nyc3", "sfo2", "sfo3", "sgp1", "syd1", "tor1")


def test_an_engine_older_than_the_streamer_is_refused():
    text = _messages(model_cache={"kind": "spaces", "bucket": "acme-weights"}, image="vllm/vllm-openai-rocm:v0.10.1")
    assert "models[0].image" in text and f"needs vLLM ≥ {versions.VLLM_RUNAI_STREAMER_MIN_VERSION}" in text
    assert _staging({"kind": "spaces", "bucket": "acme-weights"}, image="vllm/vllm-openai-rocm:v0.14.0")


def test_the_streamer_flags_belong_to_the_source():
    text = _messages(model_cache={"kind": "spaces", "bucket": "acme-weights"}, extra_args=["--load-format", "auto"])
    assert "models[0].extra_args[0]: '--load-format' is set by model_cache.kind spaces" in text


def test_keys_of_the_other_kind_are_refused():
    assert "model_cache.tier: applies to kind nfs only" in _messages(model_cache={"kind": "spaces", "bucket": "acme-weights", "tier": "high"})
    assert "model_cache.bucket: applies to kind spaces only" in _messages(model_cache={"kind": "nfs", "bucket": "acme-weights"})
    assert "model_cache.size_gib: applies to kind nfs only" in _messages(model_cache={"kind": "none", "size_gib": 100})


def test_a_bad_prefix_is_refused():
    assert "model_cache.prefix: '/models'" in _messages(model_cache={"kind": "spaces", "bucket": "acme-weights", "prefix": "/models"})
    assert "model_cache.prefix: 'a/../b'" in _messages(model_cache={"kind": "spaces", "bucket": "acme-weights", "prefix": "a/../b"})


def test_the_spaces_secret_key_must_be_a_secret():
    values, secrets = stack_values("staging")
    values[NS + "model_cache"] = {"kind": "spaces", "bucket": "acme-weights"}
    values["digitalocean:spacesAccessId"] = "DO00EXAMPLE"
    values["digitalocean:spacesSecretKey"] = "plain"
    with pytest.raises(ConfigError, match="digitalocean:spacesSecretKey"):
        load_config(values, stack="staging", secret_keys=secrets, base_dir=ROOT)
    cfg = load_config(values, stack="staging", secret_keys=secrets | {"digitalocean:spacesSecretKey"}, base_dir=ROOT)
    assert cfg.spaces_credentials_set


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("vllm/vllm-openai-rocm:v0.33.0", (0, 33, 0)),
        ("rocm/vllm:rocm6.4.1_vllm_0.9.1_20250702", (0, 9, 1)),
        ("registry.example:5000/team/vllm:0.12.0", (0, 12, 0)),
        ("team/vllm:custom", None),
    ],
)
def test_the_vllm_version_of_an_image_tag(image, version):
    assert versions.vllm_version_of_image(image) == version
