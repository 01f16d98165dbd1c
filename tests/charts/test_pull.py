"""`infra charts pull`: a real download with Helm's client from a local HTTP chart repository,
checked against the pinned chart, version and digest."""

from __future__ import annotations

import argparse
import shutil

import pytest

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


def test_pull_downloads_and_checks_the_digest(repo, packaged_charts, tmp_path, capsys):
    digest = file_digest(packaged_charts / "keda-2.18.3.tgz")
    dest = tmp_path / "charts"
    assert run_pull(_args(dest), pins=[("keda", "2.18.3", repo, digest)]) == 0
    assert file_digest(dest / "keda-2.18.3.tgz") == digest
    assert "ok      keda-2.18.3.tgz" in capsys.readouterr().out
    assert run_pull(_args(dest, check=True), pins=[("keda", "2.18.3", repo, digest)]) == 0


def test_an_unrecorded_digest_is_printed_for_the_reviewer(repo, tmp_path, capsys):
    assert run_pull(_args(tmp_path / "charts"), pins=[("keda", "2.18.3", repo, "")]) == 0
    assert "no digest recorded in versions.py: record this one" in capsys.readouterr().out


def test_a_different_digest_or_version_fails(repo, packaged_charts, tmp_path, capsys):
    dest = tmp_path / "charts"
    dest.mkdir()
    shutil.copy(packaged_charts / "keda-2.18.3.tgz", dest / "keda-2.18.4.tgz")
    assert run_pull(_args(dest, check=True), pins=[("keda", "2.18.4", repo, "sha256:" + "0" * 64)]) == 1
    out = capsys.readouterr().out
    assert "holds keda 2.18.3, not keda 2.18.4" in out and "versions.py records sha256:000" in out


def test_check_reports_a_missing_archive(tmp_path, capsys):
    assert run_pull(_args(tmp_path, check=True), pins=[("keda", "2.18.3", "https://example.invalid", "")]) == 1
    assert "MISSING" in capsys.readouterr().out
