"""`infra doctor` for an existing-cluster stack (cluster.existing): what the cluster's API says about
the stack's assumptions, with no DigitalOcean token.

The Kubernetes API is reached with a kubeconfig file (`--kubeconfig FILE` or $KUBECONFIG: doctor
cannot decrypt the stack's `kubeconfig` secret) over plain HTTPS (requests): a bearer token, a
client certificate, or an exec credential plugin (`doctl kubernetes cluster kubeconfig save` writes
one); nothing heavier. Three reads: GET /version, GET /api/v1/nodes, GET /apis/cilium.io/v2.

The verdicts are pure functions of those answers (`cluster_checks`), so they are tested with fake
answers (tests/commands/test_doctor_existing.py) and against a real control plane
(tests/cluster/test_doctor_existing.py).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infra.errors import Problem, UserError
from infra.preflight import Check, check_pinned_versions

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 20.0
GPU_RESOURCES = {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}


# --------------------------------------------------------------------------- what the stack says


@dataclass(frozen=True)
class PoolExpectation:
    """One pool as the stack describes it: its selector, how many nodes, their GPUs."""

    name: str
    node_selector: Mapping[str, str]
    nodes: int
    gpu_resource: str  # amd.com/gpu | nvidia.com/gpu
    gpus_per_node: int
    plugin_installed_by_stack: bool  # the stack installs the device plugin: no GPU is advertised before `pulumi up`


@dataclass(frozen=True)
class ClusterExpectation:
    context: str | None
    system_node_selector: Mapping[str, str]
    pools: tuple[PoolExpectation, ...]


def expectation_from_config(cfg: Any) -> ClusterExpectation:
    """What doctor checks of an existing-cluster StackConfig."""
    existing = cfg.cluster.existing
    pools = tuple(
        PoolExpectation(
            name=p.name, node_selector=dict(p.node_selector or {}), nodes=int(p.nodes or 0),
            gpu_resource=GPU_RESOURCES[p.gpu.vendor], gpus_per_node=p.gpu.gpus,
            plugin_installed_by_stack=p.gpu.vendor == "amd" and cfg.gpu_runtime.mode != "doks-managed",
        )  # fmt: skip
        for p in cfg.gpu_pools
    )
    return ClusterExpectation(context=existing.context, system_node_selector=dict(existing.system_node_selector or {}), pools=pools)


# --------------------------------------------------------------------------- the verdicts (pure)


@dataclass(frozen=True)
class ClusterAnswers:
    """What the API server answered (None: the request failed; `errors` says why)."""

    version: Mapping[str, Any] | None = None
    nodes: Sequence[Mapping[str, Any]] | None = None
    cilium: bool | None = None  # cilium.io/v2 served
    errors: Mapping[str, str] = field(default_factory=dict)


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name", "?"))


def _ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _unschedulable(node: Mapping[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def _matches(node: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    labels = _labels(node)
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _allocatable(node: Mapping[str, Any], resource: str) -> int:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0


def _names(nodes: Sequence[Mapping[str, Any]], limit: int = 4) -> str:
    names = [_name(n) for n in nodes]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _selector_text(selector: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def check_version(answers: ClusterAnswers) -> list[Check]:
    if answers.version is None:
        why = answers.errors.get("version", "no answer")
        return [Check("api server", "fail", f"GET /version: {why}",
                      "check the kubeconfig's server, credentials and context, and that this machine can reach the API")]
    git = str(answers.version.get("gitVersion", ""))
    major, minor = str(answers.version.get("major", "")), str(answers.version.get("minor", "")).rstrip("+")
    checks = [Check("api server", "pass", f"reachable, Kubernetes {git or f'{major}.{minor}'}")]
    if major.isdigit() and minor.isdigit():
        pinned = check_pinned_versions(f"{major}.{minor}")
        checks.append(Check(pinned.name, pinned.status, pinned.detail, pinned.fix.replace(
            "or keep cluster.version inside those ranges", "or upgrade the cluster into those ranges")))
    return checks


def check_pools(expect: ClusterExpectation, nodes: Sequence[Mapping[str, Any]]) -> list[Check]:
    """Each pool's selector matches at least `nodes` Ready, schedulable nodes, each advertising the
    size's GPUs; no node matches two pools (or a pool and the system selector)."""
    checks = []
    for pool in expect.pools:
        name = f"pool {pool.name}"
        matched = [n for n in nodes if _matches(n, pool.node_selector)]
        usable = [n for n in matched if _ready(n) and not _unschedulable(n)]
        sel = _selector_text(pool.node_selector)
        if len(usable) < pool.nodes:
            not_ready = [n for n in matched if n not in usable]
            extra = f" ({len(not_ready)} more not Ready or cordoned: {_names(not_ready)})" if not_ready else ""
            checks.append(Check(name, "fail", f"{sel} matches {len(usable)} Ready node(s){extra}; gpu_pools[].nodes is {pool.nodes}",
                                f"label {pool.nodes} GPU nodes {sel}, or set nodes to {len(usable)}" if usable else
                                f"label the pool's nodes {sel} (kubectl label node NAME ...), or fix gpu_pools[].node_selector"))
            continue
        short = [n for n in usable if _allocatable(n, pool.gpu_resource) < pool.gpus_per_node]
        if short and pool.plugin_installed_by_stack:
            checks.append(Check(name, "warn", (
                f"{len(usable)} Ready node(s) match {sel}; {len(short)} advertise fewer than {pool.gpus_per_node} {pool.gpu_resource} "
                f"({_names(short)}) — expected before `pulumi up` installs the device plugin (gpu_runtime.mode)"),
                "after `pulumi up`, check again: each node must then advertise the size's GPUs"))
        elif short:
            have = ", ".join(f"{_name(n)}: {_allocatable(n, pool.gpu_resource)}" for n in short[:4])
            checks.append(Check(name, "fail", (
                f"{len(short)} of the {len(usable)} Ready node(s) matching {sel} advertise fewer than {pool.gpus_per_node} "
                f"allocatable {pool.gpu_resource} ({have})"),
                "install the cluster's GPU device plugin (or set gpu_runtime.mode device-plugin / gpu-operator), or fix the pool's size"))
        else:
            more = f" ({len(usable) - pool.nodes} more than gpu_pools[].nodes: unused by the plan)" if len(usable) > pool.nodes else ""
            checks.append(Check(name, "pass", f"{len(usable)} Ready node(s) match {sel}, each with ≥ {pool.gpus_per_node} {pool.gpu_resource}{more}"))
    if expect.system_node_selector:
        sel = _selector_text(expect.system_node_selector)
        system = [n for n in nodes if _matches(n, expect.system_node_selector) and _ready(n) and not _unschedulable(n)]
        checks.append(Check("system nodes", "pass", f"{len(system)} Ready node(s) match {sel}") if system else
                      Check("system nodes", "fail", f"no Ready node matches {sel}: the router, Prometheus and the operators would stay Pending",
                            f"label the nodes for system workloads {sel}, or fix cluster.existing.system_node_selector"))
    else:
        checks.append(Check("system nodes", "warn", "cluster.existing.system_node_selector is not set: system pods are not pinned",
                            "set it to the labels of the nodes for system workloads"))
    owners: dict[str, list[str]] = {}
    selectors = [(f"gpu_pools {p.name}", p.node_selector) for p in expect.pools]
    if expect.system_node_selector:
        selectors.append(("system", expect.system_node_selector))
    for node in nodes:
        for who, selector in selectors:
            if _matches(node, selector):
                owners.setdefault(_name(node), []).append(who)
    shared = {node: who for node, who in owners.items() if len(who) > 1}
    if shared:
        listed = "; ".join(f"{node}: {' and '.join(who)}" for node, who in sorted(shared.items())[:4])
        checks.append(Check("pool overlap", "fail", f"{len(shared)} node(s) match two selectors ({listed})",
                            "give each pool (and the system nodes) labels no other pool's nodes carry"))
    else:
        checks.append(Check("pool overlap", "pass", "no node matches two selectors"))
    return checks


