"""The offline plan: every stack plans, deterministically, with secrets redacted; diffs catch danger."""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess

import pytest
import yaml

from infra.offline import SECRET_MARKER, build_plan
from infra.plandiff import diff_plans, render_markdown
from tests.conftest import ROOT, STACKS, make_project, plan_of, run_cli

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
    assert autoscaled["options"]["ignoreChanges"] == ["gpuPartitionMode", "nodeCount"]
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
    make_project(tmp_path)
    (tmp_path / "stacks" / "Pulumi.prod.yaml").write_text(yaml.safe_dump(doc))
    plan = build_plan("prod", tmp_path)
    text = plan.to_json()
    assert "SENTINEL" not in text
    assert plan.summary["secrets_to_set"] == []


def _mutated_plan(tmp_path, stack, mutate):
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    mutate(doc["config"])
    make_project(tmp_path)
    (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    return build_plan(stack, tmp_path).to_dict()


def test_diff_detects_added_model(tmp_path):
    # Not a gated repo: a gated one needs huggingface_token, which every model pod then reads (its
    # prefetch Job changes), a change of its own (test_gated_model_requires_the_token).
    def add(config):
        config["inference-platform:gpu_pools"].append({"name": "mi300x-b", "size": "gpu-mi300x8-1536gb", "nodes": 1})
        config["inference-platform:models"].append(
            {"name": "llama70b", "source": "NousResearch/Hermes-3-Llama-3.1-70B", "pool": "mi300x-b", "layout": "auto",
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
        ("partition mode", lambda c: c["inference-platform:gpu_pools"][1].__setitem__("partition_mode", "AMD_PARTITION_MODE_SPX_NPS1"), POOL, "gpuPartitionMode"),
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


def test_plan_cli_json_and_manifests(tmp_path, capsys):
    out_json = tmp_path / "plan.json"
    out_dir = tmp_path / "manifests"
    code, out, err = run_cli(["plan", "staging", "--json", str(out_json), "--out", str(out_dir)], capsys)
    assert code == 0, err
    assert "Models:" in out and "Cost:" in out and "GPU pools:" in out
    assert out_json.read_text() == plan_of("staging").to_json()
    listed = [ln for ln in (out_dir / ".infra-manifests").read_text().splitlines() if not ln.startswith("#")]
    assert listed and sorted(p.name for p in out_dir.glob("*.yaml")) == sorted(listed)


def test_diff_cli_between_files(tmp_path, capsys):
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    old = plan_of("prod").to_dict()
    new = copy.deepcopy(old)
    for r in new["resources"]:
        if r["type"] == CLUSTER:
            r["inputs"]["region"] = "nyc2"
    a.write_text(json.dumps(old))
    b.write_text(json.dumps(new))
    code, out, _ = run_cli(["diff", str(a), str(b), "--fail-on-replace"], capsys)
    assert code == 3
    assert "REPLACE" in out and "region" in out


def test_diff_against_git_ref(tmp_path, capsys, monkeypatch):
    """`infra diff STACK --base REF` plans the base revision in a worktree; HEAD vs HEAD is empty."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "infra", "components", "stacks"],
                           capture_output=True, text=True).stdout.strip()
    monkeypatch.chdir(ROOT)
    code, out, err = run_cli(["diff", "dev", "--base", "HEAD"], capsys)
    assert code == 0, err
    assert "Offline plan diff" in out
    if not dirty:
        assert "No changes" in out


def test_diff_unknown_ref_is_a_clear_error(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, _, err = run_cli(["diff", "dev", "--base", "no-such-ref-xyz"], capsys)
    assert code == 2
    assert "no-such-ref-xyz" in err and "Traceback" not in err


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


def _dangerous_keys(diff):
    return {c.key for c in diff.changed if c.replaced}


NFS = "digitalocean:index/nfs:Nfs"


def test_region_change_replaces_every_node_pool_with_the_cluster(tmp_path):
    """The pools' `clusterId` text does not change, but they go with the cluster: flag them too."""
    old = plan_of("prod").to_dict()
    new = _mutated_plan(tmp_path, "prod", lambda c: c.__setitem__("inference-platform:region", "nyc2"))
    diff = diff_plans(old, new)
    pools = {(r["type"], r["name"]) for r in old["resources"] if r["type"] == POOL}
    stateful = {(r["type"], r["name"]) for r in old["resources"] if r["type"] in (CLUSTER, VPC, NFS)}
    assert len(pools) == 2 and len(stateful) == 3
    assert pools | stateful <= _dangerous_keys(diff)
    danger = diff.dangerous()
    for _, name in pools:
        (line,) = [d for d in danger if f"`{name}`" in d]
        assert "REPLACE" in line and "replaced with its DOKS cluster `prod-doks`" in line and "protected" in line
    md = render_markdown(diff)
    assert md.index("Replacements and deletions") < md.index("prod-pool-mi325x") < md.index("#### Changed")


def test_system_pool_size_replaces_cluster_and_pools_but_not_the_vpc(tmp_path):
    old = plan_of("prod").to_dict()
    new = _mutated_plan(
        tmp_path, "prod", lambda c: c["inference-platform:cluster"]["system_pool"].__setitem__("size", "g-4vcpu-16gb")
    )
    diff = diff_plans(old, new)
    replaced = _dangerous_keys(diff)
    assert {k[0] for k in replaced} == {CLUSTER, POOL}
    assert len([k for k in replaced if k[0] == POOL]) == 2
    assert not any("Vpc" in d or "Nfs" in d for d in diff.dangerous())


def test_vpc_replacement_follows_through_the_cluster_to_the_pools():
    """Transitive: a VPC replaced takes the cluster (vpcUuid), the NFS share (vpcId) and, through
    the cluster, every node pool; also for plans written before input dependencies were recorded."""
    old = plan_of("prod").to_dict()
    new = copy.deepcopy(old)
    for r in new["resources"]:
        if r["type"] == VPC:
            r["inputs"]["ipRange"] = "10.60.0.0/20"
    legacy = copy.deepcopy(new)
    for r in legacy["resources"]:
        r.pop("inputDependencies")
    for plan in (new, legacy):
        diff = diff_plans(old, plan)
        kinds = sorted(k[0] for k in _dangerous_keys(diff))
        assert kinds.count(POOL) == 2 and CLUSTER in kinds and NFS in kinds and VPC in kinds
        assert not [c for c in diff.changed if c.key[0] == "digitalocean:index/project:Project"]


def test_diff_of_a_new_stack_reads_new_not_none():
    """A stack created with `infra new-env` has no base plan: no `$None`, and money as the plan prints it."""
    from infra.offline import money

    new = plan_of("prod").to_dict()
    empty = {"stack": "prod", "project": "inference-platform", "resources": [], "models": [], "cost": {}}
    md = render_markdown(diff_plans(empty, new))
    assert "None" not in md
    low, high = money(new["cost"]["usd_per_month_min"]), money(new["cost"]["usd_per_month_max"])
    assert "," in high  # prod costs thousands a month: $35,368.00, not $35368.0
    assert f"**Monthly cost**: — (new stack) → {low}–{high}" in md


def test_diff_money_matches_the_plan_summary():
    from infra.commands.plan import render_summary

    old = plan_of("staging").to_dict()
    new = plan_of("prod").to_dict()
    md = render_markdown(diff_plans(old, new))
    low = f"${new['cost']['usd_per_month_min']:,.2f}"
    assert low in md and low in render_summary(plan_of("prod"))


def _names(directory):
    return sorted(p.name for p in directory.iterdir())


def test_plan_out_refuses_a_directory_it_did_not_write(tmp_path):
    """`--out .` once deleted Pulumi.yaml: a non-empty directory without the marker is refused, untouched."""
    from infra.commands.plan import write_manifests
    from infra.errors import UserError

    (tmp_path / "Pulumi.yaml").write_text("name: keep-me\n")
    (tmp_path / "Pulumi.prod.yaml").write_text("config: {}\n")
    with pytest.raises(UserError, match="pick an empty or new directory"):
        write_manifests(plan_of("dev"), tmp_path)
    assert _names(tmp_path) == ["Pulumi.prod.yaml", "Pulumi.yaml"]
    assert (tmp_path / "Pulumi.yaml").read_text() == "name: keep-me\n"


def test_plan_out_cli_refuses_before_planning(tmp_path, capsys, monkeypatch):
    (tmp_path / "Pulumi.yaml").write_text("name: keep-me\n")
    from infra.commands import plan

    monkeypatch.setattr(plan, "build_plan", lambda *a, **k: pytest.fail("planned before checking --out"))
    code, out, err = run_cli(["plan", "dev", "--out", str(tmp_path)], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(tmp_path) in err and ".infra-manifests" in err
    assert "Models:" not in out
    assert _names(tmp_path) == ["Pulumi.yaml"]


def test_plan_out_second_run_replaces_only_its_own_files(tmp_path):
    """Files from the first run that the second does not write (a removed model) disappear; the
    marker lists exactly what is there; a file the user added is kept."""
    from infra.commands.plan import MARKER, manifest_filename, write_manifests
    from infra.offline import kubernetes_objects

    out = tmp_path / "manifests"
    write_manifests(plan_of("prod"), out)
    prod_files = {manifest_filename(o) for o in kubernetes_objects(plan_of("prod"))}
    assert set(_names(out)) == prod_files | {MARKER}
    (out / "NOTES.md").write_text("mine\n")
    dev_files = {manifest_filename(o) for o in kubernetes_objects(plan_of("dev"))}
    assert prod_files - dev_files, "the test needs files that only the first run writes"
    write_manifests(plan_of("dev"), out)
    assert set(_names(out)) == dev_files | {MARKER, "NOTES.md"}
    listed = [ln for ln in (out / MARKER).read_text().splitlines() if not ln.startswith("#")]
    assert sorted(listed) == sorted(dev_files)


def test_plan_out_marker_cannot_reach_outside_or_clobber(tmp_path):
    from infra.commands.plan import MARKER, manifest_filename, write_manifests
    from infra.errors import UserError
    from infra.offline import kubernetes_objects

    outside = tmp_path / "outside.yaml"
    outside.write_text("keep\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "user.yaml").write_text("keep\n")
    (out / MARKER).write_text("../outside.yaml\n/etc/hosts\nuser.txt\n")
    (out / "user.txt").write_text("keep\n")
    write_manifests(plan_of("dev"), out)
    assert outside.read_text() == (out / "user.yaml").read_text() == (out / "user.txt").read_text() == "keep\n"
    # a file the user put where this run wants to write, not listed in the marker: refused
    name = manifest_filename(kubernetes_objects(plan_of("prod"))[0])
    other = tmp_path / "other"
    other.mkdir()
    (other / MARKER).write_text("")
    (other / name).write_text("mine\n")
    with pytest.raises(UserError, match=re.escape(name)):
        write_manifests(plan_of("prod"), other)
    assert _names(other) == sorted([MARKER, name]) and (other / name).read_text() == "mine\n"


# --- measured goodput and unmeetable SLOs (planner sizing) -------------------------------------


def _measured_staging(tmp_path, *, peak_rps=12, measured=5.086, mutate=None, conditions=None):
    """A copy of staging whose model carries the measured winner exactly as `infra tune ingest --write` records it."""
    from infra.domain import Provenance
    from infra.tuning.stackfile import write_measured_layout

    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    doc["config"]["inference-platform:models"][0]["workload"]["peak_rps"] = peak_rps
    if mutate:
        mutate(doc["config"])
    stacks = make_project(tmp_path) / "stacks"
    path = stacks / "Pulumi.staging.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    layout = {"tp": 4, "ep": True, "dp": 1, "replicas_per_node": 2, "max_num_seqs": 128,
              "max_num_batched_tokens": 16384, "gpu_memory_utilization": 0.9, "kv_cache_dtype": "fp8",
              "max_model_len": 4096}
    recorded = {}
    if conditions:
        (ttft, tpot), (isl, osl) = conditions["slo"], conditions["workload"]
        recorded = {"slo": {"ttft_p90_ms": ttft, "tpot_p90_ms": tpot}, "workload": {"input_tokens": isl, "output_tokens": osl},
                    "gpu": conditions["gpu"]}
    provenance = Provenance.model_validate(
        {"measured_at": "2026-12-02T18:16:00", "vllm_version": "0.33.0", "image": "vllm/vllm-openai-rocm:v0.33.0",
         "measured_goodput_rps": measured, "predicted_goodput_rps": 15.532,
         "source_results": ["results/tp4-ep-r2/rate-1.json"], **recorded}
    )
    write_measured_layout(path, "qwen3-235b", layout, provenance)
    return tmp_path


def test_measured_goodput_sizes_the_pool_and_is_shown_next_to_the_prediction(tmp_path):
    from infra.commands.plan import render_summary

    root = _measured_staging(tmp_path)
    plan = build_plan("staging", root)
    (model,) = plan.models
    predicted, measured = model["predicted"], model["measured"]
    # The prediction is kept as it was; the measurement (per node, as the benchmark measures it) sizes.
    # unmeasured, the prediction sizes on the low end of its calibration band: ceil(12 × 1.2 / low)
    low = predicted["goodput_band_rps_per_node"][0]
    assert predicted["goodput_rps_per_node"] > 10 and predicted["nodes_needed"] == math.ceil(12 * 1.2 / low)
    assert measured["goodput_rps_per_node"] == 5.086 and measured["nodes_needed"] == 3  # ceil(12 × 1.2 / 5.086)
    assert measured["measured_at"] == "2026-12-02T18:16:00" and measured["vllm_version"] == "0.33.0"
    assert measured["vs_predicted"] == pytest.approx(5.086 / predicted["goodput_rps_per_node"], abs=1e-3)
    notes = plan.summary["notes"]
    assert any("needs 3 nodes of mi300x-8 at the measured goodput (5.09 req/s/node)" in n for n in notes)
    assert any("infra tune calibrate" in n and "--stack staging --model qwen3-235b" in n for n in notes)
    text = render_summary(plan)
    assert (
        "measured: 5.09 req/s/node (bench 2026-12-02, vLLM 0.33.0); planner predicted "
        f"{predicted['goodput_rps_per_node']:.2f}; 3 node(s) for peak"
    ) in text
    assert "1 node(s) for peak" not in text  # the prediction no longer claims the sizing
    assert build_plan("staging", root).to_json() == plan.to_json()  # still byte-identical


def test_a_measurement_under_other_conditions_is_noted(tmp_path):
    """Recorded under TPOT 40 ms, 1000 prompt tokens, on an MI325X node; the stack now says 50 ms,
    2000 tokens, MI300X: the figure no longer describes this deployment."""
    conditions = {"slo": (2000, 40), "workload": (1000, 300), "gpu": "gpu-mi325x8-2048gb"}
    plan = build_plan("staging", _measured_staging(tmp_path, peak_rps=4, measured=14.0, conditions=conditions))
    (note,) = [n for n in plan.summary["notes"] if "other conditions" in n]
    assert "SLO p90 TTFT/TPOT 2000/40 ms → 2000/50 ms" in note
    assert "tokens in/out 1000/300 → 2000/300" in note
    assert "GPU gpu-mi325x8-2048gb → gpu-mi300x8-1536gb" in note
    assert "re-run infra bench" in note.lower()


def test_a_measurement_under_the_stacks_conditions_has_no_note(tmp_path):
    conditions = {"slo": (2000, 50), "workload": (2000, 300), "gpu": "gpu-mi300x8-1536gb"}
    plan = build_plan("staging", _measured_staging(tmp_path, peak_rps=4, measured=14.0, conditions=conditions))
    assert not any("other conditions" in n for n in plan.summary["notes"])


def test_measured_goodput_near_the_prediction_needs_no_calibration(tmp_path):
    plan = build_plan("staging", _measured_staging(tmp_path, peak_rps=4, measured=14.0))
    assert plan.models[0]["measured"]["nodes_needed"] == 1
    assert not any("calibrate" in n or "at the measured goodput" in n for n in plan.summary["notes"])


def test_measured_plan_without_provenance_has_no_measured_block():
    assert all("measured" not in m for s in STACKS for m in plan_of(s).models)


def test_measured_goodput_that_is_not_a_number_is_a_config_error(tmp_path):
    from infra.errors import UserError

    root = _measured_staging(tmp_path)
    path = root / "stacks" / "Pulumi.staging.yaml"
    path.write_text(path.read_text().replace("measured_goodput_rps: 5.086", 'measured_goodput_rps: "fast"'))
    with pytest.raises(UserError, match=r"measured_goodput_rps.*'fast'"):
        build_plan("staging", root)


def _staging_with(tmp_path, mutate):
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    mutate(doc["config"])
    make_project(tmp_path)
    (tmp_path / "stacks" / "Pulumi.staging.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def test_unmeetable_ttft_on_layout_auto_fails_like_a_config_error(tmp_path, capsys):
    def tight(config):
        config["inference-platform:models"][0]["slo"]["ttft_p90_ms"] = 10

    root = _staging_with(tmp_path, tight)
    code, out, err = run_cli(["plan", "staging", "--root", str(root)], capsys)
    assert code == 2, out + err
    assert "Traceback" not in err and "Models:" not in out
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    assert "models[0].slo" in line and "p90 TTFT 10 ms / TPOT 50 ms" in line
    assert "best p90 TTFT is" in line and "best p90 TPOT" in line and "relax ttft_p90_ms to at least" in line
    assert "TPOT about" not in line


def test_unmeetable_slos_of_several_models_are_reported_together(tmp_path):
    from infra.errors import ConfigError

    def two(config):
        config["inference-platform:models"][0]["slo"]["ttft_p90_ms"] = 10
        config["inference-platform:gpu_pools"].append({"name": "mi300x-b", "size": "gpu-mi300x8-1536gb", "nodes": 1})
        config["inference-platform:models"].append(
            {"name": "llama70b", "source": "meta-llama/Llama-3.3-70B-Instruct", "pool": "mi300x-b", "layout": "auto",
             "workload": {"input_tokens": 1000, "output_tokens": 200}, "slo": {"ttft_p90_ms": 1000, "tpot_p90_ms": 1}}
        )

    with pytest.raises(ConfigError) as err:
        build_plan("staging", _staging_with(tmp_path, two))
    paths = [p.path for p in err.value.problems]
    assert paths == ["inference-platform:models[0].slo", "inference-platform:models[1].slo"]
    assert "relax tpot_p90_ms" in err.value.problems[1].message


def test_unmeetable_slo_of_an_explicit_layout_is_a_note_not_an_error(tmp_path):
    def explicit(config):
        model = config["inference-platform:models"][0]
        model["layout"] = {"tp": 4, "ep": True, "replicas_per_node": 2, "kv_cache_dtype": "fp8"}
        model["slo"]["ttft_p90_ms"] = 10

    plan = build_plan("staging", _staging_with(tmp_path, explicit))
    assert plan.models[0]["predicted"]["goodput_rps_per_node"] == 0
    (note,) = [n for n in plan.summary["notes"] if "cannot be met" in n]
    assert note.startswith("model qwen3-235b: p90 TTFT 10 ms / TPOT 50 ms cannot be met by layout tp4-ep-r2 of")
    assert "relax ttft_p90_ms" in note


# --------------------------------------------------------------------------- robustness: diff input


def test_plan_shape_check_accepts_every_stack_plan(plans):
    from infra.plandiff import plan_shape_problems

    for stack, plan in plans.items():
        assert plan_shape_problems(json.loads(plan.to_json())) == [], stack


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("[]", "not an offline plan: the plan is a list, expected an object"),
        ("{}", "stack: is missing, expected a name"),
        ('{"stack": "prod", "project": "p", "resources": {}}', "not an offline plan: resources is an object, expected a list"),
        ('{"stack": "prod", "project": "p", "resources": [3]}', "resources[0] is a number, expected an object"),
        ('{"stack": "prod", "project": "p", "resources": [{"type": "t", "name": "n", "inputs": [], "options": {}}]}',
         "resources[0].inputs is a list, expected an object"),
        ('{"stack": "prod", "project": "p", "resources": [], "models": [{"name": "m"}]}', "models[0].layout is missing"),
        ("not json", "not a plan JSON file: Expecting value"),
    ],
)
def test_diff_rejects_files_that_are_not_plans(tmp_path, capsys, content, expected):
    from infra.cli import main

    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = tmp_path / "good.json"
    good.write_text(plan_of("dev").to_json())
    for argv in ([str(bad), str(good)], [str(good), str(bad)]):
        assert main(["diff", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {bad}: ") and expected in err
        assert "Traceback" not in err and "No changes" not in err


def test_diff_of_binary_or_missing_file_is_one_line(tmp_path, capsys):
    from infra.cli import main

    binary = tmp_path / "plan.json"
    binary.write_bytes(b"\xff\xfe\x00")
    assert main(["diff", str(binary), str(binary)]) == 2
    assert "not UTF-8 text" in capsys.readouterr().err
    assert main(["diff", str(tmp_path / "nope.json"), str(binary)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nope.json'}: cannot read: No such file or directory"


# --------------------------------------------------------------------------- deployment fixes

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"
NFS = "digitalocean:index/nfs:Nfs"


def _set_cluster(**fields):
    return lambda c: c["inference-platform:cluster"].update(fields)


def test_growing_the_nfs_share_replaces_no_claim(tmp_path):
    old = plan_of("prod").to_dict()
    new = _mutated_plan(tmp_path, "prod", lambda c: c["inference-platform:model_cache"].__setitem__("size_gib", 2048))
    diff = diff_plans(old, new)
    changed = {c.key[0]: c for c in diff.changed}
    assert changed[NFS].changes == [("size", 1024, 2048)] and not changed[NFS].replaced
    assert changed[PV].changes == [("spec.capacity.storage", "1024Gi", "2048Gi")] and not changed[PV].replaced
    assert not changed[PVC].replaced  # its request changes only under ignoreChanges
    assert not diff.dangerous() and "CAUTION" not in render_markdown(diff)
    # Without the ignore, infra diff would flag the claim: the check above is not vacuous.
    unguarded = copy.deepcopy(new)
    next(r for r in unguarded["resources"] if r["type"] == PVC)["options"]["ignoreChanges"] = []
    assert any(PVC in line for line in diff_plans(old, unguarded).dangerous())


def test_retired_version_prefix_is_a_one_line_plan_error(tmp_path, capsys):
    root = _staging_with(tmp_path, _set_cluster(version="1.29"))
    code, out, err = run_cli(["plan", "staging", "--root", str(root)], capsys)
    assert code == 2, out + err
    assert "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    assert "inference-platform:cluster.version: '1.29'" in line and "'1.29.'" in line


def test_exact_version_is_managed_and_lowering_it_is_a_replacement(tmp_path):
    pinned = _mutated_plan(tmp_path, "prod", _set_cluster(version="1.33.6-do.1", auto_upgrade=False))
    cluster = next(r for r in pinned["resources"] if r["type"] == CLUSTER)
    assert cluster["inputs"]["version"] == "1.33.6-do.1" and cluster["options"]["ignoreChanges"] == []
    lowered = _mutated_plan(tmp_path, "prod", _set_cluster(version="1.33.1-do.5", auto_upgrade=False))
    replaced = [c for c in diff_plans(pinned, lowered).changed if c.key[0] == CLUSTER]
    assert replaced and "version (lowered)" in replaced[0].replace_paths


def test_a_version_prefix_is_ignored_after_creation_even_without_auto_upgrade(tmp_path):
    old = plan_of("prod").to_dict()
    assert next(r for r in old["resources"] if r["type"] == CLUSTER)["options"]["ignoreChanges"] == ["version"]
    new = _mutated_plan(tmp_path, "prod", _set_cluster(version="1.32", auto_upgrade=False))
    cluster = next(r for r in new["resources"] if r["type"] == CLUSTER)
    assert cluster["options"]["ignoreChanges"] == ["version"]
    # The engine keeps the running version: no downgrade, so no replacement.
    assert not [c for c in diff_plans(old, new).changed if c.key[0] == CLUSTER and c.replaced]


def test_firewall_cleanup_and_teardown_options_per_environment(plans):
    dev = next(r for r in plans["dev"].resources if r["type"] == CLUSTER)["inputs"]
    prod = next(r for r in plans["prod"].resources if r["type"] == CLUSTER)
    # An empty allow-list is sent as disabled: None would keep an existing firewall on.
    assert dev["controlPlaneFirewall"] == {"allowedAddresses": [], "enabled": False}
    assert dev["destroyAllAssociatedResources"] is True
    assert prod["inputs"]["destroyAllAssociatedResources"] is False and prod["options"]["protect"] is True


def test_model_service_children_go_with_the_cluster_and_router_children_are_deleted(plans):
    cluster = "digitalocean:index/kubernetesCluster:KubernetesCluster::prod-doks"
    resources = plans["prod"].resources
    model_children = [r for r in resources if (r["parent"] or "").startswith("inference-platform:model_service")]
    router_children = [r for r in resources if (r["parent"] or "").startswith("inference-platform:router")]
    assert model_children and all(r["options"]["deletedWith"] == cluster for r in model_children)
    # A public router's Service of type LoadBalancer must be deleted so that DOKS removes the DO LB.
    assert router_children and not any(r["options"]["deletedWith"] for r in router_children)


def test_plan_shape_problems_name_every_path_and_kind():
    from infra.plandiff import plan_shape_problems

    plan = {
        "stack": " ", "project": None,
        "resources": [
            {"type": "t", "name": "n", "inputs": {}, "options": {"dependsOn": {}}, "parent": 3, "inputDependencies": []},
            {"type": "t", "name": "n", "inputs": {}, "options": []},
            5,
        ],
        "models": [3, {"name": "", "layout": {"name": 1}}],
        "cost": [],
    }
    assert plan_shape_problems(plan) == [
        ("stack", "is a blank string, expected a name"),
        ("project", "is null, expected a name"),
        ("resources[0].options.dependsOn", "is an object, expected a list"),
        ("resources[0].parent", "is a number, expected a resource name or null"),
        ("resources[0].inputDependencies", "is a list, expected an object"),
        ("resources[1].options", "is a list, expected an object"),
        ("resources[2]", "is a number, expected an object with type, name, inputs and options"),
        ("models[0]", "is a number, expected an object with name and layout"),
        ("models[1].name", "is an empty string, expected a model name"),
        ("models[1].layout.name", "is a number, expected a layout name"),
        ("cost", "is a list, expected an object"),
        ("resources[1]", "t `n` appears twice"),
    ]
