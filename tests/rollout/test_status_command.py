"""`infra rollout status` reads the variants' recorded series from Prometheus' HTTP API and says
promote / hold / roll back with the numbers (a stand-in Prometheus answers the queries here; the
e2e test runs it against the real one)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from infra.cli import main
from infra.rollout.prometheus import SERIES


def _serve(values: dict[str, dict[str, float]]):
    """A Prometheus that answers `<series>{model="qwen3-235b"}` with one sample per variant."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 - http.server's name
            query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)["query"][0]
            name = query.split("{")[0]
            field = next(k for k, v in SERIES.items() if v == name)
            result = [
                {"metric": {"__name__": name, "model": "qwen3-235b", "variant": variant}, "value": [0, str(numbers[field])]}
                for variant, numbers in values.items()
                if field in numbers
            ]
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


GOOD = {"ttft_p90_s": 0.6, "tpot_p90_s": 0.03, "error_ratio": 0.0, "burn_short": 0.1, "burn_long": 0.2,
        "goodput_rps_per_gpu": 0.4, "requests_per_s": 1.0, "requests_long": 2000}
SLOW = {**GOOD, "ttft_p90_s": 4.0, "burn_short": 7.0, "burn_long": 6.5, "requests_per_s": 0.25, "requests_long": 500}


@pytest.mark.parametrize(
    ("candidate", "code", "words"),
    [({**GOOD, "requests_per_s": 0.25, "requests_long": 500}, 0, ["PROMOTE", "20 %", "→ 50 %"]),
     (SLOW, 4, ["ROLL BACK", "6.50× (1 h)", "infra rollout abort"]),
     ({**GOOD, "requests_per_s": 0.25, "requests_long": 12}, 3, ["HOLD", "12 requests"])],
)
def test_status_says_what_to_do_with_the_numbers(rollout_project, capsys, candidate, code, words):
    server = _serve({"current": GOOD, "candidate": candidate})
    try:
        argv = ["rollout", "status", "staging", "qwen3-235b", "--root", str(rollout_project),
                "--prometheus", f"http://127.0.0.1:{server.server_port}"]
        assert main(argv) == code
        out = capsys.readouterr().out
        assert all(w in out for w in words), out
        assert "tp2-r4" in out and "tp4-ep-r2" in out
        assert main([*argv, "--json"]) == code
        report = json.loads(capsys.readouterr().out)
        assert report["measured_candidate_share_percent"] == 20.0
    finally:
        server.shutdown()


def test_an_unreachable_prometheus_is_one_clear_error(rollout_project, capsys):
    assert main(["rollout", "status", "staging", "qwen3-235b", "--root", str(rollout_project), "--prometheus", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "--prometheus" in err and "cannot query" in err