def cluster_checks(expect: ClusterExpectation, answers: ClusterAnswers) -> list[Check]:
    """Every verdict of an existing cluster from the API's answers."""
    checks = check_version(answers)
    if answers.version is None:
        return checks
    if answers.nodes is None:
        checks.append(Check("nodes", "fail", f"GET /api/v1/nodes: {answers.errors.get('nodes', 'no answer')}",
                            "the kubeconfig's user needs `list nodes` (cluster-wide) to deploy the platform"))
    else:
        checks += check_pools(expect, answers.nodes)
    if answers.cilium is False:
        checks.append(Check("cilium", "fail", "the API serves no cilium.io/v2: the plan's CiliumNetworkPolicies need Cilium as the CNI (as DOKS runs)",
                            "run the platform on a cluster with Cilium (docs/existing-cluster.md)"))
    elif answers.cilium:
        checks.append(Check("cilium", "pass", "cilium.io/v2 is served (CiliumNetworkPolicy)"))
    return checks


# --------------------------------------------------------------------------- kubeconfig and HTTPS


@dataclass(frozen=True)
class KubeAccess:
    """How to reach one cluster: its server and the credentials of one context."""

    server: str
    context: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    token: str | None = None
    cert_file: str | None = None
    cert_data: bytes | None = None
    key_file: str | None = None
    key_data: bytes | None = None
    exec_spec: Mapping[str, Any] | None = None
    base_dir: Path = Path()


