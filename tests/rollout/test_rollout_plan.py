"""Issue 25: a staging variant with a rollout plans cleanly — both variants, the split, the cost of
both, what promote removes — and its objects validate and pass the policy pack."""

from __future__ import annotations

import pytest

from infra.offline import build_plan, kubernetes_objects
from infra.plandiff import diff_plans, render_markdown
from infra.render.model_service import LABEL_VARIANT
from tests.conftest import make_project, plan_of, policy_violations, validate_built_ins
from tests.rollout.conftest import staging_with_rollout_text


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("rollout") / "project")
    (root / "stacks" / "Pulumi.staging.yaml").write_text(staging_with_rollout_text())
    return build_plan("staging", root)


def _deployments(plan):
    return {o["metadata"]["name"]: o for o in kubernetes_objects(plan) if o["kind"] == "Deployment"}


def test_the_plan_shows_both_variants_the_split_and_the_cost_of_both(plan):
    (model,) = plan.models
    r = model["rollout"]
    assert model["layout"]["name"] == "tp2-r4" and r["current_replicas"] == 4
    assert r["candidate"]["layout"]["name"] == "tp4-ep-r2" and r["candidate"]["replicas"] == 1
    assert (r["weight_percent"], r["realised_percent"], r["steps"], r["next_step"]) == (20, 20.0, [20, 50], 50)
    # one TP4 candidate engine does not fit next to four TP2 engines on the one 8-GPU node
    assert r["extra_nodes"] == 1 and r["usd_per_hour_extra"] == 20.72
    assert r["promote_removes"] == [] and "Deployment qwen3-235b-engine-candidate" in r["abort_removes"]
    items = {i["item"]: i["usd_per_hour_min"] for i in plan.cost["items"]}
    assert items["rollout:qwen3-235b"] == 20.72
    pool = plan.summary["pools"][0]
    assert pool["min_nodes"] == 1 and pool["rollout_nodes"] == 1


def test_the_pool_grows_by_the_candidate_nodes(plan):
    (pool,) = [r for r in plan.resources if r["type"] == "digitalocean:index/kubernetesNodePool:KubernetesNodePool"]
    assert pool["inputs"]["nodeCount"] == 2


def test_candidate_engines_are_a_second_deployment_behind_the_models_service(plan):
    deps = _deployments(plan)
    current, cand = deps["qwen3-235b-engine"], deps["qwen3-235b-engine-candidate"]
    assert current["spec"]["replicas"] == 4 and cand["spec"]["replicas"] == 1
    # the current engines are untouched: no variant label (adding one would restart them)
    assert LABEL_VARIANT not in current["spec"]["template"]["metadata"]["labels"]
    cand_labels = cand["spec"]["template"]["metadata"]["labels"]
    assert cand_labels[LABEL_VARIANT] == "candidate"
    assert cand["spec"]["selector"]["matchLabels"][LABEL_VARIANT] == "candidate"
    args = cand["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "4" and "--enable-expert-parallel" in args
    (service,) = [o for o in kubernetes_objects(plan) if o["kind"] == "Service" and o["metadata"]["name"] == "qwen3-235b"]
    # the model's Service (and through it the router's registrar) selects both variants
    assert all(cand_labels[k] == v for k, v in service["spec"]["selector"].items())
    current_labels = current["spec"]["template"]["metadata"]["labels"]
    assert all(current_labels[k] == v for k, v in service["spec"]["selector"].items())


def test_monitoring_labels_variants_and_records_them(plan):
    objs = kubernetes_objects(plan)
    monitors = [o for o in objs if o["kind"] == "PodMonitor"]
    relabels = [r for m in monitors for e in m["spec"]["podMetricsEndpoints"] for r in e.get("relabelings", [])]
    assert any(r.get("targetLabel") == "variant" and r.get("replacement") == "current" for r in relabels)
    rules = [o for o in objs if o["kind"] == "PrometheusRule"]
    groups = {g["name"] for r in rules for g in r["spec"]["groups"]}
    assert {"inference-platform.rollout.qwen3-235b", "inference-platform.alerts.rollout"} <= groups
    # the not-ready alert expects the candidate's engines too (they are the model's ready pods)
    (expected,) = [r for o in rules for g in o["spec"]["groups"] for r in g["rules"]
                   if r.get("record") == "model:vllm_replicas_expected:count"]
    assert expected["expr"] == "vector(5)"
    # GPUs serving count each variant's engines at its own GPUs per engine (TP2 current, TP4 candidate)
    (gpus,) = [r for o in rules for g in o["spec"]["groups"] for r in g["rules"] if r.get("record") == "model:vllm_gpus_serving:sum"]
    assert 'variant="current"}) or vector(0)) * 2' in gpus["expr"] and 'variant="candidate"}) or vector(0)) * 4' in gpus["expr"]


def test_objects_validate_and_the_policy_pack_passes(plan):
    assert validate_built_ins(kubernetes_objects(plan)) >= 10
    assert policy_violations(plan, "staging") == []


def test_the_plan_is_byte_identical_across_runs(plan, tmp_path):
    root = make_project(tmp_path / "again")
    (root / "stacks" / "Pulumi.staging.yaml").write_text(staging_with_rollout_text())
    assert build_plan("staging", root).to_json() == plan.to_json()


def test_the_diff_shows_the_rollout_and_what_promote_removes(plan):
    md = render_markdown(diff_plans(plan_of("staging").to_dict(), plan.to_dict()))
    assert "#### Layout rollouts" in md
    row = next(line for line in md.splitlines() if line.startswith("| qwen3-235b | `∅`") or line.startswith("| qwen3-235b | ∅"))
    assert "candidate tp4-ep-r2 ×1 at 20 %" in row and "+1 node(s)" in row and "promote → 50 %" in row
    assert "qwen3-235b-engine-candidate" in md


def test_summary_lines(plan):
    from infra.commands.plan import render_summary

    text = render_summary(plan, terminal=False)
    assert "rollout: current tp2-r4 ×4 | candidate tp4-ep-r2 ×1 at 20 % of requests" in text
    assert "running both: +1 node(s) ($20.72/h)" in text
    assert "1 + 1 for rollouts" in text
