"""Named client API keys (issue 30): several keys valid at once, so a key rotates without a 401 window.

The stack's `api_keys` is a map name → key, each entry a Pulumi secret of its own
(`pulumi config set --secret --path 'api_keys.ci-2026q4' <key>`), so the names stay readable in
the stack file and in plans while the keys stay encrypted. `api_key` is shorthand for the entry
named `default`. Nothing set: one key named `default` is generated at `pulumi up`
(pulumi-random, kept as a secret in the stack's state).

Pure functions: the names are checked wherever the stack is read (the offline plan sees only
names and `secure:` ciphertexts); the keys themselves only at `pulumi up`, where the program holds
them (`key_value_problems`). No message ever quotes a key. (Whether the front door checks them
reads the router: infra/config/cross_checks.py `client_key_problems`.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.errors import Problem

DEFAULT_KEY_NAME = "default"  # what `api_key` (and the generated key) is called
KEY_NAME_RULE = "lowercase letters, digits and '-', 1–40 characters"
_KEY_NAME = re.compile(r"^[a-z0-9-]{1,40}$")
MIN_KEY_CHARS = 16
# RFC 6750 §2.1 `b64token`: what a bearer token may hold. The front door matches keys exactly
# (case-sensitive), and this alphabet needs no quoting in its nginx map or the gateway's Secret.
KEY_ALPHABET_RULE = "letters, digits and - . _ ~ + / (then '=' padding only), the bearer-token alphabet of RFC 6750"
_KEY_VALUE = re.compile(r"^[A-Za-z0-9._~+/-]+=*$")
SET_ONE = "pulumi config set --secret --path 'api_keys.<name>' <key>"


@dataclass(frozen=True)
class ClientKeys:
    """The names of the keys clients may send (values never here).

    names: sorted; `default` is the `api_key` shorthand or the generated key.
    generated: no key set: `pulumi up` generates the one named `default`.
    """

    names: tuple[str, ...] = (DEFAULT_KEY_NAME,)
    generated: bool = True

    @property
    def several(self) -> bool:
        return len(self.names) > 1


def client_keys_from_config(api_keys: Any, *, api_keys_path: str, api_key_set: bool, api_keys_secret: bool) -> tuple[ClientKeys, list[Problem]]:
    """The key names from the raw `api_keys` value and whether `api_key` is set.

    `api_keys`: None (not set); from a stack file a mapping name → `{secure: <ciphertext>}`; from
    the Pulumi runtime a mapping name → None (the program drops the values before validation).
    `api_keys_secret`: the whole value was given as one secret (its names then cannot be read)."""
    if api_keys is None and not api_keys_secret:
        if api_key_set:
            return ClientKeys(names=(DEFAULT_KEY_NAME,), generated=False), []
        return ClientKeys(), []
    if not isinstance(api_keys, Mapping):
        why = "given as one secret value" if api_keys_secret else f"got {type(api_keys).__name__}"
        return ClientKeys(), [Problem(api_keys_path, f"a map of key name → key is expected ({why}); set each key on its own path: `{SET_ONE}`")]
    problems = []
    names = []
    for name, value in api_keys.items():
        at = f"{api_keys_path}.{name}"
        if not isinstance(name, str) or not _KEY_NAME.match(name):
            problems.append(Problem(at, f"key name {str(name)!r} is not allowed: use {KEY_NAME_RULE} (a label such as `default` or `ci-2026q4`)"))
            continue
        if not (value is None or (isinstance(value, Mapping) and set(value) == {"secure"} and str(value["secure"] or "").strip())):
            problems.append(Problem(at, f"given in plain text (or empty); every key is a secret: `pulumi config set --secret --path 'api_keys.{name}' <key>`"))
            continue
        names.append(name)
    if not api_keys and not problems:
        problems.append(Problem(api_keys_path, f"an empty map names no key; remove it (a key is generated) or set one: `{SET_ONE}`"))
    if api_key_set and DEFAULT_KEY_NAME in names:
        problems.append(
            Problem(
                f"{api_keys_path}.{DEFAULT_KEY_NAME}",
                "api_key is shorthand for the key named `default`, and both are set; keep one "
                "(`pulumi config rm api_key`, or rename this entry)",
            )
        )
    if api_key_set:
        names.append(DEFAULT_KEY_NAME)
    if problems:
        return ClientKeys(), problems
    return ClientKeys(names=tuple(sorted(set(names))), generated=False), []


def key_value_problems(keys: Mapping[str, Any], path_of: Mapping[str, str]) -> list[Problem]:
    """The keys themselves (at `pulumi up`, where the program holds them): each a non-empty
    bearer token of at least 16 characters. `path_of`: key name → its config path."""
    problems = []
    for name, key in sorted(keys.items()):
        at = path_of.get(name, name)
        if not isinstance(key, str) or not key:
            problems.append(Problem(at, "the key is empty; set a key of at least 16 characters"))
        elif len(key) < MIN_KEY_CHARS:
            problems.append(Problem(at, f"the key has {len(key)} characters; at least {MIN_KEY_CHARS} are required (e.g. `openssl rand -hex 24`)"))
        elif not _KEY_VALUE.match(key):
            problems.append(Problem(at, f"the key holds characters a bearer token may not: use {KEY_ALPHABET_RULE}"))
    return problems


def key_names_note(keys: ClientKeys, *, front_door: bool, checked: bool = True) -> str:
    """The plan's line on client keys: names only, where they are checked, how to read one; with
    a front door that checks none (gateway authentication none), that no client key is checked."""
    if not checked:
        return ("API keys: none checked — router.gateway.authentication is none, so the gateway admits every client that "
                "reaches it (internal gateways only); the engines behind it check an internal engine key")
    checked = "checked at the front door; the engines behind it check an internal engine key" if front_door else "checked by each engine"
    if keys.generated:
        source = "`default`, generated at `pulumi up` (pulumi-random, a secret in the stack's state)"
    else:
        source = ", ".join(f"`{n}`" for n in keys.names)
    read = (
        "read the generated key with `pulumi stack output api_key --show-secrets`"
        if keys.generated
        else "read a key with `pulumi config get --path 'api_keys.<name>'` (the `api_key` shorthand: `pulumi config get api_key`)"
    )
    return f"API keys: {source}; {checked}; clients send `Authorization: Bearer <key>`; {read}"
