"""What the operators and hook Jobs of the installed charts create at run time, from their objects.

A templated chart declares custom resources that an operator turns into pods, and pods that write
Secrets the chart's other pods mount. Without them the invariants would see a `Prometheus` that
runs nowhere (the system pool's capacity misses its biggest pod, the chart's Prometheus Service
selects nothing) and Deployments mounting Secrets nobody creates. They are added here as plain
manifests marked `inference-platform/implied`, derived from the objects alone:

- **prometheus-operator**: a `Prometheus` (monitoring.coreos.com/v1) becomes StatefulSet
  `prometheus-<name>`, an `Alertmanager` StatefulSet `alertmanager-<name>`, with the CR's
  replicas (× shards), nodeSelector, tolerations, podMetadata labels and the `prometheus` /
  `alertmanager` container's resources; the pods carry the labels the operator sets
  (`app.kubernetes.io/name`, `app.kubernetes.io/instance`, `app.kubernetes.io/managed-by`,
  `operator.prometheus.io/name`, and `prometheus`/`alertmanager: <name>`) and the ports it opens:
  the CR's `portName` (default `web`) and the config reloader's `reloader-web` (8080). Where the CR
  sets no requests, the footprint implied.py assumes for the untemplated chart is used.
- **Secrets written by a pod**: a container started with `--secret-name=NAME` (kube-webhook-certgen,
  the admission-webhook hook Jobs of kube-prometheus-stack and others) or `--cert-secret-name=NAME`
  (KEDA's operator with certificate rotation) creates Secret NAME in its namespace.
"""

from __future__ import annotations

from typing import Any

from infra.invariants.objects import group_of, identity, pod_templates

IMPLIED = "inference-platform/implied"
MONITORING_GROUP = "monitoring.coreos.com"
RELOADER_PORT = {"name": "reloader-web", "containerPort": 8080}
# kind → (StatefulSet name prefix and name label, container port)
OPERATED = {"Prometheus": ("prometheus", 9090), "Alertmanager": ("alertmanager", 9093)}
SECRET_ARGS = ("--secret-name=", "--cert-secret-name=")


def _operated_statefulset(cr: dict, assumed: dict[str, tuple[str, str]]) -> dict[str, Any]:
    kind = str(cr.get("kind"))
    name_label, port = OPERATED[kind]
    cpu, memory = assumed.get(name_label, ("0", "0"))
    _, _, ns, name = identity(cr)
    spec = cr.get("spec") or {}
    requests = dict((spec.get("resources") or {}).get("requests") or {})
    requests.setdefault("cpu", cpu)
    requests.setdefault("memory", memory)
    pod_labels = {
        **((spec.get("podMetadata") or {}).get("labels") or {}),
        "app.kubernetes.io/name": name_label, "app.kubernetes.io/instance": name,
        "app.kubernetes.io/managed-by": "prometheus-operator", "operator.prometheus.io/name": name, name_label: name,
    }
    pod_spec: dict[str, Any] = {"containers": [
        {"name": name_label, "resources": {"requests": requests},
         "ports": [{"name": str(spec.get("portName") or "web"), "containerPort": port}]},
        {"name": "config-reloader", "ports": [dict(RELOADER_PORT)]},
    ]}
    for key in ("nodeSelector", "tolerations", "serviceAccountName"):
        if spec.get(key):
            pod_spec[key] = spec[key]
    replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    replicas *= int(spec.get("shards", 1) or 1) if kind == "Prometheus" else 1
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": f"{name_label}-{name}", "namespace": ns,
                     "annotations": {IMPLIED: f"created by prometheus-operator for {kind} {ns}/{name}"}},
        "spec": {"replicas": replicas, "template": {"metadata": {"labels": pod_labels}, "spec": pod_spec}},
    }


def _written_secrets(obj: dict) -> list[dict[str, Any]]:
    out = []
    for template in pod_templates(obj):
        for container in template.containers():
            for arg in container.get("args") or []:
                for flag in SECRET_ARGS:
                    if isinstance(arg, str) and arg.startswith(flag) and arg[len(flag):]:
                        out.append({
                            "apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": arg[len(flag):], "namespace": template.namespace, "annotations": {
                                IMPLIED: f"written at run time by {obj.get('kind')} {template.namespace}/{identity(obj)[3]} ({flag}…)"}},
                        })
    return out


def operator_objects(objects: list[dict], assumed: dict[str, tuple[str, str]]) -> list[dict]:
    """The StatefulSets prometheus-operator makes for the plan's Prometheus/Alertmanager objects
    and the Secrets the plan's pods write (see the module doc), each once and only where the plan
    does not declare the object itself. `assumed`: (cpu, memory) requests of the `prometheus` /
    `alertmanager` pods where their CR sets none."""
    out: list[dict] = []
    for obj in objects:
        if group_of(obj) == MONITORING_GROUP and obj.get("kind") in OPERATED:
            out.append(_operated_statefulset(obj, assumed))
        out += _written_secrets(obj)
    declared = {identity(o) for o in objects}
    unique = {identity(o): o for o in out if identity(o) not in declared}
    return list(unique.values())
