"""Switches of the pinned vLLM that add administrative routes to the engine's API server.

vLLM's API-key middleware (vllm/entrypoints/serve/middleware/authenticate.py, `GUARDED_PREFIX`)
checks the key only on paths under /v1, /v2, /inference and /cohere; every other route is served
to whoever reaches the engine's port. Each switch below adds routes that change the engine or
its host, and vLLM itself marks each one for development only (a "SECURITY WARNING: Development
endpoints are enabled" or "should ONLY be used for local development" log line). Read in the
0.33.0 wheel (the one infra/catalog/vllm_flags.json is extracted from):
vllm/entrypoints/launchers/api_server/routers.py and the routers it registers.

How a value turns a switch on mirrors vLLM: its envs.py reads VLLM_SERVER_DEV_MODE as
`bool(int(value))` (so `true` is not a value: the engine stops at start) and
VLLM_ALLOW_RUNTIME_LORA_UPDATING as `1`/`true`; a boolean flag by its last occurrence (`--no-X`
turns it off); `--profiler-config` when it names a profiler; `--fault-tolerance-config` turns
fault tolerance on whenever it is given (vllm/engine/arg_utils.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class AdminSwitch:
    """One switch: an env var (`dest` None) or a flag (`dest`: the parser's dest), the routes it adds,
    whether they sit under a prefix the API key guards, and what a caller of them can do."""

    name: str
    dest: str | None
    routes: tuple[str, ...]
    keyed: bool
    does: str
    source: str

    @property
    def env(self) -> bool:
        return self.dest is None


SWITCHES: tuple[AdminSwitch, ...] = (
    AdminSwitch(
        "VLLM_SERVER_DEV_MODE", None,
        ("/sleep", "/wake_up", "/collective_rpc", "/reset_prefix_cache", "/server_info", "/pause", "/update_weights"),
        False, "put the engine to sleep, run arbitrary RPCs in its workers, pause it or load other weights",
        "vllm/entrypoints/serve/__init__.py register_vllm_dev_api_routers; vllm/entrypoints/rl/online/api_router.py",
    ),
    AdminSwitch(
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING", None, ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"),
        True, "load LoRA adapters from any path or hub repository into the engine",
        "vllm/entrypoints/serve/lora/api_router.py",
    ),
    AdminSwitch(
        "--profiler-config", "profiler_config", ("/start_profile", "/stop_profile"),
        False, "start the profiler, which slows every request and writes traces to the pod's disk",
        "vllm/entrypoints/serve/profile/api_router.py",
    ),
    AdminSwitch(
        "--enable-elastic-ep", "enable_elastic_ep", ("/scale_elastic_ep",),
        False, "change the replica's data-parallel size", "vllm/entrypoints/serve/elastic_ep/api_router.py",
    ),
    AdminSwitch(
        "--enable-fault-tolerance", "enable_fault_tolerance", ("/fault_tolerance/apply",),
        False, "send its engines recovery instructions", "vllm/entrypoints/serve/fault_tolerance/api_router.py",
    ),
    AdminSwitch(
        "--fault-tolerance-config", "fault_tolerance_config", ("/fault_tolerance/apply",),
        False, "send its engines recovery instructions (the config turns fault tolerance on)",
        "vllm/entrypoints/serve/fault_tolerance/api_router.py",
    ),
    AdminSwitch(
        "--tokens-only", "tokens_only", ("/abort_requests",),
        False, "abort any request in flight", "vllm/entrypoints/scale_out/token_in_token_out/api_router.py",
    ),
)

BY_ENV = {s.name: s for s in SWITCHES if s.env}
BY_DEST = {s.dest: s for s in SWITCHES if not s.env}


def env_switch_on(name: str, value: str) -> bool | None:
    """Whether env var `name` set to `value` turns its switch on, as vLLM reads it; None for a
    value vLLM cannot read (it stops at start)."""
    if name == "VLLM_SERVER_DEV_MODE":
        try:
            return int(value) != 0
        except ValueError:
            return None
    return value.strip().lower() in ("1", "true")


def profiler_named(value: str | None, token: str) -> bool:
    """Whether one `--profiler-config` element names a profiler (which registers the routes):
    `--profiler-config.profiler=torch`, or a JSON object with a `profiler`; a dotted key other
    than `profiler` does not. A value that is not JSON is taken as naming one (it cannot be told)."""
    name = token.split("=", 1)[0]
    if "." in name:
        return name.split(".", 1)[1] == "profiler" and value not in (None, "", "null", "None")
    try:
        doc = json.loads(value or "")
    except json.JSONDecodeError:
        return True
    return not isinstance(doc, dict) or doc.get("profiler") is not None
