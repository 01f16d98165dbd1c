"""Turn a StackPlan's resources into Pulumi resources: the only code that touches the Pulumi engine.

Nothing is decided here. `plan_stack` planned every resource — type, logical name, group, inputs
(rendered), options — in dependency order (infra/stack_resources/); `declare` wraps each one
generically, in that order:

- a group (a component) as a `PlannedGroup` of the planned type, its outputs registered once its
  members exist;
- a provider as a `ProviderResource`, a provider-implemented component (`yaml/v2:ConfigFile`) as a
  remote `ComponentResource`, everything else as a `CustomResource` of the planned type token,
  pinned to the plugin version of the installed SDK package;
- placeholders (infra/resource_graph/values.py) as Outputs: another resource's output, a stack
  secret, a provider function's answer, a pure function applied to Outputs.

The real program (`infra/__main__.py`) calls it; tests run it under the mock runtime and compare
what it registers with the plan's records (tests/resource_graph/test_declare_matches_plan.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any

import pulumi

from components.group import PlannedGroup
from infra.resource_graph.graph import PlannedResource, ResourceGraph
from infra.resource_graph.values import Apply, Invoke, Ref, Secret, SecretInput
from infra.stack_plan import StackPlan

# The Python SDK distribution whose version is each package's plugin version.
SDK_DISTRIBUTIONS = {"kubernetes": "pulumi_kubernetes", "digitalocean": "pulumi_digitalocean", "random": "pulumi_random"}


@dataclass(frozen=True)
class Secrets:
    """The stack's secret config values as Pulumi secret Outputs (None when not set)."""

    huggingface_token: Any = None
    api_key: Any = None
    api_keys: Mapping[str, Any] | None = None  # key name → its secret Output (names from the config)
    grafana_admin_password: Any = None
    alert_webhook_url: Any = None
    engine_key: Any = None  # the key engines behind a front door check (else generated)
    kubeconfig: Any = None  # cluster.existing: the Kubernetes provider's credentials

    def get(self, key: str) -> Any:
        """The secret a plan names by key (`huggingface_token`, `api_keys.<name>`)."""
        if key.startswith("api_keys."):
            value = (self.api_keys or {}).get(key.split(".", 1)[1])
        else:
            value = getattr(self, key)
        if value is None:
            raise ValueError(f"the plan needs secret {key!r} but it was not given")
        return value


@cache
def plugin_version(package: str) -> str | None:
    """The plugin version a package's installed SDK asks for (what its typed classes would send)."""
    dist = SDK_DISTRIBUTIONS.get(package)
    return metadata.version(dist) if dist else None


class _Declared:
    """The Pulumi resources declared so far, and the Outputs placeholders became."""

    def __init__(self, graph: ResourceGraph, secrets: Secrets) -> None:
        self.graph = graph
        self.secrets = secrets
        self.resources: dict[str, pulumi.Resource] = {}
        self._resolved: dict[int, Any] = {}  # one Output per placeholder object (one invoke per lookup)

    def value(self, value: Any, parent: pulumi.Resource | None = None) -> Any:
        """`value` with every placeholder turned into what Pulumi takes as an input."""
        if isinstance(value, (Ref, SecretInput, Secret, Invoke, Apply)):
            if id(value) not in self._resolved:
                self._resolved[id(value)] = self._placeholder(value, parent)
            return self._resolved[id(value)]
        if isinstance(value, Mapping):
            return {k: self.value(v, parent) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v, parent) for v in value]
        return value

    def _placeholder(self, value: Any, parent: pulumi.Resource | None) -> Any:
        if isinstance(value, Ref):
            resource = self.resources[value.resource]
            out = resource.id if value.output == "id" else getattr(resource, value.output)
            return pulumi.Output.secret(out) if value.secret else out
        if isinstance(value, SecretInput):
            return pulumi.Output.secret(self.secrets.get(value.key))
        if isinstance(value, Secret):
            return pulumi.Output.secret(self.value(value.value, parent))
        if isinstance(value, Apply):
            fn = value.fn
            return pulumi.Output.all(*[self.value(a, parent) for a in value.args]).apply(lambda args: fn(*args))
        return self._invoke(value, parent)

    def _invoke(self, invoke: Invoke, parent: pulumi.Resource | None) -> Any:
        args = self.value(invoke.args, parent)

        def pick(answer: Any) -> Any:
            for part in invoke.path:
                answer = answer[part]
            return invoke.check(answer) if invoke.check is not None else answer

        if invoke.blocking:
            # Its answer decides what is declared: called now, and a bad answer stops the program here.
            return pick(pulumi.runtime.invoke(invoke.token, args, opts=pulumi.InvokeOptions(parent=parent)).value)
        opts = pulumi.InvokeOutputOptions(parent=parent, depends_on=[self.resources[k] for k in invoke.depends_on])
        out = pulumi.runtime.invoke_output(invoke.token, args, opts=opts).apply(pick)
        return pulumi.Output.secret(out) if invoke.secret else out

    def options(self, res: PlannedResource) -> pulumi.ResourceOptions:
        o, get = res.options, self.resources.get
        return pulumi.ResourceOptions(
            parent=get(res.parent) if res.parent else None,
            provider=get(o.provider) if o.provider else None,
            depends_on=[self.resources[k] for k in o.depends_on] or None,
            deleted_with=get(o.deleted_with) if o.deleted_with else None,
            protect=o.protect,
            ignore_changes=list(o.ignore_changes) or None,
            delete_before_replace=o.delete_before_replace or None,
            retain_on_delete=o.retain_on_delete or None,
            replace_on_changes=list(o.replace_on_changes) or None,
            additional_secret_outputs=list(o.additional_secret_outputs) or None,
            custom_timeouts=pulumi.CustomTimeouts(**o.custom_timeouts) if o.custom_timeouts else None,
            version=None if res.is_group else plugin_version(res.package),
        )

    def declare(self, res: PlannedResource) -> pulumi.Resource:
        opts = self.options(res)
        parent = opts.parent
        if res.is_group:
            return PlannedGroup(res.type, res.name, opts)
        props = {**self.value(res.inputs, parent), **{o: None for o in res.outputs if o not in res.inputs and o != "id"}}
        if res.remote:
            return pulumi.ComponentResource(res.type, res.name, props, opts, remote=True)
        if res.is_provider:
            return pulumi.ProviderResource(res.package, res.name, props, opts)
        return pulumi.CustomResource(res.type, res.name, props, opts)


@dataclass(frozen=True)
class DeclaredGraph:
    """A declared graph: each planned resource's Pulumi resource by key, each group's outputs and
    the stack's outputs (Outputs inside)."""

    resources: dict[str, pulumi.Resource]
    group_outputs: dict[str, dict[str, Any]]
    outputs: dict[str, Any]


def declare_graph(graph: ResourceGraph, secrets: Secrets) -> DeclaredGraph:
    """Declare every resource of `graph` in its order, then register each group's outputs."""
    declared = _Declared(graph, secrets)
    for res in graph:
        declared.resources[res.key] = declared.declare(res)
    groups = {}
    for res in graph:
        if res.is_group:
            groups[res.key] = declared.value(res.group_outputs)
            declared.resources[res.key].register_outputs(groups[res.key])
    return DeclaredGraph(declared.resources, groups, declared.value(graph.outputs))


def declare(plan: StackPlan, secrets: Secrets) -> dict[str, Any]:
    """Declare every planned resource of the stack; returns the stack outputs."""
    for note in plan.notes:
        pulumi.log.info(note)
    return declare_graph(plan.resources, secrets).outputs
