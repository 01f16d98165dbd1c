"""Run Pulumi code under Pulumi's mock runtime and record everything it registers.

For tests: `declare` run here registers what the plan records (tests/resource_graph/), and the
entry point's tests run the real program's `main` here; `infra plan` needs none of it. No engine,
no cloud, no credentials: every resource registration goes to a recording monitor, every invoke gets a realistic answer from `PlanMocks`, and the answers are fixed per
resource name, so the same program records byte-identical data on every run.

A `Registration` keeps what the engine would receive: inputs (deserialized, and the serialized
wire form with secrets still wrapped, so tests can prove no secret leaves in plain text) and the
resource options that `Mocks.new_resource` never sees (protect, ignore_changes, depends_on,
aliases, timeouts, ...).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc, settings

from infra.resource_graph.offline_values import (
    OFFLINE_K8S_VERSIONS,
    OFFLINE_KUBECONFIG_TOKEN,
    OFFLINE_NFS_HOST,
    SECRET_MARKER,
    STALE_KUBECONFIG_TOKEN,  # noqa: F401 - re-exported for the tests
    UNKNOWN_MARKER,
    offline_answer,
    offline_id,
    offline_state,
)

_SIG_KEY = rpc._special_sig_key  # type: ignore[attr-defined]
_SECRET_SIG = rpc._special_secret_sig  # type: ignore[attr-defined]
_RESOURCE_SIG = rpc._special_resource_sig  # type: ignore[attr-defined]
_OUTPUT_SIG = rpc._special_output_value_sig  # type: ignore[attr-defined]
_UNKNOWN = rpc.UNKNOWN
# The values the offline plan shows for what only the cloud knows, kept as the mocks' answers so a
# program run here registers what the plan records (infra/resource_graph/offline_values.py).
MOCK_K8S_VERSIONS = OFFLINE_K8S_VERSIONS
MOCK_NFS_HOST = OFFLINE_NFS_HOST
MOCK_KUBECONFIG_TOKEN = OFFLINE_KUBECONFIG_TOKEN
mock_id = offline_id


class PlanMocks(pulumi.runtime.Mocks):
    """Realistic answers for what the program reads back from the providers: the offline plan's
    (ids, URNs, endpoint, kubeconfig, NFS host and path, Kubernetes versions), every other output
    echoing the inputs, as the real providers do for plain arguments. `calls` records every invoke
    with its arguments."""

    def __init__(self, k8s_versions: tuple[str, ...] = MOCK_K8S_VERSIONS):
        self.k8s_versions = k8s_versions
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        return mock_id(args.name), offline_state(args.typ, args.name, args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        return offline_answer(args.token, args.args, self.k8s_versions)


# --------------------------------------------------------------------------- what was registered


@dataclass
class Registration:
    """One RegisterResource request as the engine would receive it."""

    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    inputs: dict[str, Any]  # deserialized (secrets unwrapped to their values)
    wire: dict[str, Any]  # the serialized object, secrets still wrapped
    protect: bool | None
    ignore_changes: list[str]
    delete_before_replace: bool
    retain_on_delete: bool | None
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    deleted_with: str
    additional_secret_outputs: list[str]
    replace_on_changes: list[str]
    custom_timeouts: dict[str, str]
    aliases: list[str]

    @property
    def provider_urn(self) -> str:
        """The provider reference without its `::<id>` suffix."""
        return self.provider.rsplit("::", 1)[0] if self.provider else ""

    def plan_record(self) -> dict[str, Any]:
        """The registration as the offline plan's JSON records it: engine-level inputs with
        secrets and unknowns marked, resources named `type::name`, options and input deps."""
        return {
            "type": self.type,
            "name": self.name,
            "parent": urn_name(self.parent) or None,
            "custom": self.custom,
            "inputs": normalise(self.wire) if self.wire else {},
            "options": {
                "protect": bool(self.protect),
                "ignoreChanges": sorted(self.ignore_changes),
                "dependsOn": sorted(urn_name(u) for u in self.dependencies),
                "deleteBeforeReplace": self.delete_before_replace,
                "retainOnDelete": bool(self.retain_on_delete),
                "replaceOnChanges": sorted(self.replace_on_changes),
                "additionalSecretOutputs": sorted(self.additional_secret_outputs),
                "customTimeouts": dict(self.custom_timeouts),
                "provider": _provider_name(self.provider),
                "deletedWith": urn_name(self.deleted_with) or None,
                "aliases": sorted(self.aliases),
            },
            # Which resources each input's value comes from (`clusterId` → the cluster). The mock
            # ids in `inputs` are resolved and cannot say so; `infra diff` follows a replacement by it.
            "inputDependencies": {
                key: sorted(urn_name(u) for u in urns) for key, urns in sorted(self.property_dependencies.items()) if urns
            },
        }


def normalise(value: Any) -> Any:
    """Engine values → stable plain JSON: secrets and unknowns marked, resource refs by name, ints as ints."""
    if isinstance(value, dict):
        sig = value.get(_SIG_KEY)
        if sig == _SECRET_SIG:
            return SECRET_MARKER
        if sig == _RESOURCE_SIG:
            return {"$ref": urn_name(value.get("urn", ""))}
        if sig == _OUTPUT_SIG:
            if value.get("secret"):
                return SECRET_MARKER
            return normalise(value["value"]) if "value" in value else UNKNOWN_MARKER
        return {k: normalise(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value == _UNKNOWN:
        return UNKNOWN_MARKER
    return value


def urn_name(urn: str) -> str:
    """`urn:pulumi:stack::project::a$b::name` → `b::name` (type of the resource and its logical name)."""
    if not urn:
        return ""
    parts = urn.split("::")
    return f"{parts[2].split('$')[-1]}::{parts[3]}" if len(parts) >= 4 else urn


def _provider_name(ref: str) -> str | None:
    """A provider reference `urn::id` → the provider's `type::name`, or None for default providers."""
    if not ref:
        return None
    name = urn_name(ref.rsplit("::", 1)[0])
    return None if name.split("::")[-1].startswith("default") else name


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """MockMonitor that keeps every RegisterResource request and every invoke."""

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
                inputs=rpc.deserialize_properties(request.object) if request.object else {},
                wire=json_format.MessageToDict(request.object) if request.object else {},
                protect=request.protect if request.HasField("protect") else None,
                ignore_changes=list(request.ignoreChanges),
                delete_before_replace=bool(request.deleteBeforeReplace),
                retain_on_delete=request.retainOnDelete if request.HasField("retainOnDelete") else None,
                provider=request.provider,
                dependencies=list(request.dependencies),
                property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
                deleted_with=request.deletedWith,
                additional_secret_outputs=list(request.additionalSecretOutputs),
                replace_on_changes=list(request.replaceOnChanges),
                custom_timeouts={k: getattr(timeouts, k) for k in ("create", "update", "delete") if getattr(timeouts, k)},
                aliases=[a.urn or a.spec.name for a in request.aliasSpecs] if request.aliasSpecs else [],
            )
        )
        return response


