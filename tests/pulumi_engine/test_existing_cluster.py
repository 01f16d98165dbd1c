"""An existing-cluster stack (cluster.existing) deployed for real: the README's deploy commands with
the real Pulumi CLI and kubernetes provider against the control plane of tests/cluster, whose kwok
nodes carry the labels the stack's pools select and the GPUs of their size.

One stack, in order (each step needs the one before it): stack init and secrets → `infra doctor`
→ preview equal to `infra plan` → up (readiness waits satisfied) → up again with no change → no
secret in the backend's files → destroy leaves nothing → no plugin downloaded.

The test stack: dev, one small model on one single-GPU pool, the vLLM router as front door (plain
Deployments and ClusterIP Services), no weight cache (`model_cache.kind: none`), observability and
autoscaling off (dev's defaults; both install Helm charts, whose archives are not reachable here:
issue 31). The API key and the engine key are given as secrets, so no pulumi-random resource is
planned (pulumi-resource-random v4.21.4 is not served by the Go proxy).
"""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.cluster import nodes
from tests.cluster.harness import SYSTEM_NAMESPACES, Cluster
from tests.pulumi_engine.workspace import Workspace, encodings, plan_resources, preview_resources

STACK = "engine"
SYSTEM_POOL, GPU_POOL = "system", "gpu-mi300x"
API_KEY = "engine-test-api-key-0123456789abcdef"
ENGINE_KEY = "engine-test-engine-key-0123456789abcdef"
STACK_FILE = textwrap.dedent(f"""\
    config:
      inference-platform:environment: dev
      inference-platform:region: tor1
      inference-platform:cluster:
        existing:
          system_node_selector: {{doks.digitalocean.com/node-pool: {SYSTEM_POOL}}}
      inference-platform:gpu_pools:
        - name: mi300x-1
          size: gpu-mi300x1-192gb
          nodes: 1
          node_selector: {{doks.digitalocean.com/node-pool: {GPU_POOL}}}
      inference-platform:model_cache:
        kind: none
      inference-platform:models:
        - name: qwen3-8b
          source: Qwen/Qwen3-8B
          pool: mi300x-1
          layout: auto
          workload: {{input_tokens: 1000, output_tokens: 200, peak_rps: 2}}
          slo: {{ttft_p90_ms: 1000, tpot_p90_ms: 40}}
      inference-platform:router:
        kind: round-robin
    """)


class Deployment:
    """What the steps share: the workspace, the cluster, the kubeconfig and which steps passed."""

    def __init__(self, ws: Workspace, cluster: Cluster, kubeconfig, secrets: dict[str, str]):
        self.ws, self.cluster, self.kubeconfig, self.secrets = ws, cluster, kubeconfig, secrets
        self.passed: set[str] = set()
        self.state: dict = {}
        self.seconds: dict[str, float] = {}

    def need(self, step: str) -> None:
        if step not in self.passed:
            pytest.skip(f"needs step {step!r}, which did not pass")

    def timed(self, step: str, run) -> None:
        self.seconds[step] = self.seconds.get(step, 0.0) + run.seconds


@pytest.fixture(scope="module")
def deployment(engine_toolchain, control_plane, engine_kubeconfig, tmp_path_factory):
    from tests.pulumi_engine import conftest

    cluster = Cluster.connect(control_plane)
    cluster.preinstall()  # the Gateway API and Cilium CRDs every DOKS 1.33 cluster has
    cluster.add_nodes([
        nodes.system_pool(SYSTEM_POOL, "s-4vcpu-8gb", 2, {}, []),
        nodes.gpu_pool(GPU_POOL, "gpu-mi300x1-192gb", 1, {}, []),
    ])  # fmt: skip
    ws = Workspace.create(tmp_path_factory.mktemp("existing"), engine_toolchain)
    conftest._STATE["workspace"] = ws
    (ws.root / "stacks" / f"Pulumi.{STACK}.yaml").write_text(STACK_FILE)
    path, secrets = engine_kubeconfig
    d = Deployment(ws, cluster, path, {**secrets, "api_key": API_KEY, "engine_key": ENGINE_KEY})
    yield d
    print("\nengine steps (s): " + ", ".join(f"{k} {v:.0f}" for k, v in d.seconds.items()))


def test_1_login_init_and_secrets(deployment):
    d, ws = deployment, deployment.ws
    for run in (ws.login(),
                ws.pulumi("stack", "init", STACK, "--secrets-provider", "passphrase"),
                ws.pulumi("config", "set", "--secret", "kubeconfig", stdin=d.kubeconfig.read_text()),
                ws.pulumi("config", "set", "--secret", "api_key", API_KEY),
                ws.pulumi("config", "set", "--secret", "engine_key", ENGINE_KEY)):  # fmt: skip
        d.timed("init", run)
    stack_file = (ws.root / "stacks" / f"Pulumi.{STACK}.yaml").read_text()
    assert "encryptionsalt:" in stack_file and "secure:" in stack_file
    leaked = [name for name, value in d.secrets.items() if any(e in stack_file for e in encodings(value))]
    assert not leaked, f"in the stack file unencrypted: {leaked}"
    d.passed.add("init")


def test_2_doctor_passes(deployment):
    d, ws = deployment, deployment.ws
    d.need("init")
    ws.dev_sh_ready()
    run = ws.run("./dev.sh", "infra", "doctor", STACK, "--kubeconfig", str(d.kubeconfig), timeout=600)
    d.timed("doctor", run)
    d.passed.add("doctor")


