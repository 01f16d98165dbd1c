"""What a model's `env` and endpoint flags may say: no name the platform sets, no endpoint a
policy may not open (names and reasons: infra/catalog/engine_env.py).

Run for each model and for the model its rollout candidate would become (`model_problems`), each
problem at the key as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.catalog.engine_env import PLATFORM_ENV, endpoint_host, endpoint_settings, metadata_space
from infra.errors import Problem

if TYPE_CHECKING:
    from infra.config.model_keys import ModelKeys
    from infra.config.models import ModelConfig


def platform_env_problems(model: ModelConfig, keys: ModelKeys) -> list[Problem]:
    """An env entry the platform sets would replace the platform's value: refused, naming the owner."""
    return [
        Problem(keys(f"env.{name}"), f"{name} is set by the platform from {PLATFORM_ENV[name]}; "
                "an env entry would replace it (remove it, or change the owning key)")
        for name in model.env if name in PLATFORM_ENV
    ]  # fmt: skip


def endpoint_problems(model: ModelConfig, keys: ModelKeys) -> list[Problem]:
    """Each endpoint setting must be a URL with a host, and not a link-local address: instance
    metadata lives there, and its egress rule would open it to the engines."""
    problems = []
    for key, url in endpoint_settings(model.env, model.extra_args):
        host, _, _ = endpoint_host(url)
        if not host:
            problems.append(
                Problem(keys(key), f"{url!r} is not an endpoint URL; give scheme://host[:port][/path]")
            )
        elif metadata_space(host):
            problems.append(
                Problem(
                    keys(key),
                    (
                        f"{url!r} names a link-local address ({host}), where the droplet metadata service lives; no egress "
                        "rule opens it (docs/security.md): name the collector or mirror by its own address or host name"
                    ),
                )
            )
    return problems
