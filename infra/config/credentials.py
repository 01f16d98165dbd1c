"""One scan for credentials over every string a stack file holds (issue 37).

Whatever a stack file says in plain text ends up somewhere readable: the plan JSON and its YAML,
`pulumi preview`, a Deployment's env, an Alertmanager config, a PrometheusRule's annotations. A
credential belongs in a Pulumi secret (`pulumi config set --secret ...`), so one written in plain
text is refused wherever it sits: in any key of our namespace (a model's env or extra_args, a
rollout candidate's, an alert channel, the runbook URL, a node label), and in the namespaces the
program passes through to its providers (`kubernetes:kubeconfig`).

What counts as a credential, from the value alone:
- an access token by its published prefix (Hugging Face, DigitalOcean, OpenAI-style, GitHub,
  GitLab, Slack, AWS access key ids), a JWT, a PEM private key;
- a URL that is one: a Slack or Discord incoming-webhook URL (whoever holds it may post), a URL
  with a password in its user-info (`https://user:pass@host`) or a credential in its query string
  (`?token=`, `?access_token=`, `?sig=`, ...);
and from where it sits:
- an environment variable (`models[].env`) or a provider key whose name says credential
  (`*TOKEN*`, `*SECRET*`, `*KEY*`, `*PASSWORD*`, `kubeconfig`), unless the value is a number or
  a switch;
- a command-line flag whose name says credential (`--api-key`, `--hf-token`, `--password`).

A message names the key path and what to do, never the value. Keys that are secrets by
declaration (api_key, huggingface_token, digitalocean:token, ...) are checked where they are
declared (infra/config/secrets.py, client_keys.py); their `secure:` values are never read.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from infra.catalog.vllm_flags import canonical_flag
from infra.config.base import NS
from infra.errors import Problem

# Credentials by their published prefixes: Hugging Face (hf_), DigitalOcean (dop_v1_, doo_v1_, ...),
# OpenAI-style (sk-), GitHub (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), GitLab (glpat-), Slack
# (xoxb-, ...), AWS access key ids (AKIA...); a JWT (three base64url parts, the first `eyJ`); a PEM key.
TOKEN_VALUE = re.compile(
    r"(?:^|[\s=:'\"/])(?:hf_[A-Za-z0-9]{16,}|do[a-z]_v1_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
)
# Kubeconfig content (its user entries carry the cluster's credentials): a client key or certificate
# (`client-key-data`, `client-certificate-data`, `client-key`, `client-certificate`), or a `users:`
# list with a bearer `token:` / `password:` in it. Also looked for inside base64 (a kubeconfig is
# often passed around encoded).
KUBECONFIG_CLIENT_KEY = re.compile(r"(?:^|[\s{,])[\"']?client-(?:key|certificate)(?:-data)?[\"']?\s*:", re.MULTILINE)
KUBECONFIG_USERS = re.compile(r"(?:^|[\s{,])[\"']?users[\"']?\s*:", re.MULTILINE)
KUBECONFIG_USER_SECRET = re.compile(r"(?:^|[\s{,])[\"']?(?:token|password|auth-provider)[\"']?\s*:\s*\S", re.MULTILINE)
BASE64_BLOB = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
# A value that is a file path (`/etc/kube/config`, `~/.kube/config`, `./kubeconfig`): it names where a
# credential is, and is not one (KUBECONFIG=/etc/kube/config).
FILE_PATH = re.compile(r"^(?:~|\.{1,2})?/[A-Za-z0-9._/-]*$")
# Incoming-webhook URLs: the URL itself is the credential.
WEBHOOK_URL = re.compile(
    r"https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)/|(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/"
    r"|[a-z0-9.-]+\.webhook\.office\.com/|chat\.googleapis\.com/v1/spaces/)",
    re.IGNORECASE,
)
URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s'\"]+", re.IGNORECASE)
# Query parameters that carry a credential (OAuth, signed URLs, API gateways).
SECRET_PARAM = re.compile(
    r"^(?:x-)?(?:access[_-]?token|token|auth(?:[_-]?token)?|api[_-]?key|apikey|key|secret|password|passwd|pwd|sig|signature"
    r"|client[_-]?secret|x-amz-signature|x-goog-signature|code)$",
    re.IGNORECASE,
)
# Variable and key names that say "credential": a whole `_`-separated word (VLLM_..._TOKEN_THRESHOLD
# holds a count), or the kubeconfig itself.
SECRET_NAME = re.compile(
    r"(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|PASS|KEY|APIKEY|CREDENTIALS?|AUTH|KUBECONFIG)(?:$|_)", re.IGNORECASE
)
NUMBER_OR_SWITCH = re.compile(r"^\s*(?:[+-]?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|true|false|yes|no|on|off)?\s*$", re.IGNORECASE)
# Command-line flags whose value is a credential: `--api-key`, `--hf-token`, `--password`, `--client-secret`.
SECRET_FLAG = re.compile(r"^--?(?:[a-z0-9]+-)*(?:api-key|token|password|passwd|secret)$")


def _secret_mechanism(path: str, name: str = "", secret_names: tuple[str, ...] = ()) -> str:
    """Where the value belongs instead of the stack file in plain text."""
    upper = name.upper()
    if upper in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN") or upper.startswith("HF_"):
        return "set the stack's huggingface_token secret instead (`pulumi config set --secret huggingface_token ...`); the model pods get it as HF_TOKEN"
    if upper in ("VLLM_API_KEY", "API_KEY", "OPENAI_API_KEY"):
        return ("set the stack's api_key secret instead (`pulumi config set --secret api_key ...`), which the front door checks "
                "(with router.kind service every engine reads it as VLLM_API_KEY; behind a router or the gateway the engines "
                "check an internal key of their own)")
    if path.split(".")[0].split("[")[0] == "kubernetes:kubeconfig":
        return ("the program's Kubernetes provider never reads kubernetes:kubeconfig (it uses the DOKS cluster's own, or "
                "with cluster.existing the kubeconfig secret: `pulumi config set --secret kubeconfig < FILE`): remove it")
    if ":" in path.split(".")[0] and not path.startswith(NS):
        key = path.split(".")[0].split("[")[0]
        return f"set it as a secret (`pulumi config set --secret {key} ...`), which keeps it encrypted in the stack file"
    return (
        "plain-text secrets land in the plan, the rendered objects and `pulumi preview`; the stack's secrets are "
        f"{', '.join(secret_names) or 'declared in infra/config/secrets.py'} (`pulumi config set --secret KEY ...`): use one of them, or keep the value out "
        "of the stack file"
    )


def _is_kubeconfig_text(text: str) -> bool:
    return bool(KUBECONFIG_CLIENT_KEY.search(text)) or (
        bool(KUBECONFIG_USERS.search(text)) and bool(KUBECONFIG_USER_SECRET.search(text))
    )


def _kubeconfig_problem(text: str) -> str | None:
    """Why `text` is (or, base64-decoded, holds) a kubeconfig with credentials in it, or None."""
    if _is_kubeconfig_text(text):
        return "holds a kubeconfig with the cluster's credentials (client key, certificate or token)"
    for match in BASE64_BLOB.finditer(text):
        blob = match.group(0)
        try:
            decoded = base64.b64decode(blob + "=" * (-len(blob) % 4), altchars=b"-_" if ("-" in blob or "_" in blob) else None)
            decoded_text = decoded.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if _is_kubeconfig_text(decoded_text) or TOKEN_VALUE.search(decoded_text):
            return "holds base64 that decodes to a kubeconfig or an access token (the cluster's credentials)"
    return None


def _url_problem(text: str) -> str | None:
    """Why a URL in `text` is (or carries) a credential, or None."""
    if WEBHOOK_URL.search(text):
        return ("is an incoming-webhook URL, which is a credential (whoever holds it can post to the channel); set it as "
                "the alert_webhook_url secret (`pulumi config set --secret alert_webhook_url ...`) and keep it out of "
                "plain keys")
    for match in URL.finditer(text):
        try:
            parts = urlsplit(match.group(0))
            password = parts.password
        except ValueError:
            continue
        if password:
            return "is a URL with a password in it (user:password@host); the URL is copied into the plan and the objects: remove the password"
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if SECRET_PARAM.match(name) and value:
                return (f"is a URL that carries a credential in its query string ({name}=...); the URL is copied into the plan "
                        "and the objects (an alert link, an env var): give it without the credential")
    return None


def _walk(node: Any, path: str) -> Iterator[tuple[str, Any, str | None]]:
    """(path, value, the map key it sits under) of every string, and of every list of strings."""
    if isinstance(node, dict):
        if set(node) == {"secure"}:
            return  # a secret's ciphertext: never read
        for key, value in node.items():
            yield from _walk_child(value, f"{path}.{key}", str(key))
    elif isinstance(node, list):
        yield path, node, None
        for i, value in enumerate(node):
            yield from _walk_child(value, f"{path}[{i}]", None)
    elif isinstance(node, str):
        yield path, node, None


def _walk_child(value: Any, path: str, key: str | None) -> Iterator[tuple[str, Any, str | None]]:
    if isinstance(value, str):
        yield path, value, key
    else:
        yield from _walk(value, path)


def _named_credential(path: str, key: str | None, value: str) -> bool:
    """A value under a name that says credential, where names are the user's (env vars)."""
    if key is None or NUMBER_OR_SWITCH.match(value) or FILE_PATH.match(value.strip()):
        return False
    return re.search(r"\.env\.[^.]+$", path) is not None and SECRET_NAME.search(key) is not None


