"""Issue 17, `router.kind: gateway` end to end: a staging variant plans cleanly and
deterministically; every object validates (built-ins against Kubernetes 1.33, the custom
resources and the EPP config against the published field lists of the pinned versions); the
HTTPRoutes send each model to its own pool; prod gets one gateway and one endpoint for both models;
bad input is one clear config error."""

from __future__ import annotations

import pytest
import yaml

from infra.catalog import versions
from infra.config import load_stack_file
from infra.errors import ConfigError
from infra.offline import build_plan, kubernetes_objects
from infra.render.epp import MODEL_HEADER, selector_matches
from tests import gateway_schemas
from tests.conftest import ROOT, make_project, policy_violations

GATEWAY = {"kind": "gateway", "replicas": 2}


def _write_variant(root, stack: str, router: dict, mutate=None):
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["inference-platform:router"] = router
    if mutate:
        mutate(doc["config"])
    make_project(root)
    (root / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    return root


def _variant(root, stack: str, router: dict = GATEWAY, mutate=None):
    return build_plan(stack, _write_variant(root, stack, router, mutate))


@pytest.fixture(scope="module")
def staging(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("gw-staging"), "staging")


@pytest.fixture(scope="module")
def prod(tmp_path_factory):
    public = {**GATEWAY, "replicas": 3, "public": True, "tls_certificate_id": "5a1c2f4e-9b3d-4e7a-8c21-0f6d3b9a7e15", "allowed_source_cidrs": ["203.0.113.0/24"]}
    return _variant(tmp_path_factory.mktemp("gw-prod"), "prod", public)


def _objects(plan, kind=None):
    return [o for o in kubernetes_objects(plan) if kind is None or o["kind"] == kind]


def _types(plan, suffix):
    return [r for r in plan.resources if r["type"].endswith(suffix)]


# --- plans cleanly, deterministically --------------------------------------------------------


def test_staging_gateway_plans_with_a_front_door(staging):
    door = staging.to_dict()["front_door"]
    assert door["kind"] == "gateway" and door["urls"] == ["http://inference-gateway.inference.svc.cluster.local/v1"]
    assert door["models"] == ["Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"]  # the served model name clients send
    assert door["routing"] == "EPP: prefix+queue+kv scorers"
    assert "API key checked at the gateway" in door["why"] and door["public_url"] is None
    # the gateway checks keys: the stack's api_key, or one generated at `pulumi up` (issue 30)
    assert not any("api_key" in s for s in staging.summary["secrets_to_set"])
    assert any("pulumi stack output api_key --show-secrets" in n for n in staging.summary["notes"])
    # no production-stack router under kind gateway
    assert not [r for r in staging.resources if r["type"] == "inference-platform:router:Router"]
    assert len(_types(staging, "InferenceGateway")) == 1


def test_gateway_plan_is_byte_identical_across_runs(staging, tmp_path):
    assert _variant(tmp_path, "staging").to_json() == staging.to_json()


def test_committed_stacks_front_door_is_the_router():
    """The shipped stacks (router kind session) keep the one vLLM router as their front door."""
    from tests.conftest import plan_of

    assert plan_of("staging").to_dict()["front_door"]["kind"] == "session"


def test_pins_are_what_the_fixtures_were_read_at():
    tags = {gateway_schemas.fixture(k)["source"]["repository"]: gateway_schemas.fixture(k)["source"]["tag"] for k in gateway_schemas.kinds()}
    assert tags["agentgateway/agentgateway"] == versions.AGENTGATEWAY_CHART_VERSION
    assert tags["kubernetes-sigs/gateway-api-inference-extension"] == versions.GATEWAY_API_INFERENCE_EXTENSION_VERSION
    assert tags["kubernetes-sigs/gateway-api"] == versions.GATEWAY_API_VERSION
    assert tags["llm-d/llm-d-router"] == versions.LLM_D_ROUTER_VERSION
    assert versions.EPP_IMAGE.endswith(":" + versions.LLM_D_ROUTER_VERSION)
    assert tags["kubernetes-sigs/lws"] == versions.LWS_IMAGE_TAG == "v" + versions.LWS_CHART_VERSION
    assert tags["k8snetworkplumbingwg/multus-cni"] == versions.MULTUS_VERSION


# --- every object validates --------------------------------------------------------------------


@pytest.mark.parametrize("which", ["staging", "prod"])
def test_built_in_objects_validate_against_kubernetes_1_33(which, request):
    import kubernetes_validate

    plan = request.getfixturevalue(which)
    checked = 0
    for obj in _objects(plan):
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        if "." in group and not group.endswith("k8s.io") or group.endswith("x-k8s.io") or group in (
            "inference.networking.k8s.io", "gateway.networking.k8s.io"
        ):
            continue
        kubernetes_validate.validate(obj, "1.33", strict=True)
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("which", ["staging", "prod"])
def test_custom_resources_validate_against_the_pinned_field_lists(which, request):
    plan = request.getfixturevalue(which)
    known = set(gateway_schemas.kinds())
    seen = set()
    for obj in _objects(plan):
        if obj["kind"] in known:
            assert gateway_schemas.errors(obj) == [], (obj["kind"], obj["metadata"]["name"])
            seen.add(obj["kind"])
    assert {"Gateway", "HTTPRoute", "InferencePool", "AgentgatewayPolicy", "AgentgatewayParameters"} <= seen


def test_epp_configs_validate_against_the_config_types(staging):
    configs = [o for o in _objects(staging, "ConfigMap") if o["metadata"]["name"].endswith("-epp")]
    assert configs
    for cm in configs:
        (text,) = cm["data"].values()
        assert gateway_schemas.errors(yaml.safe_load(text)) == []


def test_an_unknown_field_fails_the_validator(staging):
    pool = _objects(staging, "InferencePool")[0]
    bad = {**pool, "spec": {**pool["spec"], "modelServerSelector": {}}}
    assert gateway_schemas.errors(bad)


# --- the routes send each model to its pool only -----------------------------------------------


def _route_table(plan):
    """served model name → pool names its route sends it to."""
    table: dict[str, list[str]] = {}
    for route in _objects(plan, "HTTPRoute"):
        for rule in route["spec"]["rules"]:
            values = [h["value"] for m in rule["matches"] for h in m.get("headers", []) if h["name"] == MODEL_HEADER]
            assert len(values) == 1, route["metadata"]["name"]
            table.setdefault(values[0], []).extend(b["name"] for b in rule["backendRefs"] if b["kind"] == "InferencePool")
    return table


def test_each_model_reaches_its_own_pool_only(prod):
    engines = [o for o in _objects(prod, "Deployment") if o["metadata"]["labels"].get("app.kubernetes.io/name") == "vllm"]
    pools = {p["metadata"]["name"]: p for p in _objects(prod, "InferencePool")}
    table = _route_table(prod)
    assert len(table) == len(prod.models) == 2
    for engine in engines:
        model = engine["metadata"]["labels"]["inference-platform/model"]
        labels = engine["spec"]["template"]["metadata"]["labels"]
        selecting = [name for name, p in pools.items() if selector_matches(p["spec"]["selector"]["matchLabels"], labels)]
        assert selecting == [model], (model, selecting)
    for served_name, targets in table.items():
        assert len(targets) == 1 and targets[0] in pools, served_name


def test_prod_has_one_gateway_and_one_endpoint_for_both_models(prod):
    assert len(_objects(prod, "Gateway")) == 1
    public = [s for s in _objects(prod, "Service") if s["spec"].get("type") == "LoadBalancer"]
    assert public == []  # the LoadBalancer is the controller's, configured by AgentgatewayParameters
    (params,) = _objects(prod, "AgentgatewayParameters")
    svc = params["spec"]["service"]
    assert svc["spec"]["type"] == "LoadBalancer" and svc["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert svc["metadata"]["annotations"]["service.beta.kubernetes.io/do-loadbalancer-certificate-id"] == "5a1c2f4e-9b3d-4e7a-8c21-0f6d3b9a7e15"
    door = prod.to_dict()["front_door"]
    assert len(door["models"]) == 2 and door["public_url"].startswith("https://")
    assert not [r for r in prod.resources if r["type"] == "inference-platform:router:Router"]


def test_public_gateway_checks_the_api_key_from_a_pulumi_secret(prod):
    (secret,) = [s for s in _types(prod, "core/v1:Secret") if s["inputs"]["metadata"]["name"] == "inference-gateway-api-key"]
    assert secret["inputs"]["stringData"] == "[secret]"
    policies = {p["metadata"]["name"]: p for p in _objects(prod, "AgentgatewayPolicy")}
    traffic = policies["inference-gateway-prerouting"]["spec"]["traffic"]
    assert traffic["apiKeyAuthentication"] == {"mode": "Strict", "secretRef": {"name": "inference-gateway-api-key"}}
    assert traffic["phase"] == "PreRouting"


def test_request_timeouts_follow_each_models_slo(prod):
    cfg = load_stack_file("prod", ROOT)
    for route in _objects(prod, "HTTPRoute"):
        model = next(m for m in cfg.models if m.name == route["metadata"]["name"])
        at_slo_s = model.slo.ttft_p90_ms / 1000 + model.workload.output_tokens * model.slo.tpot_p90_ms / 1000
        timeout = int(route["spec"]["rules"][0]["timeouts"]["request"].removesuffix("s"))
        assert timeout >= max(60, at_slo_s * 2)


def test_session_routing_adds_the_session_affinity_scorer(tmp_path):
    plan = _variant(tmp_path, "staging", {**GATEWAY, "gateway": {"routing": "session"}})
    (cm,) = [o for o in _objects(plan, "ConfigMap") if o["metadata"]["name"].endswith("-epp")]
    config = yaml.safe_load(next(iter(cm["data"].values())))
    types = [p["type"] for p in config["plugins"]]
    assert types[0] == "session-affinity-scorer" and "prefix-cache-scorer" in types
    (dep,) = [o for o in _objects(plan, "Deployment") if o["metadata"]["name"].endswith("-epp")]
    assert "--allow-experimental-plugins" in dep["spec"]["template"]["spec"]["containers"][0]["args"]


# --- bad input: one clear config error each ---------------------------------------------------


def _load(tmp_path, router, mutate=None):
    _write_variant(tmp_path, "staging", router, mutate)
    return load_stack_file("staging", tmp_path)


def _problems(excinfo) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in excinfo.value.problems]


def test_an_unknown_scorer_names_the_key_and_the_allowed(tmp_path):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, {**GATEWAY, "gateway": {"scorers": {"prefix-cache-scorr": 3}}})
    ((path, message),) = _problems(e)
    assert path.endswith("router.gateway.scorers.prefix-cache-scorr")
    assert "did you mean 'prefix-cache-scorer'" in message and "queue-scorer" in message


