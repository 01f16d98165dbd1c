"""Run the real Pulumi program under Pulumi's mock runtime and record a deterministic Plan.

No engine, no cloud, no credentials: `infra/__main__.py` runs exactly as `pulumi up` would run it,
but every resource registration goes to a recording monitor and every invoke gets a realistic mock
answer. Secrets from the stack file are never decrypted: they are replaced by `[secret]` before the
program sees them, and any value the program marks secret is recorded as `[secret]` too.

The Plan is plain data (`Plan.to_json()` is byte-identical for identical input): the resources
with their engine-level inputs and options, the models with their layouts and predictions, and the
cost. The program hands the planning facts (layouts, reasons, cost) to this module through
`infra.platform.PlatformFacts`, not through stack outputs, so secrets and the plan never mix.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.config import NS, PROJECT, StackConfig, load_stack_file, read_stack_file, repo_root, stack_file

SECRET_MARKER = "[secret]"
UNKNOWN_MARKER = "[unknown]"
_SIG = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
_OUTPUT_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

# The recording monitor of the `run_program` call in progress, None otherwise. `infra/__main__.py`
# trusts it, not an environment variable, to know it runs under the offline plan: only then may a
# missing secret become the `[secret]` placeholder instead of stopping the program.
_ACTIVE_MONITOR: Any = None


def offline_plan_running() -> bool:
    """True only while `run_program` runs the program and its recording mock monitor is the one the
    Pulumi runtime talks to. A real `pulumi up` never imports this module's runner, and the engine's
    gRPC monitor is never ours, whatever the environment says."""
    if _ACTIVE_MONITOR is None:
        return False
    from pulumi.runtime import settings
    from pulumi.runtime.mocks import MockMonitor

    monitor = settings.get_monitor()
    return monitor is _ACTIVE_MONITOR and isinstance(monitor, MockMonitor)


MOCK_K8S_VERSIONS = ["1.34.1-do.0", "1.33.6-do.1", "1.33.1-do.5", "1.32.10-do.2", "1.31.14-do.3"]


# --------------------------------------------------------------------------- plan data


@dataclass
class Plan:
    """Everything the program would declare, as plain data."""

    stack: str
    project: str
    resources: list[dict[str, Any]]
    models: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "project": self.project,
            "summary": self.summary,
            "cost": self.cost,
            "models": self.models,
            "resources": self.resources,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        return cls(
            stack=data["stack"],
            project=data["project"],
            resources=data["resources"],
            models=data.get("models", []),
            cost=data.get("cost", {}),
            summary=data.get("summary", {}),
        )


def money(value: float | None) -> str:
    """US dollars as the plan summary and the plan diff both show them (`$35,368.00`), so a figure
    reads the same in a terminal and in a pull-request comment."""
    return "n/a" if value is None else f"${value:,.2f}"


def normalise(value: Any) -> Any:
    """Engine values → stable plain JSON: secrets and unknowns marked, resource refs by name, ints as ints."""
    if isinstance(value, dict):
        sig = value.get(_SIG)
        if sig == _SECRET_SIG:
            return SECRET_MARKER
        if sig == _RESOURCE_SIG:
            return {"$ref": _urn_name(value.get("urn", ""))}
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


def _urn_name(urn: str) -> str:
    """`urn:pulumi:stack::project::a$b::name` → `b::name` (type of the resource and its logical name)."""
    if not urn:
        return ""
    parts = urn.split("::")
    return f"{parts[2].split('$')[-1]}::{parts[3]}" if len(parts) >= 4 else urn


def _provider_name(ref: str) -> str | None:
    """A provider reference `urn::id` → the provider's `type::name`, or None for default providers."""
    if not ref:
        return None
    urn = ref.rsplit("::", 1)[0]
    name = _urn_name(urn)
    return None if name.split("::")[-1].startswith("default") else name


# --------------------------------------------------------------------------- recording monitor


def _record(request) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    inputs = normalise(MessageToDict(request.object, preserving_proto_field_name=True)) if request.object else {}
    timeouts = request.customTimeouts
    options: dict[str, Any] = {
        "protect": bool(request.protect),
        "ignoreChanges": sorted(request.ignoreChanges),
        "dependsOn": sorted(_urn_name(u) for u in request.dependencies),
        "deleteBeforeReplace": bool(request.deleteBeforeReplace),
        "retainOnDelete": bool(request.retainOnDelete),
        "replaceOnChanges": sorted(request.replaceOnChanges),
        "additionalSecretOutputs": sorted(request.additionalSecretOutputs),
        "customTimeouts": {k: v for k, v in (("create", timeouts.create), ("update", timeouts.update), ("delete", timeouts.delete)) if v},
        "provider": _provider_name(request.provider),
        "deletedWith": _urn_name(request.deletedWith) or None,
        "aliases": sorted(a.urn or a.spec.name for a in request.aliasSpecs) if request.aliasSpecs else [],
    }
    # Which resources each input's value comes from (`clusterId` → the cluster). The mock ids in
    # `inputs` are resolved and cannot say so; `infra diff` needs it to follow a replacement.
    input_dependencies = {
        key: sorted(_urn_name(u) for u in deps.urns)
        for key, deps in sorted(request.propertyDependencies.items())
        if deps.urns
    }
    return {
        "type": request.type,
        "name": request.name,
        "parent": _urn_name(request.parent) or None,
        "custom": bool(request.custom),
        "inputs": inputs,
        "options": options,
        "inputDependencies": input_dependencies,
    }


