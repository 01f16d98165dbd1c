"""stacks/factors.STACK.json read through its schema (infra/stack_factors.py, issue 37)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest

from infra.errors import UserError
from infra.planner.efficiency import FRACTIONS, load_efficiency
from infra.stack_factors import StackFactors, load_stack_factors, stack_factors_from_json

FACTORS = {k: round(v, 4) for k, v in asdict(load_efficiency().for_family("cdna3", moe=True)).items()}


def _doc(stack: str = "s", **factors) -> dict:
    return {"format": 1, "stack": stack, "source": "telemetry", "families": {"cdna3": {"engine": "vllm", "factors": {**FACTORS, **factors}}},
            "provenance": {"cluster": "s-doks"}, "observations": [], "measured": {}}


def _problems(doc) -> list[str]:
    with pytest.raises(UserError) as err:
        stack_factors_from_json(doc, "s", "stacks/factors.s.json")
    assert err.value.source == "stacks/factors.s.json"
    return [str(p) for p in err.value.problems]


def test_what_calibrate_writes_reads_back():
    factors = stack_factors_from_json(_doc(), "s", "f")
    again = stack_factors_from_json(json.loads(json.dumps(factors.to_json())), "s", "f")
    assert asdict(again.families["cdna3"]) == asdict(factors.families["cdna3"])


def test_every_percent_is_refused_with_its_fraction_never_clamped():
    problems = _problems(_doc(**{name: FACTORS[name] * 100 for name in FRACTIONS}))
    assert len(problems) == len(FRACTIONS)
    for name, problem in zip(FRACTIONS, problems, strict=True):
        assert problem.startswith(f"families.cdna3.factors.{name}: ") and "looks like a percent: write" in problem


@pytest.mark.parametrize(("factor", "value", "says"), [
    ("tpot_p90_factor", 0.9, "at least 1"),
    ("step_overhead_ms", -1.0, "at least 0"),
    ("hbm_efficiency", 0.0, "greater than 0"),
    ("hbm_efficiency", True, "a boolean where a number belongs"),
    ("hbm_efficiency", "0.7", "a string where a number belongs"),
    ("hbm_efficiency", math.nan, "not a finite number"),
])
def test_a_factor_out_of_its_type_or_range_names_its_field(factor, value, says):
    (problem,) = _problems(_doc(**{factor: value}))
    assert problem.startswith(f"families.cdna3.factors.{factor}: ") and says in problem


@pytest.mark.parametrize(("doc", "says"), [
    ([], "a list where an object belongs"),
    ({**_doc(), "families": "cdna3"}, "families: a string where an object belongs"),
    ({**_doc(), "families": {"cdna9": {"factors": FACTORS}}}, "families.cdna9: not a GPU family of the catalog"),
    ({**_doc(), "observations": {"a": 1}}, "observations: an object where a list belongs"),
    ({**_doc(), "measured": {"m": {"served_rps_per_node": -1, "within_slo": True, "from": "a", "to": "b", "windows": 1}}},
     "measured.m.served_rps_per_node"),
    ({**_doc(), "stack": "other"}, "stack: written for stack 'other', not 's'"),
])
def test_the_file_s_shape_is_one_line_per_field_never_a_traceback(doc, says):
    with pytest.raises(UserError) as err:
        stack_factors_from_json(doc, "s", "stacks/factors.s.json")
    text = err.value.render()
    assert text.startswith("stacks/factors.s.json: ") and says in text


def test_a_family_none_of_the_pools_is_refused(tmp_path):
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "factors.s.json").write_text(json.dumps(_doc()))
    assert isinstance(load_stack_factors(tmp_path, "s", families={"cdna3"}), StackFactors)
    with pytest.raises(UserError, match="families.cdna3: this stack's GPU pools are cdna4"):
        load_stack_factors(tmp_path, "s", families={"cdna4"})


def test_the_stack_s_factors_reach_a_multi_turn_model_too(tmp_path):
    """The session model planned with the catalog's factors whatever the file said (issue 37)."""
    import shutil

    import yaml

    from infra.config import load_stack_file
    from infra.stack_plan import plan_stack
    from tests.conftest import ROOT, make_project

    root = make_project(tmp_path)
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    doc["config"]["inference-platform:models"][0]["workload"]["turns_per_session"] = 4
    (root / "stacks" / "Pulumi.sf.yaml").write_text(yaml.safe_dump(doc))
    before = plan_stack(load_stack_file("sf", root)).models[0].plan.chosen.goodput_rps_per_node
    slow = {name: FACTORS[name] / 2 for name in FRACTIONS}
    (root / "stacks" / "factors.sf.json").write_text(json.dumps(_doc("sf", **slow)))
    after = plan_stack(load_stack_file("sf", root)).models[0].plan.chosen.goodput_rps_per_node
    assert after < 0.9 * before
    shutil.rmtree(root)


def test_keys_that_start_with_an_underscore_are_comments_and_a_rewrite_keeps_the_top_level_ones():
    doc = {"_comment": "fitted by hand", **_doc()}
    doc["families"]["cdna3"]["_why"] = "bench of 2026-11"
    doc["families"]["cdna3"]["factors"]["_note"] = "x"
    doc["families"]["_cdna4"] = {"factors": {}}  # commented out
    doc["observations"] = [{"_seen": 1, "model": "m"}]
    factors = stack_factors_from_json(doc, "s", "f")
    assert list(factors.families) == ["cdna3"] and factors.observations == ({"model": "m"},)
    written = factors.to_json()
    assert written["_comment"] == "fitted by hand" and list(written)[0] == "_comment"
    assert "_why" not in json.dumps(written["families"])


def test_an_efficiency_table_reads_comments_and_refuses_other_unknown_keys(tmp_path):
    from infra.planner.efficiency import load_efficiency as load

    table = json.loads((__import__("infra.planner.efficiency", fromlist=["DEFAULT_PATH"]).DEFAULT_PATH).read_text())
    table["_comment"] = "a copy to try other factors"
    table["families"]["default"]["_note"] = "kept"
    path = tmp_path / "efficiency.json"
    path.write_text(json.dumps(table))
    assert load(path).for_family("cdna3", moe=True) == load_efficiency().for_family("cdna3", moe=True)
    table["familes"] = {}
    path.write_text(json.dumps(table))
    with pytest.raises(UserError, match="unknown key.s. familes"):
        load(path)
