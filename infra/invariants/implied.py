"""Objects the cluster will hold that the program does not declare itself.

Helm charts and controllers create objects of their own: the Service and Deployment an
Agentgateway controller makes for each Gateway (named after the Gateway, in its namespace), the
headless Service and StatefulSets the LeaderWorkerSet controller names after each LeaderWorkerSet,
the HorizontalPodAutoscaler KEDA names after each ScaledObject, the
pods of each chart release, the DaemonSets DOKS runs on every node, and what the charts' operators
and hook Jobs create from the chart's objects (operator_objects.py). The invariants must see them —
a model named like the Gateway takes the controller's Service name; a 1-vCPU system node cannot
hold a monitoring stack it never saw — so they are added here as plain manifests, marked
`inference-platform/implied`.

Chart pods carry the requests the rendered values give them; where the values leave a chart's
default (no requests), the footprint below is assumed and said so in the docs
(docs/configuration.md#plan-invariants). When a chart's real objects are in the plan (templated
offline), its release is skipped here, so nothing is counted twice.
"""

from __future__ import annotations

from typing import Any

from infra.charts.source import chart_name
from infra.invariants.objects import identity
from infra.invariants.operator_objects import operator_objects

IMPLIED = "inference-platform/implied"
HELM_RELEASE_ANNOTATION = "meta.helm.sh/release-name"

# Agentgateway's deployer names the proxy Deployment, Service and ServiceAccount after the Gateway
# and labels the pods with the Gateway's name and class (kgateway deployer conventions).
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
GATEWAY_CLASS_LABEL = "gateway.networking.k8s.io/gateway-class-name"
GATEWAY_PROXY_PORTS = ({"name": "http", "containerPort": 80}, {"name": "metrics", "containerPort": 15020})

# Per chart: (component, its values key, pods, cpu, memory, per_node): the requests used where the
# values set none. Assumed from the charts' defaults and typical idle use; Prometheus grows with
# series and retention.
CHART_FOOTPRINT: dict[str, tuple[tuple[str, str, int, str, str, bool], ...]] = {
    "kube-prometheus-stack": (
        ("prometheus", "prometheus", 1, "500m", "2Gi", False),
        ("alertmanager", "alertmanager", 1, "50m", "128Mi", False),
        ("grafana", "grafana", 1, "150m", "384Mi", False),
        ("prometheus-operator", "prometheusOperator", 1, "100m", "128Mi", False),
        ("kube-state-metrics", "kube-state-metrics", 1, "50m", "128Mi", False),
        ("node-exporter", "prometheus-node-exporter", 1, "50m", "64Mi", True),
    ),
    "keda": (
        ("keda-operator", "operator", 1, "100m", "100Mi", False),
        ("keda-operator-metrics-apiserver", "metricsServer", 1, "100m", "100Mi", False),
        ("keda-admission-webhooks", "webhooks", 1, "100m", "100Mi", False),
    ),
    "lws": (("lws-controller-manager", "manager", 1, "100m", "128Mi", False),),
    "agentgateway": (("agentgateway", "controller", 1, "100m", "128Mi", False),),
    "cert-manager": (
        ("cert-manager", "cert-manager", 1, "50m", "64Mi", False),
        ("cert-manager-cainjector", "cainjector", 1, "50m", "64Mi", False),
        ("cert-manager-webhook", "webhook", 1, "50m", "64Mi", False),
    ),
    "gpu-operator-charts": (("amd-gpu-operator-controller-manager", "controllerManager", 1, "100m", "256Mi", False),),
}
# What DOKS runs on every node (Cilium, CSI node plugin, node agent, konnectivity, kube-proxy) and
# once per cluster (CoreDNS ×2, Cilium operator), on the system pool: assumed, DOKS publishes no
# figures. CoreDNS and kube-proxy carry the `k8s-app` labels of upstream Kubernetes' manifests, which
# kube-prometheus-stack's kube-system Services select.
DOKS_PER_NODE = ("doks-node-daemons", "250m", "600Mi")
DOKS_CLUSTER = (("coredns", 2, "100m", "170Mi", {"k8s-app": "kube-dns"}), ("cilium-operator", 1, "50m", "128Mi", {}))
DOKS_KUBE_PROXY_LABELS = {"k8s-app": "kube-proxy"}  # its requests are in DOKS_PER_NODE


