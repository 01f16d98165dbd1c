"""Planning Kubernetes objects and Helm releases into a group: the options a group hands its members.

Every member of a group (what used to be a component's children) is declared with the cluster's
provider, waits for what the group waits for, and — where the group says so — is deleted with the
cluster (tearing the cluster down then skips deleting each object one by one). These helpers carry
those options so each planning module only says what is particular to an object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from infra.charts.source import release_chart
from infra.render.secret_keys import with_keys
from infra.resource_graph.graph import GraphBuilder, Options, kubernetes_type
from infra.resource_graph.values import Secret

HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE_TYPE = "kubernetes:yaml/v2:ConfigFile"
# pulumi-kubernetes' Python SDK sends `compat: "true"` with every Release: the provider then
# accepts the SDK's field names. A Release planned here is declared without the SDK class, so the
# plan says it.
RELEASE_COMPAT = "true"
# A Secret's values are secret outputs as well as secret inputs (pulumi-kubernetes' Secret class
# marks them so; declared generically, the plan says it).
SECRET_OUTPUTS = ("data", "stringData")


@dataclass(frozen=True)
class Group:
    """A group's key and the options its members get (see the module docstring)."""

    builder: GraphBuilder
    key: str
    name: str  # the group's logical name: members are named `<name>-...`
    provider: str | None = None
    depends_on: tuple[str, ...] = ()
    deleted_with: str | None = None
    protect: bool = False

    def options(self, *, depends_on: Iterable[str] = (), **extra: Any) -> Options:
        return Options(
            protect=self.protect,
            provider=self.provider,
            depends_on=(*self.depends_on, *depends_on),
            deleted_with=self.deleted_with,
            **extra,
        )

    def object(self, name: str, obj: Mapping[str, Any], *, depends_on: Iterable[str] = (), outputs: Sequence[str] = (),
               **extra: Any) -> str:  # fmt: skip
        """A rendered Kubernetes object as the member `name`."""
        return self.builder.resource(
            kubernetes_type(obj), name, obj, parent=self.key, options=self.options(depends_on=depends_on, **extra),
            outputs=outputs,
        )

    def secret(self, name: str, shape: Mapping[str, Any], string_data: Any, *, keys: Iterable[str] | None = None,
               depends_on: Iterable[str] = ()) -> str:  # fmt: skip
        """A Secret whose values are all secret (`shape`: its apiVersion, kind, metadata, type). Its
        key names (those of `string_data`, or `keys` when the map itself is computed) go in an
        annotation the plan can read (infra/render/secret_keys.py); values never do."""
        names = list(string_data) if keys is None else list(keys)
        obj = {**shape, "metadata": with_keys(dict(shape["metadata"]), names), "stringData": Secret(string_data)}
        return self.object(name, obj, depends_on=depends_on, additional_secret_outputs=SECRET_OUTPUTS)

    def release(self, name: str, inputs: Mapping[str, Any], *, depends_on: Iterable[str] = (), outputs: Sequence[str] = ()) -> str:
        return self.builder.resource(
            HELM_RELEASE_TYPE, name, {**inputs, "compat": RELEASE_COMPAT}, parent=self.key,
            options=self.options(depends_on=depends_on), outputs=outputs,
        )

    def config_file(self, name: str, url: str, *, depends_on: Iterable[str] = ()) -> str:
        """pulumi-kubernetes' `yaml/v2:ConfigFile` (a component the provider implements) of a URL."""
        return self.builder.resource(
            CONFIG_FILE_TYPE, name, {"file": url}, parent=self.key, options=self.options(depends_on=depends_on), remote=True,
        )

    def without_deleted_with(self) -> Group:
        return replace(self, deleted_with=None)


def open_group(builder: GraphBuilder, type_: str, name: str, *, provider: str | None = None, depends_on: Iterable[str] = (),
               deleted_with: str | None = None, protect: bool = False, group_depends_on: Iterable[str] = (),
               group_deleted_with: str | None = None) -> Group:  # fmt: skip
    """A new group and the options its members get. `group_depends_on` / `group_deleted_with` are
    the group's own options (Pulumi hands a group's dependencies to nothing; its members carry
    their own), `depends_on` / `deleted_with` what each member gets."""
    key = builder.group(
        type_, name, options=Options(protect=protect, depends_on=tuple(group_depends_on), deleted_with=group_deleted_with)
    )
    return Group(builder, key, name, provider, tuple(depends_on), deleted_with, protect)


def chart_inputs(chart: str, version: str, repo: str) -> dict[str, Any]:
    """`chart`, `version` and `repositoryOpts` of a Release: from a local archive (INFRA_CHART_DIR)
    or the chart's repository (infra/charts/source.py `release_chart`)."""
    source = release_chart(chart, version, repo)
    inputs: dict[str, Any] = {"chart": source.chart, "version": source.version}
    if source.repo:
        inputs["repositoryOpts"] = {"repo": source.repo}
    return inputs

