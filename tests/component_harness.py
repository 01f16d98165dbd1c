"""Run Pulumi components under the mock runtime and record what they register.

Pulumi's `Mocks.new_resource` only sees a resource's inputs; the resource *options* (protect,
ignore_changes, provider, depends_on, ...) travel in the RegisterResource request. The
`RecordingMonitor` keeps every request so tests can assert both, and keeps the serialized wire
form so a test can check that no secret value leaves the program in plain text.

Usage:

    rec = run_program(lambda: DoksCluster("prod", args))
    cluster = rec.one("digitalocean:index/kubernetesCluster:KubernetesCluster")
    assert cluster.protect and cluster.inputs["ha"] is True
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

# A kubeconfig token the mocks hand out; tests assert it never appears in plain text.
FAKE_KUBECONFIG_TOKEN = "mock-doks-token-5f1e2d"  # noqa: S105 - test fixture, not a credential
FAKE_KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nclusters:\n- name: doks\n  cluster: {server: https://1.2.3.4}\n"
    f"users:\n- name: admin\n  user: {{token: {FAKE_KUBECONFIG_TOKEN}}}\n"
)
# What the cluster resource's state holds: issued at creation and, with the DO provider, only
# renewed by `pulumi refresh`. The Kubernetes provider must never use it.
STALE_KUBECONFIG_TOKEN = "stale-doks-token-in-state"  # noqa: S105 - test fixture, not a credential
STALE_KUBECONFIG = FAKE_KUBECONFIG.replace(FAKE_KUBECONFIG_TOKEN, STALE_KUBECONFIG_TOKEN)
FAKE_K8S_LATEST = {"1.33.": "1.33.1-do.5", "1.32.": "1.32.6-do.2", "1.34.": "1.34.0-do.1", "1.29.": ""}  # 1.29: retired
FAKE_NFS_HOST = "10.20.0.7"


@dataclass
class Registration:
    """One RegisterResource request as the engine would receive it."""

    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    wire: dict[str, Any]  # the serialized object, secrets still wrapped
    protect: bool | None
    ignore_changes: list[str]
    delete_before_replace: bool
    retain_on_delete: bool | None
    provider: str
    dependencies: list[str]
    deleted_with: str
    additional_secret_outputs: list[str]
    replace_on_changes: list[str]
    custom_timeouts: dict[str, str]

    @property
    def provider_urn(self) -> str:
        """The provider reference without its `::<id>` suffix."""
        return self.provider.rsplit("::", 1)[0] if self.provider else ""


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """MockMonitor that keeps every RegisterResource request."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        # (token, URNs of the resources registered before the invoke ran)
        self.invokes: list[tuple[str, list[str]]] = []

    def Invoke(self, request):  # noqa: N802 - gRPC method name
        self.invokes.append((request.tok, [r.urn for r in self.registrations]))
        return super().Invoke(request)

    def RegisterResource(self, request):  # noqa: N802 - gRPC method name
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        timeouts = request.customTimeouts
        self.registrations.append(
            Registration(
                type=request.type,
                name=request.name,
                urn=response.urn,
                parent=request.parent,
                custom=bool(request.custom),
                inputs=rpc.deserialize_properties(request.object),
                wire=json_format.MessageToDict(request.object),
                protect=request.protect if request.HasField("protect") else None,
                ignore_changes=list(request.ignoreChanges),
                delete_before_replace=bool(request.deleteBeforeReplace),
                retain_on_delete=(request.retainOnDelete if request.HasField("retainOnDelete") else None),
                provider=request.provider,
                dependencies=list(request.dependencies),
                deleted_with=request.deletedWith,
                additional_secret_outputs=list(request.additionalSecretOutputs),
                replace_on_changes=list(request.replaceOnChanges),
                custom_timeouts={
                    k: getattr(timeouts, k) for k in ("create", "update", "delete") if getattr(timeouts, k)
                },
            )
        )
        return response


