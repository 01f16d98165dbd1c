"""The environment's one request router (vllm-router, all models) and its optional public endpoint.

Thin: manifests come from `infra.render.router`. Kind `service` creates nothing (clients use each
model's Service; the config refuses `public` with it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.render.client_proxy_keys import CLIENT_KEYS_FILE, client_keys_map, engine_key_map
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
from infra.render.secret_keys import with_keys


@dataclass(frozen=True)
class RouterArgs:
    """Inputs of the environment's router.

    spec: kind, models, replicas, exposure, the client key names its proxy checks.
    client_keys: key name → the key (Pulumi secret Outputs); land only in Secret `router-client-keys`.
    engine_key: the engines' key (a Pulumi secret Output); lands only in Secret `router-upstream-key`.
    provider: the cluster's Kubernetes provider.
    depends_on: the model services (their engines are the router's workers).
    """

    spec: RouterSpec
    client_keys: Mapping[str, Any] | None = None
    engine_key: Any = None
    provider: k8s.Provider | None = None
    depends_on: Sequence[pulumi.Resource] = ()


class Router(pulumi.ComponentResource):
    """ServiceAccount + read-only Role + registrar/install ConfigMaps → Deployment + PDB + Service;
    public LB optional."""

    spec: RouterSpec
    deployment: k8s.apps.v1.Deployment | None
    service: k8s.core.v1.Service | None
    public_service: k8s.core.v1.Service | None
    endpoint: str | None  # in-cluster base URL (None for kind `service`: use each model's)
    public_address: pulumi.Output[str] | None

    def __init__(self, name: str, args: RouterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:router:Router", name, None, opts)
        spec = self.spec = args.spec

        def child_opts(*, depends_on: Sequence[pulumi.Resource] = (), **extra) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=[*args.depends_on, *depends_on], **extra
            )

        self.deployment = self.service = self.public_service = None
        self.endpoint = self.public_address = None
        if spec.uses_router:
            sa = render_service_account(spec)
            account = k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=sa["metadata"], opts=child_opts())
            role = render_role(spec)
            role_res = k8s.rbac.v1.Role(
                f"{name}-role", metadata=role["metadata"], rules=role["rules"], opts=child_opts()
            )
            binding = render_role_binding(spec)
            binding_res = k8s.rbac.v1.RoleBinding(
                f"{name}-rolebinding",
                metadata=binding["metadata"],
                role_ref=binding["roleRef"],
                subjects=binding["subjects"],
                opts=child_opts(depends_on=[account, role_res]),
            )
            key_secrets = self._key_secrets(name, args, child_opts)
            maps = [render_registrar_configmap(spec), render_client_proxy_configmap(spec)]
            maps += [] if spec.image else [render_install_configmap(spec)]
            map_res = [
                k8s.core.v1.ConfigMap(
                    f"{name}-{cm['metadata']['name']}", metadata=cm["metadata"], data=cm["data"], opts=child_opts()
                )
                for cm in maps
            ]
            deployment = render_router_deployment(spec)
            self.deployment = k8s.apps.v1.Deployment(
                f"{name}-deployment",
                metadata=deployment["metadata"],
                spec=deployment["spec"],
                opts=child_opts(depends_on=[binding_res, *map_res, *key_secrets]),
            )
            pdb = render_router_pdb(spec)
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=child_opts()
            )
            service = render_router_service(spec)
            self.service = k8s.core.v1.Service(
                f"{name}-service", metadata=service["metadata"], spec=service["spec"], opts=child_opts()
            )
            self.endpoint = f"{spec.internal_url}/v1"

            if spec.public:
                public = render_public_service(spec)
                self.public_service = k8s.core.v1.Service(
                    f"{name}-public",
                    metadata=public["metadata"],
                    spec=public["spec"],
                    # The DO load balancer takes a few minutes to get an address.
                    opts=child_opts(custom_timeouts=pulumi.CustomTimeouts(create="20m", update="20m")),
                )
                self.public_address = self.public_service.status.apply(_ingress_address)

        self.register_outputs({"endpoint": self.endpoint, "public_address": self.public_address})

    @staticmethod
    def _key_secrets(name: str, args: RouterArgs, child_opts) -> list[k8s.core.v1.Secret]:
        """Secrets `router-client-keys` and `router-upstream-key`: the client proxy's key files,
        built from the keys' secret Outputs (never a plain string, never in state unencrypted)."""
        shapes = render_client_key_secret_shapes(args.spec)
        if not shapes:
            return []
        if not args.client_keys or args.engine_key is None:
            raise ValueError("the router's client proxy checks keys but no client keys or engine key were given")
        names = sorted(args.client_keys)
        client_file = pulumi.Output.all(*[args.client_keys[n] for n in names]).apply(
            lambda keys: client_keys_map(dict(zip(names, keys, strict=True)))
        )
        engine_file = pulumi.Output.from_input(args.engine_key).apply(engine_key_map)
        secrets = []
        for shape, file in shapes:
            content = client_file if file == CLIENT_KEYS_FILE else engine_file
            secrets.append(
                k8s.core.v1.Secret(
                    f"{name}-{shape['metadata']['name']}",
                    metadata=with_keys(shape["metadata"], [file]),
                    type=shape["type"],
                    string_data={file: pulumi.Output.secret(content)},
                    opts=child_opts(additional_secret_outputs=["data", "stringData"]),
                )
            )
        return secrets


def _ingress_address(status) -> str:
    """The load balancer's IP (or hostname) from a Service status, '' until DO assigns one."""
    try:
        ingress = (status.load_balancer.ingress or [])[0]
    except (AttributeError, IndexError, TypeError):
        return ""
    return ingress.ip or ingress.hostname or ""
