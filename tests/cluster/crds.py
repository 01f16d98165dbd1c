"""The CRDs (and their companion objects) of every controller and chart the plan uses, read at
test time from the pinned Go module (`go mod download -json MODULE@VERSION` names its directory
in the module cache); never copied into the repository. tests/cluster/versions.py says which
module and version stands for which chart or manifest URL."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import yaml

from infra.catalog import versions as pins
from tests.cluster import versions

# The plan's manifest URLs (components/gateway.py ConfigFiles) → the CRD_MODULES key standing for it.
URL_SOURCES = {
    pins.GATEWAY_API_CRDS_URL: "gateway-api",
    pins.INFERENCE_POOL_CRDS_URL: "inference-pool",
    pins.INFERENCE_OBJECTIVE_CRD_URL: "inference-objective",
}


class _Loader(yaml.SafeLoader):
    """PyYAML reads a bare `=` as YAML 1.1's value tag; CRD enums (the Prometheus operator's label
    matchers) mean the string."""


_Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


class NotServed(Exception):
    """The module holding these CRDs is not served by the Go module proxy."""


@functools.cache
def module_dir(module: str, version: str) -> Path:
    proc = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True,
                          check=False, env={**os.environ, "GOFLAGS": "-mod=mod", "GOWORK": "off"})  # fmt: skip
    info = json.loads(proc.stdout or "{}")
    if proc.returncode or "Dir" not in info:
        raise NotServed(f"{module}@{version}: {info.get('Error') or proc.stderr.strip()}")
    return Path(info["Dir"])


def source_objects(source: str) -> list[dict]:
    """Every object in the YAML files of one CRD source (a chart name or a CRD_MODULES key)."""
    if source in versions.NOT_SERVED:
        raise NotServed(versions.NOT_SERVED[source])
    if source not in versions.CRD_MODULES:
        return []  # the chart installs no CRD the plan's objects use
    module, version, paths = versions.CRD_MODULES[source]
    root = module_dir(module, version)
    files: list[Path] = []
    for rel in paths:
        path = root / rel
        files += sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    objects = []
    for file in files:
        for doc in yaml.load_all(file.read_text(), Loader=_Loader):  # noqa: S506 - a SafeLoader subclass
            if isinstance(doc, dict) and doc.get("kind"):
                objects.append(doc)
    return objects


def chart_name(chart: str) -> str:
    """`oci://cr.agentgateway.dev/charts/agentgateway` → `agentgateway`."""
    return chart.rstrip("/").rsplit("/", 1)[-1]
