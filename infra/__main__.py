"""Pulumi entry point: load config → plan_stack → the whole-plan check → declare → export outputs.

A configuration or planning error, or a broken whole-plan invariant (`infra.offline.check_before_up`,
the check `infra plan` runs, in this process), stops the program before any resource is declared,
with one clear message (pulumi.RunError prints it without a traceback), so a bad config never
half-applies a stack. `infra plan` does not run this file: it records the same StackPlan without
Pulumi.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# Pulumi runs `main: infra/` as a directory, which puts infra/ itself on sys.path; then a library's
# `import platform` would load a module of ours by that name instead of the standard library's.
# Drop that entry and put the project root there instead, so only `infra.<module>` names ours.
_HERE = Path(__file__).resolve().parent
PROJECT_ROOT = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

import pulumi  # noqa: E402
from pulumi.runtime import config as runtime_config  # noqa: E402

from infra.errors import ConfigError, UserError  # noqa: E402

try:  # the catalogs load on import: a malformed INFRA_GPU_CATALOG is one line, not a traceback
    from infra.config import NS, SECRET_KEYS, load_config
    from infra.config.allow_lists import stack_exposure
    from infra.config.client_keys import DEFAULT_KEY_NAME, ClientKeys, key_value_problems
    from infra.declare import Secrets, declare
    from infra.offline import check_before_up
    from infra.stack_plan import plan_stack
except UserError as _err:
    raise pulumi.RunError(_err.render()) from None


def runtime_config_values() -> dict[str, Any]:
    """Config values as the Pulumi engine handed them to the program, decrypted, structured values
    (JSON text) decoded. Secrets among them go no further than `values_from_pulumi_runtime` and
    `named_keys`."""
    merged: dict[str, Any] = dict(runtime_config.get_config_env())
    merged.update(runtime_config.CONFIG.get())
    return {key: _decoded(value) for key, value in merged.items()}


def _decoded(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            pass
    return value


def values_from_pulumi_runtime() -> tuple[dict[str, Any], set[str]]:
    """The values config validation sees: secrets as None, `api_keys` as its names only."""
    merged = runtime_config_values()
    secret_keys = set(runtime_config.get_config_secret_keys_env()) | {k for k in merged if runtime_config.is_config_secret(k)}
    values: dict[str, Any] = {}
    for key, value in merged.items():
        if key == f"{NS}api_keys":  # the names of the named keys; their keys never carried past this point
            values[key] = {name: None for name in value} if isinstance(value, dict) else None
        elif key in secret_keys:
            values[key] = None  # never carried past this point
        else:
            values[key] = value
    return values, secret_keys


def named_keys(config: pulumi.Config, keys: ClientKeys, api_keys: Any, api_key: str | None, engine_key: str | None = None) -> dict[str, Any] | None:
    """Every named key as its own Pulumi secret Output, after checking the keys themselves and the
    engine key (length, alphabet; a ConfigError names the config path, never the key)."""
    given = dict(api_keys) if isinstance(api_keys, dict) else {}
    paths = {name: f"{NS}api_keys.{name}" for name in given}
    checked = dict(given)
    if api_key is not None:
        checked[DEFAULT_KEY_NAME], paths[DEFAULT_KEY_NAME] = api_key, f"{NS}api_key"
    problems = key_value_problems(checked, paths)
    if engine_key is not None:  # checked like a client key, and named by its own path
        problems += key_value_problems({"engine_key": engine_key}, {"engine_key": f"{NS}engine_key"})
    if problems:
        raise ConfigError(problems)
    if not given:
        return None
    whole = config.require_secret_object("api_keys")
    return {name: whole.apply(lambda d, n=name: str(d[n])) for name in keys.names if name in given}


def main() -> None:
    stack = pulumi.get_stack()
    values, secret_keys = values_from_pulumi_runtime()
    try:
        cfg = load_config(values, stack=stack, secret_keys=secret_keys, base_dir=PROJECT_ROOT, source=f"stack {stack}")
        blockers = stack_exposure(cfg.environment, cfg.cluster.api_allow_list, cfg.router).blockers
        if blockers:
            raise ConfigError("; ".join(f"{b.path}: {b.message}" for b in blockers))
        if cfg.missing_secrets:
            raise ConfigError(
                "missing secrets: "
                + "; ".join(f"{NS}{k} ({SECRET_KEYS[k]}): pulumi config set --secret {k} ..." for k in cfg.missing_secrets)
            )
        plan = plan_stack(cfg)
        # The whole-plan invariants, as `infra plan` runs them, before anything is declared.
        problems = check_before_up(plan, PROJECT_ROOT)
        if problems:
            raise ConfigError(problems, source=f"stack {stack}")
        config = pulumi.Config("inference-platform")
        given = runtime_config_values()
        secrets = Secrets(**{key: config.get_secret(key) for key in SECRET_KEYS if key != "api_keys"},
                          api_keys=named_keys(config, cfg.client_keys, given.get(f"{NS}api_keys"), given.get(f"{NS}api_key"),
                                             given.get(f"{NS}engine_key")))
        outputs = declare(plan, secrets)
    except ConfigError as err:
        raise pulumi.RunError(err.render()) from None
    for name, value in outputs.items():
        pulumi.export(name, value)


main()
