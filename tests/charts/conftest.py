"""Chart tests template small charts of our own (tests/fixtures/charts), packaged at test time:
the real charts cannot be vendored here, and CI has no network."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "charts"


@pytest.fixture(scope="session")
def packaged_charts(tmp_path_factory) -> Path:
    """A directory holding `keda-2.18.3.tgz`, packaged from tests/fixtures/charts/keda (a test chart
    named like the pinned KEDA release, so the prod stack's release templates it)."""
    helm_python = pytest.importorskip("helm_python")
    out = tmp_path_factory.mktemp("charts")
    helm_python.package(FIXTURES / "keda", destination=out)
    return out


@pytest.fixture
def chart_env(packaged_charts, tmp_path, monkeypatch) -> Path:
    """INFRA_CHART_DIR at the packaged test charts and a fresh cache; returns the archive."""
    monkeypatch.setenv("INFRA_CHART_DIR", str(packaged_charts))
    monkeypatch.setenv("INFRA_CHART_CACHE", str(tmp_path / "cache"))
    return packaged_charts / "keda-2.18.3.tgz"
