"""The llm-d endpoint picker's scorer plugins that `router.gateway.scorers` may name.

Facts of llm-d/llm-d-router @ v0.10.0 (the EPP pinned in versions.py): the plugin type names are
the `...Type` constants of pkg/epp/framework/plugins/scheduling/scorer/**, registered by
cmd/epp/runner/runner.go `registerInTreePlugins` with a stability level; an Alpha plugin only
loads with `--allow-experimental-plugins` (pkg/epp/framework/interface/plugin/registry.go
`ValidatePluginStability`). Listed are the scorers that work with their default parameters and
the producers the EPP registers by default (prefix-cache-scorer's `approx-prefix-cache-producer`
is `RegisterAsDefaultProducer`); scorers that need a tokenizer, KV-cache events, a latency
predictor or another plugin's name (precise-prefix-cache, token-load, latency, no-hit-lru,
active-request) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scorer:
    """One EPP scorer plugin type."""

    type: str
    stability: str  # "beta" | "alpha"
    what: str


SCORERS: dict[str, Scorer] = {
    s.type: s
    for s in (
        Scorer("prefix-cache-scorer", "beta", "share of the prompt's blocks an engine is estimated to hold in its prefix cache"),
        Scorer("queue-scorer", "beta", "fewer requests waiting (vllm:num_requests_waiting) scores higher"),
        Scorer("kv-cache-utilization-scorer", "beta", "lower KV-cache use (vllm:kv_cache_usage_perc) scores higher"),
        Scorer("running-requests-size-scorer", "beta", "fewer requests running (vllm:num_requests_running) scores higher"),
        Scorer("load-aware-scorer", "beta", "queue length against a threshold (default parameters)"),
        Scorer("lora-affinity-scorer", "beta", "engines with the requested LoRA adapter loaded score higher"),
        Scorer("session-affinity-scorer", "alpha", "the engine that served the session (header) before scores 1"),
    )
}

SESSION_AFFINITY = "session-affinity-scorer"

# The EPP's own default profile when given no configuration (pkg/epp/config/loader/defaults.go
# `loadDefaultConfig` @ v0.10.0): prefix-cache 3, queue 2, kv-cache-utilization 2.
DEFAULT_WEIGHTS: dict[str, float] = {"prefix-cache-scorer": 3.0, "queue-scorer": 2.0, "kv-cache-utilization-scorer": 2.0}
# `router.gateway.routing: session` adds the session-affinity scorer to those, keyed on
# router.session_header (strategy `session_id`, pkg/epp/framework/plugins/scheduling/util/
# sessionaffinity/session_id.go @ v0.10.0): a conversation stays on its engine while the engine's
# queue and KV cache still count.
SESSION_WEIGHT = 2.0
MAX_WEIGHT = 100.0


def preset_weights(routing: str) -> dict[str, float]:
    """The scorer weights of a routing preset ("prefix" | "session")."""
    if routing == "session":
        return {SESSION_AFFINITY: SESSION_WEIGHT, **DEFAULT_WEIGHTS}
    return dict(DEFAULT_WEIGHTS)
