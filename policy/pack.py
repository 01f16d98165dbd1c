"""Wrap the plain rules in `rules.py` as CrossGuard policies.

Kept apart from `__main__.py` so that tests can build and exercise the policies without starting
the pack's gRPC server (which `PolicyPack(...)` does as soon as it is constructed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

try:  # imported as part of the repository (tests, tooling)
    from policy import rules
except ImportError:  # run by Pulumi from inside policy/
    import rules  # type: ignore[no-redef]

PACK_NAME = "inference-platform-guardrails"

# Config every policy accepts; each key is optional (see rules.py for defaults).
_CONFIG_SCHEMA = PolicyConfigSchema(
    properties={
        "environment": {"type": "string", "enum": list(rules.ENVIRONMENTS)},
        "dropletLimit": {"type": "integer", "minimum": 1},
    }
)


def _resource_validator(rule: rules.Rule) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        config = dict(args.get_config() or {})
        if rule.needs_options:
            # `protect` is a resource option: visible to resource policies as args.opts.protect.
            found = rule.check(
                args.resource_type, args.props, config, protect=bool(args.opts.protect), urn=args.urn
            )
        else:
            found = rule.check(args.resource_type, args.props, config)
        for message in found:
            report_violation(message, None)

    return validate


def _stack_validator(rule: rules.Rule) -> Callable[[StackValidationArgs, ReportViolation], None]:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [
            rules.StackResource(r.resource_type, r.props, r.name, r.urn, bool(r.opts.protect))
            for r in args.resources
        ]
        for message in rule.check(resources, dict(args.get_config() or {})):
            report_violation(message, None)

    return validate


def build_policies(enforcement_level: EnforcementLevel = EnforcementLevel.MANDATORY) -> list[Any]:
    """One CrossGuard policy per rule, all mandatory unless the pack config says otherwise."""
    policies: list[Any] = []
    for rule in rules.RULES:
        if rule.scope == "resource":
            policies.append(
                ResourceValidationPolicy(
                    name=rule.name,
                    description=rule.description,
                    validate=_resource_validator(rule),
                    enforcement_level=enforcement_level,
                    config_schema=_CONFIG_SCHEMA,
                )
            )
        else:
            policies.append(
                StackValidationPolicy(
                    name=rule.name,
                    description=rule.description,
                    validate=_stack_validator(rule),
                    enforcement_level=enforcement_level,
                    config_schema=_CONFIG_SCHEMA,
                )
            )
    return policies
