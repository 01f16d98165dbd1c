"""The Gateway API Inference Extension front door (router.kind gateway, issue 17): every model's
InferencePool, endpoint picker and route, and the gateway itself.
"""

from __future__ import annotations

from infra.catalog.epp import preset_weights
from infra.config import NS, StackConfig, install_gateway_api_crds
from infra.errors import ConfigError, Problem
from infra.render.epp import FAILURE_MODES, PoolSpec, selection_conflicts
from infra.render.gateway import API_KEY_SECRET, ENGINE_KEY_SECRET, GatewaySpec, route_timeout_seconds
from infra.render.model_service import ModelServiceSpec, pod_labels
from infra.render.observability import MonitoringSettings
from infra.stack_plan.namespaces import ENGINES_NAMESPACE, INFERENCE_NAMESPACE


def gateway_pool_specs(cfg: StackConfig, services: tuple[ModelServiceSpec, ...], system_node_selector: dict[str, str]) -> tuple[PoolSpec, ...]:
    """Every model's InferencePool + endpoint picker + route, from router.gateway and its SLO."""
    gw = cfg.router.gateway
    weights = dict(gw.scorers) if gw.scorers else preset_weights(gw.routing)
    scorers = tuple(weights.items())  # the preset's (or the config's) order
    by_name = {m.name: m for m in cfg.models}
    pools = []
    for s in services:
        model = by_name[s.name]
        pools.append(
            PoolSpec(
                model=s.name,
                served_model_name=s.served_model_name,
                scorers=scorers,
                gateway_name="inference-gateway",
                namespace=ENGINES_NAMESPACE,
                gateway_namespace=INFERENCE_NAMESPACE,
                session_header=cfg.router.session_header,
                failure_mode=FAILURE_MODES[gw.failure_mode],
                request_timeout_seconds=route_timeout_seconds(model.slo.ttft_p90_ms, model.slo.tpot_p90_ms, model.workload.output_tokens),
                objectives=tuple((o.name, o.priority) for o in gw.objectives if o.model == s.name),
                system_node_selector=dict(system_node_selector),
            )
        )
    return tuple(pools)


def gateway_spec(
    cfg: StackConfig,
    services: tuple[ModelServiceSpec, ...],
    system_node_selector: dict[str, str],
    monitoring: MonitoringSettings | None,
) -> GatewaySpec | None:
    """The environment's gateway under router.kind gateway (else None). Raises ConfigError when a
    model's pool would select another model's engine pods."""
    if cfg.router.kind != "gateway":
        return None
    r = cfg.router
    pools = gateway_pool_specs(cfg, services, system_node_selector)
    # The engine pods' labels as every engine workload renders them (a Deployment's template, a
    # LeaderWorkerSet's leader), not by rendering a Deployment: a replica over nodes has none.
    labels = {s.name: pod_labels(s) for s in services}
    index = {m.name: i for i, m in enumerate(cfg.models)}
    problems = [
        Problem(
            f"{NS}models[{index[model]}].name",
            f"{model!r}: its InferencePool's selector would also select the engine pods of models[{index[other]}] "
            f"({other!r}); every model needs its own engine labels (names must be unique)",
        )
        for model, other in selection_conflicts(pools, labels)
    ]
    if problems:
        raise ConfigError(problems, source=f"stacks/Pulumi.{cfg.stack}.yaml")
    checks_keys = r.gateway.authentication == "api-key"  # the stack's named keys, or the generated one
    # The engines check the engine key in every case (issue 30): the gateway always sends it upstream.
    return GatewaySpec(
        name=f"{cfg.stack}-gateway",
        pools=pools,
        namespace=INFERENCE_NAMESPACE,
        replicas=r.replicas,
        public=r.public,
        tls_certificate_id=r.tls_certificate_id,
        allowed_source_cidrs=tuple(r.allowed_source_cidrs),
        api_key_secret=API_KEY_SECRET,
        client_key_names=cfg.client_keys.names,
        engine_key_secret=ENGINE_KEY_SECRET,
        checks_client_keys=checks_keys,
        install_gateway_api_crds=install_gateway_api_crds(r.gateway, cfg.network),
        system_node_selector=dict(system_node_selector),
        monitoring=monitoring,
    )
