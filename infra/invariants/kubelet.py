"""Pod wiring as the kubelet resolves it: what the API server accepts and a node then cannot run.

The API server validates a pod's shape, not its wiring, so each of these is admitted and fails
only on the node (issue 35: the router's probes named `port: http`, a port only its client-proxy
sidecar declares; the pod was admitted, never became Ready, and its liveness probe restarted it):

- **probe and hook ports**: a probe's (or lifecycle hook's) named `httpGet`/`tcpSocket` port is
  looked up in the *probed container's own* `ports` (kubelet `findPortByName` over
  `container.Ports`), never in its sidecars'. An unknown name is a probe error on every period.
- **env keys**: `valueFrom.secretKeyRef` / `configMapKeyRef` (not optional) name a key the
  Secret/ConfigMap holds; a missing key keeps the container in `CreateContainerConfigError`.
- **mounted keys**: a `secret`/`configMap` volume's (or projected source's) `items[].key` is in the
  object; a missing key fails the mount (`ContainerCreating` for ever).
- **exec commands**: an exec probe's or hook's program exists in the image, where the catalog knows
  the image's programs (infra/catalog/images.py); a missing one fails every probe.

Keys are checked only where the plan renders the Secret/ConfigMap with its keys known: a
ConfigMap's `data`/`binaryData`; a Secret's `data`/`stringData`, or, where the values are Pulumi
secrets the plan never sees, the key names the component lists in the `inference-platform/keys`
annotation (names only, never a value). Objects of other owners (a chart's, the cluster's) are
left to their owners.
"""

from __future__ import annotations

from infra.catalog.images import executables_of
from infra.errors import Problem
from infra.invariants.keypaths import KeyPaths
from infra.invariants.objects import PodTemplate, all_pod_templates, describe, identity
from infra.render.secret_keys import KEYS_ANNOTATION

PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
HOOKS = ("postStart", "preStop")


def object_keys(obj: dict) -> frozenset[str] | None:
    """The keys a Secret/ConfigMap holds, or None when the plan does not know them."""
    found: set[str] = set()
    known = False
    for field in ("data", "stringData", "binaryData"):
        value = obj.get(field)
        if isinstance(value, dict) and value:
            found |= set(value)
            known = True
    annotation = ((obj.get("metadata") or {}).get("annotations") or {}).get(KEYS_ANNOTATION)
    if annotation is not None:
        found |= {k.strip() for k in str(annotation).split(",") if k.strip()}
        known = True
    if not known and obj.get("kind") == "ConfigMap" and "data" in obj:
        known = True  # an empty ConfigMap: it holds no key at all
    return frozenset(found) if known else None


def _handlers(container: dict) -> list[tuple[str, dict]]:
    """(what, handler) for every probe and lifecycle hook of a container."""
    out = [(probe, container[probe]) for probe in PROBES if isinstance(container.get(probe), dict)]
    lifecycle = container.get("lifecycle") or {}
    out += [(f"lifecycle.{hook}", lifecycle[hook]) for hook in HOOKS if isinstance(lifecycle.get(hook), dict)]
    return out


def _port_problems(template: PodTemplate, container: dict, where: str) -> list[str]:
    own = {str(p["name"]) for p in container.get("ports") or [] if p.get("name")}
    out = []
    for what, handler in _handlers(container):
        for kind in ("httpGet", "tcpSocket"):
            port = (handler.get(kind) or {}).get("port")
            if isinstance(port, str) and not port.isdigit() and port not in own:
                others = sorted(
                    c["name"] for c in template.containers() if c is not container
                    and any(p.get("name") == port for p in c.get("ports") or [])
                )  # fmt: skip
                declared = f" (only {', '.join(others)} declares it)" if others else ""
                out.append(f"{where}'s {what} uses port {port!r}, which container {container.get('name')!r} does not declare"
                           f"{declared}: the kubelet looks a probe's named port up in the probed container only, so the probe "
                           "errors on every period")
    return out


def _exec_problems(container: dict, where: str) -> list[str]:
    programs = executables_of(str(container.get("image", "")))
    if programs is None:
        return []
    out = []
    for what, handler in _handlers(container):
        command = (handler.get("exec") or {}).get("command") or []
        if command and str(command[0]) not in programs:
            out.append(f"{where}'s {what} runs {command[0]!r}, which image {container.get('image')} does not have "
                       f"(it has {', '.join(sorted(p for p in programs if '/' not in p))})")
    return out


def _key_refs(template: PodTemplate) -> list[tuple[str, str, str, str]]:
    """(kind, name, key, where) of every non-optional key a pod's containers and volumes need."""
    out = []
    for c in template.containers():
        for env in c.get("env") or []:
            source = env.get("valueFrom") or {}
            for field, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                ref = source.get(field)
                if isinstance(ref, dict) and ref.get("name") and ref.get("key") and not ref.get("optional"):
                    out.append((kind, str(ref["name"]), str(ref["key"]), f"container {c.get('name')!r} env {env.get('name')}"))

    def items(kind: str, body: dict, name_field: str, where: str) -> None:
        if not isinstance(body, dict) or body.get("optional") or not body.get(name_field):
            return
        for item in body.get("items") or []:
            if item.get("key"):
                out.append((kind, str(body[name_field]), str(item["key"]), where))

    for vol in template.spec.get("volumes") or []:
        where = f"volume {vol.get('name')!r}"
        items("Secret", vol.get("secret"), "secretName", where)
        items("ConfigMap", vol.get("configMap"), "name", where)
        for source in (vol.get("projected") or {}).get("sources") or []:
            items("Secret", source.get("secret"), "name", where)
            items("ConfigMap", source.get("configMap"), "name", where)
    return out


def check_kubelet_wiring(objects: list[dict], paths: KeyPaths) -> list[Problem]:
    """Every pod template of `objects` (Deployments, DaemonSets, Jobs, StatefulSets, LeaderWorkerSet
    leaders and workers, chart workloads) as the kubelet will wire it."""
    holders = {identity(o): o for o in objects if o.get("kind") in ("Secret", "ConfigMap") and not (o.get("apiVersion") or "").count("/")}
    problems: list[Problem] = []
    for template in all_pod_templates(objects):
        owner = template.owner
        who = describe(owner) + (f" ({template.role})" if template.role else "")
        messages: list[str] = []
        for container in template.containers():
            where = f"{who} container {container.get('name')!r}"
            messages += _port_problems(template, container, where)
            messages += _exec_problems(container, where)
        for kind, name, key, where in _key_refs(template):
            held = holders.get(("", kind, template.namespace, name))
            keys = object_keys(held) if held is not None else None
            if keys is not None and key not in keys:
                messages.append(f"{who} {where} needs key {key!r} of {kind} {template.namespace}/{name}, which holds "
                                f"{', '.join(sorted(keys)) or 'no key'}")
        problems += [Problem(paths.of_object(owner), m) for m in dict.fromkeys(messages)]
    return problems

