"""Pulumi entry point: load and validate the stack config, build the platform, export outputs.

A configuration error stops the program before any resource is declared, with one clear message
(pulumi.RunError prints it without a traceback), so a bad config never half-applies a stack.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Pulumi runs `main: infra/` as a directory, which puts infra/ itself on sys.path; then a library's
# `import platform` would load infra/platform.py instead of the standard library's module. Drop that
# entry and put the repository root there instead, so only `infra.platform` names ours.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.insert(0, str(_HERE.parent))
ROOT = Path(os.environ.get("INFRA_STACK_ROOT") or _HERE.parent)

import pulumi  # noqa: E402

from infra.config import NS, SECRET_KEYS, load_config, values_from_pulumi_runtime  # noqa: E402
from infra.errors import ConfigError  # noqa: E402
from infra.platform import Secrets, build_platform  # noqa: E402


def _secret(key: str, required: bool):
    """A secret config value as a secret Output, or None when unset (never read in plain text).

    Under the offline plan a required-but-unset secret becomes a redacted placeholder so the plan
    still shows every resource; the summary lists it under "secrets to set".
    """
    value = pulumi.Config("inference-platform").get_secret(key)
    if value is None and required and _offline():
        value = pulumi.Output.secret("[secret]")
    return value


def main() -> None:
    values, secret_keys = values_from_pulumi_runtime()
    try:
        cfg = load_config(values, stack=pulumi.get_stack(), secret_keys=secret_keys, base_dir=ROOT, source=f"stack {pulumi.get_stack()}")
    except ConfigError as err:
        raise pulumi.RunError(err.render()) from None
    if cfg.missing_secrets and not _offline():
        raise pulumi.RunError(
            "missing secrets: "
            + "; ".join(f"{NS}{k} ({SECRET_KEYS[k]}): pulumi config set --secret {k} ..." for k in cfg.missing_secrets)
        )
    secrets = Secrets(**{k: _secret(k, k in cfg.secrets_required) for k in SECRET_KEYS})
    outputs = build_platform(cfg, secrets, ROOT)
    for name, value in outputs.items():
        pulumi.export(name, value)


def _offline() -> bool:
    """True under `infra plan`, where missing secrets are listed instead of fatal.

    Decided by the runtime itself, not by an environment variable: the offline runner must be
    running this program against its own recording mock monitor. An `INFRA_OFFLINE_PLAN=1` left in
    a shell would otherwise let a real `pulumi up` deploy the literal `[secret]` placeholder as
    the API key or the Grafana password.
    """
    offline = sys.modules.get("infra.offline")
    return offline is not None and offline.offline_plan_running()


main()
