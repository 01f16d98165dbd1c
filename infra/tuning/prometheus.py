"""A small, strict client of Prometheus' HTTP API (`/api/v1/query_range`, `/api/v1/query`).

Strict because a calibration must never be fitted to an answer it misread: every way an answer
can be wrong — no connection, a timeout, an HTTP error, a body that is not JSON, `status: error`,
a result of the wrong type, a value that is not a finite number — is one `PrometheusError` (a
UserError: one line, exit 2) naming the URL path and the query, and nothing is written. An empty
result is not an error here: the caller decides whether "no series" means "no data yet".

Transport: requests with urllib3's Retry on connection errors and 502/503/504 (a Prometheus
restarting behind its Service), exponential backoff, then a clear error; (connect, read) timeouts
on every call. Queries are POSTed as form data (long PromQL stays out of URLs and logs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from infra.errors import UserError

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0
RETRIES = 3
BACKOFF_S = 0.5
# Prometheus refuses ranges of more than 11,000 points per series.
MAX_POINTS = 11_000


class PrometheusError(UserError):
    """Prometheus could not be asked, or its answer cannot be used."""


@dataclass(frozen=True)
class Series:
    """One series of a range query: its labels and (unix time, value) samples, in time order."""

    labels: dict[str, str]
    samples: tuple[tuple[float, float], ...]


def check_url(url: str) -> str:
    """`--prometheus` must be an http(s) base URL without credentials in it (they would end up
    in the factors file's provenance and in logs)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--prometheus: {url!r} is not an http(s) URL (e.g. http://localhost:9090)")
    if parts.username or parts.password:
        raise UserError("--prometheus: credentials in the URL are not accepted (they would be recorded); use a port-forward")
    return url.rstrip("/")


class PrometheusClient:
    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout_s: float | None = None,
        read_timeout_s: float | None = None,
        retries: int | None = None,
        backoff_s: float | None = None,
    ):
        self.base_url = check_url(base_url)
        self.timeout = (connect_timeout_s or CONNECT_TIMEOUT_S, read_timeout_s or READ_TIMEOUT_S)
        retries = RETRIES if retries is None else retries
        self.retries = retries
        backoff_s = BACKOFF_S if backoff_s is None else backoff_s
        retry = Retry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            backoff_factor=backoff_s,
            status_forcelist=(502, 503, 504),
            allowed_methods=frozenset({"GET", "POST"}),
            raise_on_status=False,
        )
        self.session = requests.Session()
        self.session.mount("http://", HTTPAdapter(max_retries=retry))
        self.session.mount("https://", HTTPAdapter(max_retries=retry))

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[Series]:
        """Every series of `expr` over [start, end] at `step_s`; NaN/Inf samples are an error."""
        if (end - start) / step_s > MAX_POINTS:
            step_s = math.ceil((end - start) / MAX_POINTS)
        data = self._post("/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}, expr)
        if data.get("resultType") != "matrix":
            raise PrometheusError(f"Prometheus answered {data.get('resultType')!r} to a range query, expected a matrix: {expr}")
        return [Series(_labels(s, expr), tuple(_sample(v, expr) for v in s.get("values") or ())) for s in data.get("result") or []]

    def query(self, expr: str, at: float) -> list[Series]:
        """An instant query at `at` (vector results only), as single-sample Series."""
        data = self._post("/api/v1/query", {"query": expr, "time": f"{at:.3f}"}, expr)
        if data.get("resultType") != "vector":
            raise PrometheusError(f"Prometheus answered {data.get('resultType')!r} to an instant query, expected a vector: {expr}")
        return [Series(_labels(s, expr), (_sample(s.get("value"), expr),)) for s in data.get("result") or []]

    def _post(self, path: str, form: dict, expr: str) -> dict:
        url = self.base_url + path
        try:
            response = self.session.post(url, data=form, timeout=self.timeout)
        except requests.RequestException as err:
            # After the last retry urllib3 reports a read timeout as MaxRetryError(reason=ReadTimeoutError),
            # which requests raises as a ConnectionError.
            reason = getattr(err.args[0], "reason", None) if err.args else None
            if isinstance(err, requests.Timeout) or isinstance(reason, ReadTimeoutError):
                raise PrometheusError(
                    f"Prometheus at {self.base_url} did not answer {path} within {self.timeout[1]:g} s: {expr}"
                ) from None
            raise PrometheusError(f"cannot reach Prometheus at {self.base_url} ({type(err).__name__}) after {self.retries} retries") from None
        try:
            payload = response.json()
        except ValueError:
            raise PrometheusError(
                f"Prometheus at {url} answered HTTP {response.status_code} with a body that is not JSON "
                f"({response.headers.get('content-type', 'no content type')}): is this Prometheus' API?"
            ) from None
        if not isinstance(payload, dict):
            raise PrometheusError(f"Prometheus at {url} answered JSON that is not an object: {expr}")
        if response.status_code != 200 or payload.get("status") != "success":
            why = payload.get("error") or payload.get("errorType") or "no error given"
            raise PrometheusError(f"Prometheus at {url} answered HTTP {response.status_code}: {why} (query: {expr})")
        data = payload.get("data")
        if not isinstance(data, dict):
            raise PrometheusError(f"Prometheus at {url} answered without a data object: {expr}")
        return data


def _labels(series: object, expr: str) -> dict[str, str]:
    if not isinstance(series, dict) or not isinstance(series.get("metric", {}), dict):
        raise PrometheusError(f"Prometheus answered a malformed series to {expr}")
    return {str(k): str(v) for k, v in (series.get("metric") or {}).items()}


def _sample(value: object, expr: str) -> tuple[float, float]:
    try:
        t, v = value  # type: ignore[misc]
        t, v = float(t), float(v)
    except (TypeError, ValueError):
        raise PrometheusError(f"Prometheus answered a sample that is not [time, value]: {value!r} (query: {expr})") from None
    if not math.isfinite(v):
        raise PrometheusError(f"Prometheus answered {v} for {expr} at {t:.0f}: not a finite number (a division by zero in a rule?)")
    return t, v
