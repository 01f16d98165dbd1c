"""The stacks the security checks cover: the shipped dev/staging/prod plus one variant per front
door and layout family the shipped stacks do not exercise (public router, gateway, P/D on a
fabric pool, multi-node replicas, Spaces weights, the AMD GPU operator, endpoints named by settings). Shared by the connectivity test, the checkov
scan (scripts/scan_security.py) and the policy-pack test, so every security check sees the same
set of plans."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

SHIPPED = ("dev", "staging", "prod")
FABRIC_SIZE = "gpu-mi325x8-2048gb-fabric-contracted"


def _public_router(config) -> None:
    config["inference-platform:router"].update(
        {"public": True, "tls_certificate_id": "5a1c2f4e-9b3d-4e7a-8c21-0f6d3b9a7e15", "allowed_source_cidrs": ["198.18.0.0/15"]}
    )


def _gateway(config) -> None:
    config["inference-platform:router"] = {
        "kind": "gateway", "replicas": 3, "public": True, "tls_certificate_id": "5a1c2f4e-9b3d-4e7a-8c21-0f6d3b9a7e15",
        "allowed_source_cidrs": ["198.18.0.0/15"],
    }  # fmt: skip


def _pd(config) -> None:
    (pool,) = config["inference-platform:gpu_pools"]
    pool.update({"size": FABRIC_SIZE, "fabric": True, "nodes": 2, "usd_per_hour": 24.0})
    config["inference-platform:models"][0]["layout"] = "p1tp8-ep-d1tp8-ep"


def _multi_node(config) -> None:
    for pool in config["inference-platform:gpu_pools"]:
        pool["size"], pool["fabric"] = FABRIC_SIZE, True
    config["inference-platform:gpu_pools"][0].update({"min_nodes": 2, "max_nodes": 4})
    config["inference-platform:model_cache"]["size_gib"] = 2048  # R1 in BF16 is 1.3 TB
    config["inference-platform:models"][0].update(
        {
            "name": "deepseek-r1",
            "source": "unsloth/DeepSeek-R1-BF16",
            "layout": {"tp": 8, "ep": True, "dp": 2, "nodes_per_replica": 2},
            "workload": {"input_tokens": 5600, "output_tokens": 140, "peak_rps": 2},
            "slo": {"ttft_p90_ms": 2000, "tpot_p90_ms": 50},
            "autoscaling": {"enabled": False},
        }
    )


def _spaces(config) -> None:
    config["inference-platform:model_cache"] = {"kind": "spaces", "bucket": "acme-staging-weights"}


def _endpoints(config) -> None:
    """Endpoints the stack is told to use (issue 35): a hub mirror by name (in the VPC), an
    in-cluster OTLP collector, and an alert webhook (HTTPS)."""
    config["inference-platform:models"][0]["env"] = {
        "HF_ENDPOINT": "http://hf-mirror.internal:8080",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://otel-collector.observability.svc:4317",
    }
    config["inference-platform:observability"]["alert_receiver"] = {"kind": "webhook"}


def _gpu_operator(config) -> None:
    config["inference-platform:gpu_runtime"] = {"mode": "gpu-operator"}


# variant name → (the shipped stack it starts from, the change)
VARIANTS: dict[str, tuple[str, Callable[[dict], None]]] = {
    "prod-public-router": ("prod", _public_router),
    "prod-gateway": ("prod", _gateway),
    "staging-pd-fabric": ("staging", _pd),
    "prod-multi-node": ("prod", _multi_node),
    "staging-spaces": ("staging", _spaces),
    "staging-gpu-operator": ("staging", _gpu_operator),
    "staging-endpoints": ("staging", _endpoints),
}
NAMES = SHIPPED + tuple(VARIANTS)


_PLANS: dict[str, object] = {}


def plan_named(name: str, workdir: Path):
    """The offline Plan of a shipped stack or of a variant (planned in a project copy under `workdir`).
    Planned once per process: five test modules read the same ten plans (read-only), and a plan is
    deterministic, so the first is the plan."""
    from infra.offline import build_plan
    from tests.conftest import ROOT, plan_variant

    if name not in _PLANS:
        if name in SHIPPED:
            _PLANS[name] = build_plan(name, ROOT)
        else:
            stack, mutate = VARIANTS[name]
            _PLANS[name] = plan_variant(workdir / name, stack, mutate)
    return _PLANS[name]