@dataclass
class Recording:
    """What a program registered, what it returned and what it logged, with lookups that fail loudly."""

    registrations: list[Registration]
    value: Any = None
    invokes: list[tuple[str, list[str]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # pulumi.log warnings and errors
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


def _contains_plain(value: Any, needle: str) -> bool:
    if isinstance(value, dict):
        if value.get(_SIG_KEY) == _SECRET_SIG:
            return False
        return any(_contains_plain(v, needle) for v in value.values())
    if isinstance(value, list):
        return any(_contains_plain(v, needle) for v in value)
    return isinstance(value, str) and needle in value


# --------------------------------------------------------------------------- running a program


def run_program(
    program: Callable[[], Any],
    *,
    stack: str = "dev",
    project: str = "inference-platform",
    mocks: PlanMocks | None = None,
) -> Recording:
    """Run `program` (which declares resources) under the mock runtime; return what it registered.

    Pulumi's runtime is process-global: this resets its settings and config, runs the program on
    an event loop of its own, and hands the caller's event loop back afterwards.
    """
    mocks = mocks or PlanMocks()
    monitor = RecordingMonitor(mocks)
    log = _EngineLog()
    previous_loop = getattr(asyncio.get_event_loop_policy()._local, "_loop", None)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    worker_loops = _WorkerLoops()
    loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="pulumi-mock", initializer=worker_loops.open))
    settings.reset_options()
    pulumi.runtime.set_all_config({}, [])
    pulumi_mocks.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor, logger=log.logger)
    result: dict[str, Any] = {}

    def body():
        result["value"] = program()

    try:
        from pulumi.runtime.stack import run_pulumi_func

        loop.run_until_complete(run_pulumi_func(body))
    finally:
        loop.close()
        worker_loops.close()
        if previous_loop is None or previous_loop.is_closed():
            # Leave a usable loop behind, as a fresh interpreter has one; closed at exit.
            previous_loop = asyncio.new_event_loop()
            atexit.register(previous_loop.close)
        asyncio.set_event_loop(previous_loop)
    return Recording(monitor.registrations, result.get("value"), monitor.invokes, log.messages)


