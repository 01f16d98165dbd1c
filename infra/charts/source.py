"""Where chart archives are found: the project's `charts/` directory, or INFRA_CHART_DIR.

Archives are named as `helm package` and `helm pull` name them: `<chart>-<version>.tgz`. The
directory is an environment variable rather than a stack key because it is a property of the
machine (a CI cache, a directory of archives pulled once), not of the stack.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CHART_DIR_ENV = "INFRA_CHART_DIR"


def chart_dirs(root: Path | None) -> list[Path]:
    """The directories searched for archives, first match wins: INFRA_CHART_DIR, then `charts/`."""
    dirs = []
    env = os.environ.get(CHART_DIR_ENV)
    if env:
        dirs.append(Path(env))
    if root is not None:
        dirs.append(root / "charts")
    return dirs


def archive_name(chart: str, version: str) -> str:
    return f"{chart}-{version}.tgz"


def find_archive(root: Path | None, chart: str, version: str) -> Path | None:
    """The archive of `chart` at `version`, or None when no searched directory holds it."""
    for directory in chart_dirs(root):
        path = directory / archive_name(chart, version)
        if path.is_file():
            return path
    return None


@dataclass(frozen=True)
class ReleaseChart:
    """Where a `helm.v3.Release` installs its chart from: a chart name in the HTTP repository
    `repo`, an `oci://` reference, or a local archive's path (`repo` None for the last two)."""

    chart: str
    version: str
    repo: str | None


def release_chart(chart: str, version: str, repo: str) -> ReleaseChart:
    """The source of a release: its archive in INFRA_CHART_DIR when that directory holds it (so
    `pulumi up` needs no chart repository; the plan checks the archive's chart, version and digest
    first), else its repository or registry."""
    env = os.environ.get(CHART_DIR_ENV)
    if env and (Path(env) / archive_name(chart, version)).is_file():
        return ReleaseChart(str(Path(env) / archive_name(chart, version)), version, None)
    if repo.startswith("oci://"):
        return ReleaseChart(f"{repo.rstrip('/')}/{chart}", version, None)
    return ReleaseChart(chart, version, repo)


def chart_name(chart_input: str, version: str) -> str:
    """The chart's name from a Release's `chart` input: a name, `oci://…/<name>`, or a local archive
    `…/<name>-<version>.tgz`."""
    base = str(chart_input).rsplit("/", 1)[-1]
    suffix = f"-{version}.tgz"
    return base[: -len(suffix)] if base.endswith(suffix) else base


def local_archive(chart_input: str) -> Path | None:
    """The archive a Release installs from, when its `chart` input is a local archive."""
    return Path(chart_input) if str(chart_input).endswith(".tgz") else None
