"""What the e2e tests run, taken from the project's renderers: re-point these after a refactor.

Every command line, rule and query the real components receive comes from one function below,
and each of those calls exactly one project function (named in its docstring). The tests never
build a vLLM, router, bench or Prometheus input by hand, except where marked STAND-IN: there the
project renders nothing for the component under test yet.

  engine args/env   infra.render.model_service.render_deployment(spec) → container args, env
                    (which calls infra.render.vllm_args.vllm_serve_args)
  router args       infra.render.router.router_args(spec) (vllm-router, IGW mode, policy by kind)
  registrar args    infra.render.router.registrar_args(spec), running the repo's
                    infra/render/router_registrar.py against a stand-in EndpointSlice API
  bench args        infra.tuning.bench.bench_serve_args(target, layout, rate, n, opts, ...)
  ingest            `infra tune ingest` (infra.commands.tune), run as the CLI
  rules             infra.render.observability.render_prometheus_rules(...)[i]["spec"]["groups"]
  scrape labels     infra.render.observability.render_pod_monitors(...) relabelings
  KEDA queries      infra.render.autoscaling.in_flight_query / queue_query
  dashboards        infra.render.observability.dashboard_files()
"""

from __future__ import annotations

from dataclasses import replace

from infra.catalog.gpus import gpu_size
from infra.domain import Layout, Slo, Workload
from infra.render import autoscaling, observability
from infra.render import model_service as ms
from infra.render import router as router_render
from infra.tuning import bench

MODEL = "tiny"  # platform model name (labels, rule `model` label)
SERVED = "tiny-llama"  # --served-model-name (vLLM's model_name label)
MOE_MODEL = "tiny-moe"
MOE_SERVED = "tiny-mixtral"
GPU_SLUG = "gpu-mi300x1-192gb"  # a one-GPU DigitalOcean size: layouts here are tp1
API_KEY_SECRET = "tiny-api-key"
API_KEY = "e2e-secret-key"  # what the Secret would hold; the engines get it as VLLM_API_KEY

# A layout small enough for the CPU: the renderer's flags, with limits a 2-core machine can run.
LAYOUT = Layout(tp=1, max_num_seqs=16, max_num_batched_tokens=2048, max_model_len=1024)
MOE_LAYOUT = Layout(tp=1, ep=True, max_num_seqs=8, max_num_batched_tokens=2048, max_model_len=1024)
WORKLOAD = Workload(input_tokens=64, output_tokens=16, peak_rps=2)
SLO = Slo(ttft_p90_ms=2500, tpot_p90_ms=250)  # 2500 ms and 250 ms are vLLM bucket boundaries


def model_service_spec(model_path: str, *, moe: bool = False, api_key: bool = True) -> ms.ModelServiceSpec:
    """A one-GPU model service as the platform composes it (source = the tiny checkpoint's path)."""
    return ms.ModelServiceSpec(
        name=MOE_MODEL if moe else MODEL,
        source=model_path,
        served_model_name=MOE_SERVED if moe else SERVED,
        layout=MOE_LAYOUT if moe else LAYOUT,
        nodes_min=1,
        nodes_max=1,
        gpu=gpu_size(GPU_SLUG),
        pool_name="mi300x-1",
        api_key_secret=API_KEY_SECRET if api_key else None,
        max_model_len=1024,
        moe=moe,
    )


def engine_container(spec: ms.ModelServiceSpec) -> dict:
    """model_service.render_deployment(spec): the vllm container (args = `vllm serve` args)."""
    deployment = ms.render_deployment(spec)
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"]
    return container


def router_spec(kind: str, models: tuple[tuple[str, str], ...] = ((MODEL, SERVED),)) -> router_render.RouterSpec:
    """The environment's router as plan_stack builds it: every model, the API-key Secret."""
    return router_render.RouterSpec(models=tuple(router_render.RoutedModel(n, s) for n, s in models), kind=kind,
                                    api_key_secret=API_KEY_SECRET)


def project_router_args(spec: router_render.RouterSpec) -> list[str]:
    """router.router_args(spec): the router container's args."""
    return router_render.router_args(spec)


def project_registrar_args(spec: router_render.RouterSpec) -> list[str]:
    """router.registrar_args(spec): the registrar sidecar's args (after `python`)."""
    return router_render.registrar_args(spec)


REGISTRAR_SCRIPT = router_render.REGISTRAR_FILE


def bench_target(spec: ms.ModelServiceSpec) -> bench.BenchTarget:
    return bench.BenchTarget("e2e", spec.name, spec, WORKLOAD, SLO)


def bench_args(spec: ms.ModelServiceSpec, layout: Layout, rate_rps: float, num_prompts: int, run_id: str) -> list[str]:
    """bench.bench_serve_args(...): `vllm bench serve` args for one rate (base URL, tokenizer and
    result dir are rewritten by the harness)."""
    opts = bench.BenchOptions(run_id=run_id, seconds_per_rate=5, min_prompts=num_prompts, warmups=2)
    return bench.bench_serve_args(bench_target(spec), layout, rate_rps, num_prompts, opts,
                                  base_url="http://placeholder", result_dir="placeholder")


def layout_with_replicas(replicas: int) -> Layout:
    return replace(LAYOUT, replicas_per_node=replicas)


def observed_model(replicas: int = 2) -> observability.ObservedModel:
    spec_deployment = f"{MODEL}-engine"
    return observability.ObservedModel(
        name=MODEL, served_model_name=SERVED, namespace=ms.ENGINES_NAMESPACE, ttft_p90_ms=SLO.ttft_p90_ms,
        tpot_p90_ms=SLO.tpot_p90_ms, gpus_per_replica=1, replicas=replicas, usd_per_gpu_hour=2.0,
        pool="mi300x-1", usd_per_node_hour=2.0, deployment=spec_deployment,
    )


def rule_groups(replicas: int = 2) -> list[dict]:
    """observability.render_prometheus_rules(...): every group of every PrometheusRule."""
    rules = observability.render_prometheus_rules(
        [observed_model(replicas)], observability.GpuRuntimeFacts(vendor="amd"), observability.MonitoringSettings()
    )
    return [g for obj in rules for g in obj["spec"]["groups"]]


def scrape_target_labels() -> dict[str, list[str]]:
    """observability.render_pod_monitors(...): component → target labels its relabelings set."""
    monitors = observability.render_pod_monitors(
        [observed_model()], observability.GpuRuntimeFacts(vendor="amd"), observability.MonitoringSettings()
    )
    out = {}
    for m in monitors:
        for endpoint in m["spec"]["podMetricsEndpoints"]:
            out[m["metadata"]["name"]] = {
                "port": endpoint.get("port", endpoint.get("portNumber")),
                "path": endpoint["path"],
                "labels": [r["targetLabel"] for r in endpoint.get("relabelings", []) if r.get("action") == "replace"],
            }
    return out


def keda_queries() -> dict[str, str]:
    model = observed_model()
    return {"in_flight": autoscaling.in_flight_query(model), "queue": autoscaling.queue_query(model)}


def dashboard_files():
    return observability.dashboard_files()
