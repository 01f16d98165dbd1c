"""The stack's resources as a plain value: every cloud resource and Kubernetes object, grouped.

`plan_stack` fills a `ResourceGraph` with what `pulumi up` will create — each resource's type
token, logical name, group (its parent component), inputs as the engine receives them (rendered
objects; placeholders where a value comes from elsewhere, infra/resource_graph/values.py) and its
options (protect, dependencies, timeouts, ...). Nothing here knows Pulumi: `declare` wraps each
entry generically, the offline plan records each as the engine would see it
(infra/resource_graph/records.py), and the invariants, the security scan and chart templating read
the same value.

Keys are `type::name`, the form the plan file uses, so a key reads the same in an error, in the
plan JSON and in `infra diff`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PROVIDER_TYPE_PREFIX = "pulumi:providers:"


def key_of(type_: str, name: str) -> str:
    return f"{type_}::{name}"


@dataclass(frozen=True)
class Options:
    """Resource options as the plan decides them (dependencies by key; expanded later as Pulumi
    expands a group into its members)."""

    protect: bool = False
    depends_on: tuple[str, ...] = ()
    provider: str | None = None  # key of an explicit provider; None: the package's default provider
    deleted_with: str | None = None
    ignore_changes: tuple[str, ...] = ()
    delete_before_replace: bool = False
    retain_on_delete: bool = False
    replace_on_changes: tuple[str, ...] = ()
    additional_secret_outputs: tuple[str, ...] = ()
    custom_timeouts: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PlannedResource:
    """One resource `pulumi up` registers.

    custom: a cloud or Kubernetes resource (or a provider); False for a group (a component).
    remote: a component a provider implements (pulumi-kubernetes' `yaml/v2:ConfigFile`).
    outputs: the outputs other values read (engine names); a group's outputs are what it exports.
    """

    type: str
    name: str
    inputs: Mapping[str, Any]
    parent: str | None
    options: Options = field(default_factory=Options)
    custom: bool = True
    remote: bool = False
    outputs: tuple[str, ...] = ()
    group_outputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return key_of(self.type, self.name)

    @property
    def package(self) -> str:
        """The provider package: `kubernetes`, `digitalocean`, `random` (a provider's own package for providers)."""
        if self.type.startswith(PROVIDER_TYPE_PREFIX):
            return self.type[len(PROVIDER_TYPE_PREFIX):]
        return self.type.split(":", 1)[0]

    @property
    def is_provider(self) -> bool:
        return self.type.startswith(PROVIDER_TYPE_PREFIX)

    @property
    def is_group(self) -> bool:
        return not self.custom and not self.remote


@dataclass
class ResourceGraph:
    """Every planned resource in declaration order (a parent before its children, a dependency
    before its dependents), with the stack's outputs."""

    resources: list[PlannedResource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    _by_key: dict[str, PlannedResource] = field(default_factory=dict, repr=False)

    def add(self, resource: PlannedResource) -> str:
        """Add `resource` (its parent, provider and dependencies must be in the graph); its key."""
        if resource.key in self._by_key:
            raise ValueError(f"two planned resources named {resource.key}")
        missing = [k for k in (resource.parent, resource.options.provider, resource.options.deleted_with, *resource.options.depends_on)
                   if k is not None and k not in self._by_key]  # fmt: skip
        if missing:
            raise ValueError(f"{resource.key} refers to resources planned after it or not at all: {missing}")
        self.resources.append(resource)
        self._by_key[resource.key] = resource
        return resource.key

    def __getitem__(self, key: str) -> PlannedResource:
        return self._by_key[key]

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __iter__(self) -> Iterator[PlannedResource]:
        return iter(self.resources)

    def __len__(self) -> int:
        return len(self.resources)

    def children(self, key: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.parent == key]

    def of_type(self, type_: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.type == type_]


class GraphBuilder:
    """Adds planned resources to a graph with the options a group hands its members (the provider,
    what every member waits for, what deletes them with it)."""

    def __init__(self, graph: ResourceGraph) -> None:
        self.graph = graph

    def group(self, type_: str, name: str, *, parent: str | None = None, options: Options | None = None,
              outputs: Mapping[str, Any] | None = None) -> str:  # fmt: skip
        return self.graph.add(
            PlannedResource(type_, name, {}, parent, options or Options(), custom=False, group_outputs=dict(outputs or {}))
        )

    def resource(self, type_: str, name: str, inputs: Mapping[str, Any], *, parent: str | None,
                 options: Options | None = None, outputs: Sequence[str] = (), remote: bool = False) -> str:  # fmt: skip
        return self.graph.add(
            PlannedResource(type_, name, dict(inputs), parent, options or Options(), custom=not remote, remote=remote,
                            outputs=tuple(outputs))  # fmt: skip
        )

    def set_group_outputs(self, key: str, outputs: Mapping[str, Any]) -> None:
        """A group's outputs, once its members exist (they read the members' outputs)."""
        index = next(i for i, r in enumerate(self.graph.resources) if r.key == key)
        old = self.graph.resources[index]
        new = PlannedResource(old.type, old.name, old.inputs, old.parent, old.options, custom=old.custom,
                              remote=old.remote, outputs=old.outputs, group_outputs=dict(outputs))  # fmt: skip
        self.graph.resources[index] = new
        self.graph._by_key[key] = new


def kubernetes_type(obj: Mapping[str, Any]) -> str:
    """The pulumi-kubernetes type token of a rendered object: `kubernetes:apps/v1:Deployment`,
    `kubernetes:core/v1:Service` (the core group is `core`)."""
    api_version = obj["apiVersion"]
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{obj['kind']}"

