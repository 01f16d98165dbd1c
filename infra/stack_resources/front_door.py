"""The environment's front door: the vllm-router (with its client proxy and registrar), or the
inference gateway (Agentgateway + Inference Extension) with an endpoint picker per model.

Objects come from `infra.render.router`, `infra.render.gateway`, `infra.render.epp` and
`infra.render.gateway_observability`. Neither group is deleted with the cluster: a Service of type
LoadBalancer must be deleted on destroy so that DOKS removes the DO load balancer.

Keys: the client keys land only in the router's `router-client-keys` Secret (or the gateway's
API-key Secret), the engine key only in `router-upstream-key` (or the gateway's engine-key Secret),
both built from the secrets by pure functions of the renderers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from infra.catalog import versions
from infra.render.client_proxy_keys import CLIENT_KEYS_FILE, client_keys_map, engine_key_map
from infra.render.epp import render_epp, render_pool_resources
from infra.render.gateway import (
    CONTROLLER_NAMESPACE,
    GatewaySpec,
    client_api_key_entries,
    gateway_labels,
    render_controller_values,
    render_gateway_resources,
)
from infra.render.gateway_observability import (
    render_gateway_dashboard_configmap,
    render_gateway_pod_monitors,
    render_gateway_prometheus_rule,
)
from infra.render.model_service import API_KEY_KEY
from infra.render.router import (
    RouterSpec,
    render_client_key_secret_shapes,
    render_client_proxy_configmap,
    render_install_configmap,
    render_public_service,
    render_registrar_configmap,
    render_role,
    render_role_binding,
    render_router_deployment,
    render_router_pdb,
    render_router_service,
    render_service_account,
)
from infra.resource_graph.graph import GraphBuilder
from infra.resource_graph.values import Apply, Ref
from infra.stack_resources.kube import Group, chart_inputs, open_group

GATEWAY_HELM_TIMEOUT_S = 600


def by_name(fn: Callable[[dict[str, Any]], Any], names: list[str]) -> Callable[..., Any]:
    """`fn` of a name → key map, as a function of the keys in `names` order (for `Apply`)."""

    def build(*keys: Any) -> Any:
        return fn(dict(zip(names, keys, strict=True)))

    build.__qualname__ = f"{fn.__qualname__}[{','.join(names)}]"
    return build


def ingress_address(status: Any) -> str:
    """The load balancer's IP (or hostname) from a Service's status, '' until DO assigns one."""
    try:
        ingress = ((status or {}).get("loadBalancer") or {}).get("ingress") or []
        first = ingress[0]
    except (AttributeError, IndexError, TypeError):
        return ""
    return first.get("ip") or first.get("hostname") or ""


def plan_router(b: GraphBuilder, spec: RouterSpec, *, client_keys: Mapping[str, Any], engine_key: Any, provider: str,
                depends_on: list[str], name: str) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """ServiceAccount + read-only Role + registrar/install ConfigMaps → Deployment + PDB + Service,
    a public LoadBalancer Service optional. The group's key and the front door's outputs."""
    group = open_group(b, "inference-platform:router:Router", name, provider=provider, depends_on=depends_on)
    outputs: dict[str, Any] = {"endpoint": None, "public_address": None}
    if spec.uses_router:
        account = group.object(f"{name}-sa", render_service_account(spec))
        role = group.object(f"{name}-role", render_role(spec))
        binding = group.object(f"{name}-rolebinding", render_role_binding(spec), depends_on=[account, role])
        key_secrets = []
        shapes = render_client_key_secret_shapes(spec)
        if shapes:
            if not client_keys or engine_key is None:
                raise ValueError("the router's client proxy checks keys but no client keys or engine key were given")
            names = sorted(client_keys)
            client_file = Apply(by_name(client_keys_map, names), tuple(client_keys[n] for n in names))
            engine_file = Apply(engine_key_map, (engine_key,))
            for shape, file in shapes:
                content = client_file if file == CLIENT_KEYS_FILE else engine_file
                key_secrets.append(group.secret(f"{name}-{shape['metadata']['name']}", shape, {file: content}))
        maps = [render_registrar_configmap(spec), render_client_proxy_configmap(spec)]
        maps += [] if spec.image else [render_install_configmap(spec)]
        map_keys = [group.object(f"{name}-{cm['metadata']['name']}", cm) for cm in maps]
        group.object(f"{name}-deployment", render_router_deployment(spec), depends_on=[binding, *map_keys, *key_secrets])
        group.object(f"{name}-pdb", render_router_pdb(spec))
        group.object(f"{name}-service", render_router_service(spec))
        outputs["endpoint"] = f"{spec.internal_url}/v1"
        if spec.public:
            public = group.object(
                f"{name}-public", render_public_service(spec), outputs=("status",),
                # The DO load balancer takes a few minutes to get an address.
                custom_timeouts={"create": "20m", "update": "20m"},
            )  # fmt: skip
            outputs["public_address"] = Apply(ingress_address, (Ref(public, "status"),))
    b.set_group_outputs(group.key, outputs)
    return group.key, outputs


def plan_gateway(b: GraphBuilder, spec: GatewaySpec, *, client_keys: Mapping[str, Any], engine_key: Any, provider: str,
                 depends_on: list[str], monitoring: str | None, name: str) -> tuple[str, str]:  # fmt: skip
    """The CRDs (Gateway API where the platform installs them, InferencePool, InferenceObjective,
    Agentgateway's own chart) → the Agentgateway controller (it creates the GatewayClass) → the
    API-key Secret, parameters, Gateway and policies → per model the endpoint picker's objects,
    then its InferencePool, HTTPRoute and InferenceObjectives → the monitors (after the monitoring
    stack, which installs their CRDs). The group's key and the controller release's."""
    group = open_group(b, "inference-platform:gateway:InferenceGateway", name, provider=provider, depends_on=depends_on)
    crds = [group.config_file(f"{name}-{logical}", url) for logical, url in spec.crd_urls]
    controller_ns = group.object(f"{name}-controller-ns", {"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": {"name": CONTROLLER_NAMESPACE, "labels": gateway_labels()}})  # fmt: skip
    crds.append(group.release(f"{name}-agentgateway-crds", {
        "name": "agentgateway-crds",
        **_chart(versions.AGENTGATEWAY_CRDS_CHART, spec.chart_version),
        "namespace": CONTROLLER_NAMESPACE, "timeout": GATEWAY_HELM_TIMEOUT_S,
    }, depends_on=[controller_ns]))  # fmt: skip
    controller = group.release(f"{name}-agentgateway", {
        "name": "agentgateway", **_chart(versions.AGENTGATEWAY_CHART, spec.chart_version),
        "namespace": CONTROLLER_NAMESPACE, "values": render_controller_values(spec), "timeout": GATEWAY_HELM_TIMEOUT_S,
        "atomic": False,
    }, depends_on=[controller_ns, *crds])  # fmt: skip
    secrets = _gateway_key_secrets(group, spec, client_keys, engine_key)
    edge = [group.object(_qualified(name, obj), obj, depends_on=[controller, *secrets]) for obj in render_gateway_resources(spec)]
    for pool in spec.pools:
        built = [group.object(f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}", obj) for obj in render_epp(pool)]
        for obj in render_pool_resources(pool):
            group.object(_qualified(name, obj), obj, depends_on=[controller, *edge, *built])
    if spec.monitoring is not None:
        after = [monitoring] if monitoring is not None else []
        for obj in [*render_gateway_pod_monitors(spec, spec.monitoring), render_gateway_prometheus_rule(spec, spec.monitoring)]:
            group.object(_qualified(name, obj), obj, depends_on=after)
        board = render_gateway_dashboard_configmap(spec, spec.monitoring)
        group.object(f"{name}-{board['metadata']['name']}", board, depends_on=after)
    b.set_group_outputs(group.key, {"endpoint": spec.endpoint, "models": [p.served_model_name for p in spec.pools]})
    return group.key, controller


def _chart(chart: str, version: str) -> dict[str, Any]:
    return chart_inputs(chart, version, versions.AGENTGATEWAY_CHART_REPO)


def _qualified(group_name: str, obj: dict) -> str:
    """`<group>-<kind>-<object name>`: unique per kind inside a group."""
    return f"{group_name}-{obj['kind'].lower()}-{obj['metadata']['name']}"


def _gateway_key_secrets(group: Group, spec: GatewaySpec, client_keys: Mapping[str, Any], engine_key: Any) -> list[str]:
    """The API-key Secret (one entry per named client key) and the engine key's Secret."""
    secrets = []
    if spec.api_key_secret:
        if not client_keys:
            raise ValueError("the gateway checks API keys but no client keys were given")
        names = sorted(client_keys)
        entries = Apply(by_name(client_api_key_entries, names), tuple(client_keys[n] for n in names))
        shape = {"apiVersion": "v1", "kind": "Secret",
                 "metadata": {"name": spec.api_key_secret, "namespace": spec.namespace, "labels": gateway_labels()}}  # fmt: skip
        secrets.append(group.secret(f"{group.name}-api-key", shape, entries, keys=names))
    if spec.engine_key_secret:
        if engine_key is None:
            raise ValueError("the gateway sends the engine key upstream but none was given")
        shape = {"apiVersion": "v1", "kind": "Secret",
                 "metadata": {"name": spec.engine_key_secret, "namespace": spec.namespace, "labels": gateway_labels()}}  # fmt: skip
        secrets.append(group.secret(f"{group.name}-engine-key", shape, {API_KEY_KEY: engine_key}))
    return secrets
