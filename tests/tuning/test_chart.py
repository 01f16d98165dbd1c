"""The hand-written SVG chart: well-formed, one line per layout per panel, SLO lines, markers."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from infra.tuning.chart import render_latency_chart
from infra.tuning.goodput import compare_layouts
from infra.tuning.results import load_results
from tests.conftest import TESTS_DIR

FIXTURES = TESTS_DIR / "fixtures" / "bench" / "staging-qwen3-235b"
NS = {"svg": "http://www.w3.org/2000/svg"}


def _comparison():
    return compare_layouts(load_results([FIXTURES]), ttft_p90_ms=2000, tpot_p90_ms=50)


def test_chart_is_valid_svg_with_a_line_per_layout_and_the_slo():
    svg = render_latency_chart(_comparison(), title="qwen3-235b <staging>")
    root = ET.fromstring(svg)  # well-formed, title escaped
    panels = root.findall("svg:g[@class='panel']", NS)
    assert [p.get("data-metric") for p in panels] == ["p90 TTFT (ms)", "p90 TPOT (ms)"]
    for panel in panels:
        layouts = panel.findall("svg:g[@class='layout']", NS)
        assert [g.get("data-layout") for g in layouts] == ["tp4-ep-r2", "tp8-ep-r1", "tp2-r4"]
        assert len(panel.findall("svg:line[@class='slo']", NS)) == 1
    # tp4-ep-r2 has 6 distinct rates (the repeat at 5 rps is merged): 6 markers, 6 vertices.
    tp4 = panels[1].find("svg:g[@data-layout='tp4-ep-r2']", NS)
    assert len(tp4.find("svg:polyline", NS).get("points").split()) == 6
    markers = tp4.findall("svg:circle", NS) + tp4.findall("svg:path", NS)
    filled = [m for m in markers if m.get("fill") != "white"]
    assert len(markers) == 6 and len(filled) == 5  # 6 rps is past the SLO: hollow
    # A goodput marker for layouts with goodput, none for the one that never meets the SLO.
    assert tp4.find("svg:line[@class='goodput']", NS) is not None
    assert panels[0].find("svg:g[@data-layout='tp2-r4']/svg:line[@class='goodput']", NS) is None
    assert "qwen3-235b &lt;staging&gt;" in svg


def test_slo_line_sits_at_the_slo_and_outliers_are_clipped():
    svg = render_latency_chart(_comparison())
    root = ET.fromstring(svg)
    ttft = root.findall("svg:g[@class='panel']", NS)[0]
    frame = ttft.find("svg:rect", NS)
    top, height = float(frame.get("y")), float(frame.get("height"))
    slo_y = float(ttft.find("svg:line[@class='slo']", NS).get("y1"))
    # y axis ends at a round number >= 1.5 x SLO and <= 5 x SLO; the SLO line is where 2000 ms is.
    axis_top = max(float(t.text) for t in ttft.findall("svg:text", NS) if t.text.replace(".", "").isdigit() and float(t.get("x")) < float(frame.get("x")))
    assert 3000 <= axis_top <= 10000
    assert abs(slo_y - (top + height * (1 - 2000 / axis_top))) < 0.2
    # tp2-r4 at 3 rps (9800 ms) fits under 10000; nothing is drawn above the frame.
    for el in ttft.iter():
        for attr in ("cy", "y1", "y2"):
            if el.get(attr) is not None:
                assert top - 0.1 <= float(el.get(attr)) <= top + height + 4.1
