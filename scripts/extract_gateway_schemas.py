#!/usr/bin/env python3
"""Write the field lists of the gateway's custom resources, for tests/render/test_gateway_schemas.py.

For each CRD of the pinned versions (infra/catalog/versions.py) this reads the CRD file from a
local git checkout of its repository at the pinned tag and writes the structure of the served
version's OpenAPI schema — types, properties, required keys, enums, bounds, patterns and list
sizes — to tests/fixtures/gateway_schemas/<kind>.json, with the repository, path, tag and commit
it came from. Descriptions, defaults and CEL rules are dropped: what is kept is the field list the
API server checks an object against (unknown fields are refused, as with
`kubectl apply --validate=strict`), not the upstream text.

    scripts/extract_gateway_schemas.py --repo kubernetes-sigs/gateway-api=/path/to/checkout ...

Nothing is fetched; each `--repo owner/name=DIR` must be a git checkout that has the tag.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "gateway_schemas"

# kind → (repository, tag, path, served version)
SOURCES: dict[str, tuple[str, str, str, str]] = {
    "InferencePool": (
        "kubernetes-sigs/gateway-api-inference-extension",
        "v1.6.0",
        "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml",
        "v1",
    ),
    "Gateway": ("kubernetes-sigs/gateway-api", "v1.6.1", "config/crd/standard/gateway.networking.k8s.io_gateways.yaml", "v1"),
    "HTTPRoute": ("kubernetes-sigs/gateway-api", "v1.6.1", "config/crd/standard/gateway.networking.k8s.io_httproutes.yaml", "v1"),
    "InferenceObjective": ("llm-d/llm-d-router", "v0.10.0", "config/crd/bases/llm-d.ai_inferenceobjectives.yaml", "v1alpha2"),
    "AgentgatewayPolicy": (
        "agentgateway/agentgateway",
        "v1.4.1",
        "controller/install/helm/agentgateway-crds/templates/agentgateway.dev_agentgatewaypolicies.yaml",
        "v1alpha1",
    ),
    "AgentgatewayParameters": (
        "agentgateway/agentgateway",
        "v1.4.1",
        "controller/install/helm/agentgateway-crds/templates/agentgateway.dev_agentgatewayparameters.yaml",
        "v1alpha1",
    ),
    # Multi-node replicas (fabric pools): the LeaderWorkerSet and the Multus attachment of each fabric NIC.
    "LeaderWorkerSet": ("kubernetes-sigs/lws", "v0.10.0", "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml", "v1"),
    "NetworkAttachmentDefinition": ("k8snetworkplumbingwg/multus-cni", "v4.3.0", "deployments/multus-daemonset-thick.yml", "v1"),
    # Replica autoscaling: KEDA's ScaledObject (chart 2.18.3 installs KEDA v2.18.3).
    "ScaledObject": ("kedacore/keda", "v2.18.3", "config/crd/bases/keda.sh_scaledobjects.yaml", "v1alpha1"),
}

# Schema keywords that carry structure; everything else (description, default, example,
# x-kubernetes-validations, x-kubernetes-list-*) is dropped.
KEEP = {
    "type", "properties", "required", "enum", "items", "additionalProperties", "minItems", "maxItems",
    "minLength", "maxLength", "minimum", "maximum", "pattern", "format", "minProperties", "maxProperties",
    "anyOf", "oneOf", "allOf", "not", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string",
    "nullable",
}


def structure(node):
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "properties":
                out[key] = {name: structure(v) for name, v in value.items()}
            elif key in KEEP:
                out[key] = structure(value)
        return out
    if isinstance(node, list):
        return [structure(v) for v in node]
    return node


def extract(kind: str, checkout: Path) -> dict:
    repo, tag, path, version = SOURCES[kind]
    text = subprocess.run(["git", "-C", str(checkout), "show", f"{tag}:{path}"], check=True, capture_output=True, text=True).stdout
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", f"{tag}^{{commit}}"], check=True, capture_output=True, text=True).stdout.strip()
    docs = [d for d in yaml.safe_load_all(text) if d and d.get("kind") == "CustomResourceDefinition"]
    (crd,) = [d for d in docs if d["spec"]["names"]["kind"] == kind]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return {
        "source": {"repository": repo, "tag": tag, "commit": commit, "path": path},
        "apiVersion": f"{crd['spec']['group']}/{version}",
        "kind": kind,
        "scope": crd["spec"]["scope"],
        "schema": structure(served["schema"]["openAPIV3Schema"]),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", default=[], help="owner/name=DIR of a local git checkout")
    args = parser.parse_args(argv)
    checkouts = dict(item.split("=", 1) for item in args.repo)
    OUT.mkdir(parents=True, exist_ok=True)
    for kind, (repo, *_rest) in SOURCES.items():
        if repo not in checkouts:
            print(f"skipping {kind}: no --repo {repo}=DIR", file=sys.stderr)
            continue
        data = extract(kind, Path(checkouts[repo]))
        (OUT / f"{kind}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{kind}: {data['source']['repository']} {data['source']['tag']} {data['source']['path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
