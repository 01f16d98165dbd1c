"""With INFRA_CHART_DIR holding a pinned archive, `pulumi up` installs that release from it (no chart
repository needed), and only if its digest is the one recorded in infra/catalog/chart_digests.json."""

from __future__ import annotations

import pytest

from infra.charts import digests
from infra.charts.template import file_digest
from infra.config import load_stack_file
from infra.errors import UserError
from infra.offline import build_plan, offline_plan
from infra.project import project_root
from infra.stack_plan import plan_stack


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """An empty digest file of our own instead of the committed one."""
    path = tmp_path / "chart_digests.json"
    monkeypatch.setattr(digests, "digests_path", lambda: path)
    return path


def _release(plan, chart_name):
    (record,) = [r for r in plan.resources if r["type"].endswith(":Release") and r["inputs"]["name"] == chart_name]
    return record["inputs"]


def _deploy_check():
    """What the check before `pulumi up` runs (`infra.offline.check_before_up`): the offline plan, strict."""
    return offline_plan(plan_stack(load_stack_file("prod", project_root(None))), deploy=True)


def test_a_release_whose_archive_is_there_installs_from_it(chart_env, recorded):
    plan = build_plan("prod")
    keda = _release(plan, "keda")
    assert keda["chart"] == str(chart_env) and keda["version"] == "2.18.3" and "repositoryOpts" not in keda
    kps = _release(plan, "kps")  # no archive: from its repository, as before
    assert kps["chart"] == "kube-prometheus-stack" and kps["repositoryOpts"]["repo"].startswith("https://")
    (entry,) = [e for e in plan.charts if e["release"] == "keda"]
    assert entry["chart"] == "keda" and entry["templated"]
    (note,) = [n for n in plan.summary["notes"] if "no digest recorded" in n]
    assert "keda 2.18.3" in note and "`pulumi up` refuses to install it" in note


def test_pulumi_up_refuses_an_archive_whose_digest_was_never_recorded(chart_env, recorded):
    with pytest.raises(UserError) as err:
        _deploy_check()
    (problem,) = err.value.problems
    assert problem.path == "Helm release prod-autoscaling-keda"
    assert "installs only archives whose digest is recorded" in problem.message and "infra charts pull" in problem.message


def test_pulumi_up_installs_an_archive_with_its_recorded_digest(chart_env, recorded):
    digests.record_digest("keda", "2.18.3", file_digest(chart_env), recorded)
    plan = _deploy_check()
    assert not [n for n in plan.summary["notes"] if "no digest recorded" in n]


def test_an_archive_with_another_digest_is_refused_by_plan_and_up(chart_env, recorded):
    digests.record_digest("keda", "2.18.3", "sha256:" + "1" * 64, recorded)
    with pytest.raises(UserError) as err:
        build_plan("prod")
    (problem,) = err.value.problems
    assert "records sha256:111" in problem.message and "not the published archive" in problem.message
