"""The environment's front door: where clients send requests, for which models, routed how and why.

A pure value in the StackPlan, shown by `infra plan` (text and `--json`) and compared by `infra
diff` (a change of kind or URL is an endpoint change clients must follow). Generic on purpose:
every router kind fills the same fields — the vLLM router (session / prefix / round-robin), a
gateway, or none (kind `service`: one ClusterIP Service per model, so one URL per model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LB_ADDRESS = "<load balancer address>"  # assigned by DigitalOcean at deploy time


@dataclass(frozen=True)
class FrontDoor:
    """kind: the router kind (`router.kind`).
    urls: in-cluster base URLs; one for a shared front door, one per model for kind `service`.
    public_url: the public load balancer's base URL (its address is known only after deploy), or None.
    models: served model names (the `model` clients send), sorted.
    routing: the routing policy in the router's own terms (e.g. `consistent_hash`).
    why: one line on what the policy does for this stack.
    client_keys: the names of the API keys clients may send (never the keys).
    """

    kind: str
    urls: tuple[str, ...]
    public_url: str | None
    models: tuple[str, ...]
    routing: str
    why: str
    client_keys: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "urls": list(self.urls),
            "public_url": self.public_url,
            "models": list(self.models),
            "routing": self.routing,
            "why": self.why,
            "client_keys": list(self.client_keys),
        }

    def lines(self) -> list[str]:
        """The plan text's front-door block."""
        out = [f"  kind {self.kind}: {self.routing} — {self.why}"]
        out += [f"  internal: {u}" for u in self.urls]
        if self.public_url:
            out.append(f"  public:   {self.public_url}")
        out.append(f"  models:   {', '.join(self.models)}")
        if self.client_keys:
            out.append(f"  keys:     {', '.join(self.client_keys)} (names; clients send `Authorization: Bearer <key>`)")
        return out


def public_base_url(tls: bool) -> str:
    return f"{'https' if tls else 'http'}://{LB_ADDRESS}"


def endpoint_changes(old: dict | None, new: dict | None) -> list[tuple[str, Any, Any]]:
    """(field, before, after) of the front-door fields clients depend on: kind, URLs, public URL, models."""
    if old == new:
        return []
    a, b = old or {}, new or {}
    return [(k, a.get(k), b.get(k)) for k in ("kind", "urls", "public_url", "models", "routing") if a.get(k) != b.get(k)]
