"""An SVG chart of p90 TTFT and p90 TPOT against offered request rate, one line per layout.

Written by hand so the toolkit needs no plotting library: matplotlib would save about 100 lines
here but bring numpy, pillow, fonttools and more into every install for one chart, and its SVGs
carry generated ids and metadata that must be pinned for byte-identical output. Two panels side
by side, the SLO as a dashed red line in each, filled markers where a rate met both SLOs and
hollow ones where it did not, and a dotted vertical line at each layout's goodput. Overloaded
points (TTFT in the tens of seconds) would flatten everything else, so the y axis stops at 4× the
SLO and such points are drawn as triangles on the top edge. Output is deterministic (same input →
same bytes).
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from infra.tuning.goodput import Comparison, LayoutGoodput

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")
SLO_COLOUR = "#d62728"

_PANEL_W, _PANEL_H = 420, 300
_MARGIN_L, _MARGIN_R, _MARGIN_T, _MARGIN_B = 64, 24, 48, 48
_LEGEND_H = 22


def render_latency_chart(comparison: Comparison, *, title: str = "") -> str:
    """The chart as an SVG document string."""
    layouts = [g for g in comparison.layouts if g.points]
    legend_rows = (len(layouts) + 2) // 3
    width = 2 * (_MARGIN_L + _PANEL_W + _MARGIN_R)
    height = _MARGIN_T + _PANEL_H + _MARGIN_B + legend_rows * _LEGEND_H + 16
    x_max = _nice_ceiling(max((p.request_rate_rps for g in layouts for p in g.points), default=1.0))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    if title:
        parts.append(f'<text x="{width / 2:.1f}" y="20" text-anchor="middle" font-size="15">{escape(title)}</text>')
    panels = (
        ("p90 TTFT (ms)", comparison.ttft_p90_ms, lambda p: p.ttft_p90_ms),
        ("p90 TPOT (ms)", comparison.tpot_p90_ms, lambda p: p.tpot_p90_ms),
    )
    for index, (label, slo, value_of) in enumerate(panels):
        left = index * (_MARGIN_L + _PANEL_W + _MARGIN_R) + _MARGIN_L
        parts += _panel(layouts, left, label, slo, value_of, x_max)
    parts += _legend(layouts, _MARGIN_T + _PANEL_H + _MARGIN_B)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _panel(layouts: list[LayoutGoodput], left: float, label: str, slo: float, value_of, x_max: float) -> list[str]:
    top = _MARGIN_T
    values = [value_of(p) for g in layouts for p in g.points]
    y_max = _nice_ceiling(max(1.5 * slo, min(max(values, default=slo), 4 * slo)))

    def sx(rate: float) -> float:
        return left + _PANEL_W * rate / x_max

    def sy(ms: float) -> float:
        return top + _PANEL_H * (1 - min(ms, y_max) / y_max)

    out = [
        f'<g class="panel" data-metric="{escape(label)}">',
        f'<rect x="{left}" y="{top}" width="{_PANEL_W}" height="{_PANEL_H}" fill="none" stroke="#333"/>',
    ]
    for tick in _ticks(x_max):
        x = sx(tick)
        out.append(f'<line x1="{x:.1f}" y1="{top + _PANEL_H}" x2="{x:.1f}" y2="{top + _PANEL_H + 4}" stroke="#333"/>')
        out.append(f'<text x="{x:.1f}" y="{top + _PANEL_H + 17}" text-anchor="middle">{tick:g}</text>')
    for tick in _ticks(y_max):
        y = sy(tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + _PANEL_W}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:g}</text>')
    out.append(
        f'<text x="{left + _PANEL_W / 2:.1f}" y="{top + _PANEL_H + 36}" text-anchor="middle">request rate (req/s, Poisson)</text>'
    )
    out.append(
        f'<text x="{left - 48}" y="{top + _PANEL_H / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 {left - 48} {top + _PANEL_H / 2:.1f})">{escape(label)}</text>'
    )
    slo_y = sy(slo)
    out.append(
        f'<line class="slo" x1="{left}" y1="{slo_y:.1f}" x2="{left + _PANEL_W}" y2="{slo_y:.1f}" '
        f'stroke="{SLO_COLOUR}" stroke-dasharray="6 4" stroke-width="1.5"/>'
    )
    out.append(
        f'<text x="{left + _PANEL_W - 4}" y="{slo_y - 5:.1f}" text-anchor="end" fill="{SLO_COLOUR}">SLO {slo:g} ms</text>'
    )
    for index, g in enumerate(layouts):
        colour = PALETTE[index % len(PALETTE)]
        coords = [(sx(p.request_rate_rps), sy(value_of(p)), p, value_of(p) > y_max) for p in g.points]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in coords)
        out.append(f'<g class="layout" data-layout="{escape(g.name)}">')
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y, point, clipped in coords:
            fill = colour if point.passes else "white"
            tip = escape(f"{g.name} @ {point.request_rate_rps:g} rps: {value_of(point):.1f} ms ({point.why})")
            if clipped:
                out.append(
                    f'<path d="M{x - 5:.1f},{y + 8:.1f} L{x + 5:.1f},{y + 8:.1f} L{x:.1f},{y:.1f} Z" fill="{fill}" '
                    f'stroke="{colour}" stroke-width="1.5"><title>{tip}</title></path>'
                )
            else:
                out.append(
                    f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}" stroke="{colour}" stroke-width="1.5">'
                    f"<title>{tip}</title></circle>"
                )
        if g.goodput_rps > 0:
            gx = sx(g.goodput_rps)
            out.append(
                f'<line class="goodput" x1="{gx:.1f}" y1="{top}" x2="{gx:.1f}" y2="{top + _PANEL_H}" '
                f'stroke="{colour}" stroke-dasharray="2 3"/>'
            )
        out.append("</g>")
    out.append("</g>")
    return out


def _legend(layouts: list[LayoutGoodput], top: float) -> list[str]:
    out = ['<g class="legend">']
    for index, g in enumerate(layouts):
        colour = PALETTE[index % len(PALETTE)]
        x = _MARGIN_L + (index % 3) * 300
        y = top + (index // 3) * _LEGEND_H + 10
        goodput = f"goodput {'≥ ' if g.lower_bound else ''}{g.goodput_rps:.2f} rps"
        out.append(f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" stroke="{colour}" stroke-width="3"/>')
        out.append(f'<text x="{x + 30}" y="{y + 4}">{escape(g.name)} — {goodput}</text>')
    out.append("</g>")
    return out


def _nice_ceiling(value: float) -> float:
    """Round up to 1, 2, 2.5 or 5 × a power of ten, so axis ticks land on round numbers."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** _floor_log10(value)
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude + 1e-12:
            return step * magnitude
    return 10 * magnitude


def _floor_log10(value: float) -> int:
    exponent = 0
    while value >= 10:
        value /= 10
        exponent += 1
    while value < 1:
        value *= 10
        exponent -= 1
    return exponent


def _ticks(maximum: float, count: int = 5) -> list[float]:
    step = maximum / count
    return [round(step * i, 10) for i in range(count + 1)]
