"""`router:` — the one front door of the environment: per-model Services, a vllm-router, or a
Gateway API gateway with an endpoint picker per model (`router.gateway`). (What reads the models
or the network too — an objective's model, the endpoint pickers' names, the Gateway API CRDs'
default, the client keys a front door checks — is infra/config/cross_checks.py.)"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from infra.catalog import versions
from infra.config.allow_lists import AllowedCidr
from infra.config.base import NS, Name, StrictModel
from infra.errors import Problem

_HEADER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")


def _header_name(value: str) -> str:
    if not _HEADER.match(value):
        shown = value if len(value) <= 70 else value[:67] + "..."
        raise ValueError(
            f"{shown!r} is not an HTTP header name the router can key on; use letters, digits and '-' "
            "(1 to 64 characters), e.g. x-session-id"
        )
    return value


HeaderName = Annotated[str, AfterValidator(_header_name)]

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _certificate_id(value: str) -> str:
    """DigitalOcean names a certificate by its UUID id (the load balancer's `certificate_id`); a
    certificate's name is what a user sees first in the control panel, and would fail at deploy."""
    if not _UUID.match(value.lower()):
        shown = value if len(value) <= 70 else value[:67] + "..."
        raise ValueError(
            f"{shown!r} is not a DigitalOcean certificate id: the load balancer takes the certificate's UUID "
            "(`doctl compute certificate list` shows it in the ID column, e.g. 892071a0-bb95-49bc-8021-3afd67a210bf), "
            "not its name"
        )
    return value


CertificateId = Annotated[str, AfterValidator(_certificate_id)]


class GatewayObjectiveConfig(StrictModel):
    """An InferenceObjective: a priority the endpoint picker gives the requests that name it."""

    name: Name = Field(description="Objective name; clients send it in the `x-llm-d-inference-objective` header.")
    model: Name = Field(description="The model (models[].name) whose pool the objective belongs to.")
    priority: int = Field(
        ge=-(2**31),
        le=2**31 - 1,
        description="Higher is served first; below 0 the request is sheddable (dropped while the pool is saturated). Unset objective: 0.",
    )


class GatewayConfig(StrictModel):
    """`router.kind: gateway`: one Agentgateway gateway (Gateway API + Inference Extension) for every
    model, with an llm-d endpoint picker per model choosing the engine (docs/serving.md)."""

    routing: Literal["prefix", "session"] = Field(
        "prefix",
        description="Scorer preset of the endpoint pickers: prefix = prefix-cache 3, queue 2, kv-cache-utilization 2 (llm-d's defaults); session = those plus session-affinity 2 on router.session_header (an alpha plugin).",
    )
    scorers: dict[str, float] | None = Field(
        None,
        description="Explicit scorer weights instead of the preset, e.g. {prefix-cache-scorer: 3, queue-scorer: 2}; names from infra/catalog/epp.py, weights > 0 and ≤ 100.",
    )
    failure_mode: Literal["open", "close"] = Field(
        "open",
        description="When a model's endpoint picker is unavailable: open = the gateway still forwards to one of the model's engines (no scoring); close = requests fail.",
    )
    authentication: Literal["api-key", "none"] = Field(
        "api-key",
        description="api-key: the gateway checks `Authorization: Bearer <key>` against every named key before routing (api_keys / api_key, or the generated key; required when router.public); none: it checks no client key (internal gateways only). Either way it sends the internal engine key to the engines, which check only that.",
    )
    objectives: list[GatewayObjectiveConfig] = Field(
        default_factory=list, description="Optional InferenceObjectives (priorities), each for one model, e.g. interactive vs batch."
    )
    install_gateway_api_crds: bool | None = Field(
        None,
        description="Install the Gateway API CRDs (standard channel, pinned). Default: false on VPC-native clusters (network.cluster_subnet set), where DOKS manages them, true elsewhere.",
    )


class RouterConfig(StrictModel):
    """The one request router in front of every model of the environment."""

    kind: Literal["service", "session", "prefix", "round-robin", "gateway"] = Field(
        "session",
        description=(
            "service: clients use each model's ClusterIP Service (kube-proxy balancing); session/prefix/round-robin: "
            "one vLLM router (vllm-router 0.1.17) for all models, routing by the request's `model` with policy "
            "consistent_hash on x-session-id / cache_aware / round_robin; gateway: one Gateway API gateway with an "
            "endpoint picker per model (router.gateway)."
        ),
    )
    session_header: HeaderName = Field(
        "x-session-id",
        description=(
            "HTTP header that pins a conversation to a replica: kind session (vllm-router hashes x-session-id "
            "and has no flag to rename it: only x-session-id is accepted), or kind gateway with "
            "router.gateway.routing session (the endpoint pickers' session-affinity scorer keys on any header)."
        ),
    )
    replicas: int = Field(2, ge=1, le=20, description="Router replicas (kind gateway: gateway proxy replicas); a PodDisruptionBudget keeps one up.")
    public: bool = Field(False, description="Expose through one DigitalOcean LoadBalancer (clients send one of the API keys: api_keys / api_key, or the generated one).")
    tls_certificate_id: CertificateId | None = Field(None, description="DO certificate id (its UUID, not its name) for TLS termination on the LoadBalancer (required with public in prod; noted when missing elsewhere).")
    allowed_source_cidrs: list[AllowedCidr] = Field(
        default_factory=list,
        description="LoadBalancer source allow-list, IPv4; empty: open to the internet (refused with public in prod; noted elsewhere). Judged by the address space its entries open together, like cluster.control_plane_allowed_cidrs: half the IPv4 space or more is refused like 0.0.0.0/0; documentation and other unreachable ranges are noted (a prod list of only those blocks `pulumi up`).",
    )
    image: str | None = Field(
        None,
        description=(
            "An image with vllm-router 0.1.17 on PATH (build images/vllm-router/Dockerfile; explicit tag, not latest). "
            "Default: the pinned Python image installs the hash-locked wheels in an initContainer."
        ),
    )
    gateway: GatewayConfig = Field(default_factory=GatewayConfig, description="The gateway of router.kind gateway.")


def client_keys_checked(router: RouterConfig) -> bool:
    """Whether anything checks the client keys: every front door and engine does, except a
    gateway whose authentication is none."""
    return not (router.kind == "gateway" and router.gateway.authentication == "none")


def session_header_in_effect(router: RouterConfig) -> bool:
    """Whether anything keys on `router.session_header`: vllm-router's consistent hash (kind
    session), or the gateway's session-affinity scorer (kind gateway with routing session, or the
    scorer named in `router.gateway.scorers`; infra/catalog/epp.py)."""
    from infra.catalog.epp import SESSION_AFFINITY  # local import: keeps the catalog out of config's top

    if router.kind == "session":
        return True
    if router.kind != "gateway":
        return False
    gw = router.gateway
    return SESSION_AFFINITY in gw.scorers if gw.scorers is not None else gw.routing == "session"


# Object names the gateway renders per model (infra/render/epp.py): `<model>-epp` must not be
# another model's name, whose Service, Deployment and labels it would collide with
# (infra/config/cross_checks.py `endpoint_picker_name_problems`).
EPP_SUFFIX = "-epp"


def check_gateway(router: RouterConfig) -> list[Problem]:
    """`router.gateway` is read only by kind gateway; scorer names are the EPP's; a public gateway
    checks API keys (each objective: `objective_name_problems`; the model it names, and a model
    named like another's endpoint picker: infra/config/cross_checks.py)."""
    from infra.catalog.epp import MAX_WEIGHT, SCORERS  # local import: keeps the catalog out of config's top

    at = f"{NS}router.gateway"
    gw = router.gateway
    if router.kind != "gateway":
        return [Problem(f"{at}.{key}", f"applies only with router.kind gateway (kind is {router.kind!r})") for key in sorted(gw.model_fields_set)]
    problems = []
    for name, weight in (gw.scorers or {}).items():
        if name not in SCORERS:
            close = difflib.get_close_matches(name, list(SCORERS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(
                Problem(
                    f"{at}.scorers.{name}",
                    f"{name!r} is not a scorer of the pinned endpoint picker (llm-d-router {versions.LLM_D_ROUTER_VERSION}){hint}; "
                    f"allowed: {', '.join(SCORERS)} (infra/catalog/epp.py)",
                )
            )
        elif not 0 < weight <= MAX_WEIGHT:
            problems.append(Problem(f"{at}.scorers.{name}", f"{weight!r} is out of range; a weight must be greater than 0 and at most {MAX_WEIGHT:g}"))
    if gw.scorers is not None and not gw.scorers:
        problems.append(Problem(f"{at}.scorers", "is empty; name at least one scorer, or leave it unset for the routing preset"))
    if gw.scorers is not None and "routing" in gw.model_fields_set:
        problems.append(Problem(f"{at}.routing", "is ignored when router.gateway.scorers is given; set one of them"))
    if router.public and gw.authentication == "none":
        problems.append(
            Problem(
                f"{at}.authentication",
                "'none' on a public endpoint (router.public: true) would let anyone on the internet use the GPUs; "
                "use api-key (with the api_key secret), or make the gateway internal",
            )
        )
    return problems


def objective_name_problems(gateway: GatewayConfig) -> list[list[Problem]]:
    """Each objective's problems, by index: a name an earlier objective has (the model an objective
    names: infra/config/cross_checks.py `objective_model_problems`, reported objective by objective
    with these)."""
    at = f"{NS}router.gateway"
    seen: dict[str, int] = {}
    out: list[list[Problem]] = []
    for j, objective in enumerate(gateway.objectives):
        where = f"{at}.objectives[{j}]"
        problems = []
        if objective.name in seen:
            problems.append(Problem(f"{where}.name", f"{objective.name!r} duplicates objectives[{seen[objective.name]}]; objective names must be unique"))
        seen.setdefault(objective.name, j)
        out.append(problems)
    return out


def check_router(router: RouterConfig, environment: str) -> list[Problem]:
    """The router settings against the router kind: public needs a router that checks keys, the
    session header vllm-router reads, a pinned router image, TLS only on the public endpoint (and
    in prod, TLS and a source allow-list on a public one)."""
    problems = []
    if router.public and router.kind == "service":
        problems.append(Problem(NS + "router.public", "true needs a router (kind session, prefix, round-robin or gateway) to check the API key; kind 'service' exposes vLLM directly"))
    if router.kind == "session" and router.session_header.lower() != "x-session-id":
        problems.append(Problem(NS + "router.session_header", f"{router.session_header!r}: vllm-router 0.1.17 keys sessions on x-session-id and has no flag to rename the header; use x-session-id (clients send that header)"))
    image = router.image
    if image is not None and (":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest") or not image.strip() or any(c.isspace() for c in image)):
        problems.append(Problem(NS + "router.image", f"{image!r} is not a pinned image reference; give an image built from images/vllm-router/Dockerfile with an explicit tag other than latest"))
    if router.tls_certificate_id and not router.public:
        problems.append(Problem(NS + "router.tls_certificate_id", "applies only with router.public: true (TLS terminates on the public load balancer)"))
    if environment == "prod":
        problems += [Problem(NS + "router.public", gap) for gap in public_exposure_gaps(router)]
    return problems


def public_exposure_gaps(router: RouterConfig) -> list[str]:
    """What a public front door lacks (issue 30): TLS, or else the API keys and prompts cross the
    internet in clear; a source allow-list, or else anyone on the internet can try keys against it.
    Refused in prod (check_router), noted in dev and staging (infra/stack_plan/notes.py)."""
    if not router.public:
        return []
    gaps = []
    if not router.tls_certificate_id:
        gaps.append("true without router.tls_certificate_id: clients would send their API keys and prompts in clear "
                    "over the internet; give the id of a DigitalOcean certificate for the front door's domain")
    if not router.allowed_source_cidrs:
        gaps.append("true without router.allowed_source_cidrs: the front door would take requests (and key guesses) "
                    "from the whole internet; list your clients' public ranges")
    return gaps
