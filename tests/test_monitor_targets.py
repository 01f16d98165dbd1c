"""Every PodMonitor of ours watches pods the plan runs: a monitor whose selector matches no pod
template in its namespaces scrapes nothing and hides that (found by the issue-37 audit: a `router`
PodMonitor under router.kind gateway, where no vllm-router runs). Checked over the shipped stacks
and every security variant (service, router, public router and gateway front doors)."""

from __future__ import annotations

import pytest

from infra.offline import kubernetes_objects
from tests.security_variants import NAMES, plan_named

TEMPLATE_KEYS = ("template", "leaderTemplate", "workerTemplate")
# Monitors of pods a controller makes from an object of ours, not from a pod template in the plan:
# agentgateway runs the proxy Deployment of each Gateway (labelled with its GatewayClass).
CONTROLLER_MADE = {"inference-gateway"}


def _pod_templates(node, namespace: str, found: list[tuple[str, dict]]) -> None:
    """(namespace, labels) of every pod template in an object, however deep (Deployments, Jobs,
    LeaderWorkerSets' leader and worker templates)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in TEMPLATE_KEYS and isinstance(value, dict) and "spec" in value:
                found.append((namespace, value.get("metadata", {}).get("labels", {})))
            _pod_templates(value, namespace, found)
    elif isinstance(node, list):
        for item in node:
            _pod_templates(item, namespace, found)


def _selects(selector: dict, labels: dict) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        present = expr["key"] in labels
        if (expr["operator"] == "Exists") != present and expr["operator"] in ("Exists", "DoesNotExist"):
            return False
        if expr["operator"] == "In" and labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


@pytest.mark.parametrize("name", NAMES)
def test_every_pod_monitor_of_ours_selects_a_pod_the_plan_runs(name, tmp_path_factory):
    objects = kubernetes_objects(plan_named(name, tmp_path_factory.mktemp("variants")))
    templates: list[tuple[str, dict]] = []
    for obj in objects:
        _pod_templates(obj.get("spec", {}), obj["metadata"].get("namespace", ""), templates)
    monitors = [o for o in objects if o["kind"] == "PodMonitor"]
    for monitor in monitors:
        spec = monitor["spec"]
        if not spec["selector"] or monitor["metadata"]["name"] in CONTROLLER_MADE:
            continue  # the AMD exporter's (chart-made pods, filtered by image) and CONTROLLER_MADE
        namespaces = spec["namespaceSelector"]["matchNames"]
        hits = [labels for ns, labels in templates if ns in namespaces and _selects(spec["selector"], labels)]
        assert hits, f"{name}: PodMonitor {monitor['metadata']['name']} selects no pod the plan runs in {namespaces}"
