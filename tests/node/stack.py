"""The node test stack and what the node tests change in its rendered objects (every change listed).

The stack: dev (one model, Qwen/Qwen3-8B on one single-GPU pool, weights downloaded per pod) with the
front door of prod (router kind `session`: vllm-router, its registrar and the client proxy), one
router replica. It is rendered by `infra plan node --out DIR`, the same command an operator runs,
and its objects are applied as rendered except for SWAPS:

- images: none. The stand-in images carry the rendered names (tests/node/images.py).
- GPUs: `amd.com/gpu` leaves every engine container's requests and limits (no GPU here).
- engine size: the engine pod's CPU and memory requests and limits are cut to this 2-core node
  (18 CPUs and 216 GiB rendered for an MI300X node).
- placement: the engine's nodeSelector names the GPU pool (`mi300x-1`); it is pointed at the one node,
  which carries the system pool's label (the router's selector, unchanged).
- Secret values: the plan leaves them to Pulumi (`stringData: {}`, annotated redacted); the test
  fills them through the project's own functions (infra/render/client_proxy_keys.py).

Not applied: NetworkPolicies and CiliumNetworkPolicies (no enforcing CNI here: the bridge plugin
ignores them, docs/testing.md), the GPU DaemonSets (image pre-pull, node tuning: GPU pools only).
"""

from __future__ import annotations

import copy
import secrets
import subprocess
import sys
from pathlib import Path

import yaml

from infra.render import client_proxy_keys
from tests.conftest import ROOT, make_project
from tests.node import images

STACK = "node"
SYSTEM_POOL_LABEL = "node-doks-system"  # `<stack>-doks-system`: the label the router selects
ENGINE_POOL = "mi300x-1"
ENGINE_CPU = "500m"
ENGINE_MEMORY = "6Gi"
ENGINE_SECRET = "qwen3-8b-engine-key"
APPLIED_KINDS = ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Secret", "Service", "Deployment",
                 "PodDisruptionBudget")  # fmt: skip
CLIENT_KEY_NAME = "node-test"


def stack_doc() -> dict:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    config = doc["config"]
    config["inference-platform:router"] = {"kind": "session", "session_header": "x-session-id", "replicas": 1}
    assert config["inference-platform:models"][0]["source"] == images.MODEL_SOURCE, "the engine image serves this source"
    return doc


def render(workdir: Path) -> list[dict]:
    """`infra plan node --out DIR` (the console script's module), and every object it wrote."""
    root = make_project(workdir / "project")
    (root / "stacks" / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(stack_doc()))
    out = workdir / "rendered"
    proc = subprocess.run([sys.executable, "-m", "infra.cli", "plan", STACK, "--root", str(root), "--out", str(out), "--quiet"],
                          capture_output=True, text=True, check=False, cwd=ROOT)  # fmt: skip
    if proc.returncode:
        raise RuntimeError(f"infra plan {STACK} failed:\n{proc.stdout}\n{proc.stderr}")
    return [yaml.safe_load(p.read_text()) for p in sorted(out.glob("*.yaml"))]


def pick(objects: list[dict], kind: str, name: str) -> dict:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def keys() -> dict[str, str]:
    return {"client": secrets.token_hex(24), "engine": secrets.token_hex(24)}


def for_node(objects: list[dict], key: dict[str, str]) -> tuple[list[dict], list[str]]:
    """The objects the node applies, with SWAPS made; returns them and one line per change made."""
    changes: list[str] = []
    out = []
    for obj in objects:
        if obj["kind"] not in APPLIED_KINDS or obj["metadata"].get("namespace") == "kube-system":
            continue
        obj = copy.deepcopy(obj)
        name = obj["metadata"]["name"]
        if obj["kind"] == "Secret":
            _fill_secret(obj, key, changes)
        if obj["kind"] == "Deployment" and obj["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/name") == "vllm":
            _engine_for_node(obj["spec"]["template"]["spec"], name, changes)
        out.append(obj)
    return out, changes


def _fill_secret(obj: dict, key: dict[str, str], changes: list[str]) -> None:
    name = obj["metadata"]["name"]
    values = {
        client_proxy_keys.CLIENT_KEYS_SECRET: {client_proxy_keys.CLIENT_KEYS_FILE: client_proxy_keys.client_keys_map({CLIENT_KEY_NAME: key["client"]})},
        client_proxy_keys.ENGINE_KEY_SECRET: {client_proxy_keys.ENGINE_KEY_FILE: client_proxy_keys.engine_key_map(key["engine"])},
        ENGINE_SECRET: {"api-key": key["engine"]},
    }.get(name)  # fmt: skip
    if values is None:
        raise AssertionError(f"Secret {name}: the node test does not know its values")
    assert obj.get("stringData") in ({}, None) and not obj.get("data"), f"Secret {name} is rendered with values"
    obj["stringData"] = values
    changes.append(f"Secret {name}: values filled ({', '.join(values)}); the plan leaves them to Pulumi")


def _engine_for_node(pod: dict, name: str, changes: list[str]) -> None:
    for container in pod.get("initContainers", []) + pod["containers"]:
        resources = container.get("resources", {})
        for part in ("requests", "limits"):
            values = resources.get(part, {})
            if values.pop("amd.com/gpu", None) is not None:
                changes.append(f"Deployment {name} container {container['name']}: {part} amd.com/gpu removed")
            if "cpu" in values:
                changes.append(f"Deployment {name} container {container['name']}: {part} cpu {values['cpu']} -> {ENGINE_CPU}")
                values["cpu"] = ENGINE_CPU
            memory = values.get("memory", "")
            if memory.endswith("Gi") and float(memory[:-2]) > float(ENGINE_MEMORY[:-2]):  # sized for a GPU node
                changes.append(f"Deployment {name} container {container['name']}: {part} memory {memory} -> {ENGINE_MEMORY}")
                values["memory"] = ENGINE_MEMORY
    selector = pod.get("nodeSelector", {})
    if selector.get("doks.digitalocean.com/node-pool") == ENGINE_POOL:
        selector["doks.digitalocean.com/node-pool"] = SYSTEM_POOL_LABEL
        changes.append(f"Deployment {name}: nodeSelector node-pool {ENGINE_POOL} -> {SYSTEM_POOL_LABEL} (one node)")
