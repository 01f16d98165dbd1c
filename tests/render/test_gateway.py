"""The gateway's renderers (infra/render/gateway.py, epp.py): pure shapes, least privilege, routing."""

from __future__ import annotations

import yaml

from infra.catalog.epp import DEFAULT_WEIGHTS, SCORERS, preset_weights
from infra.render.epp import (
    MODEL_HEADER,
    PoolSpec,
    epp_config,
    render_epp_role,
    render_http_route,
    render_inference_pool,
    render_objectives,
    render_pool,
    selection_conflicts,
    selector_matches,
)
from infra.render.gateway import (
    GatewaySpec,
    gateway_front_door,
    render_gateway_resources,
    render_parameters,
    route_timeout_seconds,
    routing_summary,
)
from infra.render.model_service import selector_labels
from tests import gateway_schemas

PREFIX = tuple(preset_weights("prefix").items())


def _pool(model="chat", served="org/chat", **kw) -> PoolSpec:
    return PoolSpec(model=model, served_model_name=served, scorers=kw.pop("scorers", PREFIX), gateway_name="inference-gateway", **kw)


def _gateway(**kw) -> GatewaySpec:
    pools = kw.pop("pools", (_pool(), _pool("code", "org/code")))
    return GatewaySpec(name="t-gateway", pools=pools, **kw)


def test_the_pool_selects_exactly_its_models_engine_pods():
    chat, code = _pool(), _pool("code", "org/code")
    pool = render_inference_pool(chat)
    assert pool["spec"]["selector"]["matchLabels"] == selector_labels("chat")
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    assert selector_matches(pool["spec"]["selector"]["matchLabels"], {**selector_labels("chat"), "extra": "x"})
    assert not selector_matches(pool["spec"]["selector"]["matchLabels"], selector_labels("code"))
    assert selection_conflicts([chat, code], {"chat": selector_labels("chat"), "code": selector_labels("code")}) == []
    # a pool whose selector also matches another model's pods is reported
    loose = PoolSpec(model="chat", served_model_name="c", scorers=PREFIX, gateway_name="g")
    assert selection_conflicts([loose], {"chat": selector_labels("chat"), "other": selector_labels("chat")}) == [("chat", "other")]


def test_the_route_sends_its_model_name_to_its_pool_only():
    route = render_http_route(_pool())
    (rule,) = route["spec"]["rules"]
    (match,) = rule["matches"]
    assert match["headers"] == [{"type": "Exact", "name": MODEL_HEADER, "value": "org/chat"}]
    assert rule["backendRefs"] == [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "chat"}]
    assert gateway_schemas.errors(route) == []


def test_the_epp_config_uses_registered_scorers_with_the_documented_weights():
    config = epp_config(_pool())
    assert config["apiVersion"] == "llm-d.ai/v1alpha1" and config["kind"] == "EndpointPickerConfig"
    (profile,) = config["schedulingProfiles"]
    assert {p["pluginRef"]: p["weight"] for p in profile["plugins"]} == DEFAULT_WEIGHTS == {
        "prefix-cache-scorer": 3.0, "queue-scorer": 2.0, "kv-cache-utilization-scorer": 2.0,
    }  # fmt: skip
    assert all(p["type"] in SCORERS for p in config["plugins"])
    assert gateway_schemas.errors(config) == []


def test_the_epp_role_is_namespaced_and_read_only():
    role = render_epp_role(_pool())
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "inference-engines"  # beside the engines it reads
    resources = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert resources == {("", "pods"), ("inference.networking.k8s.io", "inferencepools"), ("llm-d.ai", "inferenceobjectives")}
    assert all(rule["verbs"] == ["get", "list", "watch"] for rule in role["rules"])


def test_every_pool_object_validates():
    import kubernetes_validate

    for obj in render_pool(_pool(objectives=(("interactive", 10), ("batch", -1)))):
        if obj["kind"] in gateway_schemas.kinds():
            assert gateway_schemas.errors(obj) == [], obj["kind"]
        else:
            kubernetes_validate.validate(obj, "1.33", strict=True)
        if obj["kind"] == "ConfigMap":
            assert gateway_schemas.errors(yaml.safe_load(next(iter(obj["data"].values())))) == []


def test_objectives_point_at_their_pool():
    objectives = render_objectives(_pool(objectives=(("interactive", 10),)))
    assert [o["spec"] for o in objectives] == [
        {"priority": 10, "poolRef": {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "chat"}}
    ]


def test_request_timeout_from_slo_and_output_length():
    # 2 s TTFT + 4 × 300 tokens × 50 ms = 62 s at the SLO; × 2, rounded up to 10 s
    assert route_timeout_seconds(2000, 50, 300) == 130
    assert route_timeout_seconds(100, 5, 10) == 60  # floor


def test_public_gateway_with_tls_terminates_on_a_regional_load_balancer():
    params = render_parameters(_gateway(public=True, tls_certificate_id="cert", allowed_source_cidrs=("10.0.0.0/8",)))
    service = params["spec"]["service"]
    annotations = service["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/do-loadbalancer-type"] == "REGIONAL"
    assert annotations["service.beta.kubernetes.io/do-loadbalancer-tls-ports"] == "443"
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/8"]
    assert gateway_schemas.errors(params) == []


def test_internal_gateway_has_no_load_balancer_and_policies_validate():
    spec = _gateway(api_key_secret="k")
    objs = render_gateway_resources(spec)
    assert render_parameters(spec)["spec"]["service"] == {"spec": {"type": "ClusterIP"}}
    assert [o["kind"] for o in objs] == ["AgentgatewayParameters", "Gateway", "AgentgatewayPolicy", "AgentgatewayPolicy"]
    for obj in objs:
        assert gateway_schemas.errors(obj) == [], obj["metadata"]["name"]
    assert len(render_gateway_resources(_gateway())) == 3  # no key: no backend-auth policy


def test_front_door_names_every_model_and_the_routing():
    door = gateway_front_door(_gateway(public=True, tls_certificate_id="c", api_key_secret="k"))
    assert door.kind == "gateway" and door.models == ("org/chat", "org/code")
    assert door.routing == "EPP: prefix+queue+kv scorers" == routing_summary(PREFIX)
    assert door.public_url.startswith("https://") and "API key checked at the gateway" in door.why
    assert len(door.urls) == 1 and door.urls[0].endswith("/v1")


def test_policies_keep_the_crds_cel_rules():
    """The field lists drop CEL rules; these are the ones our policies could break
    (agentgateway_policy_types.go @ v1.4.1: PreRouting targets a Gateway and carries only
    extAuth/authorization/transformation/extProc/*Authentication/cors; one targetRef kind)."""
    pre_routing_fields = {"phase", "authorization", "transformation", "extProc", "extAuth", "jwtAuthentication",
                          "basicAuthentication", "apiKeyAuthentication", "cors"}  # fmt: skip
    for policy in [o for o in render_gateway_resources(_gateway(api_key_secret="k")) if o["kind"] == "AgentgatewayPolicy"]:
        spec = policy["spec"]
        assert len({t["kind"] for t in spec["targetRefs"]}) == 1
        traffic = spec.get("traffic", {})
        if traffic.get("phase") == "PreRouting":
            assert set(traffic) <= pre_routing_fields
            assert all(t["kind"] == "Gateway" and t["group"] == "gateway.networking.k8s.io" for t in spec["targetRefs"])