def test_a_public_gateway_without_api_key_is_refused(tmp_path):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, {**GATEWAY, "public": True, "gateway": {"authentication": "none"}})
    ((path, message),) = _problems(e)
    assert path.endswith("router.gateway.authentication") and "'none'" in message and "api-key" in message


def test_a_model_whose_pool_would_select_another_models_pods_is_refused(tmp_path):
    def twin(config):
        models = config["inference-platform:models"]
        models.append({**models[0], "served_model_name": "twin"})

    with pytest.raises(ConfigError) as e:
        _load(tmp_path, GATEWAY, twin)
    paths = dict(_problems(e))
    assert any(p.endswith("models[1].name") for p in paths)
    message = next(m for p, m in paths.items() if p.endswith("models[1].name"))
    assert "InferencePool would select the other's engine pods" in message


def test_gateway_settings_without_kind_gateway_are_refused(tmp_path):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, {"kind": "session", "gateway": {"routing": "prefix"}})
    ((path, message),) = _problems(e)
    assert path.endswith("router.gateway.routing") and "router.kind gateway" in message


# --- the plan shows the front door; diff still works -------------------------------------------


def test_plan_text_shows_the_front_door(staging):
    from infra.commands.plan import render_summary

    text = render_summary(staging, terminal=False)
    assert "kind gateway: EPP: prefix+queue+kv scorers" in text
    assert "internal: http://inference-gateway.inference.svc.cluster.local/v1" in text


