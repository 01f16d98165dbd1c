"""The environment's one router and the front door clients use (vllm-router or the models'
Services; the gateway's front door is in gateway.py).
"""

from __future__ import annotations

from infra.catalog.vllm_flags import VLLM_PORT
from infra.config import StackConfig
from infra.front_door import FrontDoor, public_base_url
from infra.render.model_service import ModelServiceSpec
from infra.render.router import POLICY_WHY, RoutedModel, RouterSpec, router_timeout_seconds
from infra.stack_plan.facts import ModelFacts
from infra.stack_plan.namespaces import ENGINES_NAMESPACE, INFERENCE_NAMESPACE


def router_spec(cfg: StackConfig, models: list[ModelFacts], services: tuple[ModelServiceSpec, ...],
                node_selector: dict[str, str]) -> RouterSpec:
    """The environment's one router, serving every model. The engines' API-key Secrets all hold the
    stack's one `api_key`; the router reads the first model's (its Deployment waits for them all).
    Under router.kind gateway no router is declared (the gateway is the front door): kind service."""
    r = cfg.router
    keys = [s.api_key_secret for s in services if s.api_key_secret]
    if r.kind == "gateway":
        return RouterSpec(models=tuple(RoutedModel(s.name, s.served_model_name) for s in services), kind="service",
                          namespace=INFERENCE_NAMESPACE, engines_namespace=ENGINES_NAMESPACE)
    return RouterSpec(
        models=tuple(RoutedModel(s.name, s.served_model_name) for s in services),
        kind=r.kind,
        replicas=r.replicas,
        namespace=INFERENCE_NAMESPACE,
        engines_namespace=ENGINES_NAMESPACE,
        public=r.public,
        tls_certificate_id=r.tls_certificate_id,
        allowed_source_cidrs=tuple(r.allowed_source_cidrs),
        api_key_secret=keys[0] if keys else None,
        image=r.image,
        request_timeout_s=router_timeout_seconds(
            [(m.config.slo.ttft_p90_ms, m.config.slo.tpot_p90_ms, m.config.workload.output_tokens) for m in models]
        ),
        node_selector=dict(node_selector),
    )


def front_door(router: RouterSpec, services: tuple[ModelServiceSpec, ...]) -> FrontDoor:
    """Where clients go: the router's Service (and load balancer), or each model's Service."""
    served = tuple(sorted(s.served_model_name for s in services))
    if router.uses_router:
        urls: tuple[str, ...] = (f"{router.internal_url}/v1",)
        routing = f"vllm-router {router.policy}, by the request's model"
    else:
        urls = tuple(f"http://{s.name}.{s.namespace}.svc.cluster.local:{VLLM_PORT}/v1" for s in services)
        routing = "kube-proxy (per connection)"
    public = f"{public_base_url(bool(router.tls_certificate_id))}/v1" if router.public else None
    return FrontDoor(kind=router.kind, urls=urls, public_url=public, models=served, routing=routing,
                     why=POLICY_WHY[router.kind])
