"""docs/stack.schema.json (generated from the config model) accepts the shipped stacks and
rejects what the config rejects by shape: unknown keys, wrong types, secrets in plain text."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml

from infra.stackschema import MODELINE, SCHEMA_PATH
from tests.conftest import ROOT

STACKS = ("dev", "staging", "prod")


@pytest.fixture(scope="module")
def validator():
    schema = json.loads((ROOT / SCHEMA_PATH).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _stack(name: str) -> dict:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())


@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_validate_and_point_at_the_schema(validator, stack):
    path = ROOT / "stacks" / f"Pulumi.{stack}.yaml"
    assert path.read_text().splitlines()[0] == MODELINE
    assert (path.parent / "../docs/stack.schema.json").resolve() == (ROOT / SCHEMA_PATH).resolve()
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(_stack(stack))]
    assert errors == []


def _errors(validator, change) -> list[str]:
    doc = copy.deepcopy(_stack("prod"))
    change(doc["config"])
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda c: c.__setitem__("inference-platform:regoin", "atl1"), "config"),  # typo in a key
        (lambda c: c["inference-platform:cluster"].__setitem__("ha_contol_plane", True), "config/inference-platform:cluster"),
        (lambda c: c["inference-platform:gpu_pools"][0].__setitem__("max_nodes", "6"), "config/inference-platform:gpu_pools/0/max_nodes"),
        (lambda c: c.__setitem__("inference-platform:environment", "qa"), "config/inference-platform:environment"),
        (lambda c: c.__setitem__("inference-platform:api_key", "plain-text"), "config/inference-platform:api_key"),
        (lambda c: c.__setitem__("digitalocean:token", "dop_v1_plain"), "config/digitalocean:token"),
        (lambda c: c.pop("inference-platform:region"), "config"),
        (lambda c: c["inference-platform:models"][0].__setitem__("layout", "fastest"), "config/inference-platform:models/0/layout"),
    ],
)
def test_what_the_config_refuses_by_shape_the_schema_refuses(validator, change, where):
    errors = _errors(validator, change)
    assert errors and all(e.startswith(where) for e in errors), errors


def test_other_providers_keys_and_secure_values_are_accepted(validator):
    def change(config):
        config["kubernetes:context"] = "do-atl1-prod"
        config["inference-platform:api_key"] = {"secure": "v1:abc"}
        config["digitalocean:token"] = {"secure": "v1:def"}
        config["inference-platform:models"][0]["layout"] = {"tp": 8, "ep": True}

    assert _errors(validator, change) == []
