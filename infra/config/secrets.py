"""The stack's secrets: which keys are secrets, and secrets written in plain text (a credential in
any other key: infra/config/credentials.py; which secrets a stack needs: infra/config/cross_checks.py
`required_secrets`). Secret values are never read here: only whether each is set, and whether it
was set as a secret."""

from __future__ import annotations

from infra.config.base import NS
from infra.errors import Problem

# Config keys that hold secrets. They are only ever read as Pulumi secrets and never appear in the
# validated config object; the program fetches them with `pulumi.Config.require_secret`.
SECRET_KEYS: dict[str, str] = {
    "huggingface_token": "Hugging Face access token for gated models and higher download limits",
    "api_key": "API key clients send (`Authorization: Bearer ...`): shorthand for the key named `default` in api_keys; one is generated (pulumi-random) when neither is set",
    "api_keys": "Named API keys, all valid at once (rotation without downtime): a map name → key, each set on its own path (`pulumi config set --secret --path 'api_keys.ci-2026q4' <key>`); names: lowercase letters, digits, '-', 1–40 characters; keys: at least 16 characters of the bearer-token alphabet; several keys need a front door (router.kind other than service)",
    "engine_key": "Internal key the engines behind a front door check (the front door sends it upstream instead of the client's key); at least 16 characters of the bearer-token alphabet; one is generated (pulumi-random) when not set — with api_key or api_keys set too, the stack plans no random resource; refused with router.kind service (no front door reads it)",
    "kubeconfig": "cluster.existing only (required there): the kubeconfig of the existing cluster, `pulumi config set --secret kubeconfig < FILE`; the Kubernetes provider's credentials, never shown in a plan, log or stack output",
    "grafana_admin_password": "Grafana admin password (required when observability is enabled)",
    "alert_webhook_url": "Alertmanager webhook URL (Slack or generic); required by receiver kinds slack and webhook",
}
PROVIDER_SECRET_KEYS = ("digitalocean:token", "digitalocean:spacesSecretKey")
# The DigitalOcean provider creates Spaces buckets with a Spaces key of its own (not the API token):
# `pulumi config set digitalocean:spacesAccessId ...` and `--secret digitalocean:spacesSecretKey ...`
# (or SPACES_ACCESS_KEY_ID / SPACES_SECRET_ACCESS_KEY in the environment).
SPACES_PROVIDER_KEYS = ("digitalocean:spacesAccessId", "digitalocean:spacesSecretKey")


def plain_secret_problems(plain: set[str]) -> list[Problem]:
    """Secrets given in plain text (which secrets a stack needs reads its models and observability:
    infra/config/cross_checks.py `required_secrets`)."""
    return [
        Problem(
            key if ":" in key else NS + key,
            f"given in plain text; secrets must be set with `pulumi config set --secret {key.removeprefix(NS)} ...`",
        )
        for key in sorted(plain)
    ]