def test_diff_from_the_router_to_the_gateway(staging):
    from infra.plandiff import diff_plans, render_markdown
    from tests.conftest import plan_of

    diff = diff_plans(plan_of("staging").to_dict(), staging.to_dict())
    text = render_markdown(diff)
    assert not diff.empty
    assert "InferencePool" in text and "Router" in text


@pytest.mark.parametrize("which", ["staging", "prod"])
def test_gateway_variants_comply_with_every_policy(which, request):
    """The policy pack `pulumi up` runs: pinned images and charts, no literal credentials, a public
    load balancer only with an API key."""
    assert policy_violations(request.getfixturevalue(which), which) == []


@pytest.mark.parametrize("kind", ["gateway", "session"])
def test_a_public_front_door_without_tls_or_allow_list_is_noted_in_staging(tmp_path, kind):
    """Prod refuses it (tests/bad_inputs/stack-prod-public-*); staging plans and says both gaps."""
    plan = _variant(tmp_path, "staging", {"kind": kind, "replicas": 2, "public": True})
    notes = [n for n in plan.summary["notes"] if "router.public" in n]
    assert len(notes) == 2
    assert "tls_certificate_id" in notes[0] and "in clear" in notes[0] and "prod refuses" in notes[0]
    assert "allowed_source_cidrs" in notes[1] and "whole internet" in notes[1]
