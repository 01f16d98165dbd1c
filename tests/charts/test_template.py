"""Templating one archive: parts marked as what they are, secrets redacted, cached by digest+values."""

from __future__ import annotations

import pytest

from infra.charts import template
from infra.charts.template import ChartError, template_archive


def _by_kind(parts):
    return {(p["part"], p["object"]["kind"]): p for p in parts}


def test_crds_hooks_and_subchart_objects_are_marked(chart_env):
    parts = template_archive(chart_env, release="keda", namespace="keda", values={"nodeSelector": {"pool": "system"}})
    kinds = _by_kind(parts)
    assert set(kinds) == {("crd", "CustomResourceDefinition"), ("hook", "Job"), ("template", "Deployment"),
                          ("template", "Secret"), ("template", "Service")}
    deployment = kinds[("template", "Deployment")]["object"]
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "system"}
    assert deployment["metadata"]["namespace"] == "keda"
    assert deployment["metadata"]["annotations"]["meta.helm.sh/release-name"] == "keda"
    # the subchart's object is rendered with the subchart's defaults
    assert kinds[("template", "Service")]["object"]["spec"]["ports"][0]["port"] == 8080
    # Helm does not annotate hooks as release members; CRDs keep no namespace
    assert "meta.helm.sh/release-name" not in kinds[("hook", "Job")]["object"]["metadata"]["annotations"]
    assert "namespace" not in kinds[("crd", "CustomResourceDefinition")]["object"]["metadata"]


def test_chart_secrets_never_carry_a_value_and_the_result_is_deterministic(chart_env):
    first = template_archive(chart_env, release="keda", namespace="keda", values={}, use_cache=False)
    again = template_archive(chart_env, release="keda", namespace="keda", values={}, use_cache=False)
    secret = _by_kind(first)[("template", "Secret")]["object"]
    assert secret["data"] == {"token": "[secret]"}  # the chart generates it at random
    assert first == again


def test_cached_by_archive_digest_and_values(chart_env, monkeypatch):
    calls = []
    real = template.render_parts
    monkeypatch.setattr(template, "render_parts", lambda *a, **k: calls.append(k["values"]) or real(*a, **k))
    template_archive(chart_env, release="keda", namespace="keda", values={"replicaCount": 2})
    template_archive(chart_env, release="keda", namespace="keda", values={"replicaCount": 2})
    assert len(calls) == 1
    changed = template_archive(chart_env, release="keda", namespace="keda", values={"replicaCount": 3})
    assert len(calls) == 2
    assert _by_kind(changed)[("template", "Deployment")]["object"]["spec"]["replicas"] == 3


def test_values_the_schema_refuses_are_one_error_naming_the_value(chart_env):
    with pytest.raises(ChartError, match="replicaCount"):
        template_archive(chart_env, release="keda", namespace="keda", values={"replicaCount": 0}, use_cache=False)
