"""`infra charts pull`: a real download with Helm's client from a local HTTP chart repository,
checked against the pinned chart, version and digest."""

from __future__ import annotations

import argparse
import shutil

import pytest

from infra.charts.digests import record_digest, recorded_digest, recorded_digests
from infra.charts.template import file_digest
from infra.commands.charts import run_pull


@pytest.fixture
def repo(httpserver, packaged_charts, tmp_path):
    """An HTTP chart repository (index.yaml + archive) serving the test chart keda 2.18.3."""
    import helm_python

    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(packaged_charts / "keda-2.18.3.tgz", served)
    helm_python.repo_index_generate(served, base_url=httpserver.url_for("/").rstrip("/"))
    for name in ("index.yaml", "keda-2.18.3.tgz"):
        httpserver.expect_request(f"/{name}").respond_with_data((served / name).read_bytes())
    return httpserver.url_for("/").rstrip("/")


def _args(dest, check=False):
    return argparse.Namespace(check=check, dest=dest, root=None)


def test_pull_downloads_checks_and_records_the_digest(repo, packaged_charts, tmp_path, capsys):
    digest = file_digest(packaged_charts / "keda-2.18.3.tgz")
    dest, digests = tmp_path / "charts", tmp_path / "chart_digests.json"
    assert run_pull(_args(dest, check=True), pins=[("keda", "2.18.3", repo)], digests=digests) == 1  # not there yet
    assert run_pull(_args(dest), pins=[("keda", "2.18.3", repo)], digests=digests) == 0
    assert file_digest(dest / "keda-2.18.3.tgz") == digest
    out = capsys.readouterr().out
    assert "ok      keda-2.18.3.tgz" in out and "recorded in chart_digests.json" in out
    assert recorded_digest("keda", "2.18.3", digests) == digest
    assert run_pull(_args(dest, check=True), pins=[("keda", "2.18.3", repo)], digests=digests) == 0


def test_check_refuses_an_archive_whose_digest_was_never_recorded(packaged_charts, tmp_path, capsys):
    dest = tmp_path / "charts"
    dest.mkdir()
    shutil.copy(packaged_charts / "keda-2.18.3.tgz", dest)
    digests = tmp_path / "chart_digests.json"
    assert run_pull(_args(dest, check=True), pins=[("keda", "2.18.3", "https://example.invalid")], digests=digests) == 1
    assert "no digest recorded for keda 2.18.3" in capsys.readouterr().out
    assert not digests.exists()  # --check records nothing


def test_a_different_digest_or_version_fails(repo, packaged_charts, tmp_path, capsys):
    dest = tmp_path / "charts"
    dest.mkdir()
    shutil.copy(packaged_charts / "keda-2.18.3.tgz", dest / "keda-2.18.4.tgz")
    digests = tmp_path / "chart_digests.json"
    record_digest("keda", "2.18.4", "sha256:" + "0" * 64, digests)
    assert run_pull(_args(dest, check=True), pins=[("keda", "2.18.4", repo)], digests=digests) == 1
    out = capsys.readouterr().out
    assert "holds keda 2.18.3, not keda 2.18.4" in out and "chart_digests.json records sha256:000" in out


def test_check_reports_a_missing_archive(tmp_path, capsys):
    assert run_pull(_args(tmp_path, check=True), pins=[("keda", "2.18.3", "https://example.invalid")]) == 1
    assert "MISSING" in capsys.readouterr().out


def test_every_recorded_digest_is_of_a_pinned_chart_version():
    """A bump leaves the old version's digest behind: this names it."""
    from infra.catalog.versions import PINNED_CHARTS

    pinned = {f"{chart}-{version}" for chart, version, _ in PINNED_CHARTS}
    assert set(recorded_digests()) <= pinned
    assert all(d.startswith("sha256:") and len(d) == 71 for d in recorded_digests().values())
