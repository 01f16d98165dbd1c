"""The opt-in test families (cluster, e2e, node, engine): each directory's tests carry its marker
and are skipped unless `INFRA_<NAME>=1` is set or `-m` names the marker, so the default
`./dev.sh test` stays offline and fast. One rule, used by each family's conftest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def mark_opt_in(config, items, directory: Path, marker: str, env: str, what: str) -> None:
    """Mark every collected test under `directory` with `marker`; skip them unless opted in."""
    enabled = os.environ.get(env) == "1" or marker in (config.getoption("-m") or "")
    skip = pytest.mark.skip(reason=f"{what}: set {env}=1 or pass -m {marker}")
    for item in items:
        if directory in Path(str(item.fspath)).resolve().parents:
            item.add_marker(getattr(pytest.mark, marker))
            if not enabled:
                item.add_marker(skip)
