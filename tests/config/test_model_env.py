"""A model's env may not replace what the platform sets, and no endpoint setting may name
link-local space (infra/config/model_env.py; round-2 audit of issue 37)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from infra.catalog.engine_env import PLATFORM_ENV, endpoint_settings, metadata_space
from infra.offline import kubernetes_objects
from tests.security_variants import NAMES, plan_named

# Set by the renderer but open to the user: ROCm tuning switches, and the warm-up's unbuffered output.
OPEN = {"VLLM_ROCM_USE_AITER", "VLLM_ROCM_USE_AITER_MOE", "SAFETENSORS_FAST_GPU", "PYTHONUNBUFFERED"}


def _engine_env_names(node, names: set[str]) -> None:
    if isinstance(node, dict):
        for c in [*node.get("containers", []), *node.get("initContainers", [])]:
            if "vllm" in (c.get("image") or ""):
                names.update(e["name"] for e in c.get("env", []) if "value" in e)
        for value in node.values():
            _engine_env_names(value, names)
    elif isinstance(node, list):
        for item in node:
            _engine_env_names(item, names)


def test_every_literal_env_the_platform_sets_on_engines_is_owned_or_open():
    names: set[str] = set()
    work = Path(tempfile.mkdtemp())
    for name in NAMES:
        for obj in kubernetes_objects(plan_named(name, work)):
            _engine_env_names(obj, names)
    user = {"HF_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}  # the variants' own env (staging-endpoints)
    assert names - user - OPEN <= set(PLATFORM_ENV), sorted(names - user - OPEN - set(PLATFORM_ENV))


def test_link_local_space_in_every_spelling():
    for host in ("169.254.169.254", "169.254.0.1", "::ffff:169.254.169.254", "fe80::1", "fd00:ec2::254"):
        assert metadata_space(host), host
    for host in ("10.0.0.5", "2852039166", "mirror.internal", "127.0.0.1", "::1"):
        assert not metadata_space(host), host


def test_endpoint_settings_point_at_the_url_element():
    env = {"HF_ENDPOINT": "http://m", "OTHER": "x"}
    args = ["--otlp-traces-endpoint", "http://a:4317", "--otlp-traces-endpoint=http://b:4317"]
    assert endpoint_settings(env, args) == [("env.HF_ENDPOINT", "http://m"), ("extra_args[1]", "http://a:4317"), ("extra_args[2]", "http://b:4317")]