class PlatformMocks(pulumi.runtime.Mocks):
    """Provider-shaped outputs for the resources and invokes this project uses.

    Only outputs the components read are faked (ids, URNs, kubeconfig, NFS host/path); every other
    output echoes the inputs, as the real providers do for plain arguments.
    """

    def __init__(self):
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (invoke token, arguments)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        rid = f"{args.name}-id"
        if args.typ == "digitalocean:index/kubernetesCluster:KubernetesCluster":
            state["kubeConfigs"] = [_kube_config(STALE_KUBECONFIG, STALE_KUBECONFIG_TOKEN)]
            state["clusterUrn"] = f"do:kubernetes:{rid}"
            state["endpoint"] = "https://1.2.3.4"
        elif args.typ == "digitalocean:index/vpc:Vpc":
            state["vpcUrn"] = f"do:vpc:{rid}"
        elif args.typ == "digitalocean:index/nfs:Nfs":
            state["host"] = FAKE_NFS_HOST
            state["mountPath"] = f"/{rid}"
            state["status"] = "ACTIVE"
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        if args.token == "digitalocean:index/getKubernetesVersions:getKubernetesVersions":
            prefix = args.args.get("versionPrefix", "")
            latest = FAKE_K8S_LATEST.get(prefix, "1.33.1-do.5")
            return {"latestVersion": latest, "validVersions": [latest] if latest else [], "versionPrefix": prefix}
        if args.token == "digitalocean:index/getKubernetesCluster:getKubernetesCluster":
            name = args.args.get("name", "")
            return {"id": f"{name}-id", "name": name, "kubeConfigs": [_kube_config(FAKE_KUBECONFIG, FAKE_KUBECONFIG_TOKEN)]}
        return {}


def _kube_config(raw: str, token: str) -> dict[str, str]:
    """One `kubeConfigs` entry with every field the SDK's result type requires."""
    return {
        "rawConfig": raw,
        "token": token,
        "host": "https://1.2.3.4",
        "clusterCaCertificate": "",
        "clientCertificate": "",
        "clientKey": "",
        "expiresAt": "2030-01-01T00:00:00Z",
    }


@dataclass
class Recording:
    """What a program registered, with lookups that fail loudly."""

    registrations: list[Registration]
    value: Any = None
    invokes: list[tuple[str, list[str]]] = field(default_factory=list)
    _by_urn: dict[str, Registration] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self._by_urn = {r.urn: r for r in self.registrations}

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> Registration:
        found = [r for r in self.of_type(type_) if name is None or r.name == name]
        if len(found) != 1:
            names = [(r.type, r.name) for r in self.registrations]
            raise AssertionError(f"expected one {type_} {name or ''}, found {len(found)} in {names}")
        return found[0]

    def by_urn(self, urn: str) -> Registration:
        return self._by_urn[urn]

    def types(self) -> list[str]:
        return [r.type for r in self.registrations]

    def wire_text(self) -> str:
        """Every registered input object as the engine receives it (secrets still wrapped)."""
        return json.dumps([r.wire for r in self.registrations], sort_keys=True)

    def plain_text_contains(self, needle: str) -> bool:
        """True if `needle` appears anywhere in an input outside a secret wrapper."""
        return any(_contains_plain(r.wire, needle) for r in self.registrations)


_SECRET_SIG = rpc._special_secret_sig  # type: ignore[attr-defined]
_SIG_KEY = rpc._special_sig_key  # type: ignore[attr-defined]


def _contains_plain(value: Any, needle: str) -> bool:
    if isinstance(value, dict):
        if value.get(_SIG_KEY) == _SECRET_SIG:
            return False
        return any(_contains_plain(v, needle) for v in value.values())
    if isinstance(value, list):
        return any(_contains_plain(v, needle) for v in value)
    return isinstance(value, str) and needle in value


def run_program(
    program: Callable[[], Any],
    *,
    stack: str = "dev",
    project: str = "inference-platform",
    mocks: pulumi.runtime.Mocks | None = None,
) -> Recording:
    """Run `program` (which declares resources) under mocks; return everything it registered."""
    mocks = mocks or PlatformMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor)
    result: dict[str, Any] = {}

    def body():
        result["value"] = program()

    _sync_await(run_pulumi_func(body))
    return Recording(monitor.registrations, result.get("value"), monitor.invokes)


def resolve(output: Any) -> tuple[Any, bool]:
    """The settled value of an Output (or plain value) and whether it is marked secret."""
    if not isinstance(output, pulumi.Output):
        return output, False
    value = _sync_await(output.future())
    secret = _sync_await(output.is_secret())
    return value, bool(secret)
