"""`router.kind: gateway`: the environment's inference gateway and every model's pool behind it.

Thin: every manifest comes from `infra.render.gateway`, `infra.render.epp` and
`infra.render.gateway_observability`. Order: the CRDs (Gateway API where the platform installs
them, InferencePool, InferenceObjective, Agentgateway's own chart) → the Agentgateway controller
(which creates the GatewayClass) → the API-key Secret, AgentgatewayParameters, Gateway and
policies → per model the endpoint picker's built-in objects, then its InferencePool, HTTPRoute and
InferenceObjectives → the monitors (after the monitoring stack, which installs their CRDs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.chart_source import chart_args
from components.custom_resources import custom_resource, qualified_name
from infra.catalog import versions
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
from infra.render.secret_keys import with_keys

HELM_TIMEOUT_S = 600


@dataclass(frozen=True)
class InferenceGatewayArgs:
    """Inputs of the gateway.

    spec: the planned gateway (GatewaySpec); `spec.api_key_secret` set means the gateway checks keys.
    client_keys: key name → the key (Pulumi secret Outputs); land only in the gateway's API-key Secret.
    engine_key: the engines' key (a Pulumi secret Output); lands only in Secret `inference-gateway-engine-key`.
    provider: the cluster's Kubernetes provider.
    depends_on: the model services (their engines are the pools' endpoints).
    monitoring: the Observability component when the stack is monitored (its chart installs the
        PodMonitor/PrometheusRule CRDs and the Grafana sidecar).
    """

    spec: GatewaySpec
    client_keys: Mapping[str, Any] | None = None
    engine_key: Any = None
    provider: k8s.Provider | None = None
    depends_on: Sequence[pulumi.Resource] = ()
    monitoring: pulumi.Resource | None = None


class InferenceGateway(pulumi.ComponentResource):
    """Agentgateway + Inference Extension: one front door, an endpoint picker per model."""

    def __init__(self, name: str, args: InferenceGatewayArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:gateway:InferenceGateway", name, None, opts)
        spec = args.spec

        def child(*deps: pulumi.Resource, **extra) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[*args.depends_on, *deps], **extra)

        crds: list[pulumi.Resource] = [
            k8s.yaml.v2.ConfigFile(f"{name}-{logical}", file=url, opts=child()) for logical, url in spec.crd_urls
        ]
        controller_ns = k8s.core.v1.Namespace(
            f"{name}-controller-ns", metadata={"name": CONTROLLER_NAMESPACE, "labels": gateway_labels()}, opts=child()
        )
        chart_crds = k8s.helm.v3.Release(
            f"{name}-agentgateway-crds",
            k8s.helm.v3.ReleaseArgs(
                name="agentgateway-crds",
                **chart_args(versions.AGENTGATEWAY_CRDS_CHART, spec.chart_version, versions.AGENTGATEWAY_CHART_REPO),
                namespace=CONTROLLER_NAMESPACE,
                timeout=HELM_TIMEOUT_S,
            ),
            opts=child(controller_ns),
        )
        crds.append(chart_crds)
        self.controller = k8s.helm.v3.Release(
            f"{name}-agentgateway",
            k8s.helm.v3.ReleaseArgs(
                name="agentgateway",
                **chart_args(versions.AGENTGATEWAY_CHART, spec.chart_version, versions.AGENTGATEWAY_CHART_REPO),
                namespace=CONTROLLER_NAMESPACE,
                values=render_controller_values(spec),
                timeout=HELM_TIMEOUT_S,
                atomic=False,
            ),
            opts=child(controller_ns, *crds),
        )

        secret_deps = self._key_secrets(name, args, child)
        # The public Service of the gateway (a DO load balancer) must be deleted on destroy, so
        # that DOKS removes the load balancer: nothing here is deleted_with the cluster.
        edge_opts = child(self.controller, *secret_deps)
        self.edge = [self._custom(name, obj, edge_opts) for obj in render_gateway_resources(spec)]

        self.pools: dict[str, list[pulumi.Resource]] = {}
        for pool in spec.pools:
            built = [self._builtin(name, obj, child()) for obj in render_epp(pool)]
            custom = [self._custom(name, obj, child(self.controller, *self.edge, *built)) for obj in render_pool_resources(pool)]
            self.pools[pool.model] = built + custom

        self.monitors: list[pulumi.Resource] = []
        if spec.monitoring is not None:
            after = child(*([args.monitoring] if args.monitoring is not None else []))
            for obj in [*render_gateway_pod_monitors(spec, spec.monitoring), render_gateway_prometheus_rule(spec, spec.monitoring)]:
                self.monitors.append(self._custom(name, obj, after))
            board = render_gateway_dashboard_configmap(spec, spec.monitoring)
            self.monitors.append(
                k8s.core.v1.ConfigMap(f"{name}-{board['metadata']['name']}", metadata=board["metadata"], data=board["data"], opts=after)
            )

        self.endpoint = spec.endpoint
        self.register_outputs({"endpoint": self.endpoint, "models": [p.served_model_name for p in spec.pools]})

    @staticmethod
    def _key_secrets(name: str, args: InferenceGatewayArgs, child) -> list[k8s.core.v1.Secret]:
        """The API-key Secret (one entry per named client key) and the engine key's Secret, their
        values built from the keys' secret Outputs only."""
        spec, secrets = args.spec, []
        if spec.api_key_secret:
            if not args.client_keys:
                raise ValueError("the gateway checks API keys but no client keys were given")
            names = sorted(args.client_keys)
            entries = pulumi.Output.all(*[args.client_keys[n] for n in names]).apply(
                lambda keys: client_api_key_entries(dict(zip(names, keys, strict=True)))
            )
            secrets.append(
                k8s.core.v1.Secret(
                    f"{name}-api-key",
                    metadata=with_keys({"name": spec.api_key_secret, "namespace": spec.namespace, "labels": gateway_labels()}, names),
                    string_data=pulumi.Output.secret(entries),
                    opts=child(additional_secret_outputs=["data", "stringData"]),
                )
            )
        if spec.engine_key_secret:
            if args.engine_key is None:
                raise ValueError("the gateway sends the engine key upstream but none was given")
            secrets.append(
                k8s.core.v1.Secret(
                    f"{name}-engine-key",
                    metadata=with_keys({"name": spec.engine_key_secret, "namespace": spec.namespace, "labels": gateway_labels()}, [API_KEY_KEY]),
                    string_data={API_KEY_KEY: pulumi.Output.secret(args.engine_key)},
                    opts=child(additional_secret_outputs=["data", "stringData"]),
                )
            )
        return secrets

    @staticmethod
    def _custom(name: str, obj: dict, opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
        return custom_resource(qualified_name(name, obj), obj, opts)

    @staticmethod
    def _builtin(name: str, obj: dict, opts: pulumi.ResourceOptions) -> pulumi.Resource:
        """The endpoint picker's built-in objects, as typed resources (validated by the provider)."""
        kind, meta = obj["kind"], obj["metadata"]
        logical = f"{name}-{kind.lower()}-{meta['name']}"
        if kind == "ServiceAccount":
            return k8s.core.v1.ServiceAccount(logical, metadata=meta, opts=opts)
        if kind == "Role":
            return k8s.rbac.v1.Role(logical, metadata=meta, rules=obj["rules"], opts=opts)
        if kind == "RoleBinding":
            return k8s.rbac.v1.RoleBinding(logical, metadata=meta, role_ref=obj["roleRef"], subjects=obj["subjects"], opts=opts)
        if kind == "ConfigMap":
            return k8s.core.v1.ConfigMap(logical, metadata=meta, data=obj["data"], opts=opts)
        if kind == "Deployment":
            return k8s.apps.v1.Deployment(logical, metadata=meta, spec=obj["spec"], opts=opts)
        if kind == "Service":
            return k8s.core.v1.Service(logical, metadata=meta, spec=obj["spec"], opts=opts)
        raise ValueError(f"no typed resource for {kind}")
