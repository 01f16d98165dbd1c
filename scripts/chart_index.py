#!/usr/bin/env python3
"""Derive the committed value index of chart archives (run after a chart version bump).

    python scripts/chart_index.py charts/keda-2.18.3.tgz [more archives...]

Writes infra/catalog/charts/<chart>-<version>.json: the chart's merged default value paths
(subcharts included) and its values.schema.json — data derived from the archive, no chart code —
which `infra plan` uses to refuse a value path the chart does not know, without the archive
(infra/charts/values.py). Needs helm-python-sdk (`pip install '.[charts]'`).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.charts.template import load_chart  # noqa: E402
from infra.charts.values import index_from_chart, write_index  # noqa: E402


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for archive in argv:
        path = write_index(index_from_chart(load_chart(Path(archive))), ROOT / "infra" / "catalog" / "charts")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
