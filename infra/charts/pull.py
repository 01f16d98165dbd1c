"""Download the pinned chart archives and check them against the catalog (online, once per bump).

Each pin in infra/catalog/versions.py (`PINNED_CHARTS`) is (chart, version, repository); its
digest is recorded in infra/catalog/chart_digests.json (infra/charts/digests.py).
`pull_chart` downloads `<chart>-<version>.tgz` from an HTTP repository (its index.yaml) or an
`oci://` registry with Helm's own client; `check_archive` says what is wrong with an archive on
disk: a different chart or version inside, or a sha256 other than the recorded digest.
"""

from __future__ import annotations

from pathlib import Path

from infra.charts.source import archive_name
from infra.charts.template import ChartError, file_digest, load_chart


def pull_chart(chart: str, version: str, repo: str, dest: Path) -> Path:
    """Download `chart` at `version` from `repo` into `dest`; the archive's path."""
    import helm_python

    dest.mkdir(parents=True, exist_ok=True)
    try:
        if repo.startswith("oci://"):
            helm_python.registry.pull(f"{repo.rstrip('/')}/{chart}", version=version, destination=dest)
        else:
            helm_python.registry.pull(chart, repo_url=repo, version=version, destination=dest)
    except helm_python.HelmError as err:
        raise ChartError(f"{chart} {version} could not be downloaded from {repo}: {err}") from None
    path = dest / archive_name(chart, version)
    if not path.is_file():
        raise ChartError(f"{chart} {version} from {repo} did not arrive as {path.name}")
    return path


def check_archive(path: Path, chart: str, version: str, digest: str) -> list[str]:
    """What is wrong with the archive at `path` for the pin (chart, version, digest); an empty
    digest is not checked (the caller asks for it to be recorded)."""
    problems = []
    loaded = load_chart(path)
    if (loaded.name, loaded.version) != (chart, version):
        problems.append(f"{path.name} holds {loaded.name} {loaded.version}, not {chart} {version}")
    actual = file_digest(path)
    if digest and actual != digest:
        problems.append(f"{path.name} has digest {actual}; infra/catalog/chart_digests.json records {digest}")
    return problems