def _flag_problems(path: str, args: list[Any], secret_names: tuple[str, ...] = ()) -> list[Problem]:
    problems = []
    for j, arg in enumerate(args):
        if not isinstance(arg, str) or not arg.startswith("-"):
            continue
        flag = canonical_flag(arg).split("=", 1)[0]
        if SECRET_FLAG.match(flag):
            name = "API_KEY" if flag.endswith("api-key") else ("HF_TOKEN" if flag == "--hf-token" else "")
            problems.append(Problem(f"{path}[{j}]", f"{arg.split('=')[0]!r} would put the credential in plain text; {_secret_mechanism(path, name, secret_names)}"))
    return problems


def credential_problems(
    values: dict[str, Any], skip: set[str] | frozenset[str] = frozenset(), secret_names: tuple[str, ...] = ()
) -> list[Problem]:
    """Every plain-text credential in a stack file's `values` (full `namespace:key` paths, or our
    keys without the namespace), one problem per key path. `skip`: keys checked as secrets where
    they are declared; `secret_names`: the stack's secret keys (SECRET_KEYS), which the messages list."""
    problems: list[Problem] = []
    for top, value in values.items():
        full = top if ":" in top else NS + top
        if full in skip or top in skip or value is None:
            continue
        if not full.startswith(NS):
            name = full.split(":", 1)[1]
            if SECRET_NAME.search(name) and not (isinstance(value, str) and NUMBER_OR_SWITCH.match(value)) and not isinstance(value, bool | int | float):
                # A provider's credential (`kubernetes:kubeconfig`), as text or as a mapping: all of it is secret.
                what = "the cluster's credentials (client keys or tokens)" if "kubeconfig" in name.lower() else "a credential"
                problems.append(Problem(full, f"{name} holds {what} and is given in plain text; {_secret_mechanism(full, name, secret_names)}"))
                continue
        for path, item, key in _walk_child(value, full, None):
            if isinstance(item, list):
                problems += _flag_problems(path, item, secret_names)
                continue
            name = key or ""
            kubeconfig = _kubeconfig_problem(item)
            if kubeconfig:
                problems.append(Problem(path, f"{kubeconfig} in plain text; set the cluster's kubeconfig as the kubeconfig secret "
                                              "(`pulumi config set --secret kubeconfig < FILE`), which only the program's "
                                              "Kubernetes provider reads; no engine or other key may carry it"))
                continue
            token = TOKEN_VALUE.search(item)
            if token and any(u.start() <= token.start() < u.end() for u in URL.finditer(item)):
                # In a URL (its user-info, path or query): the token goes, the URL may stay.
                problems.append(Problem(path, "is a URL with an access token in it; the URL is copied into the plan and the "
                                              "objects (an alert link, an env var): give it without the token"))
                continue
            if token:
                problems.append(Problem(path, f"looks like an access token; {_secret_mechanism(path, name, secret_names)}"))
                continue
            why = _url_problem(item)
            if why:
                problems.append(Problem(path, why))
            elif _named_credential(path, key, item):
                problems.append(Problem(path, f"{name} names a credential and is given in plain text; {_secret_mechanism(path, name, secret_names)}"))
    return list(dict.fromkeys(problems))
