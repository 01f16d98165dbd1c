"""The stack's secrets: which keys are secrets, which a stack needs, and credentials written in
plain text where a secret belongs. Secret values are never read here: only whether each is set,
and whether it was set as a secret."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from infra.catalog.vllm_flags import canonical_flag
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


# Credentials by their published prefixes: Hugging Face (hf_), DigitalOcean (dop_v1_, doo_v1_, ...),
# OpenAI-style (sk-), GitHub (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), GitLab (glpat-), Slack
# (xoxb-, ...), AWS access key ids (AKIA...).
_TOKEN_VALUE = re.compile(
    r"(?:^|[\s=:'\"])(?:hf_[A-Za-z0-9]{16,}|do[a-z]_v1_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})"
)
# Variable names that say "credential": a whole `_`-separated word (VLLM_..._TOKEN_THRESHOLD holds a count).
_SECRET_NAME = re.compile(r"(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|PASS|KEY|APIKEY|CREDENTIALS?|AUTH)(?:$|_)", re.IGNORECASE)
_NUMBER_OR_FLAG = re.compile(r"^\s*(?:[+-]?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|true|false|yes|no|on|off)?\s*$", re.IGNORECASE)


def _secret_mechanism(name: str) -> str:
    """Where the secret belongs instead of a plain `env:` value."""
    upper = name.upper()
    if upper in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN") or upper.startswith("HF_"):
        return "set the stack's huggingface_token secret instead (`pulumi config set --secret huggingface_token ...`); the model pods get it as HF_TOKEN"
    if upper in ("VLLM_API_KEY", "API_KEY", "OPENAI_API_KEY"):
        return "set the stack's api_key secret instead (`pulumi config set --secret api_key ...`); the model pods get it as VLLM_API_KEY"
    return (
        "plain-text secrets would land in the plan, the Deployment and `pulumi preview`; the stack's secrets are "
        "huggingface_token and api_key (`pulumi config set --secret KEY ...`), or keep the variable out of the stack file"
    )


def plain_secret_problems(model: ModelConfig, at: str) -> list[Problem]:
    """A credential written into `env` (or `extra_args`) would be copied verbatim into the plan JSON and the
    Deployment: refused, as every plain-text secret is (README "Secrets")."""
    problems = []
    for name, value in model.env.items():
        if _TOKEN_VALUE.search(value):
            problems.append(Problem(f"{at}.env.{name}", f"the value looks like an access token; {_secret_mechanism(name)}"))
        elif _SECRET_NAME.search(name) and not _NUMBER_OR_FLAG.match(value):
            problems.append(Problem(f"{at}.env.{name}", f"{name} names a credential and is given in plain text; {_secret_mechanism(name)}"))
    for j, arg in enumerate(model.extra_args):
        if _TOKEN_VALUE.search(arg):
            problems.append(Problem(f"{at}.extra_args[{j}]", f"looks like an access token; {_secret_mechanism('')}"))
        elif canonical_flag(arg) == "--api-key":
            problems.append(Problem(f"{at}.extra_args[{j}]", f"{arg.split('=')[0]!r} would put the key in plain text; {_secret_mechanism('API_KEY')}"))
    return problems


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

