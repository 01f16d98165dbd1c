"""The keys the stack checks, as values the plan can name but never shows.

Clients send one of the named keys (`api_keys`, `api_key` as the key named `default`); without any,
one `default` key is generated once and kept, a secret, in the stack's state (pulumi-random) — so
no environment serves without a key (issue 30). Behind a front door the engines check one internal
engine key, the `engine_key` secret or generated the same way, which never rotates with the client keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.config.client_keys import DEFAULT_KEY_NAME
from infra.resource_graph.graph import GraphBuilder, Options
from infra.resource_graph.values import Ref, SecretInput

RANDOM_PASSWORD_TYPE = "random:index/randomPassword:RandomPassword"
# The generated value and its hash are secret outputs (pulumi-random's own marking).
RANDOM_SECRET_OUTPUTS = ("bcryptHash", "result")


def _generated(b: GraphBuilder, name: str) -> Ref:
    key = b.resource(RANDOM_PASSWORD_TYPE, name, {"length": 48, "special": False}, parent=None,
                     options=Options(additional_secret_outputs=RANDOM_SECRET_OUTPUTS), outputs=("result",))  # fmt: skip
    return Ref(key, "result", secret=True)


def client_keys(b: GraphBuilder, stack: str, names: tuple[str, ...], stored: set[str], generated: bool) -> dict[str, Any]:
    """The keys clients may send, by name. The generated key keeps its name of before named keys
    existed (`<stack>-api-key`), so a live stack's generated key stays the same."""
    keys: dict[str, Any] = {}
    if not generated:
        shorthand = DEFAULT_KEY_NAME if "api_key" in stored else None
        keys = {n: SecretInput(f"api_keys.{n}") for n in names if n != shorthand}
        if shorthand:
            keys[DEFAULT_KEY_NAME] = SecretInput("api_key")
    if not keys:
        keys[DEFAULT_KEY_NAME] = _generated(b, f"{stack}-api-key")
    return {name: keys[name] for name in sorted(keys)}


def engine_key(b: GraphBuilder, stack: str, has_front_door: bool, *, given: bool = False) -> Ref | SecretInput | None:
    """The one key engines behind a front door check: the front door sends it upstream instead of
    the client's key, so client keys rotate without touching (or restarting) an engine. `given`:
    the stack sets it (the `engine_key` secret), so none is generated."""
    if not has_front_door:
        return None
    return SecretInput("engine_key") if given else _generated(b, f"{stack}-engine-key")


def stack_secret(key: str, stored: set[str]) -> SecretInput | None:
    """A secret of the stack's configuration the plan refers to, if the stack stores (or needs) it."""
    return SecretInput(key) if key in stored else None


def default_key(keys: Mapping[str, Any]) -> Any:
    return keys.get(DEFAULT_KEY_NAME)
