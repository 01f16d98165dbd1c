#!/usr/bin/env python3
"""Registrar: keeps vllm-router's worker list equal to the engines Kubernetes says are ready.

Why a registrar at all: vllm-router 0.1.17 routes by the request's `model` field only in IGW mode
(`--enable-igw`), and there it ignores `--worker-urls`; workers must be added with `POST /workers`.
Given only a URL, the router asks the worker's `/v1/models` for its model *without* an API key, so
key-protected engines answer 401 and the worker is filed under model "unknown" (measured in
tests/e2e/test_multi_model.py). `POST /workers {"url": ..., "model_id": ...}` with the served model
name sets it explicitly and needs no key (vllm-project/router 0.1.17 `src/routers/router_manager.rs`,
checked against the real binary in the e2e tests). Its own `--service-discovery` watches pods but
files them without a model id, so it cannot serve several models.

Why a sidecar in each router pod (and not one beside each engine): the router keeps its worker
list in memory, per pod. A sidecar next to the router re-registers everything within one interval
after the router restarts, covers every router replica without any engine knowing how many there
are, and needs one namespaced Role (get/list/watch EndpointSlices). An engine-side sidecar would
have to discover router pods, re-register on every router restart it cannot see, and could not
remove itself after a crash. EndpointSlices (not pods) because their `ready` condition already
folds in the readiness probe and termination: an engine leaves the router as soon as it stops
being ready, before its pod is gone.

Stdlib only: this file is shipped verbatim in a ConfigMap and run by the plain Python base image
(`python registrar.py --router URL --namespace NS --model SERVED=SERVICE ...`). The decision logic
is `reconcile()` (pure, tested without Kubernetes); `main()` only does the I/O.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
ENGINE_PORT_NAME = "http"  # the engine container's port name (infra/render/model_service.py)


@dataclass(frozen=True)
class Actions:
    """What to change on the router: URLs to remove, then (url, model_id) pairs to add."""

    remove: tuple[str, ...]
    add: tuple[tuple[str, str], ...]

    @property
    def empty(self) -> bool:
        return not (self.remove or self.add)


def ready_urls(slices: list[dict], port_name: str = ENGINE_PORT_NAME) -> list[str]:
    """`http://ip:port` of every ready endpoint in a list of EndpointSlice objects.

    A missing `ready` condition means ready (discovery.k8s.io/v1 EndpointConditions docs); a
    terminating endpoint is not ready. Slices of other address types (FQDN) are skipped."""
    urls = set()
    for s in slices:
        if s.get("addressType") not in ("IPv4", "IPv6"):
            continue
        ports = [p.get("port") for p in s.get("ports") or [] if p.get("name") == port_name and p.get("port")]
        if not ports:
            continue
        for endpoint in s.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            for address in endpoint.get("addresses") or []:
                host = f"[{address}]" if s["addressType"] == "IPv6" else address
                urls.update(f"http://{host}:{port}" for port in ports)
    return sorted(urls)


def reconcile(desired: dict[str, str], registered: dict[str, str]) -> Actions:
    """desired/registered: worker URL → model id. Remove what is gone or filed under another model
    (a pod IP reused by another model's engine), add what is missing."""
    remove = sorted(url for url, model in registered.items() if desired.get(url) != model)
    add = sorted((url, model) for url, model in desired.items() if registered.get(url) != model)
    return Actions(tuple(remove), tuple(add))


def registered_workers(listing: dict) -> dict[str, str]:
    """The router's `GET /workers` answer as URL → model id."""
    return {w["url"]: w.get("model_id", "unknown") for w in listing.get("workers", [])}


# --------------------------------------------------------------------------- I/O


def _request(method: str, url: str, *, body: dict | None = None, headers: dict | None = None,
             context: ssl.SSLContext | None = None, timeout: float = 10.0) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Accept": "application/json", **(headers or {})})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else {}


class Kubernetes:
    """The in-cluster API, as the pod's service account (or an explicit server for tests)."""

    def __init__(self, server: str, token_file: str, ca_file: str | None):
        self.server = server.rstrip("/")
        self.token_file = token_file
        self.context = ssl.create_default_context(cafile=ca_file) if server.startswith("https") and ca_file else None

    def endpoint_slices(self, namespace: str, service: str) -> list[dict]:
        with open(self.token_file) as f:  # re-read: projected tokens rotate
            token = f.read().strip()
        selector = urllib.parse.quote(f"kubernetes.io/service-name={service}")
        url = f"{self.server}/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices?labelSelector={selector}"
        return _request("GET", url, headers={"Authorization": f"Bearer {token}"}, context=self.context).get("items", [])


def desired_workers(kube: Kubernetes, namespace: str, models: dict[str, str]) -> dict[str, str]:
    """models: served model name → engine Service name."""
    out: dict[str, str] = {}
    for model, service in sorted(models.items()):
        for url in ready_urls(kube.endpoint_slices(namespace, service)):
            out[url] = model
    return out


def apply(router: str, actions: Actions, log) -> None:
    for url in actions.remove:
        _request("DELETE", f"{router}/workers/{urllib.parse.quote(url, safe='')}")
        log(f"removed {url}")
    for url, model in actions.add:
        _request("POST", f"{router}/workers", body={"url": url, "model_id": model})
        log(f"added {url} as {model}")


def run_once(kube: Kubernetes, router: str, namespace: str, models: dict[str, str], log) -> Actions:
    desired = desired_workers(kube, namespace, models)
    actions = reconcile(desired, registered_workers(_request("GET", f"{router}/workers")))
    apply(router, actions, log)
    return actions


def parse_models(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        model, sep, service = value.partition("=")
        if not (sep and model and service):
            raise SystemExit(f"--model {value!r}: expected SERVED_MODEL_NAME=ENGINE_SERVICE")
        out[model] = service
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--router", required=True, help="router base URL, e.g. http://127.0.0.1:8001")
    p.add_argument("--namespace", required=True, help="namespace of the engine Services")
    p.add_argument("--model", action="append", default=[], required=True, help="SERVED_MODEL_NAME=ENGINE_SERVICE (repeat)")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between reconciliations")
    p.add_argument("--once", action="store_true", help="reconcile once and exit")
    default_server = "https://{}:{}".format(os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc"),
                                            os.environ.get("KUBERNETES_SERVICE_PORT", "443"))
    p.add_argument("--api-server", default=default_server)
    p.add_argument("--token-file", default=f"{SA_DIR}/token")
    p.add_argument("--ca-file", default=f"{SA_DIR}/ca.crt")
    args = p.parse_args(argv)
    models = parse_models(args.model)
    kube = Kubernetes(args.api_server, args.token_file, args.ca_file)

    def log(msg: str) -> None:
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {msg}", flush=True)

    # The registrar is PID 1 of its container, and the kernel gives PID 1 no default action for
    # SIGTERM: without a handler the kubelet's stop signal is ignored and every router pod waits out
    # its whole terminationGracePeriodSeconds (300 s) for the SIGKILL (found under a real kubelet,
    # tests/node). Nothing is in flight between reconciliations: stop at once.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log(f"registrar: router {args.router}, models {json.dumps(models, sort_keys=True)}, every {args.interval:g}s")
    while True:
        try:
            run_once(kube, args.router.rstrip("/"), args.namespace, models, log)
        except (OSError, urllib.error.URLError, ValueError) as err:  # router starting, API blip: retry
            log(f"reconcile failed (retrying): {err}")
            if args.once:
                return 1
        if args.once:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
