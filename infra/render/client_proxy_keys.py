"""The key files of the router pod's client proxy (issue 30: several named client keys, one engine key).

The client proxy (nginx, infra/render/router.py `client_proxy_config`) checks `Authorization:
Bearer <key>` against every named client key and sends the engine key upstream in its place. Both
come as files from Secrets mounted into the proxy container (never env, never the command line,
never the rendered ConfigMap):

- Secret `router-client-keys`, file `client-keys.map`: one nginx `map` entry per named key,
  `"~^Bearer <key>$" <name>;`. A regular expression because nginx matches a map's plain strings
  ignoring case, and a key must match exactly; the bearer-token alphabet the config allows
  (infra/config/client_keys.py) has two characters special to PCRE, `.` and `+`, written as
  one-character classes; none is special inside nginx quotes.
- Secret `router-upstream-key`, file `engine-key.map`: `default "Bearer <engine key>";`, the one
  entry of a map with a constant source, so nginx holds the value without an env lookup.

Both are projected into one directory; the watch loop (client_proxy.sh) reloads nginx when a file
changes, so a key added or removed by `pulumi up` works within the kubelet's sync period with no
restart. The functions here are pure: the component (components/router.py) applies them to the
keys' Pulumi secret Outputs, so the files exist only inside Secrets.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

CLIENT_KEYS_SECRET = "router-client-keys"
ENGINE_KEY_SECRET = "router-upstream-key"  # the engine key; not `router-engine-key`, which a model named `router` would take
CLIENT_KEYS_FILE = "client-keys.map"
ENGINE_KEY_FILE = "engine-key.map"
KEYS_DIR = "/etc/client-proxy/keys"  # where the proxy container sees both files
WATCH_SCRIPT = Path(__file__).with_name("client_proxy.sh")
WATCH_SCRIPT_NAME = "client_proxy.sh"
WATCH_SECONDS = 5
_PCRE_SPECIAL = {".": "[.]", "+": "[+]"}


def _exact(key: str) -> str:
    return "".join(_PCRE_SPECIAL.get(c, c) for c in key)


def client_keys_map(keys: Mapping[str, str]) -> str:
    """`client-keys.map`: key name by `Authorization` value, one entry per named key (sorted by name).
    The keys are valid by construction (infra/config/client_keys.py `key_value_problems`)."""
    lines = ["# key name by Authorization header (infra/render/client_proxy_keys.py); no entry: 401"]
    lines += [f'"~^Bearer {_exact(key)}$" {name};' for name, key in sorted(keys.items())]
    return "\n".join(lines) + "\n"


def engine_key_map(engine_key: str) -> str:
    """`engine-key.map`: the `Authorization` value the proxy sends upstream."""
    return f'default "Bearer {engine_key}";\n'


def keys_volume() -> dict:
    """Both Secrets in one read-only directory of the proxy container (a projected volume: the
    kubelet updates it in place when either Secret changes)."""
    return {
        "name": "client-proxy-keys",
        "projected": {
            "sources": [
                {"secret": {"name": CLIENT_KEYS_SECRET, "items": [{"key": CLIENT_KEYS_FILE, "path": CLIENT_KEYS_FILE}]}},
                {"secret": {"name": ENGINE_KEY_SECRET, "items": [{"key": ENGINE_KEY_FILE, "path": ENGINE_KEY_FILE}]}},
            ],
        },
    }
