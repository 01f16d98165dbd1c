"""`model_cache:` — where replicas load weights from (NFS share, Spaces bucket, or Hugging Face)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from infra.catalog.spaces import (
    NEAREST_SPACES_REGION,
    SPACES_REGIONS,
    SPACES_REGIONS_SOURCE,
    bucket_name_problem,
)
from infra.config.base import NS, StrictModel
from infra.errors import Problem


class ModelCacheConfig(StrictModel):
    """Where replicas load weights from: a DO NFS share, a DO Spaces bucket, or Hugging Face itself.

    nfs: a Network File Storage share in the VPC, filled once by a prefetch Job, read by every
    replica (and home of the shared compile cache). spaces: a Spaces bucket (S3-compatible),
    filled once by the prefetch Job and streamed straight into GPU memory by vLLM's Run:ai Model
    Streamer (`--load-format runai_streamer`); compile caches stay on each node's disk. none: each
    pod downloads from Hugging Face to its scratch disk. docs/cold-start.md compares them.
    """

    kind: Literal["nfs", "spaces", "none"] = Field(
        "nfs",
        description="nfs: DO Network File Storage share; spaces: DO Spaces bucket streamed into GPU memory; none: each pod downloads from Hugging Face to local scratch.",
    )
    size_gib: int = Field(1024, ge=50, le=16384, description="nfs: share size in GiB (≥ 50; it can grow, never shrink).")
    tier: Literal["standard", "high"] = Field("high", description="nfs: NFS performance tier.")
    bucket: str | None = Field(
        None,
        description="spaces (required): bucket name, unique across Spaces; 3–63 lowercase letters, digits and '-', starting and ending with a letter or digit.",
    )
    region: str | None = Field(
        None,
        description="spaces: region of the bucket (a region with Spaces, e.g. nyc3 for a cluster in nyc2); default: the stack's region.",
    )
    prefix: str = Field(
        "models",
        description="spaces: key prefix under which the prefetch stores each checkpoint, as <prefix>/<org>/<name>/<revision or main>/.",
    )
    streamer_concurrency: int = Field(
        16, ge=1, le=64,
        description="spaces: Run:ai streamer reader threads per vLLM process (each GPU rank of a replica streams its share with this many).",
    )

_PREFIX = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
_SPACES_ONLY = ("bucket", "region", "prefix", "streamer_concurrency")
_NFS_ONLY = ("size_gib", "tier")


def check_model_cache(mc: ModelCacheConfig, region: str) -> list[Problem]:
    """Keys that only one kind reads, and the bucket's name and region (`region`: the stack's; the
    models it streams to: infra/config/cross_checks.py `streamer_problems`)."""
    at = f"{NS}model_cache"
    given = mc.model_fields_set
    problems = []
    foreign = _NFS_ONLY if mc.kind == "spaces" else _SPACES_ONLY if mc.kind == "nfs" else _NFS_ONLY + _SPACES_ONLY
    for key in foreign:
        if key in given:
            problems.append(Problem(f"{at}.{key}", f"applies to kind {'nfs' if key in _NFS_ONLY else 'spaces'} only; this cache is kind {mc.kind!r}"))
    if mc.kind != "spaces":
        return problems
    if mc.bucket is None:
        problems.append(Problem(f"{at}.bucket", "required with kind spaces: the Spaces bucket the weights are stored in (names are unique across Spaces)"))
    else:
        why = bucket_name_problem(mc.bucket)
        if why:
            problems.append(
                Problem(f"{at}.bucket", f"{mc.bucket!r} {why}; use 3–63 lowercase letters, digits and '-', e.g. acme-prod-weights")
            )
    region_key = "region" if mc.region is not None else None
    region = mc.region or region
    if region not in SPACES_REGIONS:
        nearest = NEAREST_SPACES_REGION.get(region)
        hint = f"; set model_cache.region: {nearest} (the nearest)" if nearest and region_key is None else ""
        where = f"{at}.region" if region_key else f"{at}.kind"
        problems.append(
            Problem(
                where,
                f"Spaces is not offered in {region!r}{hint}; regions with Spaces: {', '.join(SPACES_REGIONS)} "
                f"({SPACES_REGIONS_SOURCE})",
            )
        )
    if not _PREFIX.match(mc.prefix) or ".." in mc.prefix.split("/"):
        problems.append(Problem(f"{at}.prefix", f"{mc.prefix!r} is not an object key prefix; use segments of letters, digits, '.', '_' and '-' joined by '/', e.g. models"))
    return problems