def _workload(kind: str, name: str, namespace: str, pods: int, cpu: str, memory: str, *, node_selector: dict | None,
              tolerate_all: bool, why: str, labels: dict | None = None, ports: tuple = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}},
                                            "ports": [dict(p) for p in ports]}]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerate_all:
        spec["tolerations"] = [{"operator": "Exists"}]
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "annotations": {IMPLIED: why}},
        "spec": {"template": {"metadata": {"labels": {"app.kubernetes.io/name": name, **(labels or {})}}, "spec": spec}},
    }
    if kind != "DaemonSet":
        obj["spec"]["replicas"] = pods
    return obj


def _gateway_objects(gateway: dict, objects: list[dict]) -> list[dict]:
    _, _, ns, name = identity(gateway)
    params_ref = ((gateway.get("spec") or {}).get("infrastructure") or {}).get("parametersRef") or {}
    params = next((o for o in objects if o.get("kind") == params_ref.get("kind") and identity(o)[3] == params_ref.get("name")
                   and identity(o)[2] == ns), {})
    overlay = (params.get("spec") or {})
    deployment = ((overlay.get("deployment") or {}).get("spec") or {})
    replicas = int(deployment.get("replicas", 1))
    node_selector = ((deployment.get("template") or {}).get("spec") or {}).get("nodeSelector")
    requests = (overlay.get("resources") or {}).get("requests") or {"cpu": "100m", "memory": "128Mi"}
    why = f"created by the gateway controller for Gateway {ns}/{name}"
    gw_class = str((gateway.get("spec") or {}).get("gatewayClassName", ""))
    pod_labels = {GATEWAY_NAME_LABEL: name, GATEWAY_CLASS_LABEL: gw_class}
    proxy = _workload("Deployment", name, ns, replicas, str(requests.get("cpu", "0")), str(requests.get("memory", "0")),
                      node_selector=node_selector, tolerate_all=False, why=why, labels=pod_labels, ports=GATEWAY_PROXY_PORTS)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "annotations": {IMPLIED: why}},
        "spec": {"selector": dict(pod_labels), "ports": [{"name": "http", "port": 80, "targetPort": 80}]},
    }
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns, "annotations": {IMPLIED: why}}}
    return [proxy, service, account]


# The LeaderWorkerSet controller (LWS v0.10.0, pkg/controllers/leaderworkerset_controller.go) creates,
# named after the LeaderWorkerSet: a headless Service (the group's DNS; subdomainPolicy Shared, the
# default), the leaders' StatefulSet, and one workers' StatefulSet per group, `<name>-<group>`.
# KEDA (v2.18) creates the HorizontalPodAutoscaler of a ScaledObject as `keda-hpa-<name>`.
KEDA_HPA_PREFIX = "keda-hpa-"


def _named(kind: str, api: str, name: str, ns: str, why: str) -> dict[str, Any]:
    """An object a controller creates, for its identity only (no selector, no pods: those are the
    owner's, already counted)."""
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns, "annotations": {IMPLIED: why}}}


