"""Prometheus alerting rules of the inference SLOs (pure data, no Pulumi): the burn-rate alerts of
both SLIs, the serving alerts (scrape deadman, errors, saturation, slow readiness) and the AMD GPU
alerts. What they read is recorded by infra/render/slo_rules.py, whose docstring explains the SLO
and the burn-rate policy; the P/D alerts are infra/render/pd_rules.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from infra.render.slo_rules import (
    BURN_RATE_POLICY,
    DEFAULT_THRESHOLDS,
    ERROR_BUDGET,
    MIN_REQUESTS_PER_HOUR,
    READY_ALERT_FACTOR,
    RUNBOOK_DEFAULT,
    AlertThresholds,
    BurnRateWindow,
    ObservedModel,
    promql_number,
    quoted,
    regex_literal,
    selector,
)


def runbook_link(base: str, anchor: str) -> str:
    return f"{base}#{anchor}"


def alerting_rule(
    name: str,
    expr: str,
    severity: str,
    for_: str | None,
    summary: str,
    description: str,
    runbook_base: str,
    extra_labels: dict | None = None,
) -> dict:
    rule = {"alert": name, "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity, **(extra_labels or {})}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook_url": runbook_link(runbook_base, name.lower()),
    }
    return rule


def _burn_condition(short: str, w: BurnRateWindow) -> str:
    """Both windows over the threshold, and enough traffic in the long window to mean it.

    The guard averages over the long window rather than the last hour, so a slow burn over a day
    still warns when the night is quiet; the value of the condition stays the long-window ratio.
    """
    t = promql_number(w.error_ratio_threshold)
    return (
        f"(model:vllm_{short}_slo_errors:ratio_rate{w.long_window} > {t}"
        f" and model:vllm_{short}_slo_errors:ratio_rate{w.short_window} > {t}"
        f" and model:vllm_{short}_requests:rate{w.long_window} * 3600 >= {MIN_REQUESTS_PER_HOUR})"
    )


def slo_alert_group(runbook_base: str = RUNBOOK_DEFAULT) -> dict:
    """Burn-rate alerts for both SLIs; generic over the `model` label of the recorded ratios."""
    rules = []
    for short, title in (("ttft", "time to first token"), ("tpot", "time per output token")):
        for speed, severity, for_ in (("Fast", "critical", "2m"), ("Slow", "warning", "15m")):
            windows = [w for w in BURN_RATE_POLICY if w.severity == severity]
            expr = "\n or\n".join(_burn_condition(short, w) for w in windows)
            rules.append(
                alerting_rule(
                    f"Vllm{short.capitalize()}Slo{speed}Burn",
                    expr,
                    severity,
                    for_,
                    f"{{{{ $labels.model }}}}: p90 {title} SLO error budget burning {speed.lower()}",
                    f"{{{{ $value | humanizePercentage }}}} of {{{{ $labels.model }}}} requests exceeded the "
                    f"p90 {title} limit (budget: {ERROR_BUDGET:.0%} of requests). Windows: "
                    + ", ".join(f"{w.long_window}/{w.short_window} at {w.burn_rate:g}×" for w in windows)
                    + f"; only with at least {MIN_REQUESTS_PER_HOUR} requests/h over the long window.",
                    runbook_base,
                )
            )
    return {"name": "inference-platform.alerts.slo", "rules": rules}


def serving_alert_group(
    models: Iterable[ObservedModel],
    thresholds: AlertThresholds = DEFAULT_THRESHOLDS,
    runbook_base: str = RUNBOOK_DEFAULT,
) -> dict:
    """Queue, KV cache, readiness, restarts and the per-model deadman."""
    models = list(models)
    namespaces = "|".join(sorted({regex_literal(m.namespace) for m in models})) or "none"
    growth_per_s = thresholds.queue_growth_per_minute / 60.0
    rules = [
        alerting_rule(
            "VllmQueueGrowing",
            "model:vllm_requests_waiting:sum > 0"
            f" and deriv(model:vllm_requests_waiting:sum[15m]) > {promql_number(growth_per_s)}",
            "warning",
            "10m",
            "{{ $labels.model }}: request queue keeps growing",
            "{{ $labels.model }} has {{ $value }} requests waiting and the queue has grown by more than "
            f"{thresholds.queue_growth_per_minute:g} request/min for 15 minutes: demand exceeds capacity.",
            runbook_base,
        ),
        alerting_rule(
            "VllmKvCacheSaturated",
            f"model:vllm_kv_cache_usage:max > {promql_number(thresholds.kv_cache_usage_ratio)}",
            "warning",
            "10m",
            "{{ $labels.model }}: KV cache nearly full",
            "The fullest {{ $labels.model }} replica uses {{ $value | humanizePercentage }} of its KV cache; "
            "vLLM preempts and recomputes sequences when it runs out.",
            runbook_base,
        ),
        alerting_rule(
            "VllmReplicasNotReady",
            "model:vllm_replicas_ready:sum < model:vllm_replicas_expected:count",
            "warning",
            thresholds.replicas_not_ready_for,
            "{{ $labels.model }}: fewer vLLM replicas ready than configured",
            "Only {{ $value }} {{ $labels.model }} replicas have been ready for "
            f"{thresholds.replicas_not_ready_for}.",
            runbook_base,
        ),
        alerting_rule(
            "InferencePodRestarting",
            "label_replace(sum by (namespace, pod, label_inference_platform_model) ("
            f'increase(kube_pod_container_status_restarts_total{{namespace=~"{namespaces}"}}[30m])'
            " * on (namespace, pod) group_left (label_inference_platform_model)"
            ' kube_pod_labels{label_app_kubernetes_io_name=~"vllm|router|vllm-pd-router"}),'
            ' "model", "$1", "label_inference_platform_model", "(.+)")'
            f" >= {thresholds.pod_restarts_per_30m}",
            "warning",
            None,
            "{{ $labels.namespace }}/{{ $labels.pod }} restarted {{ $value }} times in 30 minutes",
            "A vLLM or router pod of {{ $labels.model }} keeps restarting.",
            runbook_base,
        ),
    ]
    for m in models:
        rules += _model_down_alerts(m, thresholds, runbook_base)
    if any(m.predicted_ready_seconds is not None for m in models):
        rules.append(slow_readiness_alert(runbook_base))
    return {"name": "inference-platform.alerts.serving", "rules": rules}


def _model_down_alerts(m: ObservedModel, thresholds: AlertThresholds, runbook_base: str) -> list[dict]:
    """One model's deadmen: no replica ready although some are wanted (VllmModelDown), and ready
    replicas without vLLM metrics (VllmMetricsAbsent, a broken scrape)."""
    # The deadman fires only while the model's Deployment reports Ready replicas: vLLM serves
    # /metrics once the engine has loaded (up to ~40 min for a 235B model) and its readiness probe
    # passes at the same moment, so Ready-without-metrics is a scrape problem, whereas a rollout
    # still loading is not (VllmReplicasNotReady covers loads that never finish).
    # kube_deployment_status_replicas_ready needs no kube-state-metrics label allow-list.
    kind = m.workload  # kube-state-metrics: kube_deployment_* or kube_statefulset_*
    spec_replicas = "kube_deployment_spec_replicas" if kind == "deployment" else "kube_statefulset_replicas"
    deployment_ready = (
        f"kube_{kind}_status_replicas_ready{{namespace={quoted(m.namespace)}, "
        f"{kind}={quoted(m.deployment)}}} > 0"
    )
    # A total outage: no SLO series flow (no vLLM metrics) and the deadman above needs a
    # ready replica, so without this nothing would page until VllmReplicasNotReady warns.
    # A parked model (0 desired replicas) and a Deployment's first load are not outages; a
    # rollout of a single-replica model is, and pages.
    deployment = f"namespace={quoted(m.namespace)}, {kind}={quoted(m.deployment)}"
    return [
        alerting_rule(
            "VllmModelDown",
            f"kube_{kind}_status_replicas_ready{{{deployment}}} == 0"
            f" and on () ({spec_replicas}{{{deployment}}} > 0)"
            f" and on () (time() - kube_{kind}_created{{{deployment}}}"
            f" > {thresholds.model_down_grace_seconds})",
            "critical",
            thresholds.model_down_for,
            f"{m.name}: no vLLM replica is ready",
            f"Deployment {m.namespace}/{m.deployment} wants replicas but none has been ready for "
            f"{thresholds.model_down_for}: every request to {m.served_model_name} fails.",
            runbook_base,
            extra_labels={"model": m.name},
        ),
        alerting_rule(
            "VllmMetricsAbsent",
            f"absent_over_time(vllm:num_requests_running{selector(m)}[{thresholds.deadman_window}])"
            f" and on () ({deployment_ready})",
            "critical",
            "5m",
            f"{m.name}: no vLLM metrics although replicas are ready",
            f"Deployment {m.namespace}/{m.deployment} has ready replicas, but Prometheus has no vLLM "
            f"metrics for model_name={m.served_model_name} for {thresholds.deadman_window}: the "
            "scrape is broken, so the SLO alerts for it are blind.",
            runbook_base,
            extra_labels={"model": m.name},
        ),
    ]


# Exporter metric → the alert that reads it (AmdGpuMetricsAbsent watches each one).
GPU_ALERT_METRICS: dict[str, str] = {
    "gpu_junction_temperature": "AmdGpuJunctionTemperatureHigh",
    "gpu_health": "AmdGpuUnhealthy",
    "gpu_ecc_uncorrect_total": "AmdGpuUncorrectableEccErrors",
}


def gpu_alert_group(
    thresholds: AlertThresholds = DEFAULT_THRESHOLDS, runbook_base: str = RUNBOOK_DEFAULT
) -> dict:
    """AMD device-metrics-exporter alerts, aggregated per physical GPU (hostname, gpu_id), and
    a cluster-wide deadman for the exporter itself.

    The exporter adds the workload's pod/namespace labels to a GPU's series when a pod holds it,
    so aggregating per GPU keeps one alert per device whatever runs on it.
    """
    rules = [
        alerting_rule(
            "AmdGpuJunctionTemperatureHigh",
            "max by (hostname, gpu_id) (gpu_junction_temperature)"
            f" > {promql_number(thresholds.gpu_junction_temperature_c)}",
            "warning",
            "5m",
            "GPU {{ $labels.gpu_id }} on {{ $labels.hostname }} runs hot",
            "Junction temperature {{ $value }} °C; the GPU will throttle its clocks and slow every "
            "replica on it.",
            runbook_base,
        ),
        alerting_rule(
            "AmdGpuUnhealthy",
            "min by (hostname, gpu_id) (gpu_health) == 0",
            "critical",
            "5m",
            "GPU {{ $labels.gpu_id }} on {{ $labels.hostname }} reports unhealthy",
            "The device-metrics exporter marks the GPU unhealthy; the device plugin stops offering it.",
            runbook_base,
        ),
        alerting_rule(
            "AmdGpuUncorrectableEccErrors",
            "max by (hostname, gpu_id) (delta(gpu_ecc_uncorrect_total[15m])) > 0",
            "critical",
            None,
            "GPU {{ $labels.gpu_id }} on {{ $labels.hostname }} logged uncorrectable ECC errors",
            "{{ $value }} new uncorrectable memory errors in 15 minutes; results computed on this GPU may be "
            "wrong.",
            runbook_base,
        ),
        # The deadman of the three alerts above, one series per metric they read: each alert is
        # blind without its own metric (an exporter config that drops gpu_health leaves
        # AmdGpuUnhealthy silent while the temperature still arrives). kube-state-metrics exports
        # extended resources with the name sanitised (`amd.com/gpu` → `amd_com_gpu`) and needs no
        # label allow-list for it; the alert's value is the number of AMD GPU nodes. The `for`
        # covers a GPU node scaled up from zero, whose exporter pod still has to pull and start.
        alerting_rule(
            "AmdGpuMetricsAbsent",
            "("
            + "\n or ".join(
                f'label_replace(absent_over_time({metric}[{thresholds.deadman_window}]), "metric", '
                f'"{metric}", "", "")'
                for metric in GPU_ALERT_METRICS
            )
            + ')\n* on () group_left () count(kube_node_status_capacity{resource="amd_com_gpu"} > 0)',
            "warning",
            "10m",
            "No {{ $labels.metric }} from the AMD GPU exporter although the cluster has AMD GPU nodes",
            "{{ $value }} nodes offer amd.com/gpu, but Prometheus has scraped no {{ $labels.metric }} "
            f"series from the ROCm device-metrics-exporter for {thresholds.deadman_window}: the alerts "
            "reading it are blind ("
            + ", ".join(f"{metric}: {alert}" for metric, alert in GPU_ALERT_METRICS.items())
            + ").",
            runbook_base,
        ),
    ]
    return {"name": "inference-platform.alerts.gpu", "rules": rules}


def slow_readiness_alert(runbook_base: str) -> dict:
    """An engine pod still not Ready after READY_ALERT_FACTOR × the plan's time-to-ready: a
    rollout (or scale-up) is loading far slower than planned — a throttled source, a cold cache,
    a crash loop inside the startup probe's budget. Generic over the recorded `model` label."""
    factor = promql_number(READY_ALERT_FACTOR)
    return alerting_rule(
        "VllmReplicaSlowToReady",
        f"model:engine_loading_seconds > on (model) group_left () ({factor} * model:engine_predicted_ready_seconds)",
        "warning",
        "1m",
        "{{ $labels.model }}: pod {{ $labels.pod }} is taking far longer to become ready than planned",
        "{{ $labels.namespace }}/{{ $labels.pod }} started {{ $value | humanizeDuration }} ago and is not ready; "
        f"the plan expects a new {{{{ $labels.model }}}} pod to be ready in half the time this alert allows ({factor}×).",
        runbook_base,
    )
