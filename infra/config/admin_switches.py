"""vLLM switches in a model's `env` or `extra_args` that add administrative routes to its engines
(infra/catalog/vllm_admin.py): refused where someone other than the platform's own pods could call
them, noted elsewhere.

Who reaches an engine's :8000 depends on the front door (infra/render/network_policy.py):
- `router.kind: service`: every pod of the cluster, straight to the engines;
- `router.kind: gateway`: every client the gateway admits — its routes match any path of a
  request whose body names the model (infra/render/epp.py), so `POST /sleep` reaches an engine;
- a router (session, prefix, round-robin): only the front door's pods, Prometheus and the model's
  own pods; the client proxy forwards `/v1/` and the probe paths only (infra/render/router.py).
So a switch is refused in prod (vLLM marks each one for development only) and under kinds service
and gateway in any environment (that reads router.kind: infra/config/cross_checks.py
`admin_switch_problems`); behind a router in dev and staging the plan notes it. A value vLLM cannot
read (VLLM_SERVER_DEV_MODE=true: it parses an integer) is refused everywhere (`switches_on`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.catalog.vllm_admin import BY_DEST, BY_ENV, AdminSwitch, env_switch_on, profiler_named
from infra.catalog.vllm_flags import flag_setting, option_indices, option_value
from infra.errors import Problem

if TYPE_CHECKING:
    from infra.config.model_keys import ModelKeys
    from infra.config.models import ModelConfig


@dataclass(frozen=True)
class SwitchOn:
    """A switch a model's settings turn on: at `key` (as written), spelt `written`."""

    key: str
    written: str
    switch: AdminSwitch


def switches_on(model: ModelConfig, keys: ModelKeys) -> tuple[list[SwitchOn], list[Problem]]:
    """The switches `model` turns on (by effective value: the last flag element wins), and the
    env values vLLM could not read."""
    found: list[SwitchOn] = []
    problems: list[Problem] = []
    for name, value in model.env.items():
        switch = BY_ENV.get(name)
        if switch is None:
            continue
        on = env_switch_on(name, value)
        if on is None:
            problems.append(Problem(keys(f"env.{name}"), (
                f"{value!r} is not a value vLLM can read: it reads {name} as an integer (bool(int(...)), vllm/envs.py), "
                "so every engine would stop at start; write 0 or 1")))
        elif on:
            found.append(SwitchOn(keys(f"env.{name}"), f"{name}={value}", switch))
    args = list(model.extra_args)
    last: dict[str, tuple[int, bool]] = {}
    for j in option_indices(args):
        setting = flag_setting(args[j])
        if setting is None or setting[0] not in BY_DEST:
            continue
        dest, value = setting
        if value is None:  # a value flag: --profiler-config names a profiler; --fault-tolerance-config is on when given
            value = profiler_named(option_value(args, j), args[j]) if dest == "profiler_config" else True
            if not value and dest in last:
                continue  # `--profiler-config.torch_profiler_dir=...` leaves a profiler named earlier on
        last[dest] = (j, value)
    for dest, (j, on) in last.items():
        if on:
            found.append(SwitchOn(keys(f"extra_args[{j}]"), args[j], BY_DEST[dest]))
    return found, problems


def offer(s: AdminSwitch) -> str:
    """What a switch that is on opens, and to whom."""
    guard = "to any client holding an API key" if s.keyed else "without a key"
    return f"makes vLLM serve {', '.join(s.routes)} {guard}, through which a caller could {s.does} (vLLM: development only)"


def admin_switch_note(model: ModelConfig, keys: ModelKeys, on: SwitchOn) -> str:
    """The plan's note for a switch behind a router in dev or staging (nothing refuses it there)."""
    clients = "; clients with a key reach /v1/ routes through the front door" if on.switch.keyed else ""
    return (f"model {model.name}: {on.key.split(':', 1)[-1]}: {on.written!r} {offer(on.switch)}; only the front door's pods, "
            f"Prometheus and the model's own pods reach the engines' :8000 here (the client proxy forwards /v1/ only){clients}; "
            "prod, router.kind service and router.kind gateway refuse it")
