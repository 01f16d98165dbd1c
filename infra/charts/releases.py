"""The Helm releases of a recorded plan, templated: what `infra plan` adds under `charts`.

Works on the plan records of `kubernetes:helm.sh/v3:Release` resources, so the values templated
are exactly the inputs the program hands to Pulumi (secrets are already the `[secret]`
placeholder there, and every chart Secret is redacted again before it is shown).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.charts.source import CHART_DIR_ENV, find_archive
from infra.charts.template import ChartError, file_digest, helm_available, template_archive

RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
PULL_COMMAND = "infra charts pull"


def release_records(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in resources if r["type"] == RELEASE_TYPE]


def template_releases(resources: list[dict[str, Any]], root: Path | None) -> tuple[list[dict[str, Any]], list[str]]:
    """(one entry per Helm release, notes). An entry holds the release, chart, version, the
    archive's digest and the templated parts; a release whose archive (or Helm) is absent has no
    parts and `templated: false`, and the notes say so once, with the command that fixes it."""
    entries, missing = [], []
    helm = helm_available()
    for res in release_records(resources):
        inputs = res["inputs"]
        chart, version = inputs.get("chart", ""), str(inputs.get("version", ""))
        release = inputs.get("name") or res["name"]
        namespace = inputs.get("namespace") or "default"
        entry: dict[str, Any] = {
            "resource": res["name"], "release": release, "namespace": namespace, "chart": chart, "version": version,
            "templated": False, "digest": None, "parts": [],
        }
        archive = find_archive(root, chart, version)
        if archive is None or not helm:
            missing.append(f"{chart} {version}")
        else:
            values = inputs.get("values") or {}
            try:
                entry["parts"] = template_archive(
                    archive, release=release, namespace=namespace, values=values,
                    skip_crds=bool(inputs.get("skipCrds")),
                )
            except ChartError as err:
                raise ChartError(f"Helm release {res['name']} ({chart} {version}): {err}") from None
            entry["templated"] = True
            entry["digest"] = file_digest(archive)
        entries.append(entry)
    notes = []
    if missing:
        why = "helm-python-sdk is not installed (pip install '.[charts]')" if not helm else (
            f"their archives are not in charts/ (or ${CHART_DIR_ENV}); `{PULL_COMMAND}` fetches them"
        )
        notes.append(f"Helm releases shown as one line each, not templated: {', '.join(missing)} — {why}")
    return entries, notes


def chart_objects(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every templated object of every release (CRDs, hooks and templates alike)."""
    return [part["object"] for entry in entries for part in entry["parts"]]
