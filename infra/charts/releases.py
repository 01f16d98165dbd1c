"""The Helm releases of a recorded plan, templated: what `infra plan` adds under `charts`.

Works on the plan records of `kubernetes:helm.sh/v3:Release` resources, so the values templated
are exactly the inputs the program hands to Pulumi (secrets are already the `[secret]`
placeholder there, and every chart Secret is redacted again before it is shown).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from infra.charts.digests import recorded_digest
from infra.charts.pull import check_archive
from infra.charts.source import CHART_DIR_ENV, chart_name, find_archive, local_archive
from infra.charts.template import ChartError, file_digest, helm_available, load_chart, template_archive
from infra.charts.values import committed_index, index_from_chart, unknown_paths

RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
PULL_COMMAND = "infra charts pull"


def release_records(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in resources if r["type"] == RELEASE_TYPE]


def release_chart_version(inputs: dict[str, Any]) -> tuple[str, str, Path | None]:
    """(chart name, version, the local archive it installs from or None) of a Release's inputs."""
    version = str(inputs.get("version", ""))
    chart_input = str(inputs.get("chart", ""))
    return chart_name(chart_input, version), version, local_archive(chart_input)


def archive_problems(resources: list[dict[str, Any]], *, deploy: bool) -> tuple[list[tuple[str, str]], list[str]]:
    """(problems, notes) for the releases that install from a local archive (INFRA_CHART_DIR): the
    archive must be there and be the pinned chart with the digest recorded in
    infra/catalog/chart_digests.json. A digest never recorded is a note for `infra plan` and a
    problem for the check before `pulumi up` (`deploy`): nothing installs an archive nobody vouched for."""
    problems, notes = [], []
    for res in release_records(resources):
        chart, version, archive = release_chart_version(res["inputs"])
        if archive is None:
            continue
        where = f"Helm release {res['name']}"
        if not archive.is_file():
            problems.append((where, f"installs from {archive}, which is not there; `{PULL_COMMAND} --dest {archive.parent}`"))
            continue
        digest = recorded_digest(chart, version)
        actual = file_digest(archive)
        if digest and actual != digest:
            problems.append((where, f"{archive} has digest {actual}; infra/catalog/chart_digests.json records {digest} "
                                    f"for {chart} {version}: not the published archive"))
        elif not digest:
            try:
                wrong = check_archive(archive, chart, version, "") if helm_available() else []
            except ChartError as err:
                wrong = [str(err)]
            problems += [(where, w) for w in wrong]
            unrecorded = (f"{chart} {version}: no digest recorded for {archive.name} ({actual}); `{PULL_COMMAND}` "
                          "records it (check it against the repository's index.yaml and commit infra/catalog/chart_digests.json)")
            if deploy:
                problems.append((where, f"`pulumi up` installs only archives whose digest is recorded: {unrecorded}"))
            elif not wrong:
                notes.append(f"{unrecorded}; until then `pulumi up` refuses to install it")
    return problems, notes


def template_releases(resources: list[dict[str, Any]], root: Path | None) -> tuple[list[dict[str, Any]], list[str]]:
    """(one entry per Helm release, notes). An entry holds the release, chart, version, the
    archive's digest and the templated parts; a release whose archive (or Helm) is absent has no
    parts and `templated: false`, and the notes say so once, with the command that fixes it."""
    entries, missing, jobs = [], [], []
    helm = None  # whether helm-python-sdk is installed: asked once an archive is found
    for res in release_records(resources):
        inputs = res["inputs"]
        chart, version, local = release_chart_version(inputs)
        release = inputs.get("name") or res["name"]
        namespace = inputs.get("namespace") or "default"
        entry: dict[str, Any] = {
            "resource": res["name"], "release": release, "namespace": namespace, "chart": chart, "version": version,
            "templated": False, "digest": None, "parts": [],
        }
        archive = local if local is not None and local.is_file() else find_archive(root, chart, version)
        if archive is not None and helm is None:
            helm = helm_available()
        if archive is None or not helm:
            missing.append(f"{chart} {version}")
        else:
            jobs.append((entry, res["name"], archive, inputs))
        entries.append(entry)
    if len(jobs) > 1:  # Helm renders and parses in Go, outside the GIL: the releases template side by side
        with ThreadPoolExecutor(len(jobs)) as pool:
            list(pool.map(_template_one, jobs))
    else:
        for job in jobs:
            _template_one(job)
    notes = []
    if missing:
        why = "helm-python-sdk is not installed (pip install '.[charts]')" if helm is False else (
            f"their archives are not in charts/ (or ${CHART_DIR_ENV}); `{PULL_COMMAND}` fetches them"
        )
        notes.append(f"Helm releases shown as one line each, not templated: {', '.join(missing)} — {why}")
    return entries, notes


def _template_one(job: tuple[dict[str, Any], str, Path, dict[str, Any]]) -> None:
    entry, resource, archive, inputs = job
    try:
        entry["parts"] = template_archive(
            archive, release=entry["release"], namespace=entry["namespace"], values=inputs.get("values") or {},
            skip_crds=bool(inputs.get("skipCrds")),
        )
    except ChartError as err:
        raise ChartError(f"Helm release {resource} ({entry['chart']} {entry['version']}): {err}") from None
    entry["templated"] = True
    entry["digest"] = file_digest(archive)


def value_index(root: Path | None, chart: str, version: str) -> dict[str, Any] | None:
    """The value index of `chart` at `version`: the committed one, else one derived from the
    archive when it and Helm are at hand, else None (nothing to check against)."""
    index = committed_index(chart, version)
    if index is None and helm_available():
        archive = find_archive(root, chart, version)
        if archive is not None:
            index = index_from_chart(load_chart(archive))
    return index


def unknown_value_problems(resources: list[dict[str, Any]], root: Path | None) -> list[tuple[str, str]]:
    """(where, what) for every value a release passes that its chart does not know."""
    problems = []
    for res in release_records(resources):
        inputs = res["inputs"]
        chart, version, _ = release_chart_version(inputs)
        index = value_index(root, chart, version)
        if index is None:
            continue
        for path in unknown_paths(inputs.get("values") or {}, index["values"], index.get("schema")):
            problems.append((
                f"Helm release {res['name']}: values.{path}",
                f"{chart} {version} does not know this value (not in its default values, subcharts "
                "included, nor its values.schema.json); Helm would ignore it",
            ))
    return problems


def chart_objects(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every templated object of every release (CRDs, hooks and templates alike)."""
    return [part["object"] for entry in entries for part in entry["parts"]]
