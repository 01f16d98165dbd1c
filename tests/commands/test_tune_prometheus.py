"""`infra tune calibrate --prometheus`: window selection, bad answers, the fit, --write, idempotency.

A local HTTP server (pytest-httpserver) plays Prometheus: it answers `query_range` for the
recorded series the command reads with synthetic values, and each bad-answer case with exactly
one fault. The model is the dev stack's qwen3-8b on one MI300X; its "measured" throughput is the
planner's own closed-loop prediction × MEASURED_SHARE, so the fit has a known direction.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from werkzeug import Response

from infra.cli import main
from infra.tuning import telemetry
from infra.tuning.telemetry import RATE_LAG_S, judge_window, observations, windows
from tests.conftest import ROOT as REPO

STEP = 60
WINDOW = 900
MODEL = "qwen3-8b"
MEASURED_SHARE = 0.6
IN_FLIGHT = 8.0


# --- window selection (pure) -----------------------------------------------------------------------


def _series(start: int, end: int, **overrides) -> dict[str, dict[int, float]]:
    """Steady load over [start, end): 2 nodes, 3 req/s per node, 8 in flight; `overrides` maps a
    series name to a function of time."""
    base = {
        "nodes": lambda t: 2.0,
        "served_rps_per_node": lambda t: 3.0,
        "output_tokens_per_s_per_node": lambda t: 600.0,
        "in_flight_per_node": lambda t: IN_FLIGHT,
        "prompt_tokens": lambda t: 1000.0,
        "output_tokens": lambda t: 200.0,
        "ttft_good": lambda t: 0.97,
        "tpot_good": lambda t: 0.95,
        "resets": lambda t: 0.0,
    }
    base.update(overrides)
    return {name: {t: f(t) for t in range(start, end, STEP) if f(t) is not None} for name, f in base.items()}


T0 = 1_800_000_000 // WINDOW * WINDOW  # window-aligned


def _verdict(**overrides):
    series = _series(T0 - WINDOW, T0 + WINDOW, **overrides)
    return judge_window(series, T0, T0 + WINDOW, STEP)[0]


def test_windows_are_whole_and_clock_aligned():
    assert windows(T0 + 10, T0 + 3 * WINDOW + 5, WINDOW) == [(T0 + WINDOW, T0 + 2 * WINDOW), (T0 + 2 * WINDOW, T0 + 3 * WINDOW)]


def test_a_steady_window_is_an_observation_with_its_means():
    obs, verdicts = observations(_series(T0 - WINDOW, T0 + WINDOW), MODEL, "tp1-r1", T0, T0 + WINDOW, STEP, WINDOW)
    assert [v.steady for v in verdicts] == [True]
    (o,) = obs
    assert (o.nodes, o.served_rps_per_node, o.in_flight_per_node, o.within_slo) == (2.0, 3.0, IN_FLIGHT, True)


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"nodes": lambda t: 2.0 if t < T0 + 300 else 3.0}, "scaling event"),
        # a scale-up in the rate window before the window still mixes two replica counts
        ({"nodes": lambda t: 1.0 if t < T0 - RATE_LAG_S + 60 else 2.0}, "scaling event"),
        ({"resets": lambda t: 1.0 if t == T0 + 420 else 0.0}, "engine restart"),
        ({"in_flight_per_node": lambda t: 0.2, "served_rps_per_node": lambda t: 0.01}, "idle"),
        ({"served_rps_per_node": lambda t: 1.0 if (t // STEP) % 2 else 5.0}, "unstable load"),
        ({"output_tokens_per_s_per_node": lambda t: None if T0 + 120 <= t < T0 + 300 else 600.0}, "incomplete"),
        ({"nodes": lambda t: None if t == T0 else 2.0}, "incomplete"),
    ],
    ids=["scaling", "scaling-in-rate-lag", "restart", "idle", "unstable", "gap", "not-serving-at-start"],
)
def test_unsteady_windows_are_set_aside_with_why(overrides, reason):
    verdict = _verdict(**overrides)
    assert not verdict.steady and verdict.reason.startswith(reason), verdict


def test_one_missed_scrape_does_not_discard_a_loaded_window():
    """A busy engine is the one whose scrape times out; its window is still an observation, with
    means over the steps that were scraped."""
    obs, verdicts = observations(
        _series(T0 - WINDOW, T0 + WINDOW, served_rps_per_node=lambda t: None if t == T0 + 120 else 3.0),
        MODEL, "tp1-r1", T0, T0 + WINDOW, STEP, WINDOW,
    )
    assert [v.steady for v in verdicts] == [True]
    assert obs[0].served_rps_per_node == 3.0


def test_one_missed_scrape_of_one_engine_is_not_a_scaling_event():
    """`up` is 0 for one scrape of one engine: the node count dips for one step and comes back."""
    assert _verdict(nodes=lambda t: 1.0 if t == T0 + 240 else 2.0).steady
    assert not _verdict(nodes=lambda t: 1.0 if T0 + 240 <= t < T0 + 360 else 2.0).steady


def test_a_missed_scrape_leaves_its_step_out_of_the_per_node_means():
    """One of 2 engines misses a scrape: `up` counts 1 node at that step while the served rates still
    count both, so the per-node values there double. Two such steps in a window made its load read
    as unstable (CV 30 %) and biased its means; the steps are left out."""
    blips = {T0 + 240, T0 + 480}

    def doubled(value):
        return lambda t: 2 * value if t in blips else value

    obs, verdicts = observations(
        _series(T0 - WINDOW, T0 + WINDOW, nodes=lambda t: 1.0 if t in blips else 2.0, served_rps_per_node=doubled(3.0),
                output_tokens_per_s_per_node=doubled(600.0), in_flight_per_node=doubled(IN_FLIGHT)),
        MODEL, "tp1-r1", T0, T0 + WINDOW, STEP, WINDOW,
    )  # fmt: skip
    assert [v.steady for v in verdicts] == [True], verdicts
    (o,) = obs
    assert (o.nodes, o.served_rps_per_node, o.output_tokens_per_s_per_node, o.in_flight_per_node) == (2.0, 3.0, 600.0, IN_FLIGHT)


def test_a_missed_slo_is_recorded_not_dropped():
    obs, _ = observations(_series(T0, T0 + WINDOW, ttft_good=lambda t: 0.7), MODEL, "tp1-r1", T0, T0 + WINDOW, STEP, WINDOW)
    assert [o.within_slo for o in obs] == [False]


# --- the command against a local Prometheus ----------------------------------------------------------


@pytest.fixture
def stack_root(tmp_path) -> Path:
    root = tmp_path / "repo"
    (root / "stacks").mkdir(parents=True)
    shutil.copy(REPO / "stacks" / "Pulumi.dev.yaml", root / "stacks")
    return root


def _measured_tokens() -> float:
    """What the fake cluster "measures": MEASURED_SHARE × the planner's own prediction at IN_FLIGHT."""
    from infra.config import load_stack_file
    from infra.domain import Workload
    from infra.planner.search import predict_closed_loop
    from infra.stack_plan import plan_stack

    plan = plan_stack(load_stack_file("dev", REPO))
    m = plan.model(MODEL)
    cl = predict_closed_loop(m.arch, m.pool.gpu, m.layout, Workload(1000, 200), IN_FLIGHT)
    return cl.output_tokens_per_s_per_node * MEASURED_SHARE


