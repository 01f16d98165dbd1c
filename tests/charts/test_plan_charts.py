"""The offline plan templates every release whose archive is present, and its objects reach
--json, --out and `infra diff`; an absent archive is one line and one note."""

from __future__ import annotations

import copy
import json

import pytest

from infra.charts.releases import template_releases
from infra.commands.plan import write_manifests
from infra.offline import build_plan, kubernetes_objects
from infra.plandiff import diff_plans, render_markdown


@pytest.fixture(scope="module")
def plan(packaged_charts, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("INFRA_CHART_DIR", str(packaged_charts))
    mp.setenv("INFRA_CHART_CACHE", str(tmp_path_factory.mktemp("cache")))
    try:
        yield build_plan("prod")
    finally:
        mp.undo()


def _release(plan, chart):
    (entry,) = [e for e in plan.charts if e["chart"] == chart]
    return entry


def test_present_archive_is_templated_with_the_values_passed_to_pulumi(plan):
    keda = _release(plan, "keda")
    assert keda["templated"] and keda["digest"].startswith("sha256:")
    (record,) = [r for r in plan.resources if r["name"] == keda["resource"]]
    (deployment,) = [p["object"] for p in keda["parts"] if p["object"]["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == record["inputs"]["values"]["nodeSelector"]
    assert deployment in kubernetes_objects(plan)


def test_absent_archive_stays_one_line_and_the_plan_says_so_once(plan):
    kps = _release(plan, "kube-prometheus-stack")
    assert not kps["templated"] and kps["parts"] == []
    notes = [n for n in plan.summary["notes"] if "not templated" in n]
    assert len(notes) == 1 and "kube-prometheus-stack 81.4.3" in notes[0] and "infra charts pull" in notes[0]


def test_json_carries_the_chart_objects(plan):
    data = json.loads(plan.to_json())
    kinds = {p["object"]["kind"] for e in data["charts"] for p in e["parts"]}
    assert {"Deployment", "Job", "CustomResourceDefinition", "Service"} <= kinds


def test_out_writes_the_chart_objects(plan, tmp_path):
    write_manifests(plan, tmp_path / "out")
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"keda--deployment--keda-operator.yaml", "keda--job--keda-migrate.yaml",
            "cluster--customresourcedefinition--widgets.example.invalid.yaml"} <= names


def test_a_value_change_diffs_as_the_changed_object(plan):
    old = plan.to_dict()
    new = copy.deepcopy(old)
    (record,) = [r for r in new["resources"] if r["name"] == _release(plan, "keda")["resource"]]
    record["inputs"]["values"]["replicaCount"] = 2
    new["charts"], _ = template_releases(new["resources"], None)
    diff = diff_plans(old, new)
    changed = {ch.key: ch for ch in diff.changed}
    assert ("chart:keda:Deployment", "keda/keda-operator") in changed
    assert ("spec.replicas", 1, 2) in changed[("chart:keda:Deployment", "keda/keda-operator")].changes
    assert "keda/keda-operator" in render_markdown(diff)


def test_without_the_archive_on_one_side_nothing_is_compared_object_by_object(plan):
    old = plan.to_dict()
    bare = copy.deepcopy(old)
    for entry in bare["charts"]:
        entry.update(templated=False, parts=[], digest=None)
    assert diff_plans(bare, old).empty


def test_summary_lists_the_templated_release_by_kind(plan):
    from infra.commands.plan import render_summary

    summary = render_summary(plan, terminal=False)
    assert "Helm releases, templated offline:" in summary
    assert "keda (keda 2.18.3, 5 objects): 1 Deployment, 1 Secret, 1 Service, 1 crd CustomResourceDefinition, 1 hook Job" in summary
