"""The offline plan: every stack plans, deterministically, with secrets redacted; diffs catch danger."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

from infra.offline import SECRET_MARKER, build_plan
from infra.plandiff import diff_plans, render_markdown
from tests.conftest import ROOT, STACKS, plan_of

CLUSTER = "digitalocean:index/kubernetesCluster:KubernetesCluster"
POOL = "digitalocean:index/kubernetesNodePool:KubernetesNodePool"
VPC = "digitalocean:index/vpc:Vpc"


def _res(plan, type_, name=None):
    found = [r for r in plan.resources if r["type"] == type_ and (name is None or r["name"] == name)]
    assert found, f"no {type_} {name or ''} in plan"
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_plans(stack):
    plan = plan_of(stack)
    assert plan.stack == stack and plan.project == "inference-platform"
    assert _res(plan, CLUSTER) and _res(plan, VPC) and _res(plan, POOL)
    assert plan.models and all(m["layout"]["name"] for m in plan.models)
    assert plan.cost["usd_per_hour_min"] > 0


@pytest.mark.parametrize("stack", STACKS)
def test_plan_is_byte_identical_across_runs(stack):
    assert build_plan(stack, ROOT).to_json() == plan_of(stack).to_json()


def test_plan_records_options():
    plan = plan_of("prod")
    cluster = _res(plan, CLUSTER)[0]
    assert cluster["inputs"]["ha"] is True
    assert cluster["options"]["protect"] is True
    autoscaled = _res(plan, POOL, "prod-pool-mi325x")[0]
    assert autoscaled["inputs"]["autoScale"] is True
    assert autoscaled["options"]["ignoreChanges"] == ["nodeCount"]
    provider = _res(plan, "pulumi:providers:kubernetes")[0]
    assert provider["inputs"]["clusterIdentifier"] == "prod-doks-id"
    assert "deleteUnreachable" not in provider["inputs"] or provider["inputs"]["deleteUnreachable"] in (False, "false")
    assert provider["inputs"]["kubeconfig"] == SECRET_MARKER


def test_dev_is_cheap_and_unprotected():
    plan = plan_of("dev")
    assert not any(r["options"]["protect"] for r in plan.resources)
    assert _res(plan, CLUSTER)[0]["inputs"]["ha"] is False
    assert plan.cost["usd_per_hour_max"] < 3.0  # one MI300X at $1.99/h plus one small system node


def test_no_secret_value_in_plan(tmp_path):
    """Secrets set in the stack file (as `secure:`) never show up: only the redaction marker."""
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    sentinel = "v1:SENTINEL-CIPHERTEXT-should-never-appear"
    for key in ("digitalocean:token", "inference-platform:grafana_admin_password",
                "inference-platform:huggingface_token", "inference-platform:api_key"):
        doc["config"][key] = {"secure": sentinel}
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.prod.yaml").write_text(yaml.safe_dump(doc))
    plan = build_plan("prod", tmp_path)
    text = plan.to_json()
    assert "SENTINEL" not in text
    assert plan.summary["secrets_to_set"] == []


def _mutated_plan(tmp_path, stack, mutate):
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    mutate(doc["config"])
    (tmp_path / "stacks").mkdir(exist_ok=True)
    (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    return build_plan(stack, tmp_path).to_dict()


def test_diff_detects_added_model(tmp_path):
    def add(config):
        config["inference-platform:gpu_pools"].append({"name": "mi300x-b", "size": "gpu-mi300x8-1536gb", "nodes": 1})
        config["inference-platform:models"].append(
            {"name": "llama70b", "source": "meta-llama/Llama-3.3-70B-Instruct", "pool": "mi300x-b", "layout": "auto",
             "workload": {"input_tokens": 1000, "output_tokens": 200}, "slo": {"ttft_p90_ms": 1000, "tpot_p90_ms": 40}}
        )

    new = _mutated_plan(tmp_path, "staging", add)
    diff = diff_plans(plan_of("staging").to_dict(), new)
    assert any(name == "llama70b" and before is None for name, before, _ in diff.model_changes)
    assert any(r["type"] == POOL for r in diff.added)
    assert not diff.dangerous()
    md = render_markdown(diff)
    assert "llama70b" in md and "CAUTION" not in md


def test_diff_detects_changed_layout(tmp_path):
    def explicit(config):
        config["inference-platform:models"][0]["layout"] = {"tp": 8, "ep": True, "replicas_per_node": 1}

    new = _mutated_plan(tmp_path, "staging", explicit)
    diff = diff_plans(plan_of("staging").to_dict(), new)
    changes = {name: (a, b) for name, a, b in diff.model_changes}
    assert changes["qwen3-235b"][1] == "tp8-ep-r1"
    assert "tp8-ep-r1" in render_markdown(diff)


@pytest.mark.parametrize(
    "what,mutate,resource_type,path",
    [
        ("cluster region", lambda c: c.__setitem__("inference-platform:region", "nyc2"), CLUSTER, "region"),
        ("default pool size", lambda c: c["inference-platform:cluster"]["system_pool"].__setitem__("size", "g-4vcpu-16gb"), CLUSTER, "nodePool.size"),
        ("GPU pool size", lambda c: c["inference-platform:gpu_pools"][1].__setitem__("size", "gpu-mi300x8-1536gb"), POOL, "size"),
        ("partition mode", lambda c: c["inference-platform:gpu_pools"][1].__setitem__("partition_mode", "AMD_PARTITION_MODE_DPX_NPS2"), POOL, "gpuPartitionMode"),
        ("VPC CIDR", lambda c: c["inference-platform:network"].__setitem__("vpc_cidr", "10.60.0.0/20"), VPC, "ipRange"),
    ],
)
def test_diff_flags_replacements(tmp_path, what, mutate, resource_type, path):
    old = plan_of("prod").to_dict()
    new = _mutated_plan(tmp_path, "prod", mutate)
    diff = diff_plans(old, new)
    hits = [c for c in diff.changed if c.key[0] == resource_type and path in c.replace_paths]
    assert hits, f"{what}: no replacement flagged; changed: {[(c.key, c.replace_paths) for c in diff.changed]}"
    if what == "cluster region":  # the NFS share moves with the region too
        assert [c for c in diff.changed if c.key[0] == "digitalocean:index/nfs:Nfs" and "region" in c.replace_paths]
    md = render_markdown(diff)
    assert "CAUTION" in md and "REPLACE" in md and path in md


def test_diff_of_identical_plans_is_empty():
    plan = plan_of("dev").to_dict()
    diff = diff_plans(plan, copy.deepcopy(plan))
    assert diff.empty
    assert "No changes" in render_markdown(diff)


def test_diff_flags_deleted_stateful_resource():
    old = plan_of("prod").to_dict()
    new = copy.deepcopy(old)
    new["resources"] = [r for r in new["resources"] if r["type"] != VPC]
    diff = diff_plans(old, new)
    assert any("DELETE" in line and "Vpc" in line for line in diff.dangerous())


def test_plan_cli_json_and_manifests(tmp_path):
    out_json = tmp_path / "plan.json"
    out_dir = tmp_path / "manifests"
    proc = subprocess.run([sys.executable, "-m", "infra.cli", "plan", "staging", "--json", str(out_json), "--out", str(out_dir)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    assert "Models:" in proc.stdout and "Cost:" in proc.stdout
    data = json.loads(out_json.read_text())
    assert {"stack", "project", "resources", "models", "cost"} <= data.keys()
    assert all({"type", "name", "parent", "inputs", "options"} <= r.keys() for r in data["resources"])


def test_diff_cli_between_files(tmp_path):
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    old = plan_of("prod").to_dict()
    new = copy.deepcopy(old)
    for r in new["resources"]:
        if r["type"] == CLUSTER:
            r["inputs"]["region"] = "nyc2"
    a.write_text(json.dumps(old))
    b.write_text(json.dumps(new))
    proc = subprocess.run([sys.executable, "-m", "infra.cli", "diff", str(a), str(b), "--fail-on-replace"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 3
    assert "REPLACE" in proc.stdout and "region" in proc.stdout


def test_diff_against_git_ref(tmp_path):
    """`infra diff STACK --base REF` plans the base revision in a worktree; HEAD vs HEAD is empty."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "infra", "components", "stacks"],
                           capture_output=True, text=True).stdout.strip()
    proc = subprocess.run([sys.executable, "-m", "infra.cli", "diff", "dev", "--base", "HEAD"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "Offline plan diff" in proc.stdout
    if not dirty:
        assert "No changes" in proc.stdout


def test_diff_unknown_ref_is_a_clear_error():
    proc = subprocess.run([sys.executable, "-m", "infra.cli", "diff", "dev", "--base", "no-such-ref-xyz"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert "no-such-ref-xyz" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("stack", STACKS)
def test_every_kubernetes_object_validates_against_1_33(stack):
    """What `infra plan --out` writes is what a platform engineer could `kubectl apply`."""
    import kubernetes_validate

    from infra.offline import kubernetes_objects

    objects = kubernetes_objects(plan_of(stack))
    assert objects
    checked = 0
    for obj in objects:
        if "." in obj["apiVersion"].split("/")[0] and not obj["apiVersion"].startswith(
            ("apps/", "batch/", "policy/", "rbac.authorization.k8s.io/", "networking.k8s.io/")
        ):
            continue  # custom resources (PodMonitor, PrometheusRule, DeviceConfig): no OpenAPI schema
        kubernetes_validate.validate(obj, "1.33", strict=True)
        checked += 1
    assert checked >= 4


def test_no_service_named_vllm_and_gpu_limits_match_layouts(plans):
    for stack, plan in plans.items():
        from infra.offline import kubernetes_objects

        objects = kubernetes_objects(plan)
        assert not [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "vllm"]
        layouts = {m["name"]: m["layout"] for m in plan.models}
        deployments = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["labels"].get("app.kubernetes.io/name") == "vllm"]
        assert len(deployments) == len(plan.models), stack
        for dep in deployments:
            model = dep["metadata"]["labels"]["inference-platform/model"]
            layout = layouts[model]
            container = dep["spec"]["template"]["spec"]["containers"][0]
            gpus = int(next(v for k, v in container["resources"]["limits"].items() if k.endswith("/gpu")))
            assert gpus == layout["tp"] * layout["dp"], (stack, model)
            pool = next(m["pool"] for m in plan.models if m["name"] == model)
            pool_min = next(p["min_nodes"] for p in plan.summary["pools"] if p["name"] == pool)
            pool_max = next(p["max_nodes"] for p in plan.summary["pools"] if p["name"] == pool)
            replicas = next(m["replicas"] for m in plan.models if m["name"] == model)
            target = dep["metadata"]["name"]
            scaled = [o for o in objects if o["kind"] == "ScaledObject" and o["spec"]["scaleTargetRef"]["name"] == target]
            if replicas["autoscaling"]:
                # KEDA owns the count after creation: the Deployment starts at the floor and
                # ignores later changes; the ScaledObject spans the pool.
                assert dep["spec"]["replicas"] == layout["replicas_per_node"] * pool_min
                options = next(
                    r["options"] for r in plan.resources
                    if r["type"] == "kubernetes:apps/v1:Deployment" and r["inputs"]["metadata"]["name"] == target
                )
                assert options["ignoreChanges"] == ["spec.replicas"], (stack, model)
                (so,) = scaled
                assert so["spec"]["minReplicaCount"] == layout["replicas_per_node"] * pool_min
                assert so["spec"]["maxReplicaCount"] == layout["replicas_per_node"] * pool_max
            else:
                assert not scaled
                assert dep["spec"]["replicas"] == layout["replicas_per_node"] * pool_min


def test_plan_out_writes_one_file_per_object(tmp_path):
    from infra.commands.plan import write_manifests
    from infra.offline import kubernetes_objects

    plan = plan_of("prod")
    written = write_manifests(plan, tmp_path)
    files = sorted(tmp_path.glob("*.yaml"))
    assert written == len(files) == len(kubernetes_objects(plan))
    assert all(yaml.safe_load(f.read_text())["kind"] for f in files)
    text = "".join(f.read_text() for f in files)
    assert "hunter2" not in text
