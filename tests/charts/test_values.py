"""Values checked by the chart: the value index (defaults + schema) refuses a path it does not know."""

from __future__ import annotations

import copy
import json
from importlib import resources

import pytest

from infra.catalog import versions
from infra.charts.releases import unknown_value_problems
from infra.charts.source import find_archive
from infra.charts.values import OPEN, committed_index, index_from_chart, unknown_paths, value_tree
from infra.offline import build_plan

TREE = value_tree({"nodeSelector": {}, "image": {"tag": "1"}, "resources": None, "sub": {"port": 1}})
SCHEMA = {"properties": {"podLabels": {"type": "object"}, "extra": {"properties": {"a": {}}}}}


@pytest.mark.parametrize("values, unknown", [
    ({"nodeSelector": {"anything": "x"}, "resources": {"limits": {"cpu": 1}}}, []),  # open leaves
    ({"image": {"tag": "2", "tga": "3"}}, ["image.tga"]),
    ({"sub": {"port": 2}, "global": {"x": 1}}, []),  # subchart values, Helm's global
    ({"podLabels": {"a": "b"}}, []),  # known to the schema only
    ({"extra": {"a": 1, "b": 2}}, ["extra.b"]),
    ({"nodeSelectr": {"a": "b"}}, ["nodeSelectr"]),
])
def test_unknown_paths(values, unknown):
    assert unknown_paths(values, TREE, SCHEMA) == unknown


def test_leaves_are_open():
    assert value_tree({"a": [], "b": {}, "c": 1}) == {"a": OPEN, "b": OPEN, "c": OPEN}


def _pins():
    return {(chart, version) for chart, version, *_ in versions.PINNED_CHARTS}


def test_every_committed_index_is_of_a_pinned_chart_version():
    """A bump without `scripts/chart_index.py` leaves the old index behind: this names it."""
    folder = resources.files("infra.catalog").joinpath("charts")
    names = {p.name for p in folder.iterdir() if p.name.endswith(".json")}
    assert names == {f"{c}-{v}.json" for c, v in _pins()}
    for chart, version in _pins():
        index = committed_index(chart, version)
        assert (index["chart"], index["version"]) == (chart, version)


@pytest.mark.parametrize("chart, version", sorted(_pins()))
def test_committed_index_matches_the_archive_when_present(chart, version):
    """With the real archive at hand (charts/ or INFRA_CHART_DIR), the committed index is what the
    script derives from it now."""
    archive = find_archive(None, chart, version)
    if archive is None:
        pytest.skip(f"no {chart}-{version}.tgz here (CI never has it)")
    from infra.charts.template import load_chart

    assert json.loads(json.dumps(index_from_chart(load_chart(archive)))) == committed_index(chart, version)


def test_a_value_the_chart_does_not_know_is_refused_naming_it():
    plan = build_plan("prod")
    resources_ = copy.deepcopy(plan.resources)
    (keda,) = [r for r in resources_ if r["inputs"].get("chart") == "keda"]
    assert unknown_value_problems(resources_, None) == []
    keda["inputs"]["values"]["nodeSelecter"] = {"pool": "system"}
    ((where, what),) = unknown_value_problems(resources_, None)
    assert where == "Helm release prod-autoscaling-keda: values.nodeSelecter"
    assert "keda 2.18.3 does not know this value" in what


def test_the_archive_gives_the_index_when_none_is_committed(chart_env):
    from infra.charts.template import load_chart

    index = index_from_chart(load_chart(chart_env))
    assert index["values"]["metrics"]["port"] == OPEN  # subchart defaults under its name
    assert "podLabels" in index["schema"]["properties"]
    assert unknown_paths({"metrics": {"prot": 1}}, index["values"], index["schema"]) == ["metrics.prot"]


def test_a_node_selector_is_a_label_map_even_where_the_defaults_name_one_label():
    """cert-manager's default `nodeSelector: {kubernetes.io/os: linux}` does not close it to that label
    (audit t32: an existing cluster's system selector on cert-manager)."""
    index = committed_index(versions.CERT_MANAGER_CHART, versions.CERT_MANAGER_CHART_VERSION)
    selector = {"nodeSelector": {"example.com/role": "system"}}
    values = {**selector, "webhook": selector, "cainjector": selector, "startupapicheck": selector}
    assert unknown_paths(values, index["values"], index.get("schema")) == []
    assert unknown_paths({"webhook": {"nodeSelectr": {}}}, index["values"], index.get("schema")) == ["webhook.nodeSelectr"]
