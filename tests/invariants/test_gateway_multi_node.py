"""The gateway front door with a model whose replicas span nodes (found by the issue-29 property
test, whose multi-node × gateway draws were all refused with "spans nodes: its pods are rendered as
a LeaderWorkerSet leader or worker": the gateway read the engine labels by rendering a Deployment,
which a replica over nodes does not have)."""

from __future__ import annotations

import copy

import yaml

from infra.offline import build_plan, kubernetes_objects
from tests.conftest import ROOT, make_project

NS = "inference-platform:"
FABRIC = "gpu-mi325x8-2048gb-fabric-contracted"


def test_the_pool_of_a_model_over_nodes_selects_its_leaders_only(tmp_path):
    doc = copy.deepcopy(yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text()))
    cfg = doc["config"]
    for pool in cfg[NS + "gpu_pools"][:2]:
        pool.update({"size": FABRIC, "fabric": True})
    cfg[NS + "models"][0]["layout"] = {"tp": 8, "ep": True, "dp": 2, "nodes_per_replica": 2}
    cfg[NS + "router"] = {"kind": "gateway", "replicas": 1}
    root = make_project(tmp_path)
    (root / "stacks" / "Pulumi.gw.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))

    objects = kubernetes_objects(build_plan("gw", root))  # the invariants hold, or this raises

    model = cfg[NS + "models"][0]["name"]
    pool = next(o for o in objects if o["kind"] == "InferencePool" and o["metadata"]["name"] == model)
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    template = lws["spec"]["leaderWorkerTemplate"]
    selector = pool["spec"]["selector"]["matchLabels"]
    leader, worker = template["leaderTemplate"]["metadata"]["labels"], template["workerTemplate"]["metadata"]["labels"]
    assert all(leader.get(k) == v for k, v in selector.items())
    assert not all(worker.get(k) == v for k, v in selector.items())  # workers serve no HTTP