def resolve(output: Any) -> tuple[Any, bool]:
    """The settled value of an Output (or plain value) and whether it is marked secret, for a test
    that kept an Output from the program it ran."""
    if not isinstance(output, pulumi.Output):
        return output, False
    # pulumi ≥ 3.2xx keeps one `_data` future (`_future` / `_is_secret` became async properties:
    # reading them would make coroutines nobody awaits); older releases keep two futures.
    data = getattr(output, "_data", None)
    if asyncio.isfuture(data) and data.done():
        settled = data.result()
        return (None if rpc.contains_unknowns(settled.value) else settled.value), bool(settled.is_secret)
    if isinstance(getattr(type(output), "_future", None), property):
        value_future = secret_future = None
    else:
        value_future, secret_future = output._future, output._is_secret
    if all(asyncio.isfuture(f) and f.done() for f in (value_future, secret_future)):
        # Settled while the program ran: read it here. Awaiting it again would need the program's
        # event loop, which `run` has closed; pulumi 3.231's _sync_await refuses a future of
        # another loop (newer releases tolerate it), so the dependency floor needs this path.
        value = value_future.result()
        return (None if rpc.contains_unknowns(value) else value), bool(secret_future.result())
    from pulumi.runtime.sync_await import _sync_await

    value = _sync_await(output.future())
    secret = _sync_await(output.is_secret())
    return value, bool(secret)


class _WorkerLoops:
    """The event loops of the worker threads Pulumi's mock monitor runs in, one per thread.

    The monitor's calls run in the program loop's default executor and await there through
    `_sync_await`, which opens an event loop for its thread and never closes it. Left open, they
    are closed by the garbage collector at interpreter exit, after their file descriptors are gone,
    which prints a spurious "Exception ignored ... Invalid file descriptor" traceback on stderr.
    Each worker thread is given its loop here when it starts (so `_sync_await` finds it instead of
    opening one), and the loops are closed when the program is done — instead of searching the
    whole heap for stray loops afterwards, which cost a plan more than its invariants do.
    """

    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []

    def open(self) -> None:
        """The executor's initializer: runs in each new worker thread."""
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self.loops.append(loop)

    def close(self) -> None:
        for loop in self.loops:
            if not loop.is_running() and not loop.is_closed():
                loop.close()


class _EngineLog(logging.Handler):
    """Collects what the program logs through `pulumi.log` at warning level and above, instead
    of letting it spill onto the terminal in between the plan summary's lines."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []
        self.logger = logging.getLogger(f"infra.mock_runtime.engine.{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.WARNING)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def placeholder_secrets(plan) -> Any:
    """Every secret the stack stores as a `[secret]` Output (call inside `run_program`: an Output
    needs its event loop). A required secret that is not set yet is a placeholder too, as the plan
    shows every resource before its secrets exist."""
    from infra.declare import Secrets

    cfg = plan.config
    stored = cfg.secrets_set | set(cfg.secrets_required)
    shorthand = "default" if "api_key" in stored else None
    named = {n: pulumi.Output.secret(SECRET_MARKER) for n in cfg.client_keys.names if not cfg.client_keys.generated and n != shorthand}
    return Secrets(**{key: pulumi.Output.secret(SECRET_MARKER) for key in stored}, api_keys=named or None)
