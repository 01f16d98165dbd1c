"""The checks that span sections (infra/config/cross_checks.py): one table, keyed by the key each
check reports, that says the truth — every key is a key of the stack file, every check in the module
is in the table and run by stack.py, and every problem a check reports in the corpus of stack files
(tests/bad_inputs, hostile_stacks, valid_stacks) is at a key the table lists for it."""

from __future__ import annotations

import ast
import copy
import functools
import inspect
import re
import typing

import yaml
from pydantic import BaseModel

from infra.config import NS, SECRET_KEYS, StackInput, load_config, parse_stack_text
from infra.config import cross_checks as cross
from infra.errors import ConfigError, Problem
from tests.conftest import ROOT
from tests.test_bad_inputs import _stack_text

CHECKS = {c.check for checks in cross.CROSS_CHECKS.values() for c in checks}


def _inner_model(annotation) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _is_key(path: str) -> bool:
    """`models[].rollout.steps[]`: a key of the stack file (a secret's, or one StackInput declares)."""
    if path in SECRET_KEYS:
        return True
    model: type[BaseModel] | None = StackInput
    for part in path.split("."):
        name = part.removesuffix("[]")
        if model is None or name not in model.model_fields:
            return False
        model = _inner_model(model.model_fields[name].annotation)
    return True


def test_the_table_names_keys_of_the_stack_file():
    for key, checks in cross.CROSS_CHECKS.items():
        assert _is_key(key) and not re.search(r"\[\d", key), key
        for check in checks:
            assert check.reads and all(_is_key(r) for r in check.reads), (key, check.reads)


def test_every_cross_check_is_in_the_table_and_run_by_stack_py():
    defined = {
        obj for name, obj in vars(cross).items()
        if inspect.isfunction(obj) and obj.__module__ == cross.__name__ and name.endswith("_problems")
    }
    assert defined == CHECKS
    source = (ROOT / "infra" / "config" / "stack.py").read_text()
    called = {n.attr for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "cross"}
    assert {c.__name__ for c in CHECKS} <= called


def test_checks_for_reads_an_error_key():
    assert cross.checks_for(f"{NS}gpu_runtime.mode")[0].check is cross.runtime_problems
    env = cross.checks_for(f"{NS}models[1].rollout.candidate.env.VLLM_SERVER_DEV_MODE")
    assert env == () and cross.checks_for(f"{NS}models[1].env.VLLM_SERVER_DEV_MODE")[0].check is cross.admin_switch_problems
    assert {c.check for c in cross.checks_for(f"{NS}models[0].rollout.candidate.image")} >= {cross.image_vendor_problems}
    assert cross.checks_for(f"{NS}models[0].rollout.candidate.layout") == ()
    assert cross.checks_for(f"{NS}network.vpc_cidr") == ()


def _corpus() -> list[tuple[str, str]]:
    cases = []
    for group in ("bad_inputs", "hostile_stacks", "valid_stacks"):
        for path in sorted((ROOT / "tests" / group).glob("*.yaml")):
            case = yaml.safe_load(path.read_text())
            if "argv" not in case:
                cases.append((f"{group}/{path.stem}", _stack_text(case)))
    return cases


def _gateway_with_an_epp_named_model(config: dict) -> None:
    config[NS + "router"] = {"kind": "gateway", "replicas": 2, "gateway": {"objectives": [{"name": "chat", "model": "nobody", "priority": 1}]}}
    model = copy.deepcopy(config[NS + "models"][0])
    config[NS + "models"].append({**model, "name": model["name"] + "-epp", "served_model_name": "other"})


def _old_kubernetes(config: dict) -> None:
    config[NS + "cluster"]["version"] = "1.30"  # KEDA 2.18 supports 1.31 to 1.33


# Stacks that make the checks the corpus does not reach report (a shipped stack, changed).
_MORE = {"gateway-epp-name-and-objective": ("staging", _gateway_with_an_epp_named_model), "old-kubernetes": ("prod", _old_kubernetes)}


def _more() -> list[tuple[str, str]]:
    out = []
    for name, (base, mutate) in _MORE.items():
        doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{base}.yaml").read_text())
        mutate(doc["config"])
        out.append((name, yaml.safe_dump(doc, sort_keys=False)))
    return out


def test_every_problem_a_cross_check_reports_is_at_a_key_the_table_lists_for_it(monkeypatch):
    seen: dict[typing.Callable, list[Problem]] = {check: [] for check in CHECKS}

    def recording(check):
        @functools.wraps(check)
        def wrapper(*args, **kwargs):
            out = check(*args, **kwargs)
            flat = [p for item in out for p in (item if isinstance(item, list) else [item])]
            seen[check].extend(flat)
            return out
        return wrapper

    for check in CHECKS:
        monkeypatch.setattr(cross, check.__name__, recording(check))
    for name, text in _corpus() + _more():
        try:
            values, secret_keys = parse_stack_text(text, name)
            load_config(values, stack="case", secret_keys=secret_keys, base_dir=ROOT)
        except ConfigError:
            pass  # what the corpus tests check; here only which key each cross-check reports
    wrong = [(c.__name__, p.path) for c, problems in seen.items() for p in problems
             if c not in {x.check for x in cross.checks_for(p.path)}]
    assert wrong == []
    unseen = [c.__name__ for c, problems in seen.items() if not problems]
    assert unseen == [], f"no stack makes {unseen} report"
