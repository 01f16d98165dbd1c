"""The sha256 of each pinned chart archive, recorded beside the catalog's versions.

`infra/catalog/chart_digests.json` maps `<chart>-<version>` to the `sha256:` digest of the archive
(the digest a chart repository's index.yaml lists for it). It is data, written by `infra charts
pull` the first time it downloads a pinned version (trust on first use: the reviewer of the commit
that records it checks it against the repository's index.yaml) and read by `infra charts pull
--check`, by `infra plan` and by the check before `pulumi up`, which refuses to install a release
from a local archive whose digest differs from the recorded one or was never recorded. A version
bump is a new key, so an old digest can never vouch for a new archive.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

DIGESTS_NAME = "chart_digests.json"


def _key(chart: str, version: str) -> str:
    return f"{chart}-{version}"


def digests_path() -> Path:
    """The committed file (in the source tree: `infra charts pull` writes it for a commit)."""
    return Path(str(resources.files("infra.catalog").joinpath(DIGESTS_NAME)))


def recorded_digests(path: Path | None = None) -> dict[str, str]:
    path = path or digests_path()
    return json.loads(path.read_text()) if path.is_file() else {}


def recorded_digest(chart: str, version: str, path: Path | None = None) -> str | None:
    """The recorded `sha256:` digest of `chart` at `version`, or None when none is recorded."""
    return recorded_digests(path).get(_key(chart, version))


def record_digest(chart: str, version: str, digest: str, path: Path | None = None) -> Path:
    """Record `digest` for `chart` at `version` (sorted, one entry a line: reviewable diffs)."""
    path = path or digests_path()
    digests = {**recorded_digests(path), _key(chart, version): digest}
    path.write_text(json.dumps(dict(sorted(digests.items())), indent=1) + "\n")
    return path
