"""Docs that are generated from code must match it."""

from infra.configdoc import render
from tests.conftest import ROOT


def test_configuration_reference_is_current():
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == render(), "docs/configuration.md is stale: run `python -m infra.configdoc > docs/configuration.md`"


def test_every_config_key_is_documented():
    from infra.config import StackInput

    text = (ROOT / "docs" / "configuration.md").read_text()
    for name, field in StackInput.model_fields.items():
        assert f"inference-platform:{name}" in text
        assert field.description, f"{name} has no description"


def test_stack_schema_is_current():
    from infra.stackschema import SCHEMA_PATH
    from infra.stackschema import render as render_schema

    committed = (ROOT / SCHEMA_PATH).read_text()
    assert committed == render_schema(), f"{SCHEMA_PATH} is stale: run `python -m infra.stackschema > {SCHEMA_PATH}`"