def kubeconfig_path(given: Path | None, env: Mapping[str, str]) -> tuple[Path, str]:
    """The kubeconfig doctor reads, and how it was named (for errors)."""
    if given is not None:
        return given, f"--kubeconfig {given}"
    if env.get("KUBECONFIG"):
        first = env["KUBECONFIG"].split(os.pathsep)[0]
        return Path(first).expanduser(), f"KUBECONFIG {first}"
    raise UserError([Problem("--kubeconfig", (
        "an existing-cluster stack is checked through its Kubernetes API: pass --kubeconfig FILE (or set KUBECONFIG); "
        "doctor cannot decrypt the stack's kubeconfig secret"))])


def _by_name(items: Any, name: str) -> Mapping[str, Any] | None:
    for item in items or []:
        if isinstance(item, Mapping) and item.get("name") == name:
            return item
    return None


def read_kubeconfig(path: Path, where: str, context: str | None) -> KubeAccess:
    """The server and credentials of `context` (None: current-context) in the kubeconfig at `path`;
    a UserError naming what is missing (never a credential)."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise UserError([Problem(where, f"cannot read it: {err.strerror or err}")]) from None
    except yaml.YAMLError:
        raise UserError([Problem(where, "is not a kubeconfig (not YAML)")]) from None
    if not isinstance(doc, Mapping):
        raise UserError([Problem(where, "is not a kubeconfig (no mapping)")])
    name = context or doc.get("current-context")
    if not name:
        raise UserError([Problem(where, "names no current-context; set cluster.existing.context or `kubectl config use-context NAME`")])
    ctx = _by_name(doc.get("contexts"), name)
    if ctx is None:
        known = ", ".join(str(c.get("name")) for c in doc.get("contexts") or [] if isinstance(c, Mapping)) or "none"
        raise UserError([Problem(where, f"has no context {name!r} (cluster.existing.context); contexts: {known}")])
    spec = ctx.get("context") or {}
    cluster = (_by_name(doc.get("clusters"), spec.get("cluster")) or {}).get("cluster") or {}
    user = (_by_name(doc.get("users"), spec.get("user")) or {}).get("user") or {}
    if not cluster.get("server"):
        raise UserError([Problem(where, f"context {name!r} names no cluster with a server")])

    def data(key: str) -> bytes | None:
        value = cluster.get(key) if key.startswith("certificate-authority") else user.get(key)
        return base64.b64decode(value) if value else None

    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (path.parent / user["tokenFile"]).read_text().strip()
    return KubeAccess(
        server=str(cluster["server"]).rstrip("/"), context=str(name),
        ca_file=cluster.get("certificate-authority"), ca_data=data("certificate-authority-data"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")), token=token,
        cert_file=user.get("client-certificate"), cert_data=data("client-certificate-data"),
        key_file=user.get("client-key"), key_data=data("client-key-data"), exec_spec=user.get("exec"), base_dir=path.parent,
    )  # fmt: skip


def _exec_token(spec: Mapping[str, Any]) -> str:
    """A token from an exec credential plugin (client.authentication.k8s.io ExecCredential)."""
    env = {**os.environ, **{e["name"]: e["value"] for e in spec.get("env") or [] if "name" in e}}
    try:
        out = subprocess.run([spec["command"], *(spec.get("args") or [])], capture_output=True, text=True, env=env, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as err:
        raise UserError([Problem("kubeconfig exec plugin", f"{spec.get('command')!r} failed: {type(err).__name__}")]) from None
    try:
        return str(json.loads(out.stdout)["status"]["token"])
    except (ValueError, KeyError, TypeError):
        raise UserError([Problem("kubeconfig exec plugin", f"{spec.get('command')!r} printed no ExecCredential with a token")]) from None


class KubeApi:
    """GET requests to one API server with a kubeconfig's credentials (files for inline data live in
    a private temporary directory for the session's length)."""

    def __init__(self, access: KubeAccess, *, connect_timeout_s: float = CONNECT_TIMEOUT_S, read_timeout_s: float = READ_TIMEOUT_S):
        import requests

        self._tmp = tempfile.TemporaryDirectory(prefix="infra-doctor-")
        self.session = requests.Session()
        self.server = access.server
        self.timeout = (connect_timeout_s, read_timeout_s)

        def file_of(path: str | None, data: bytes | None, name: str) -> str | None:
            if data:
                target = Path(self._tmp.name) / name
                target.write_bytes(data)
                target.chmod(0o600)
                return str(target)
            return str((access.base_dir / path).expanduser()) if path else None

        ca = file_of(access.ca_file, access.ca_data, "ca.crt")
        # Passed with every request: a session's `verify` loses to $REQUESTS_CA_BUNDLE (requests merges
        # the environment into each request first), which would verify the cluster against the wrong CAs.
        self.verify: bool | str = False if access.insecure else (ca or True)
        cert, key = file_of(access.cert_file, access.cert_data, "client.crt"), file_of(access.key_file, access.key_data, "client.key")
        if cert and key:
            self.session.cert = (cert, key)
        token = access.token or (_exec_token(access.exec_spec) if access.exec_spec else None)
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def get(self, path: str) -> tuple[int, Any]:
        answer = self.session.get(self.server + path, timeout=self.timeout, verify=self.verify)
        try:
            body = answer.json()
        except ValueError:
            body = None
        return answer.status_code, body

    def close(self) -> None:
        self.session.close()
        self._tmp.cleanup()