def test_3_preview_equals_the_plan(deployment):
    d, ws = deployment, deployment.ws
    d.need("init")
    preview = ws.pulumi("preview", "--json")
    d.timed("preview", preview)
    doc = json.loads(preview.stdout)
    errors = [m["message"] for m in doc.get("diagnostics", []) if m.get("severity") == "error"]
    assert not errors, errors
    plan_file = ws.root.parent / "plan.json"
    ws.run(".venv/bin/infra", "plan", STACK, "--json", str(plan_file))
    plan = plan_resources(json.loads(plan_file.read_text()))
    real = preview_resources(preview.stdout)
    assert not [t for t, _ in plan if t.startswith(("digitalocean:", "random:"))], "an existing-cluster stack plans no DO or random resource"
    only_plan = sorted(set(plan) - set(real))
    only_real = sorted(set(real) - set(plan))
    assert real == plan, f"only in infra plan: {only_plan}\nonly in pulumi preview: {only_real}"
    d.state["resource_count"] = len(real)
    d.passed.add("preview")


def test_3_preview_with_the_policy_pack(deployment):
    """The README's `pulumi preview --diff --policy-pack policy` (CI passes policy/config.json):
    the CrossGuard pack runs as a Python plugin through the language host, all policies pass."""
    d, ws = deployment, deployment.ws
    d.need("preview")
    venv = ws.root / "policy" / "venv"
    if not venv.exists():
        venv.symlink_to(ws.root / ".venv")  # the pack's runtime: pulumi and pulumi-policy, both in .venv
    run = ws.pulumi("preview", "--diff", "--policy-pack", "policy", "--policy-pack-config", "policy/config.json")
    d.timed("preview with policies", run)
    assert "inference-platform-guardrails" in run.output, run.output[-3000:]


def test_4_up_creates_everything_and_waits_for_readiness(deployment):
    d, ws = deployment, deployment.ws
    d.need("preview")
    run = ws.pulumi("up", "--yes", "--skip-preview", timeout=1800)
    d.timed("up", run)
    d.passed.add("up")  # later steps (destroy above all) run even if a check below fails
    state = json.loads(ws.pulumi("stack", "export", "--show-secrets=false").stdout)
    resources = state["deployment"]["resources"]
    d.state["resources"] = resources
    assert not state["deployment"].get("pending_operations")
    custom = [r for r in resources if r.get("custom") and not r["type"].startswith("pulumi:providers:")]
    assert custom and all(r["type"].startswith("kubernetes:") for r in custom), sorted({r["type"] for r in custom})
    missing = [f"{r['type']} {r['id']}" for r in custom if not _live(d.cluster, r)]
    assert not missing, f"in the state but not in the API server: {missing}"
    pods = d.cluster.core.list_pod_for_all_namespaces().items
    not_ready = [f"{p.metadata.namespace}/{p.metadata.name} {p.status.phase}" for p in pods
                 if p.metadata.namespace not in SYSTEM_NAMESPACES and p.status.phase not in ("Running", "Succeeded")]  # fmt: skip
    assert not not_ready, not_ready


def test_5_second_up_changes_nothing(deployment):
    d, ws = deployment, deployment.ws
    d.need("up")
    run = ws.pulumi("up", "--yes", "--expect-no-changes", "--diff", "--skip-preview", check=False, timeout=1800)
    d.timed("up again", run)
    assert run.returncode == 0, "the second `pulumi up` changed something:\n" + run.output[-6000:]


def test_6_no_secret_in_the_backend(deployment):
    d, ws = deployment, deployment.ws
    d.need("up")
    files = ws.backend_files()
    kinds = {p.relative_to(ws.backend).parts[1] for p in files if len(p.relative_to(ws.backend).parts) > 1}
    assert "stacks" in kinds and "history" in kinds, kinds
    found = [f"{name} in {p.relative_to(ws.backend)}" for p in files for name, value in d.secrets.items()
             if any(e in p.read_text(errors="replace") for e in encodings(value))]  # fmt: skip
    assert not found, found


def test_7_destroy_leaves_nothing(deployment):
    d, ws = deployment, deployment.ws
    d.need("up")
    run = ws.pulumi("destroy", "--yes", "--skip-preview", timeout=1800)
    d.timed("destroy", run)
    left = [f"{r['type']} {r['id']}" for r in d.state.get("resources", [])
            if r.get("custom") and r["type"].startswith("kubernetes:") and _live(d.cluster, r)]  # fmt: skip
    assert not left, f"left in the API server: {left}"
    namespaces = [n for n in d.cluster.core.list_namespace().items if n.metadata.name not in SYSTEM_NAMESPACES]
    assert not namespaces, [f"{n.metadata.name} {n.status.phase} finalizers={n.spec.finalizers}" for n in namespaces]
    pods = [p.metadata.name for p in d.cluster.core.list_pod_for_all_namespaces().items
            if p.metadata.namespace not in SYSTEM_NAMESPACES]  # fmt: skip
    assert not pods, pods
    state = json.loads(ws.pulumi("stack", "export").stdout)
    assert [r["type"] for r in state["deployment"].get("resources") or []] in ([], ["pulumi:pulumi:Stack"])


def test_8_nothing_downloaded(deployment):
    assert deployment.ws.plugins() == []


def _live(cluster: Cluster, res: dict) -> bool:
    """Whether the object a state resource names still exists (with its finalizers, a deleted
    object that is stuck counts as existing)."""
    from kubernetes.client.exceptions import ApiException

    outputs = res.get("outputs") or {}
    meta = outputs.get("metadata") or {}
    obj = {"apiVersion": outputs.get("apiVersion"), "kind": outputs.get("kind"), "metadata": meta}
    try:
        api = cluster.applier.resource(obj)
        kwargs = {"namespace": meta.get("namespace")} if api.namespaced else {}
        api.get(name=meta["name"], **kwargs)
        return True
    except ApiException as err:
        if err.status == 404:
            return False
        raise
