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


def test_cached_by_archive_digest_and_values_the_crds_by_digest_alone(chart_env, monkeypatch):
    calls, crds = [], []
    real_templates, real_crds = template.template_parts, template.crd_parts
    monkeypatch.setattr(template, "template_parts", lambda *a, **k: calls.append(k["values"]) or real_templates(*a, **k))
    monkeypatch.setattr(template, "crd_parts", lambda *a: crds.append(1) or real_crds(*a))
    first = template_archive(chart_env, release="keda", namespace="keda", values={"replicaCount": 2})
    assert template_archive(chart_env, release="keda", namespace="keda", values={"replicaCount": 2}) == first
    assert len(calls) == 1 and len(crds) == 1
    changed = template_archive(chart_env, release="keda", namespace="keda", values={"replicaCount": 3})
    assert len(calls) == 2 and len(crds) == 1  # a values change does not parse the CRDs again
    assert _by_kind(changed)[("template", "Deployment")]["object"]["spec"]["replicas"] == 3
    assert _by_kind(changed)[("crd", "CustomResourceDefinition")] == _by_kind(first)[("crd", "CustomResourceDefinition")]
    uncached = template.render_parts(chart_env, release="keda", namespace="keda", values={"replicaCount": 3})
    assert uncached == changed


def test_another_helm_never_reads_what_this_one_cached(chart_env, monkeypatch):
    """The CRDs' key holds the Helm release too: a helm-python-sdk upgrade renders both parts anew."""
    calls, crds = [], []
    real_templates, real_crds = template.template_parts, template.crd_parts
    monkeypatch.setattr(template, "template_parts", lambda *a, **k: calls.append(1) or real_templates(*a, **k))
    monkeypatch.setattr(template, "crd_parts", lambda *a: crds.append(1) or real_crds(*a))
    template_archive(chart_env, release="keda", namespace="keda", values={})
    template_archive(chart_env, release="keda", namespace="keda", values={})
    assert (len(calls), len(crds)) == (1, 1)
    monkeypatch.setattr(template, "helm_tag", lambda: "9.9.9")
    template_archive(chart_env, release="keda", namespace="keda", values={})
    assert (len(calls), len(crds)) == (2, 2)


def test_a_cache_hit_does_not_start_helm(chart_env):
    """Cache keys come from package metadata: a warm plan never imports helm_python (its import starts
    Helm's Go runtime)."""
    import subprocess
    import sys

    template_archive(chart_env, release="keda", namespace="keda", values={})
    probe = (
        "import sys; from pathlib import Path; from infra.charts.template import template_archive; "
        f"template_archive(Path({str(chart_env)!r}), release='keda', namespace='keda', values={{}}); "
        "print('helm_python' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_values_the_schema_refuses_are_one_error_naming_the_value(chart_env):
    with pytest.raises(ChartError, match="replicaCount"):
        template_archive(chart_env, release="keda", namespace="keda", values={"replicaCount": 0}, use_cache=False)
