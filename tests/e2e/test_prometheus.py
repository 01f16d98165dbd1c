"""A real Prometheus scraping the two engines and the router, evaluating the project's rules.

Inputs (tests/e2e/inputs.py): rule groups = observability.render_prometheus_rules(...) spec.groups
for the e2e model; scrape target labels = what observability.render_pod_monitors' relabelings set
(model, component, node; the Prometheus Operator adds namespace and pod), put on static targets;
KEDA queries = autoscaling.in_flight_query / queue_query; dashboards = observability.dashboard_files;
the external-metric catalogue and the PromQL name extraction of tests/test_observability_rules.py.

Changed for the test, and only this: every group's `interval` (1m for the SLO group) and the
global evaluation/scrape interval are 1 s, so series appear within seconds instead of minutes.
The router is scraped on its metrics port, the container port `metrics` the project's router
PodMonitor names (its serving port's /metrics is proxied to one engine).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse

import pytest
import yaml

from tests.e2e import harness, inputs
from tests.e2e.conftest import timed
from tests.render.test_slo_rules import (
    EXTERNAL_METRICS,
    all_groups,
    dashboard_exprs,
    grafana_expr_to_promql,
    metric_names,
)

KEY = harness.bearer(inputs.API_KEY)
# Series these rules can only have with kube-state-metrics or the AMD exporter, absent here.
NOT_RUN_HERE = ("kube_", "gpu_")


class Prom:
    def __init__(self, proc: harness.Proc):
        self.proc = proc

    def query(self, expr: str) -> list[dict]:
        url = f"{self.proc.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        payload = harness.get_json(url)
        assert payload["status"] == "success", payload
        return payload["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None


def _write_config(tmp, engines, router, rule_file) -> tuple[str, dict]:
    labels = {"namespace": "inference-engines", "model": inputs.MODEL, "node": "e2e"}
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(rule_file)],
        "scrape_configs": [
            {"job_name": "vllm", "static_configs": [
                {"targets": [e.url.removeprefix("http://")], "labels": {**labels, "component": "vllm", "pod": e.name}}
                for e in engines]},
            {"job_name": "router", "static_configs": [
                {"targets": [f"{harness.LOOPBACK}:{router.meta['metrics_port']}"],
                 "labels": {k: v for k, v in {**labels, "component": "router", "pod": "router-0"}.items() if k != "model"}}]},
        ],
    }
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path), config


@pytest.fixture(scope="module")
def rule_file(tmp_path_factory):
    groups = inputs.rule_groups(replicas=2)
    for g in groups:
        g["interval"] = "1s"
    path = tmp_path_factory.mktemp("rules") / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path, groups


@pytest.fixture(scope="module")
def prom(prometheus_bin, procs, engine_pair, module_router_factory, rule_file, tmp_path_factory):
    path, _ = rule_file
    router = module_router_factory(inputs.router_spec("session"), engine_pair)
    tmp = tmp_path_factory.mktemp("prometheus")
    config_path, _ = _write_config(tmp, engine_pair, router, path)
    port = harness.free_port()
    proc = procs.start("prometheus", [prometheus_bin["prometheus"], f"--config.file={config_path}",
                                      f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address={harness.LOOPBACK}:{port}",
                                      "--log.level=warn"], port=port)
    harness.wait_http(proc, "/-/ready", timeout=60, extra_tails=procs.tails)
    p = Prom(proc)
    # Counters must be scraped once BEFORE the traffic, or rate() sees no increase.
    targets = len(engine_pair) + 1
    deadline = time.monotonic() + 60
    while len(p.query("up == 1")) < targets or len(p.query("count_over_time(up[1m]) >= 2")) < targets:
        assert time.monotonic() < deadline, f"targets not scraped: {p.query('up')}\n{procs.tails()}"
        time.sleep(1)
    # Traffic: sessions and plain requests through the router, one streamed chat.
    for i in range(12):
        body = {"model": inputs.SERVED, "prompt": f"observability request {i}", "max_tokens": 8}
        headers = {**KEY, **({"x-session-id": f"s{i % 3}"} if i % 2 else {})}
        assert harness.http("POST", router.url + "/v1/completions", body=body, headers=headers)[0] == 200
    chat = {"model": inputs.SERVED, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True}
    assert harness.http("POST", router.url + "/v1/chat/completions", body=chat, headers=KEY)[0] == 200
    with timed("prometheus: first recorded goodput series"):
        deadline = time.monotonic() + 60
        sel = f'{{model="{inputs.MODEL}"}}'
        while not ((p.value(f"model:vllm_requests_per_second:rate5m{sel}") or 0) > 0
                   and p.value(f"model:vllm_goodput_requests_per_second:rate5m{sel}") is not None):
            assert time.monotonic() < deadline, f"no goodput series after 60 s\n{procs.tails()}"
            time.sleep(1)
    time.sleep(3)  # a few more evaluations, so dependent rules see their inputs
    return p, router


def test_promtool_accepts_the_rendered_rules(prometheus_bin, rule_file):
    path, _ = rule_file
    result = subprocess.run([prometheus_bin["promtool"], "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_evaluates_without_error(prom, rule_file):
    p, _ = prom
    _, groups = rule_file
    payload = harness.get_json(f"{p.proc.url}/api/v1/rules")
    loaded = {g["name"]: g for g in payload["data"]["groups"]}
    assert set(loaded) == {g["name"] for g in groups}
    broken = {r.get("name"): r.get("lastError") for g in loaded.values() for r in g["rules"] if r.get("health") != "ok"}
    assert not broken, broken


def _depends_on_absent(expr: str, absent_records: set[str]) -> bool:
    names = metric_names(expr)
    return any(n.startswith(NOT_RUN_HERE) for n in names) or bool(names & absent_records)


def test_every_recording_rule_yields_a_series(prom, rule_file):
    p, _ = prom
    _, groups = rule_file
    records = [(r["record"], r["expr"], r.get("labels", {})) for g in groups for r in g["rules"] if "record" in r]
    expected_absent: set[str] = set()
    changed = True
    while changed:  # rules reading kube-state-metrics / exporter series, and rules reading those
        changed = False
        for name, expr, _ in records:
            if name not in expected_absent and _depends_on_absent(expr, expected_absent):
                expected_absent.add(name)
                changed = True
    empty, present = [], {}
    for name, _expr, labels in records:
        selector = ",".join(f'{k}="{v}"' for k, v in labels.items())
        result = p.query(f"{name}{{{selector}}}")
        if result:
            present[name] = result[0]["value"][1]
        elif name not in expected_absent:
            empty.append(name)
    print(json.dumps({"present": present, "absent_without_kube_state_metrics_or_exporter": sorted(expected_absent)}, indent=1))
    assert not empty, f"recording rules with no series although their inputs are scraped: {empty}"


def test_recorded_values_match_the_traffic(prom):
    p, _ = prom
    sel = f'{{model="{inputs.MODEL}"}}'
    assert p.value(f"model:vllm_replicas_up:sum{sel}") == 2  # the router's copy (component=router) is not counted
    assert p.value(f"model:vllm_requests_per_second:rate5m{sel}") > 0
    assert p.value(f"model:vllm_served_requests_per_second:rate5m{sel}") > 0
    assert p.value(f"model:vllm_output_tokens_per_second:rate5m{sel}") > 0
    assert 0 < p.value(f"model:vllm_ttft_seconds:p90{sel}") < 2.5
    for sli in ("ttft", "tpot"):
        good = p.value(f"model:vllm_{sli}_slo_good:ratio_rate5m{sel}")
        assert 0 <= good <= 1, (sli, good)
    assert p.value(f"model:vllm_goodput_requests_per_second:rate5m{sel}") >= 0


def test_keda_queries_return_the_load(prom):
    p, _ = prom
    for name, query in inputs.keda_queries().items():
        result = p.query(query)
        assert len(result) == 1, (name, query, result)
        assert float(result[0]["value"][1]) >= 0


def test_the_router_pod_monitor_ingests_only_vllm_router_series(prom):
    """The router's metrics port: its own vllm_router_* series, no copy of an engine's vllm:*."""
    p, _ = prom
    assert not p.query('count(vllm:num_requests_running{component="router"})')
    assert p.query('count({__name__=~"vllm_router_.+", component="router"})')
    router_names = {r["metric"]["__name__"] for r in p.query('group by (__name__) ({__name__=~"vllm_router_.+"})')}
    print(f"vllm-router metric names: {sorted(router_names)}")
    for name in ("vllm_router_requests_total", "vllm_router_worker_health", "vllm_router_policy_decisions_total"):
        assert name in router_names, (name, sorted(router_names))


def _rendered_groups() -> list[dict]:
    """Every rule group the project renders: this test's model and, from the renderer tests, models
    of every kind (colocated, P/D with MoRI-IO and with NIXL), so the dashboards' P/D rows count too."""
    return [*inputs.rule_groups(), *all_groups()]