def controller_named_objects(obj: dict) -> list[dict]:
    """The objects a controller names after `obj` (see above), for the identity invariant: a model
    named like one of them would be overwritten by, or overwrite, the controller's."""
    _, kind, ns, name = identity(obj)
    if kind == "LeaderWorkerSet":
        why = f"created by the LeaderWorkerSet controller for LeaderWorkerSet {ns}/{name}"
        groups = int((obj.get("spec") or {}).get("replicas") or 1)
        return ([_named("Service", "v1", name, ns, why), _named("StatefulSet", "apps/v1", name, ns, why)]
                + [_named("StatefulSet", "apps/v1", f"{name}-{g}", ns, why) for g in range(groups)])
    if kind == "ScaledObject":
        hpa = (((obj.get("spec") or {}).get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("name")
        why = f"created by KEDA for ScaledObject {ns}/{name}"
        return [_named("HorizontalPodAutoscaler", "autoscaling/v2", hpa or f"{KEDA_HPA_PREFIX}{name}", ns, why)]
    return []


def _release_objects(release: dict, objects: list[dict]) -> list[dict]:
    inputs = release.get("inputs") or {}
    chart = chart_name(str(inputs.get("chart", "")), str(inputs.get("version", "")))
    name = str(inputs.get("name") or release.get("name", chart))
    ns = str(inputs.get("namespace") or "default")
    if any((o.get("metadata") or {}).get("annotations", {}).get(HELM_RELEASE_ANNOTATION) == name for o in objects):
        return []  # the chart's own objects are in the plan
    values = inputs.get("values") or {}
    selector = values.get("nodeSelector")
    out = []
    for component, key, pods, cpu, memory, per_node in CHART_FOOTPRINT.get(chart, ()):
        section = values.get(key) or {}
        section = section.get("prometheusSpec") or section.get("alertmanagerSpec") or section
        sel = section.get("nodeSelector") or selector
        requests = (section.get("resources") or {}).get("requests") or {}
        cpu, memory = str(requests.get("cpu", cpu)), str(requests.get("memory", memory))
        out.append(_workload("DaemonSet" if per_node else "Deployment", f"{release_name_prefix(chart)}{component}", ns, pods, cpu, memory,
                             node_selector=None if per_node else sel, tolerate_all=per_node,
                             why=f"pods of the {chart} chart (release {name}); requests assumed where its values set none"))
    return out


def release_name_prefix(chart: str) -> str:
    """Implied chart pods are named `<component>` under a `chart-` prefix so they never take a
    name the program uses (their real names depend on the chart's templates)."""
    return f"{chart}-" if not chart.endswith("-charts") else "chart-"


def implied_objects(objects: list[dict], releases: list[dict], system_node_selector: dict[str, str]) -> list[dict]:
    """What controllers, charts and DOKS add to `objects` once applied (see the module doc)."""
    out: list[dict] = []
    for obj in objects:
        if obj.get("kind") == "Gateway" and str(obj.get("apiVersion", "")).startswith("gateway.networking.k8s.io/"):
            out += _gateway_objects(obj, objects)
        out += controller_named_objects(obj)
    for release in releases:
        out += _release_objects(release, objects)
    why = "run by DOKS itself (assumed footprint)"
    out.append(_workload("DaemonSet", DOKS_PER_NODE[0], "kube-system", 1, DOKS_PER_NODE[1], DOKS_PER_NODE[2],
                         node_selector=None, tolerate_all=True, why=why))
    out.append(_workload("DaemonSet", "kube-proxy", "kube-system", 1, "0", "0", node_selector=None, tolerate_all=True,
                         why=why, labels=DOKS_KUBE_PROXY_LABELS))
    for name, pods, cpu, memory, pod_labels in DOKS_CLUSTER:
        out.append(_workload("Deployment", name, "kube-system", pods, cpu, memory, node_selector=system_node_selector,
                             tolerate_all=False, why=why, labels=pod_labels))
    assumed = {component: (cpu, memory) for component, _, _, cpu, memory, _ in CHART_FOOTPRINT["kube-prometheus-stack"]}
    out += operator_objects(list(objects), assumed)
    return out


def is_implied(obj: dict) -> bool:
    return IMPLIED in ((obj.get("metadata") or {}).get("annotations") or {})
