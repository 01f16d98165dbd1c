"""Read a rollout's per-variant series from Prometheus' HTTP API (`GET /api/v1/query`).

Stdlib only (urllib): one instant query per recorded series, each answering both variants. The
series are the recording rules of infra/render/rollout_rules.py, so what `infra rollout status`
reads is exactly what the LayoutCanaryWorse alert reads.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request

from infra.errors import Problem, UserError
from infra.rollout.gate import VariantNumbers

# VariantNumbers field → recorded series (labels model, variant).
SERIES: dict[str, str] = {
    "ttft_p90_s": "model_variant:vllm_ttft_seconds:p90",
    "tpot_p90_s": "model_variant:vllm_tpot_seconds:p90",
    "error_ratio": "model_variant:vllm_unserved:ratio_rate5m",
    "burn_short": "model_variant:vllm_slo_burn_rate:rate5m",
    "burn_long": "model_variant:vllm_slo_burn_rate:rate1h",
    "goodput_rps_per_gpu": "model_variant:vllm_goodput_rps_per_gpu:rate5m",
    "requests_per_s": "model_variant:vllm_requests_per_second:rate5m",
    "requests_long": "model_variant:vllm_requests:increase1h",
}


def _label_value(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def query(base_url: str, promql: str, timeout_s: float = 10.0) -> list[dict]:
    """The result vector of one instant query; a UserError naming --prometheus when unreachable."""
    url = f"{base_url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            answer = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise UserError([Problem("--prometheus", f"cannot query {base_url}: {err}")]) from None
    if answer.get("status") != "success":
        raise UserError([Problem("--prometheus", f"{base_url} answered {answer.get('errorType')}: {answer.get('error')}")])
    return answer["data"]["result"]


def variant_numbers(base_url: str, model: str) -> dict[str, VariantNumbers]:
    """{"current": ..., "candidate": ...} from the recorded series (missing series: None)."""
    values: dict[str, dict[str, float]] = {"current": {}, "candidate": {}}
    for field_name, series in SERIES.items():
        for sample in query(base_url, f"{series}{{model={_label_value(model)}}}"):
            variant = sample["metric"].get("variant")
            if variant in values:
                v = float(sample["value"][1])
                values[variant][field_name] = None if math.isnan(v) else v
    return {variant: VariantNumbers(**fields) for variant, fields in values.items()}