def ask_cluster(api: KubeApi) -> ClusterAnswers:
    """The three reads, each failure phrased (never with a credential)."""
    import requests

    errors: dict[str, str] = {}

    def read(what: str, path: str) -> tuple[int, Any] | None:
        try:
            return api.get(path)
        except requests.exceptions.SSLError:
            errors[what] = "TLS verification failed (the kubeconfig's certificate-authority does not sign the server's certificate)"
        except requests.exceptions.ConnectionError:
            errors[what] = f"cannot connect to {api.server}"
        except requests.exceptions.Timeout:
            errors[what] = f"no answer from {api.server} within {api.timeout[1]:g} s"
        return None

    def ok(what: str, answer: tuple[int, Any] | None) -> Any:
        if answer is None:
            return None
        status, body = answer
        if status == 200:
            return body
        reason = (body or {}).get("message") if isinstance(body, Mapping) else None
        errors[what] = f"HTTP {status}" + (f" ({reason})" if reason else "") + (": the credentials are not accepted" if status == 401 else "")
        return None

    version = ok("version", read("version", "/version"))
    if version is None:
        return ClusterAnswers(errors=errors)
    nodes_body = ok("nodes", read("nodes", "/api/v1/nodes"))
    cilium_answer = read("cilium", "/apis/cilium.io/v2")
    cilium = None if cilium_answer is None else cilium_answer[0] == 200
    return ClusterAnswers(version=version, nodes=(nodes_body or {}).get("items") if nodes_body is not None else None,
                          cilium=cilium, errors=errors)  # fmt: skip
