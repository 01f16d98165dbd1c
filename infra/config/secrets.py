"""The stack's secrets: which keys are secrets, which a stack needs, and credentials written in
plain text where a secret belongs (a credential in any other key: infra/config/credentials.py).
Secret values are never read here: only whether each is set, and whether it was set as a secret."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.config.base import NS
from infra.config.observability import observability_on
from infra.errors import Problem

if TYPE_CHECKING:
    from infra.config.models import ModelConfig
    from infra.config.stack import StackInput

# Config keys that hold secrets. They are only ever read as Pulumi secrets and never appear in the
# validated config object; the program fetches them with `pulumi.Config.require_secret`.
SECRET_KEYS: dict[str, str] = {
    "huggingface_token": "Hugging Face access token for gated models and higher download limits",
    "api_key": "API key clients send (`Authorization: Bearer ...`): shorthand for the key named `default` in api_keys; one is generated (pulumi-random) when neither is set",
    "api_keys": "Named API keys, all valid at once (rotation without downtime): a map name → key, each set on its own path (`pulumi config set --secret --path 'api_keys.ci-2026q4' <key>`); names: lowercase letters, digits, '-', 1–40 characters; keys: at least 16 characters of the bearer-token alphabet; several keys need a front door (router.kind other than service)",
    "grafana_admin_password": "Grafana admin password (required when observability is enabled)",
    "alert_webhook_url": "Alertmanager webhook URL (Slack or generic); required by receiver kinds slack and webhook",
}
PROVIDER_SECRET_KEYS = ("digitalocean:token", "digitalocean:spacesSecretKey")
# The DigitalOcean provider creates Spaces buckets with a Spaces key of its own (not the API token):
# `pulumi config set digitalocean:spacesAccessId ...` and `--secret digitalocean:spacesSecretKey ...`
# (or SPACES_ACCESS_KEY_ID / SPACES_SECRET_ACCESS_KEY in the environment).
SPACES_PROVIDER_KEYS = ("digitalocean:spacesAccessId", "digitalocean:spacesSecretKey")


def check_secrets(raw: StackInput, secrets_set: set[str], plain: set[str]) -> tuple[list[Problem], tuple[str, ...]]:
    problems = [
        Problem(
            key if ":" in key else NS + key,
            f"given in plain text; secrets must be set with `pulumi config set --secret {key.removeprefix(NS)} ...`",
        )
        for key in sorted(plain)
    ]
    required = []
    # A gated repo (meta-llama/*, ...) downloads only with a token of an account that accepted its
    # terms: without one the prefetch Job fails with 401 at deploy time. `pulumi up` refuses to start
    # without it; the offline plan lists it under "secrets to set" and names the models.
    if gated_models(raw.models):
        required.append("huggingface_token")
    # api_key is never required (issue 30): every serving path checks a key, and when the stack
    # gives none the program generates one (pulumi-random, kept as a secret in the stack's state;
    # `pulumi stack output api_key --show-secrets` reads it).
    if observability_on(raw):
        required.append("grafana_admin_password")
        if raw.observability.alert_receiver.kind != "none":
            required.append("alert_webhook_url")
    return problems, tuple(required)


def gated_models(models: list[ModelConfig]) -> list[ModelConfig]:
    """The models whose Hugging Face repo is gated (infra/catalog/models.py `is_gated`)."""
    from infra.catalog.models import is_gated  # local import: the catalog is large

    return [m for m in models if is_gated(m.source)]