class FakePrometheus:
    """Answers query_range from `values(name, t)`; the series name is the recorded rule in the query."""

    def __init__(self, server, values):
        self.server, self.values, self.queries = server, values, []
        server.expect_request("/api/v1/query_range", method="POST").respond_with_handler(self.range)
        server.expect_request("/api/v1/query", method="POST").respond_with_json(
            {"status": "success", "data": {"resultType": "vector", "result": []}}
        )

    def range(self, request):
        form = parse_qs(request.get_data(as_text=True))
        query, start, end, step = form["query"][0], float(form["start"][0]), float(form["end"][0]), float(form["step"][0])
        self.queries.append(query)
        name = next((n for n, t in telemetry.SERIES.items() if t.split("{")[0].split("(")[-1] in query), None)
        samples = []
        t = start
        while t <= end + 1e-6:
            v = self.values(name, t)
            if v is not None:
                samples.append([t, "NaN" if isinstance(v, float) and math.isnan(v) else f"{v:.6g}"])
            t += step
        result = [{"metric": {"model": MODEL}, "values": samples}] if samples else []
        return Response(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}),
                        content_type="application/json")


def _steady_values(tokens: float, until: float | None = None):
    steady = {"nodes": 1.0, "served_rps_per_node": tokens / 200, "output_tokens_per_s_per_node": tokens,
              "in_flight_per_node": IN_FLIGHT, "prompt_tokens": 1000.0, "output_tokens": 200.0,
              "ttft_good": 0.95, "tpot_good": 0.93, "resets": 0.0}  # fmt: skip

    def values(name, t):
        if until is not None and t > until and name != "nodes":
            return {"resets": 0.0, "in_flight_per_node": 0.0, "served_rps_per_node": 0.0}.get(name, 0.0)
        return steady[name]

    return values


def _calibrate(server, stack_root, *extra: str) -> int:
    return main(["tune", "calibrate", "--prometheus", server.url_for("/").rstrip("/"), "--stack", "dev",
                 "--since", "2h", "--stacks-dir", str(stack_root / "stacks"), *extra])  # fmt: skip


