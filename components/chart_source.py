"""The chart arguments of a `helm.v3.Release`: from a local archive or from the chart's repository.

One place for the rule of infra/charts/source.py `release_chart`: with INFRA_CHART_DIR holding the
pinned archive, `pulumi up` installs from it (`chart` is its path, no repository); otherwise from
the HTTP repository (`repositoryOpts`) or the `oci://` registry.
"""

from __future__ import annotations

from typing import Any

import pulumi_kubernetes as k8s

from infra.charts.source import release_chart


def chart_args(chart: str, version: str, repo: str) -> dict[str, Any]:
    """`chart`, `version` and `repository_opts` for `k8s.helm.v3.Release` / `ReleaseArgs`."""
    source = release_chart(chart, version, repo)
    args: dict[str, Any] = {"chart": source.chart, "version": source.version}
    if source.repo:
        args["repository_opts"] = k8s.helm.v3.RepositoryOptsArgs(repo=source.repo)
    return args
