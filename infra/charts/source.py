"""Where chart archives are found: the project's `charts/` directory, or INFRA_CHART_DIR.

Archives are named as `helm package` and `helm pull` name them: `<chart>-<version>.tgz`. The
directory is an environment variable rather than a stack key because it is a property of the
machine (a CI cache, a directory of archives pulled once), not of the stack.
"""

from __future__ import annotations

import os
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
