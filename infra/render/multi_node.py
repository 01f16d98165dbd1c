"""A replica that spans nodes: one LeaderWorkerSet group per replica, and the fabric NIC attachments.

A layout with `nodes_per_replica` N > 1 (fabric pools only) runs one pod per node: the leader
(node rank 0) and N − 1 workers, as one group of a LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`,
LWS v0.10.0, api/leaderworkerset/v1/leaderworkerset_types.go at that tag):

- `spec.replicas` = the pool's nodes / N groups; `leaderWorkerTemplate.size` = N. Autoscaled (an
  autoscaling pool): the floor, min_nodes / N, and KEDA owns the count afterwards through the
  CRD's scale subresource (infra/render/autoscaling.py; Pulumi ignores `.spec.replicas`);
- `restartPolicy: RecreateGroupAfterStart`: a failed pod recreates its whole group (vLLM's ranks
  cannot rejoin a running replica) — but only once every pod of the group has started, so a slow
  first load (an image pull of tens of GB, weights read for half an hour) cannot loop the group
  the way `RecreateGroupOnPodRestart` does while a pod is still pending;
- `startupPolicy: LeaderCreated`: the workers start with the leader, not after it is Ready. The
  leader's API server only becomes healthy once every worker's engines have joined it, so
  `LeaderReady` would wait forever;
- env `LWS_LEADER_ADDRESS` and `LWS_WORKER_INDEX` (set by the LWS controller in every container)
  give the rendezvous address and the node rank; the kubelet expands `$(VAR)` in args from them.

The engine is vLLM's native multi-node serving, no Ray (`vllm_args.multi_node_args`): wide EP by
data parallelism over the nodes (`--data-parallel-size` over all, `--data-parallel-size-local`
per node, the leader's address and RPC port, `--headless` workers that start at rank
LWS_WORKER_INDEX × local ranks, MoRI EP all-to-all on AMD), or one TP group over the nodes
(`--nnodes`, `--node-rank`, `--master-addr`). Only the leader serves HTTP: workers carry
`app.kubernetes.io/name: vllm-worker`, so the model's Service (and so the router's registrar,
which reads its EndpointSlices), the gateway's InferencePool and the vLLM PodMonitor — all
selecting `app.kubernetes.io/name: vllm` — see leaders only; the PDB counts every engine pod.

Every pod requests the node's 8 fabric NICs next to its GPUs: `rdma/fabric0..7` (the RDMA shared
device plugin DOKS installs on fabric pools) and the Multus annotation
`k8s.v1.cni.cncf.io/networks` naming one host-device NetworkAttachmentDefinition per NIC
(`render_fabric_attachments`), plus `IPC_LOCK` for RDMA memory registration.
"""

from __future__ import annotations

import copy
import json

from infra.catalog.vllm_flags import unknown_flags, vllm_flags
from infra.errors import Problem, UserError
from infra.render.model_service import (
    PULUMI_TIMEOUT_ANNOTATION,
    ModelServiceSpec,
    deployment_name,
    deployment_timeout_seconds,
    pod_labels,
    render_deployment,
    serve_args,
)
from infra.render.vllm_args import DP_START_RANK_FLAG

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
NAD_API_VERSION = "k8s.cni.cncf.io/v1"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
FABRIC_NICS = tuple(f"fabric{i}" for i in range(8))  # DOKS fabric nodes: one NIC per GPU
RDMA_RESOURCES = tuple(f"rdma/{nic}" for nic in FABRIC_NICS)
NODE_ROLE_LABEL = "inference-platform/node-role"
WORKER_APP_NAME = "vllm-worker"  # not `vllm`: nothing that selects serving engines selects a worker
RESTART_POLICY = "RecreateGroupAfterStart"
STARTUP_POLICY = "LeaderCreated"


def worker_command(spec: ModelServiceSpec) -> list[str]:
    """`vllm serve "$@"` plus, with ep, the worker's first DP rank (LWS_WORKER_INDEX × local ranks):
    the container's args stay the checked flag list, passed to the shell as its positional ones."""
    lay = spec.layout
    script = 'exec vllm serve "$@"'
    if lay.ep:
        local = lay.dp // lay.nodes_per_replica
        script += f' {DP_START_RANK_FLAG} "$((LWS_WORKER_INDEX * {local}))"'
    return ["/bin/sh", "-c", script, "vllm-serve"]


def attach_fabric_nics(pod: dict) -> dict:
    """Give a pod template (in place) all of its node's fabric NICs: the Multus annotation naming
    one host-device NetworkAttachmentDefinition per NIC, `rdma/fabric0..7` in the engine
    container's requests and limits, and `IPC_LOCK` for RDMA memory registration. Only for a pod
    that is the one pod on its node (host-device moves each NIC into one pod's netns): a multi-node
    replica's leader and workers, a spanning P/D unit's whole-node engines (render/pd_service.py)."""
    pod["metadata"].setdefault("annotations", {})[NETWORKS_ANNOTATION] = ",".join(FABRIC_NICS)
    container = pod["spec"]["containers"][0]
    for key in ("requests", "limits"):
        container["resources"][key].update({r: "1" for r in RDMA_RESOURCES})
    caps = container.setdefault("securityContext", {}).setdefault("capabilities", {}).setdefault("add", [])
    if "IPC_LOCK" not in caps:
        caps.append("IPC_LOCK")
    return pod


