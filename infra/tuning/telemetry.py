"""Steady windows of a model's live telemetry, turned into observations the planner can be fitted to.

Input: the per-node series `infra/render/planner_rules.py` records (what a node of the model served,
its output tokens/s, requests in flight, the measured prompt/answer lengths) and the SLO group's
good ratios, read back with `query_range` over `--since`. The time range is cut into fixed windows
aligned to the clock (WINDOW_S; so a second run sees the same windows), and a window is an
observation only when it is *steady*:

  complete   every series is there at the window's first step and at all but MAX_MISSING_SHARE of
             its steps (one missed scrape of a busy engine — busy engines are the ones that miss
             them — must not discard a loaded window; a longer gap, or a model not yet serving, is
             not steady);
  no scaling the number of nodes serving did not change in the window nor in the RATE_LAG_S before
             it (5 m rates still mix the old and the new replica count for that long); a one-step
             dip is a missed scrape, not a change, and its step is left out of the per-node means
             (they divide rates that still count the engine by one node fewer);
  no restart no engine counter reset in the window or the lag before it (a restarted engine
             starts cold: empty prefix cache, first-request compilation);
  not idle   at least MIN_IN_FLIGHT_PER_NODE requests in flight per node and MIN_SERVED_RPS served
             on average (an idle engine measures its overhead, not its capacity);
  stable     the served rate's coefficient of variation within the window is ≤ MAX_LOAD_CV.

An observation is what the planner can predict: at `in_flight_per_node` concurrent requests of the
measured mean lengths, a node of this layout generates `output_tokens_per_s_per_node` — the
closed-loop prediction (`infra.planner.search.predict_closed_loop`), valid at any load, not only
at saturation. Whether both p90s held (the SLO group's good ratios ≥ 0.9 over the window) is kept
for the plan's "measured X req/s/node at p90 within SLO".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from infra.render.slo_rules import SLO_QUANTILE, quoted
from infra.tuning.prometheus import PrometheusClient, Series

WINDOW_S = 900  # 15 min: long enough to average a bursty minute, short enough to find steady ones
RATE_LAG_S = 300  # the recording rules' rate window
MAX_LOAD_CV = 0.25
MAX_MISSING_SHARE = 0.1  # of a window's steps a series may miss (failed scrapes); means use the rest
MIN_IN_FLIGHT_PER_NODE = 1.0
MIN_SERVED_RPS = 100 / 3600  # the burn-rate alerts' traffic guard (slo_rules.MIN_REQUESTS_PER_HOUR)

# name -> PromQL template ({m} = the quoted model name). Comparisons (`>= 0`) drop the NaN an idle
# ratio would be, so a NaN Prometheus still answers is a real fault.
SERIES = {
    "nodes": "model:planner_nodes_serving:sum{{model={m}}}",
    "served_rps_per_node": "model:planner_measured_requests_per_s:per_node{{model={m}}}",
    "output_tokens_per_s_per_node": "model:planner_measured_output_tokens_per_s:per_node{{model={m}}}",
    "in_flight_per_node": "model:planner_measured_in_flight:per_node{{model={m}}}",
    "prompt_tokens": "model:planner_measured_prompt_tokens:mean_rate5m{{model={m}}}",
    "output_tokens": "model:planner_measured_output_tokens:mean_rate5m{{model={m}}}",
    "ttft_good": "model:vllm_ttft_slo_good:ratio_rate5m{{model={m}}} >= 0",
    "tpot_good": "model:vllm_tpot_slo_good:ratio_rate5m{{model={m}}} >= 0",
    # engine restarts: any of the model's engines' token counter went back (a new process)
    "resets": 'sum(resets(vllm:generation_tokens_total{{component="vllm", model={m}}}[{step}s])) or vector(0)',
}
REQUIRED = ("nodes", "served_rps_per_node", "output_tokens_per_s_per_node", "in_flight_per_node", "prompt_tokens", "output_tokens")
PER_NODE = ("nodes", "served_rps_per_node", "output_tokens_per_s_per_node", "in_flight_per_node")


@dataclass(frozen=True)
class Observation:
    """One steady window of one model: means over the window."""

    model: str
    layout: str
    start: int  # unix seconds, window-aligned
    end: int
    nodes: float
    served_rps_per_node: float
    output_tokens_per_s_per_node: float
    in_flight_per_node: float
    prompt_tokens: float
    output_tokens: float
    within_slo: bool

    @property
    def key(self) -> tuple[str, int]:
        return (self.model, self.start)

    def to_json(self) -> dict:
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, float):
                out[k] = round(v, 4)
        return out

    @staticmethod
    def from_json(doc: dict) -> Observation:
        return Observation(
            model=str(doc["model"]), layout=str(doc["layout"]), start=int(doc["start"]), end=int(doc["end"]),
            **{k: float(doc[k]) for k in ("nodes", "served_rps_per_node", "output_tokens_per_s_per_node",
                                          "in_flight_per_node", "prompt_tokens", "output_tokens")},
            within_slo=bool(doc["within_slo"]),
        )  # fmt: skip


@dataclass(frozen=True)
class WindowVerdict:
    start: int
    end: int
    steady: bool
    reason: str  # why not steady ("" when steady)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fetch_series(client: PrometheusClient, model: str, start: float, end: float, step_s: int) -> dict[str, dict[int, float]]:
    """{series name: {unix time: value}} of one model over [start, end]; a name with no series is {}."""
    out: dict[str, dict[int, float]] = {}
    for name, template in SERIES.items():
        expr = template.format(m=quoted(model), step=step_s)
        result: list[Series] = client.query_range(expr, start, end, step_s)
        values: dict[int, float] = {}
        for series in result:  # one series per model; sum defensively should a rule ever split it
            for t, v in series.samples:
                values[int(round(t))] = values.get(int(round(t)), 0.0) + v
        out[name] = values
    return out


def windows(start: float, end: float, window_s: int = WINDOW_S) -> list[tuple[int, int]]:
    """Whole clock-aligned windows inside [start, end]."""
    first = math.ceil(start / window_s) * window_s
    return [(t, t + window_s) for t in range(int(first), int(end) - window_s + 1, window_s)]


def without_blips(values: list[float]) -> list[float]:
    """`values` without one-step departures: a node count that differs at one step from equal
    neighbours is a missed scrape (`up` was 0 once), not a scaling event — a replica that really
    came or went stays changed."""
    return [
        v for i, v in enumerate(values)
        if not (0 < i < len(values) - 1 and values[i - 1] == values[i + 1] != v)
    ]


def judge_window(
    series: dict[str, dict[int, float]], start: int, end: int, step_s: int
) -> tuple[WindowVerdict, dict[str, list[float]] | None]:
    """Is [start, end) steady? With its per-step values when it is."""
    steps = list(range(start, end, step_s))
    values: dict[str, list[float]] = {}
    for name in REQUIRED:
        got = [series.get(name, {}).get(t) for t in steps]
        missing = sum(v is None for v in got)
        if got[0] is None or missing > MAX_MISSING_SHARE * len(steps):
            return WindowVerdict(start, end, False, f"incomplete: {name} missing at {missing}/{len(steps)} steps"), None
        values[name] = [v for v in got if v is not None]
    lag_steps = list(range(start - RATE_LAG_S, end, step_s))
    known = without_blips([n for n in (series["nodes"].get(t) for t in lag_steps) if n is not None])
    if len({round(n, 6) for n in known}) > 1:
        return WindowVerdict(start, end, False, f"scaling event: nodes serving went {min(known):g}..{max(known):g}"), None
    if known and known[0] <= 0:
        return WindowVerdict(start, end, False, "no node serving"), None
    resets = series.get("resets", {})
    if any(resets.get(t, 0.0) > 0 for t in lag_steps):
        return WindowVerdict(start, end, False, "engine restart (a counter reset)"), None
    # At a one-step dip of the node count (an engine's scrape missed: `up` 0 once) the per-node
    # series divide the model's totals — whose rates still count that engine — by too few nodes:
    # 2 nodes read as 1 doubles that step. Those steps are left out of the means and the load check.
    nodes = series["nodes"]
    blips = {t for t in steps if (n := nodes.get(t)) is not None and not math.isclose(n, known[0], rel_tol=1e-6)}
    for name in PER_NODE:
        values[name] = [v for t in steps if t not in blips and (v := series[name].get(t)) is not None]
    served = values["served_rps_per_node"]
    mean_served = statistics.fmean(served)
    in_flight = statistics.fmean(values["in_flight_per_node"])
    if in_flight < MIN_IN_FLIGHT_PER_NODE or mean_served * known[0] < MIN_SERVED_RPS:
        return WindowVerdict(start, end, False, f"idle: {in_flight:.2f} in flight per node, {mean_served:.3f} req/s per node"), None
    cv = statistics.pstdev(served) / mean_served
    if cv > MAX_LOAD_CV:
        return WindowVerdict(start, end, False, f"unstable load: served rate varies {cv:.0%} (limit {MAX_LOAD_CV:.0%})"), None
    for name in ("ttft_good", "tpot_good"):
        values[name] = [v for v in (series.get(name, {}).get(t) for t in steps) if v is not None]
    return WindowVerdict(start, end, True, ""), values


def observations(
    series: dict[str, dict[int, float]], model: str, layout: str, start: float, end: float, step_s: int,
    window_s: int = WINDOW_S,
) -> tuple[list[Observation], list[WindowVerdict]]:
    """Steady windows of one model as observations, and the verdict on every window."""
    found: list[Observation] = []
    verdicts: list[WindowVerdict] = []
    for w_start, w_end in windows(start, end, window_s):
        verdict, values = judge_window(series, w_start, w_end, step_s)
        verdicts.append(verdict)
        if values is None:
            continue
        good = [statistics.fmean(values[k]) for k in ("ttft_good", "tpot_good") if values[k]]
        found.append(
            Observation(
                model=model,
                layout=layout,
                start=w_start,
                end=w_end,
                nodes=values["nodes"][0],
                served_rps_per_node=statistics.fmean(values["served_rps_per_node"]),
                output_tokens_per_s_per_node=statistics.fmean(values["output_tokens_per_s_per_node"]),
                in_flight_per_node=statistics.fmean(values["in_flight_per_node"]),
                prompt_tokens=statistics.fmean(values["prompt_tokens"]),
                output_tokens=statistics.fmean(values["output_tokens"]),
                # No SLO series (the SLO group not evaluated yet) is not "within".
                within_slo=len(good) == 2 and min(good) >= SLO_QUANTILE,
            )
        )
    return found, verdicts
