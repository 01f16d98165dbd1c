"""Stage 1 of issue 40: this machine runs a real node — what the sandbox allows, a kubelet
registered with the control plane, and a pod started by containerd and runc under the security
context the plan gives every pod (non-root user, no capabilities, read-only root filesystem)."""

from __future__ import annotations

import json

from tests.node.node import NODE_IP, wait

RESTRICTED = {"runAsUser": 65534, "runAsGroup": 65534, "runAsNonRoot": True, "readOnlyRootFilesystem": True,
              "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip


def test_the_sandbox_allows_a_node(sandbox_report):
    print(json.dumps(sandbox_report, indent=1))
    assert sandbox_report["wall"] is None
    assert sandbox_report["capabilities"]["uid"] == 0


def test_the_kubelet_registers_a_ready_node(node):
    got = node.api("GET", f"/api/v1/nodes/{node.name}")
    assert got["status"]["nodeInfo"]["kubeletVersion"] == "v1.33.13"
    assert got["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert {"type": "InternalIP", "address": NODE_IP} in got["status"]["addresses"]
    assert got["metadata"]["labels"]["doks.digitalocean.com/node-pool"] == "node-doks-system"
    assert node.node_ready()


def test_a_restricted_pod_runs(node, image):
    ref = image("pause")["ref"]
    node.kubectl("create", "namespace", "node-test", check=False)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pause", "namespace": "node-test"},
           "spec": {"automountServiceAccountToken": False, "containers": [
               {"name": "pause", "image": ref, "imagePullPolicy": "Never", "securityContext": RESTRICTED}]}}  # fmt: skip
    node.kubectl("apply", "-f", "-", stdin=json.dumps(pod))

    def ready():
        got = node.api("GET", "/api/v1/namespaces/node-test/pods/pause")
        return (
            got
            if any(
                c["type"] == "Ready" and c["status"] == "True" for c in got["status"].get("conditions", [])
            )
            else None
        )

    got = wait("pod node-test/pause Ready", ready, node, 120)
    assert got["status"]["podIP"].startswith("10.244.0.")
    node.kubectl("delete", "pod", "pause", "-n", "node-test", "--grace-period=1")