def _recording_monitor(mocks):
    from pulumi.runtime.mocks import MockMonitor

    class RecordingMonitor(MockMonitor):
        """A MockMonitor that also keeps every RegisterResource request (inputs and options)."""

        def __init__(self, mocks):
            super().__init__(mocks)
            self.records: list[dict[str, Any]] = []

        def RegisterResource(self, request):
            if request.type != "pulumi:pulumi:Stack":
                self.records.append(_record(request))
            return super().RegisterResource(request)

    return RecordingMonitor(mocks)


def mock_id(name: str) -> str:
    """The id the mocks give a resource: fixed per name, so plans are byte-identical across runs."""
    return f"{name}-id"


def _mock_kube_configs(endpoint: str) -> list[dict[str, str]]:
    """A DOKS cluster's `kubeConfigs`, the same for the resource and for `getKubernetesCluster`:
    fixed values, so plans stay byte-identical (the program only ever records them as secrets)."""
    return [
        {
            "rawConfig": "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
            "host": endpoint,
            "token": "mock-token",
            "clusterCaCertificate": "",
            "clientCertificate": "",
            "clientKey": "",
            "expiresAt": "2030-01-01T00:00:00Z",
        }
    ]


def _mock_endpoint(rid: str) -> str:
    return f"https://{rid}.k8s.ondigitalocean.com"


def _mocks_class():
    import pulumi

    class PlanMocks(pulumi.runtime.Mocks):
        """Realistic answers for what the program reads back from the providers."""

        def new_resource(self, args: pulumi.runtime.MockResourceArgs):
            state = dict(args.inputs)
            rid = mock_id(args.name)
            if args.typ == "digitalocean:index/kubernetesCluster:KubernetesCluster":
                state.setdefault("endpoint", _mock_endpoint(rid))
                state["kubeConfigs"] = _mock_kube_configs(state["endpoint"])
                state.setdefault("urn", f"do:kubernetes:{rid}")
                state.setdefault("clusterUrn", f"do:kubernetes:{rid}")
            elif args.typ == "digitalocean:index/nfs:Nfs":
                state.setdefault("host", "10.0.0.10")
                state.setdefault("mountPath", f"/{rid}")
                state.setdefault("status", "ACTIVE")
            elif args.typ.startswith("digitalocean:index/"):
                kind = args.typ.rsplit(":", 1)[-1].lower()
                state.setdefault("urn", f"do:{kind}:{rid}")
            return rid, state

        def call(self, args: pulumi.runtime.MockCallArgs):
            if args.token == "digitalocean:index/getKubernetesVersions:getKubernetesVersions":
                prefix = args.args.get("versionPrefix") or ""
                valid = [v for v in MOCK_K8S_VERSIONS if v.startswith(prefix)]
                return {"latestVersion": valid[0] if valid else "", "validVersions": valid, "versionPrefix": prefix}
            if args.token == "digitalocean:index/getKubernetesCluster:getKubernetesCluster":
                # Looked up by name; the program names clusters after their logical name.
                name = args.args.get("name") or ""
                rid = mock_id(name)
                return {
                    "id": rid,
                    "name": name,
                    "endpoint": _mock_endpoint(rid),
                    "kubeConfigs": _mock_kube_configs(_mock_endpoint(rid)),
                    "kubeconfigExpireSeconds": args.args.get("kubeconfigExpireSeconds"),
                    "status": "running",
                    "urn": f"do:kubernetes:{rid}",
                }
            return {}

    return PlanMocks()


# --------------------------------------------------------------------------- running the program


def _engine_config(values: dict[str, Any], secret_keys: set[str]) -> tuple[dict[str, str], list[str]]:
    """Stack-file values as the engine passes them: strings, JSON for structured values, secrets masked."""
    config: dict[str, str] = {}
    for key, value in values.items():
        if key in secret_keys:
            config[key] = SECRET_MARKER
        elif isinstance(value, str):
            config[key] = value
        else:
            config[key] = json.dumps(value)
    return config, sorted(secret_keys)


