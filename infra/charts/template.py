"""Template one chart archive offline with real Helm, cached by archive digest and values.

`helm_python` (helm-python-sdk, an optional dependency: extra `charts`) binds Helm v4's Go SDK;
rendering is what `helm template` does: no cluster, `lookup` returns nothing. The result is a list
of parts, each `{"part": "crd" | "hook" | "template", "source": <file in the chart>, "object":
<manifest>}`, sorted so the same archive and values always give the same list. CRDs from the
charts' `crds/` directories are installed by Helm before the templates and never upgraded; hooks
(`helm.sh/hook`) run as Jobs/Pods around install and upgrade and are not part of the release's
steady state — the plan keeps both, marked as what they are.

Templating kube-prometheus-stack from cold takes about 0.7 s, so results are cached on disk
(INFRA_CHART_CACHE, default ~/.cache/inference-platform/charts) under the sha256 of the archive
plus the sha256 of the release name, namespace, values and Helm version (the CRDs under the archive
and Helm version alone): any change to any of them is a different key, so a stale entry is never read.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

CACHE_ENV = "INFRA_CHART_CACHE"
HOOK_ANNOTATION = "helm.sh/hook"
RELEASE_NAME_ANNOTATION = "meta.helm.sh/release-name"
RELEASE_NAMESPACE_ANNOTATION = "meta.helm.sh/release-namespace"


def is_test_hook(obj: dict[str, Any]) -> bool:
    """A `helm.sh/hook: test` object: it exists only while `helm test` runs, never in the release's
    steady state (Grafana's connection-test Pod), so the whole-plan invariants leave it out."""
    hooks = ((obj.get("metadata") or {}).get("annotations") or {}).get(HOOK_ANNOTATION) or ""
    return any(h.strip() in ("test", "test-success") for h in str(hooks).split(","))


class ChartError(Exception):
    """A chart that cannot be loaded or templated with the given values (Helm's message)."""


def helm_available() -> bool:
    """Whether helm-python-sdk is installed (the `charts` extra). Looked up, not imported: importing
    it starts the Go runtime of the Helm library (about 0.1 s), which only templating needs."""
    return importlib.util.find_spec("helm_python") is not None


def file_digest(path: Path) -> str:
    """`sha256:<hex>` of a file: the digest a chart repository's index.yaml records per archive."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inference-platform" / "charts"


@functools.cache
def helm_tag() -> str:
    """The installed helm-python-sdk release, which fixes the Helm it binds (0.2.2 binds v4.2.3): part
    of every cache key, so another Helm never reads what this one rendered. Read from the package's
    metadata, not by importing it (the import starts Helm's Go runtime; a cache hit needs none)."""
    try:
        return importlib.metadata.version("helm-python-sdk")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _values_key(release: str, namespace: str, values: dict[str, Any]) -> str:
    payload = json.dumps([release, namespace, values, helm_tag()], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _cached(key: Path | None, compute: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """`compute()`, read from / written to the cache file `key` (None: no cache)."""
    if key is not None and key.is_file():
        try:
            return json.loads(key.read_text())
        except (OSError, ValueError):
            pass  # a torn or unreadable entry is rendered again and rewritten
    parts = compute()
    if key is not None:
        try:
            key.parent.mkdir(parents=True, exist_ok=True)
            tmp = key.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(parts))
            tmp.replace(key)
        except OSError:
            pass  # a read-only cache only costs time
    return parts


def template_archive(
    archive: Path, *, release: str, namespace: str, values: dict[str, Any], skip_crds: bool = False,
    use_cache: bool = True,
) -> list[dict[str, Any]]:
    """The parts `archive` renders as release `release` in `namespace` with `values` (cached: the
    CRDs under the archive's digest alone — a values change does not parse them again — and the
    rendered templates under the digest plus the values)."""
    digest = file_digest(archive).removeprefix("sha256:")[:32]
    folder = cache_dir() if use_cache else None
    chart = _LazyChart(archive)
    crd_key = folder and folder / f"{digest}-helm{helm_tag()}-crds.json"
    crds = [] if skip_crds else _cached(crd_key, lambda: crd_parts(chart.get()))
    key = folder and folder / f"{digest}-{_values_key(release, namespace, values)[:32]}.json"
    rendered = _cached(key, lambda: template_parts(chart.get(), release=release, namespace=namespace, values=values,
                                                   label=archive.name))
    return sorted(crds + rendered, key=_order)


class _LazyChart:
    """The archive loaded once, and only when a cache misses."""

    def __init__(self, archive: Path):
        self.archive, self._chart = archive, None

    def get(self):
        if self._chart is None:
            self._chart = load_chart(self.archive)
        return self._chart


def load_chart(archive: Path):
    import helm_python

    try:
        return helm_python.Chart.load(str(archive))
    except helm_python.HelmError as err:
        raise ChartError(f"{archive.name}: cannot be loaded: {err}") from None


def render_parts(
    archive: Path, *, release: str, namespace: str, values: dict[str, Any], skip_crds: bool = False,
) -> list[dict[str, Any]]:
    """Render `archive` with Helm (uncached): the chart's CRDs and every rendered object."""
    chart = load_chart(archive)
    crds = [] if skip_crds else crd_parts(chart)
    return sorted(crds + template_parts(chart, release=release, namespace=namespace, values=values, label=archive.name),
                  key=_order)


def crd_parts(chart) -> list[dict[str, Any]]:
    """The CRDs of the chart's (and subcharts') `crds/` directories, as Helm installs them."""
    sources = [(crd.get("filename") or crd["name"], chunk) for crd in chart.crds for chunk in _chunks(crd["data"])]
    objects = _parse_all([chunk for _, chunk in sources])
    return [{"part": "crd", "source": source, "object": obj} for (source, _), obj in zip(sources, objects, strict=True)
            if _is_object(obj)]


def template_parts(chart, *, release: str, namespace: str, values: dict[str, Any], label: str) -> list[dict[str, Any]]:
    """Every object the chart's templates render with `values` (hooks marked, Secrets redacted);
    `label` names the archive in an error."""
    import helm_python

    try:
        rendered = chart.render(values, name=release, namespace=namespace, is_install=True)
    except helm_python.HelmError as err:
        raise ChartError(f"{label} does not template with these values: {err}") from None
    sources = [(source, chunk) for source, text in rendered.items()
               if source.endswith((".yaml", ".yml", ".tpl")) or "NOTES" not in source for chunk in _chunks(text)]
    parts: list[dict[str, Any]] = []
    for (source, _), obj in zip(sources, _parse_all([chunk for _, chunk in sources]), strict=True):
        if not _is_object(obj):
            continue
        obj = _with_namespace(obj, namespace)
        hook = (obj.get("metadata", {}).get("annotations") or {}).get(HOOK_ANNOTATION)
        if not hook:
            _annotate_release(obj, release, namespace)
        if obj.get("kind") == "Secret":
            _redact(obj)
        parts.append({"part": "hook" if hook else "template", "source": source, "object": obj})
    return parts


def _order(part: dict[str, Any]) -> tuple:
    return (part["part"], part["object"].get("kind", ""), _meta(part, "namespace"), _meta(part, "name"), part["source"])


def _meta(part: dict[str, Any], key: str) -> str:
    return str(part["object"].get("metadata", {}).get(key) or "")


_DOCUMENT_START = re.compile(r"^---(?:[ \t].*)?$", re.MULTILINE)


def _chunks(text: str) -> list[str]:
    return [chunk for chunk in _DOCUMENT_START.split(text) if chunk.strip()]


def _is_object(doc: Any) -> bool:
    return isinstance(doc, dict) and bool(doc.get("kind")) and bool(doc.get("apiVersion"))


def _parse(chunk: str) -> Any:
    import helm_python

    try:
        return helm_python.values_from_yaml(chunk)
    except helm_python.HelmError as err:
        raise ChartError(f"a template rendered YAML that does not parse: {err}") from None


def _parse_all(chunks: list[str]) -> list[Any]:
    """The documents parsed by Helm's own YAML reader (sigs.k8s.io/yaml, as Kubernetes reads them;
    PyYAML reads YAML 1.1, where `on` is true and a bare `=` is an error) — 3x faster than libyaml
    on the megabytes of CRDs kube-prometheus-stack carries. (Parsing them in threads measured no
    faster on the shared 2-core machine.)"""
    return [_parse(chunk) for chunk in chunks]


# Kinds that have no namespace: Helm leaves them without one, and so does the plan.
CLUSTER_SCOPED = frozenset({
    "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "APIService",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding", "PriorityClass", "StorageClass", "PersistentVolume",
    "IngressClass", "RuntimeClass", "GatewayClass", "ClusterIssuer", "CSIDriver",
})


SECRET_PLACEHOLDER = "[secret]"  # the plan's placeholder (infra/mock_runtime.py SECRET_MARKER)


def _redact(secret: dict[str, Any]) -> None:
    """Every value of a chart's Secret becomes the placeholder before anything stores or shows it:
    it may be a value the stack keeps as a Pulumi secret, or one the chart generated at random
    (which would also make the plan differ on every run)."""
    for key in ("data", "stringData"):
        if isinstance(secret.get(key), dict):
            secret[key] = dict.fromkeys(secret[key], SECRET_PLACEHOLDER)


def _annotate_release(obj: dict[str, Any], release: str, namespace: str) -> None:
    """The ownership annotations Helm writes on every object it installs (not on hooks): the live
    object carries them, so `kubectl diff` of `--out` matches, and the invariants see whose it is."""
    meta = obj.setdefault("metadata", {}) or {}
    obj["metadata"] = meta
    meta["annotations"] = {**(meta.get("annotations") or {}), RELEASE_NAME_ANNOTATION: release,
                           RELEASE_NAMESPACE_ANNOTATION: namespace}


def _with_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A namespaced object without `metadata.namespace` goes into the release namespace, as Helm
    installs it; the plan writes that namespace so `--out` files and identities are exact."""
    if obj.get("kind") in CLUSTER_SCOPED:
        return obj
    meta = obj.setdefault("metadata", {}) or {}
    obj["metadata"] = meta
    if not meta.get("namespace"):
        meta["namespace"] = namespace
    return obj