def test_calibrate_reports_fits_and_writes_then_a_rerun_changes_nothing(httpserver, stack_root, capsys, monkeypatch):
    tokens = _measured_tokens()
    now = T0 + 2 * 3600
    monkeypatch.setattr("infra.commands.tune_telemetry._now", lambda: now)
    FakePrometheus(httpserver, _steady_values(tokens))
    assert _calibrate(httpserver, stack_root, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["windows"][MODEL]["steady"] == 8  # 2 h of 15 min windows
    (family,) = report["families"]
    errors = family["mean_abs_error_pct"]
    assert errors["before"] == pytest.approx((1 / MEASURED_SHARE - 1) * 100, rel=0.02)
    assert errors["after"] < errors["before"] / 2
    assert errors["held_out"] is not None
    assert report["written"] is None and not (stack_root / "stacks" / "factors.dev.json").exists()

    assert _calibrate(httpserver, stack_root, "--write") == 0
    path = stack_root / "stacks" / "factors.dev.json"
    written = path.read_bytes()
    doc = json.loads(written)
    assert doc["provenance"]["cluster"] == "dev-doks" and doc["provenance"]["runs"] == 1
    assert doc["measured"][MODEL]["within_slo"] is True
    out = capsys.readouterr().out
    assert "mean absolute error" in out and f"wrote {path}" in out

    # the plan uses the file and says so, with what was measured
    from infra.config import load_stack_file
    from infra.stack_plan import plan_stack

    plan = plan_stack(load_stack_file("dev", stack_root))
    notes = "\n".join(plan.notes)
    assert "stacks/factors.dev.json (from telemetry of cluster dev-doks" in notes
    assert f"model {MODEL}: measured {tokens / 200:.2f} req/s/node at p90 within SLO" in notes

    # no new data: nothing changes
    assert _calibrate(httpserver, stack_root, "--write") == 0
    assert "no new steady window since the last run" in capsys.readouterr().out
    assert path.read_bytes() == written


def _bad(httpserver, handler_kind: str):
    if handler_kind == "http-500":
        httpserver.expect_request("/api/v1/query_range").respond_with_json(
            {"status": "error", "errorType": "internal", "error": "query processing would load too many samples"}, status=500)
    elif handler_kind == "not-json":
        httpserver.expect_request("/api/v1/query_range").respond_with_data("<html>login</html>", content_type="text/html")
    elif handler_kind == "timeout":
        def slow(request):
            time.sleep(1.0)
            return Response("{}", content_type="application/json")
        httpserver.expect_request("/api/v1/query_range").respond_with_handler(slow)
    elif handler_kind == "nan":
        FakePrometheus(httpserver, lambda name, t: math.nan if name == "output_tokens_per_s_per_node" else 1.0)
    elif handler_kind == "empty":
        FakePrometheus(httpserver, lambda name, t: None)
    elif handler_kind == "idle":
        FakePrometheus(httpserver, _steady_values(100.0, until=0))


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("empty", "has no planner series for qwen3-8b"),
        ("nan", "not a finite number"),
        ("http-500", "answered HTTP 500: query processing would load too many samples"),
        ("not-json", "body that is not JSON"),
        ("idle", "no steady window over the last 2h"),
        # last: the single-threaded test server is still busy with the slow answer afterwards
        ("timeout", "did not answer /api/v1/query_range within"),
    ],
)
def test_bad_prometheus_answers_are_one_line_exit_2_nothing_written(httpserver, stack_root, capsys, monkeypatch, kind, says):
    monkeypatch.setattr("infra.commands.tune_telemetry._now", lambda: T0 + 2 * 3600)
    monkeypatch.setattr("infra.tuning.prometheus.READ_TIMEOUT_S", 0.5)
    monkeypatch.setattr("infra.tuning.prometheus.RETRIES", 0)
    _bad(httpserver, kind)
    assert _calibrate(httpserver, stack_root, "--write") == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert says in err, err
    assert err.startswith("error: ") and ("\n" not in err or kind == "idle")
    assert "Traceback" not in captured.err
    assert not (stack_root / "stacks" / "factors.dev.json").exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--prometheus", "ftp://x", "--stack", "dev"], "is not an http(s) URL"),
        (["--prometheus", "http://u:p@x:9090", "--stack", "dev"], "credentials in the URL"),
        (["--prometheus", "http://x:9090"], "--stack: needed with --prometheus"),
        (["--prometheus", "http://x:9090", "--stack", "dev", "--since", "7 days"], "--since: '7 days' is not a Prometheus duration"),
        (["--prometheus", "http://x:9090", "--stack", "dev", "--window", "90s"], "--window: 90s must be a multiple of --step"),
        (["--prometheus", "http://x:9090", "--stack", "dev", "--save"], "--save: not with --prometheus"),
        ([], "RESULTS: give benchmark result files, or --prometheus URL"),
    ],
)
def test_bad_flags(argv, says, capsys, stack_root):
    assert main(["tune", "calibrate", *argv, "--stacks-dir", str(stack_root / "stacks")]) == 2
    assert says in capsys.readouterr().err