def run_program(stack: str, root: Path | None = None) -> tuple[list[dict[str, Any]], Any]:
    """Validate the stack file, run infra/__main__.py under mocks, return (records, PlatformFacts)."""
    import pulumi
    from pulumi.runtime import mocks as pulumi_mocks
    from pulumi.runtime import settings

    from infra import platform as platform_module

    root = root or repo_root()
    load_stack_file(stack, root)  # validate first: a config error never starts the program
    values, secret_keys = read_stack_file(stack_file(stack, root))
    config, secrets = _engine_config(values, secret_keys)

    monitor = _recording_monitor(_mocks_class())
    engine_log = _EngineLog()
    # Keep the caller's event loop (a test harness may own one) and hand it back afterwards.
    previous_loop = getattr(asyncio.get_event_loop_policy()._local, "_loop", None)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    settings.reset_options()
    pulumi.runtime.set_all_config(config, secrets)
    pulumi_mocks.set_mocks(
        _mocks_class(), project=PROJECT, stack=stack, preview=False, monitor=monitor, logger=engine_log.logger
    )
    platform_module.LAST_FACTS = None
    old_argv = sys.argv
    old_env = {k: os.environ.get(k) for k in ("INFRA_STACK_ROOT",)}
    os.environ["INFRA_STACK_ROOT"] = str(root)
    global _ACTIVE_MONITOR
    _ACTIVE_MONITOR = monitor
    try:
        from pulumi.runtime.stack import run_pulumi_func

        main = Path(__file__).resolve().parent / "__main__.py"
        loop.run_until_complete(run_pulumi_func(lambda: runpy.run_path(str(main), run_name="__main__")))
    finally:
        _ACTIVE_MONITOR = None
        sys.argv = old_argv
        for key, value in old_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        loop.close()
        _close_stray_event_loops(keep=previous_loop)
        if previous_loop is None or previous_loop.is_closed():
            # Leave a usable loop behind, as a fresh interpreter has one; closed at exit.
            previous_loop = asyncio.new_event_loop()
            atexit.register(previous_loop.close)
        asyncio.set_event_loop(previous_loop)
    facts = platform_module.LAST_FACTS
    if facts is not None:
        facts.notes += [m for m in engine_log.messages if m not in facts.notes]
    return monitor.records, facts


def _close_stray_event_loops(keep: asyncio.AbstractEventLoop | None = None) -> None:
    """Close the event loops Pulumi's mock monitor opens in its worker threads and never closes.

    Left open, they are closed by the garbage collector at interpreter exit, after their file
    descriptors are gone, which prints a spurious "Exception ignored ... Invalid file descriptor"
    traceback on stderr.
    """
    import gc

    for obj in gc.get_objects():
        if isinstance(obj, asyncio.AbstractEventLoop) and obj is not keep and not obj.is_running() and not obj.is_closed():
            obj.close()


class _EngineLog(logging.Handler):
    """Collects what the program logs through `pulumi.log` (warnings and errors) for the plan's
    notes, instead of letting it spill onto the terminal in between the summary's lines."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []
        self.logger = logging.getLogger(f"infra.offline.engine.{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.WARNING)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def build_plan(stack: str, root: Path | None = None) -> Plan:
    """The offline plan of one stack."""
    records, facts = run_program(stack, root)
    resources = sorted(records, key=lambda r: (r["type"], r["name"]))
    names = [(r["type"], r["name"]) for r in resources]
    if len(names) != len(set(names)):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise RuntimeError(f"duplicate resource names in the plan: {dupes}")
    cfg: StackConfig = facts.config
    return Plan(
        stack=stack,
        project=PROJECT,
        resources=resources,
        models=facts.models_json(),
        cost=facts.cost_json(),
        summary={
            "environment": cfg.environment,
            "region": cfg.region,
            "kubernetes_version_prefix": cfg.cluster.version,
            "ha": bool(cfg.cluster.ha),
            "protect": cfg.protect,
            "pools": facts.pools_json(),
            "secrets_to_set": cfg.missing_secrets,
            "notes": facts.notes,
        },
    )


def kubernetes_objects(plan: Plan) -> list[dict[str, Any]]:
    """The Kubernetes objects a plan declares, as manifests (apiVersion, kind, metadata, spec...)."""
    objects = []
    for res in plan.resources:
        if not res["type"].startswith("kubernetes:") or not res["custom"]:
            continue
        if res["type"].startswith("kubernetes:helm.sh/") or res["type"] == "pulumi:providers:kubernetes":
            continue
        obj = {k: v for k, v in res["inputs"].items() if k not in ("__defaults",)}
        if "apiVersion" not in obj or "kind" not in obj:
            continue
        if obj["kind"] == "Secret":
            obj = _redacted_secret(obj)
        objects.append(obj)
    return objects


def _redacted_secret(obj: dict[str, Any]) -> dict[str, Any]:
    """A Secret whose values are redacted: keep its shape valid, say so, never carry a value."""
    obj = dict(obj)
    redacted = False
    for key in ("data", "stringData"):
        if obj.get(key) == SECRET_MARKER or isinstance(obj.get(key), dict):
            redacted = redacted or obj.get(key) == SECRET_MARKER or SECRET_MARKER in obj[key].values()
            obj[key] = {}
    meta = dict(obj.get("metadata", {}))
    if redacted:
        meta["annotations"] = {**meta.get("annotations", {}), "inference-platform/redacted": "values are Pulumi secrets; apply with pulumi up"}
    obj["metadata"] = meta
    return obj


__all__ = ["Plan", "build_plan", "kubernetes_objects", "money", "normalise", "SECRET_MARKER", "NS"]
