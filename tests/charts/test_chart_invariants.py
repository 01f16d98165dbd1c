"""Chart objects go through the whole-plan invariants as errors, like the project's own: the checks
model what every node carries (kubernetes.io/os...), what an operator makes of a chart's custom
resources (the Prometheus StatefulSet on the system pool), the Secrets a hook Job writes, and leave
`helm test` hooks out. Variants of the fixture chart (tests/fixtures/charts/keda), packaged here."""

from __future__ import annotations

import shutil

import pytest

from infra.errors import ConfigError
from infra.invariants.implied import implied_objects
from infra.offline import build_plan, kubernetes_objects
from tests.charts.conftest import FIXTURES

# The fixture's Deployment pins to the system pool by the values; these add what real charts do.
EXTRA = """\
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata:
  name: {{ .Release.Name }}-prometheus
spec:
  portName: http-web
  nodeSelector:
    kubernetes.io/os: linux
    {{- toYaml .Values.nodeSelector | nindent 4 }}
  resources:
    requests: {cpu: 200m, memory: {{ .Values.prometheusMemory }}}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-prometheus
spec:
  selector:
    app.kubernetes.io/name: prometheus
    operator.prometheus.io/name: {{ .Release.Name }}-prometheus
  ports:
    - {name: http-web, port: 9090, targetPort: http-web}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-webhook
spec:
  selector:
    matchLabels: {app: webhook}
  template:
    metadata:
      labels: {app: webhook}
    spec:
      nodeSelector:
        kubernetes.io/os: linux
        kubernetes.io/arch: amd64
        {{- toYaml .Values.nodeSelector | nindent 8 }}
      containers:
        - name: webhook
          image: example.invalid/webhook:1
      volumes:
        - name: certs
          secret: {secretName: {{ .Release.Name }}-certs}
---
apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    helm.sh/hook: test
  labels:
    app.kubernetes.io/name: prometheus
    operator.prometheus.io/name: {{ .Release.Name }}-prometheus
spec:
  restartPolicy: Never
  containers:
    - name: test
      image: example.invalid/test:1
"""
CERTGEN = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-certgen
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: create
          image: example.invalid/certgen:1
          args: [create, "--secret-name={{ .Release.Name }}-certs"]
"""


def _variant(tmp_path, *, memory: str = "2Gi", certgen: bool = True):
    """A directory with the fixture chart plus EXTRA (and the cert-writing hook Job), packaged as
    keda-2.18.3.tgz so the prod stack's KEDA release templates it."""
    helm_python = pytest.importorskip("helm_python")
    src = tmp_path / "src" / "keda"
    shutil.copytree(FIXTURES / "keda", src)
    (src / "templates" / "extra.yaml").write_text(EXTRA)
    if certgen:
        (src / "templates" / "certgen.yaml").write_text(CERTGEN)
    with (src / "values.yaml").open("a") as values:
        values.write(f"prometheusMemory: {memory}\n")
    out = tmp_path / "archives"
    helm_python.package(src, destination=out)
    return out


@pytest.fixture
def plan_with(tmp_path, monkeypatch):
    def build(**variant):
        monkeypatch.setenv("INFRA_CHART_DIR", str(_variant(tmp_path, **variant)))
        monkeypatch.setenv("INFRA_CHART_CACHE", str(tmp_path / "cache"))
        return build_plan("prod")
    return build


def test_well_known_node_labels_operator_pods_written_secrets_and_test_hooks(plan_with):
    plan = plan_with()  # refused if any chart object broke an invariant
    objects = kubernetes_objects(plan)
    implied = implied_objects(objects, [r for r in plan.resources if r["type"].endswith(":Release")],
                              {"doks.digitalocean.com/node-pool": "prod-doks-system"})
    (statefulset,) = [o for o in implied if o["kind"] == "StatefulSet"]
    assert statefulset["metadata"]["name"] == "prometheus-keda-prometheus"
    pod = statefulset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", "doks.digitalocean.com/node-pool": "prod-doks-system"}
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "200m", "memory": "2Gi"}
    assert any(o["kind"] == "Secret" and o["metadata"]["name"] == "keda-certs" for o in implied)


def test_a_prometheus_the_system_pool_cannot_hold_is_refused(plan_with):
    with pytest.raises(ConfigError) as err:
        plan_with(memory="512Gi")
    text = str(err.value)
    assert "system pool" in text and "StatefulSet keda/prometheus-keda-prometheus (512.0 GiB per pod) fits on no node" in text


def test_a_chart_object_problem_is_an_error_naming_the_section_behind_the_release(plan_with):
    with pytest.raises(ConfigError) as err:
        plan_with(certgen=False)
    (problem,) = err.value.problems
    assert problem.path == "inference-platform:models"
    assert "Deployment keda/keda-webhook refers to Secret 'keda-certs'" in problem.message
