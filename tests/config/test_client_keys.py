"""Named client keys (issue 30): `api_keys` names, `api_key` as the key named `default`, the keys'
own checks at `pulumi up`, and what the plan shows (names only)."""

from __future__ import annotations

import pytest
import yaml

from infra.config import NS
from infra.config.client_keys import ClientKeys, client_keys_from_config, key_value_problems
from infra.config.cross_checks import front_door_problems
from infra.config.load import parse_stack_text
from infra.errors import ConfigError
from tests.conftest import ROOT, plan_of, stack_values

PATH = f"{NS}api_keys"
SECURE = {"secure": "v1:AAAABBBBCCCC"}


def _keys(api_keys, *, api_key_set=False, whole=False):
    return client_keys_from_config(api_keys, api_keys_path=PATH, api_key_set=api_key_set, api_keys_secret=whole)


def test_nothing_set_is_one_generated_key_named_default():
    assert _keys(None) == (ClientKeys(names=("default",), generated=True), [])


def test_api_key_is_the_key_named_default():
    assert _keys(None, api_key_set=True) == (ClientKeys(names=("default",), generated=False), [])


def test_named_keys_from_a_stack_file_and_from_the_runtime():
    offline, problems = _keys({"ci-2026q4": SECURE, "default": SECURE})
    assert problems == [] and offline == ClientKeys(names=("ci-2026q4", "default"), generated=False)
    runtime, problems = _keys({"ci-2026q4": None, "default": None}, whole=True)  # the program drops the keys
    assert problems == [] and runtime == offline


def test_api_key_and_named_keys_together():
    keys, problems = _keys({"ci-2026q4": SECURE}, api_key_set=True)
    assert problems == [] and keys.names == ("ci-2026q4", "default")


@pytest.mark.parametrize(
    ("api_keys", "api_key_set", "whole", "path", "fragment"),
    [
        ({"CI": SECURE}, False, False, f"{PATH}.CI", "lowercase letters, digits and '-', 1–40"),
        ({"ci_1": SECURE}, False, False, f"{PATH}.ci_1", "is not allowed"),
        ({"a" * 41: SECURE}, False, False, f"{PATH}.{'a' * 41}", "1–40 characters"),
        ({"ci": "plain-text-key-0123456789"}, False, False, f"{PATH}.ci", "given in plain text"),
        ({"ci": {"secure": ""}}, False, False, f"{PATH}.ci", "given in plain text (or empty)"),
        ({}, False, False, PATH, "an empty map names no key"),
        ({"default": SECURE}, True, False, f"{PATH}.default", "api_key is shorthand for the key named `default`, and both are set"),
        (None, False, True, PATH, "given as one secret value"),
        (["default"], False, False, PATH, "a map of key name → key is expected"),
    ],
    ids=["uppercase", "underscore", "too-long", "plain", "empty-secure", "empty-map", "default-twice", "whole-secret", "list"],
)  # fmt: skip
def test_bad_key_names_name_the_key_path(api_keys, api_key_set, whole, path, fragment):
    _, problems = _keys(api_keys, api_key_set=api_key_set, whole=whole)
    assert len(problems) == 1
    assert problems[0].path == path and fragment in problems[0].message
    assert "plain-text-key" not in problems[0].message  # never the key


@pytest.mark.parametrize(
    ("key", "fragment"),
    [("", "empty"), ("short-key", "has 9 characters; at least 16"), ("has space in the key 0123", "bearer token may not"),
     ('quote"0123456789abcdef', "bearer token may not"), ("0123456789abcdef=x", "bearer token may not"),
     (None, "empty")],
)  # fmt: skip
def test_keys_are_checked_at_pulumi_up_without_showing_them(key, fragment):
    problems = key_value_problems({"ci": key}, {"ci": f"{PATH}.ci"})
    assert [p.path for p in problems] == [f"{PATH}.ci"] and fragment in problems[0].message
    if key:
        assert key not in str(problems[0])


def test_bearer_token_alphabet_is_accepted():
    assert key_value_problems({"a": "AZaz09-._~+/0123456==", "b": "x" * 16}, {}) == []


def test_several_keys_need_a_front_door():
    several = ClientKeys(names=("ci", "default"), generated=False)
    [problem] = front_door_problems(several, "service", PATH)
    assert problem.path == PATH and "need a front door" in problem.message
    for kind in ("session", "prefix", "round-robin", "gateway"):
        assert front_door_problems(several, kind, PATH) == []
    assert front_door_problems(ClientKeys(names=("ci",), generated=False), "service", PATH) == []


STACK_FILE = """
config:
  inference-platform:api_keys:
    ci-2026q4:
      secure: v1:AAAABBBBCCCC
    default:
      secure: v1:DDDDEEEEFFFF
"""


def test_per_path_secrets_in_a_stack_file_keep_their_names_readable():
    """What `pulumi config set --secret --path 'api_keys.<name>' <key>` writes."""
    values, secret_keys = parse_stack_text(STACK_FILE, "stacks/Pulumi.x.yaml")
    keys, problems = _keys(values[PATH], whole=PATH in secret_keys)
    assert problems == [] and keys.names == ("ci-2026q4", "default")


def _prod_with_keys(tmp_path, keys: dict, *, kind: str | None = None, api_key: bool = False):
    values, secrets = stack_values("prod")
    values[PATH] = {name: SECURE for name in keys}
    if api_key:
        values[f"{NS}api_key"] = None
        secrets.add(f"{NS}api_key")
    if kind is not None:
        values[f"{NS}router"] = {**values.get(f"{NS}router", {}), "kind": kind}
    return values, secrets


def test_load_config_carries_the_names(tmp_path):
    from infra.config import load_config

    values, secrets = _prod_with_keys(tmp_path, {"ci-2026q4": 1, "ops": 1}, api_key=True)
    cfg = load_config(values, stack="prod", secret_keys=secrets, base_dir=ROOT)
    assert cfg.client_keys == ClientKeys(names=("ci-2026q4", "default", "ops"), generated=False)
    assert "v1:AAAA" not in cfg.model_dump_json()


def test_load_config_refuses_several_keys_without_a_front_door(tmp_path):
    from infra.config import load_config

    values, secrets = _prod_with_keys(tmp_path, {"ci-2026q4": 1, "ops": 1}, kind="service")
    values[f"{NS}router"].pop("public", None)
    with pytest.raises(ConfigError) as err:
        load_config(values, stack="prod", secret_keys=secrets, base_dir=ROOT)
    assert f"{PATH}: 2 keys (ci-2026q4, ops) need a front door" in str(err.value)


def test_the_plan_names_the_keys_and_never_shows_one():
    plan = plan_of("prod")
    [note] = [n for n in plan.summary["notes"] if n.startswith("API keys:")]
    assert "`default`, generated at `pulumi up`" in note and "pulumi stack output api_key --show-secrets" in note
    assert "engine key" in note
    assert plan.front_door["client_keys"] == ["default"]


def test_the_schema_accepts_per_path_secrets_and_refuses_bad_names():
    import jsonschema

    from infra.stackschema import render_schema

    schema = render_schema()
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    doc["config"].update(yaml.safe_load(STACK_FILE)["config"])
    jsonschema.validate(doc, schema)
    doc["config"][PATH]["Bad_Name"] = SECURE
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)