def _used_names() -> dict[str, set[str]]:
    """Metric name → where it is read (rules, dashboards, KEDA)."""
    used: dict[str, set[str]] = {}
    for g in _rendered_groups():
        for r in g["rules"]:
            for n in metric_names(r["expr"]):
                used.setdefault(n, set()).add(f"rule {r.get('record') or r.get('alert')}")
    for where, expr in dashboard_exprs():
        for n in metric_names(grafana_expr_to_promql(expr)):
            used.setdefault(n, set()).add(f"dashboard {where}")
    for name, query in inputs.keda_queries().items():
        for n in metric_names(query):
            used.setdefault(n, set()).add(f"KEDA {name}")
    return used


# Series only a P/D engine exports (a NIXL connector, a KV consumer): a plain CPU engine cannot show
# them, so they are checked against their catalogue source only (tests/render/test_slo_rules.py).
# Names only an engine with a KV connector exports (P/D sides, the KV offload tier): the CPU build
# runs neither, so they are listed, not required.
PD_ENGINE_ONLY = ("NixlConnector only", "KV consumers only", "OffloadingConnector")


def _pd_engine_only(name: str) -> bool:
    return any(marker in EXTERNAL_METRICS.get(name, "") for marker in PD_ENGINE_ONLY)


def test_every_vllm_metric_name_used_exists_on_the_real_engine(prom, engine_pair, engine_env):
    p, _ = prom
    real = harness.metric_names(harness.http("GET", engine_pair[0].url + "/metrics")[1].decode())
    # vllm-router's metric names are string constants in its compiled module: the P/D router's
    # series are checked there (a P/D router needs P/D engines, which a CPU build cannot run).
    router_binary = engine_env.router_extension.read_bytes()
    recorded = {r["record"] for g in _rendered_groups() for r in g["rules"] if "record" in r}
    used = _used_names()
    wrong, exporter, pd_only = {}, {}, {}
    for name, where in sorted(used.items()):
        if name in recorded or name == "up":
            continue
        if name.startswith("vllm:"):
            if name in real:
                continue
            if _pd_engine_only(name):
                pd_only[name] = EXTERNAL_METRICS[name]
            else:
                wrong[name] = sorted(where)
        elif name.startswith("vllm_router_"):
            if name.encode() not in router_binary:
                wrong[name] = sorted(where)
        elif name.startswith(NOT_RUN_HERE):
            exporter[name] = EXTERNAL_METRICS.get(name, "NOT IN tests/test_observability_rules.EXTERNAL_METRICS")
        else:
            wrong[name] = sorted(where)
    catalogued_vllm = {n for n in EXTERNAL_METRICS if n.startswith("vllm:") and not _pd_engine_only(n)}
    print(json.dumps({"exporter_or_kube_state_metrics_not_checked_here": exporter,
                      "pd_engine_only_not_checked_here": pd_only,
                      "catalogued_vllm_names_missing_on_real_engine": sorted(catalogued_vllm - real)}, indent=1))
    assert not wrong, f"metric names read by rules/dashboards/KEDA that the real engine does not export: {wrong}"
    assert catalogued_vllm <= real