def _fabric_pod(template: dict, role: str, app_name: str) -> dict:
    """A pod template of the group: role label, Multus networks, RDMA NICs, IPC_LOCK."""
    pod = copy.deepcopy(template)
    labels = pod["metadata"]["labels"]
    labels["app.kubernetes.io/name"] = app_name
    labels[NODE_ROLE_LABEL] = role
    # One pod per node holds all its GPUs; spreading is implied, and a selector on the serving
    # label would not match the workers.
    pod["spec"].pop("topologySpreadConstraints", None)
    return attach_fabric_nics(pod)


def validate_multi_node(spec: ModelServiceSpec, path: str) -> None:
    problems = []
    lay = spec.layout
    if not spec.gpu.fabric:
        problems.append(Problem(f"{path}.layout", f"{lay.name} spans nodes; {spec.gpu.slug} has no RDMA fabric"))
    if spec.gpu.gpus != len(FABRIC_NICS):
        problems.append(Problem(f"{path}.layout", f"{lay.name}: fabric nodes carry {len(FABRIC_NICS)} GPUs and NICs; {spec.gpu.slug} has {spec.gpu.gpus}"))
    if spec.nodes_min % lay.nodes_per_replica or spec.nodes_max % lay.nodes_per_replica:
        problems.append(
            Problem(f"{path}.pool", f"{spec.nodes_min}..{spec.nodes_max} nodes are not whole replicas of {lay.nodes_per_replica} nodes")
        )
    for flag in unknown_flags([DP_START_RANK_FLAG]):
        problems.append(Problem(f"{path}.layout", f"{flag} is not a `vllm serve` option in vLLM {vllm_flags()['vllm_version']}"))
    if problems:
        raise UserError(problems)


def render_leader_worker_set(spec: ModelServiceSpec) -> dict:
    """The LeaderWorkerSet of a model whose replica spans `nodes_per_replica` nodes."""
    path = f"models[{spec.name}]"
    validate_multi_node(spec, path)
    lay = spec.layout
    deployment = render_deployment(spec, node_role="leader")  # one node's pod: probes, caches, GPUs and security as for any engine
    template = deployment["spec"]["template"]

    leader = _fabric_pod(template, "leader", "vllm")
    leader["spec"]["containers"][0]["args"] = serve_args(spec, node_role="leader")

    worker = _fabric_pod(template, "worker", WORKER_APP_NAME)
    container = worker["spec"]["containers"][0]
    container["command"] = worker_command(spec)
    container["args"] = serve_args(spec, node_role="worker")
    # A headless worker serves no HTTP: no API port, no probes on it (the group restarts on a
    # failed worker through the leader, whose /health fails when a rank dies).
    for key in ("ports", "startupProbe", "readinessProbe", "livenessProbe"):
        container.pop(key, None)

    labels = pod_labels(spec)
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": deployment_name(spec),
            "namespace": spec.namespace,
            "labels": labels,
            "annotations": {PULUMI_TIMEOUT_ANNOTATION: str(deployment_timeout_seconds(spec))},
        },
        "spec": {
            "replicas": spec.replicas,
            "startupPolicy": STARTUP_POLICY,
            "rolloutStrategy": {
                "type": "RollingUpdate",
                # No spare nodes to surge into: one group at a time.
                "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0},
            },
            "leaderWorkerTemplate": {
                "size": lay.nodes_per_replica,
                "restartPolicy": RESTART_POLICY,
                "leaderTemplate": leader,
                "workerTemplate": worker,
            },
        },
    }


def nad_config(nic: str) -> str:
    """The CNI config of one fabric NIC: the host-device plugin moves the NIC into the pod."""
    return json.dumps({"cniVersion": "0.3.1", "name": nic, "type": "host-device", "device": nic}, sort_keys=True)


def render_fabric_attachments(namespace: str, labels: dict[str, str]) -> list[dict]:
    """One NetworkAttachmentDefinition per fabric NIC in the engines' namespace (the pod annotation
    names them without a namespace, so Multus looks them up in the pod's own)."""
    return [
        {
            "apiVersion": NAD_API_VERSION,
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": nic, "namespace": namespace, "labels": dict(labels)},
            "spec": {"config": nad_config(nic)},
        }
        for nic in FABRIC_NICS
    ]


__all__ = [
    "FABRIC_NICS",
    "attach_fabric_nics",
    "LWS_API_VERSION",
    "NETWORKS_ANNOTATION",
    "RDMA_RESOURCES",
    "render_fabric_attachments",
    "render_leader_worker_set",
]
