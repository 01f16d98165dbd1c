"""Helm releases templated offline at their pinned versions (issue 31).

A Helm release is one resource to Pulumi, but most of the cluster's objects stand behind it. With
the chart's packaged archive at hand (`charts/<chart>-<version>.tgz`, or INFRA_CHART_DIR), the plan
templates it with real Helm (helm-python-sdk binds Helm v4's Go SDK) and the exact values the
program passes to Pulumi, so its objects reach `--out`, `--json`, `infra diff`, the invariants and
the security scan like the components' own. Without the archive or the library a release stays one
line and the plan says so once.
"""
