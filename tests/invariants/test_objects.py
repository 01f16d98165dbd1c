"""The generic object views the invariants read: pod templates of any kind, selectors, quantities."""

from __future__ import annotations

import pytest

from infra.invariants.objects import Selector, identity, pod_requests, pod_templates, quantity


def _pod(labels, requests=None, init=None):
    spec = {"containers": [{"name": "c", "resources": {"requests": requests or {}}}]}
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": init}}]
    return {"metadata": {"labels": labels}, "spec": spec}


@pytest.mark.parametrize(("text", "value"), [("500m", 0.5), ("4Gi", 4 * 2**30), ("72", 72.0), (2, 2.0), ("1e3", 1000.0), ("2k", 2000.0)])
def test_quantities(text, value):
    assert quantity(text) == value


def test_a_quantity_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity("lots")


def test_requests_take_the_larger_of_the_containers_and_any_init_container():
    (t,) = pod_templates({"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "d"},
                          "spec": {"replicas": 3, "template": _pod({}, {"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "16Mi"})}})
    assert t.count == 3
    assert pod_requests(t) == {"cpu": 2.0, "memory": 2**30}


def test_a_leader_worker_set_counts_leaders_and_workers_per_group():
    lws = {"kind": "LeaderWorkerSet", "apiVersion": "leaderworkerset.x-k8s.io/v1", "metadata": {"name": "m", "namespace": "inference"},
           "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "leaderTemplate": _pod({"r": "l"}), "workerTemplate": _pod({"r": "w"})}}}
    counts = {t.role: t.count for t in pod_templates(lws)}
    assert counts == {"leader": 2, "worker": 6}


def test_a_daemon_set_runs_per_node_and_any_kind_that_nests_a_template_is_found():
    (ds,) = pod_templates({"kind": "DaemonSet", "apiVersion": "apps/v1", "metadata": {"name": "d"}, "spec": {"template": _pod({})}})
    assert ds.per_node
    (odd,) = pod_templates({"kind": "Rollout", "apiVersion": "x.io/v1", "metadata": {"name": "r"}, "spec": {"replicas": 5, "template": _pod({})}})
    assert odd.count == 5


def test_selectors_match_labels_expressions_and_namespaces():
    sel = Selector({"app": "vllm"}, ({"key": "model", "operator": "Exists"}, {"key": "side", "operator": "NotIn", "values": ["x"]}), ("inference",))
    assert sel.matches({"app": "vllm", "model": "a"}, "inference")
    assert not sel.matches({"app": "vllm"}, "inference")
    assert not sel.matches({"app": "vllm", "model": "a", "side": "x"}, "inference")
    assert not sel.matches({"app": "vllm", "model": "a"}, "monitoring")


def test_identity_is_group_kind_namespace_name():
    assert identity({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}) == ("", "Service", "default", "s")
    assert identity({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}) == ("", "Namespace", "", "n")
