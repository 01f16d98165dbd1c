"""The connectivity matrix a plan needs, derived from the plan — not from its policies — and the
who-can-reach-what table of docs/security.md generated from it.

`needed(plan facts, src, dst, port, protocol)` names the reason a flow must be open, or None: the
front door from its clients, the router/gateway/pickers/P/D routers to the engines (from the
Services and layouts), engines of one model to each other, weights from where the plan keeps them
(NFS, Spaces, the hub), the endpoints a model's settings name, every scrape the PodMonitors and
the chart's monitors make (kube-prometheus-stack 81.4.3's defaults, less what the values turn
off), the API for every pod that mounts a service-account token, the control plane to the
webhooks and aggregated APIs of each installed controller, DNS for every pod. Everything else must
be denied. tests/test_network_policy_plan.py asserts the analyzer's matrix (tests/policy_analyzer.py)
equals it over every pod, address and entity of every stack and variant CI scans.

    .venv/bin/python -m tests.policy_matrix --write     # regenerate the table in docs/security.md
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infra.invariants.objects import all_pod_templates, pod_selector
from infra.offline import kubernetes_objects
from tests.policy_analyzer import Connectivity, Endpoint

PART_OF = "inference-platform"
INTERNET = Endpoint("internet", ip="140.82.112.3", role="the internet")
# An address in the VPC: the NFS share, and the public load balancer's own address (facts.nfs()).
VPC_ROLE = "a VPC address (the NFS share, the public load balancer)"
METADATA = Endpoint("metadata", ip="169.254.169.254", role="droplet metadata (169.254.169.254)")
API = Endpoint("kube-apiserver", entity="kube-apiserver", role="the Kubernetes API (entity kube-apiserver)")
NODES = (Endpoint("host", entity="host", role="nodes (entities host, remote-node)"),
         Endpoint("remote-node", entity="remote-node", role="nodes (entities host, remote-node)"))  # fmt: skip
CLIENTS = (Endpoint("client", "default", {"app": "client"}, role="any pod (clients)"),
           Endpoint("intruder", "tenant-a", {"app": "anything"}, role="any pod (clients)"))  # fmt: skip
COREDNS = Endpoint("coredns", "kube-system", {"k8s-app": "kube-dns"}, {"dns": 53, "metrics": 9153}, role="CoreDNS")
DOKS_EXPORTER = Endpoint("amd-device-metrics-exporter", "kube-system", {"app": "amd-device-metrics-exporter"}, {"metrics": 5000},
                         role="DOKS's AMD device-metrics exporter")  # fmt: skip
GATEWAY_PROXY = Endpoint("gateway-proxy", "inference", {"gateway.networking.k8s.io/gateway-name": "inference-gateway",
                                                       "gateway.networking.k8s.io/gateway-class-name": "inference-platform"},
                         {"http": 80, "metrics": 15020}, role="gateway proxies")  # fmt: skip
WELL_KNOWN = (53, 80, 443, 2049, 3000, 4317, 5000, 6301, 6443, 8000, 8001, 8080, 9002, 9090, 9093, 9094, 9100, 9153, 9443, 9666,
              9978, 10250, 15020, 29000, 29500, 36367)  # fmt: skip

# The charts' pods (their labels and ports as the pinned charts set them): the plan does not carry
# them until the chart archives are templated (docs/charts.md).
MONITORING_PODS = (
    Endpoint("prometheus", "monitoring", {"app.kubernetes.io/name": "prometheus"}, {"web": 9090, "reloader-web": 8080}, role="Prometheus"),
    # a second replica: a replica scrapes the others (and itself, over loopback, which no policy sees)
    Endpoint("prometheus-1", "monitoring", {"app.kubernetes.io/name": "prometheus"}, {"web": 9090, "reloader-web": 8080}, role="Prometheus"),
    Endpoint("alertmanager", "monitoring", {"app.kubernetes.io/name": "alertmanager"}, {"web": 9093, "reloader-web": 8080, "mesh": 9094},
             role="Alertmanager"),
    Endpoint("grafana", "monitoring", {"app.kubernetes.io/name": "grafana"}, {"grafana": 3000}, role="Grafana"),
    Endpoint("operator", "monitoring", {"app": "kube-prometheus-stack-operator"}, {"https": 10250}, role="prometheus-operator"),
    Endpoint("kube-state-metrics", "monitoring", {"app.kubernetes.io/name": "kube-state-metrics"}, {"http": 8080},
             role="kube-state-metrics"),
)  # fmt: skip
CONTROLLER_PODS = {
    "keda": (Endpoint("keda-operator", "keda", {"app.kubernetes.io/name": "keda-operator"}, {"metricsservice": 9666}, role="KEDA"),
             Endpoint("keda-metrics-apiserver", "keda", {"app.kubernetes.io/name": "keda-operator-metrics-apiserver"}, {"https": 6443}, role="KEDA"),
             Endpoint("keda-admission-webhooks", "keda", {"app.kubernetes.io/name": "keda-admission-webhooks"}, {"https": 9443}, role="KEDA")),
    "agentgateway-system": (Endpoint("agentgateway", "agentgateway-system", {"app.kubernetes.io/name": "agentgateway"}, {"agw-grpc": 9978},
                                     role="agentgateway controller"),),
    "lws-system": (Endpoint("lws-controller-manager", "lws-system", {"control-plane": "controller-manager"}, {"webhook-server": 9443},
                            role="LeaderWorkerSet controller"),),
    "kube-amd-gpu": (Endpoint("amd-gpu-operator", "kube-amd-gpu", {"app.kubernetes.io/name": "gpu-operator-charts"}, {"health": 8081},
                              role="AMD GPU operator"),
                     Endpoint("device-metrics-exporter", "kube-amd-gpu", {"app.kubernetes.io/name": "metrics-exporter"},
                              {"exporter-port": 5000}, role="AMD GPU operator")),
    "cert-manager": (Endpoint("cert-manager-webhook", "cert-manager", {"app.kubernetes.io/name": "webhook"}, {"https": 10250},
                              role="cert-manager"),),
}  # fmt: skip
# chart → its controller namespace, and the ports the API server calls there (webhooks, aggregated APIs)
CONTROLLER_CHARTS = {"keda": "keda", "agentgateway": "agentgateway-system", "lws": "lws-system", "gpu-operator-charts": "kube-amd-gpu",
                     "cert-manager": "cert-manager"}  # fmt: skip
FROM_CONTROL_PLANE = {"keda": (9443, 6443), "lws-system": (9443,), "cert-manager": (10250,), "prometheus-operator": (10250,)}
# kube-prometheus-stack 81.4.3's monitors as the project's values leave them: (target role, ports);
# kube-proxy's is off (observability.py UNREACHABLE_MONITOR_VALUES), control-plane ones too.
CHART_SCRAPES = (("Prometheus", (9090, 8080)), ("Alertmanager", (9093, 8080)), ("Grafana", (3000,)), ("prometheus-operator", (10250,)),
                 ("kube-state-metrics", (8080,)), ("CoreDNS", (9153,)))  # fmt: skip
NODE_SCRAPES = (10250, 9100)  # kubelet + cAdvisor, node-exporter (host network)


def _role(labels: dict[str, str], name: str) -> str:
    comp, app = labels.get("app.kubernetes.io/component"), labels.get("app.kubernetes.io/name")
    if name.startswith("image-prepull"):
        return "image pre-pull DaemonSets"
    if comp == "engine":
        return "engines"
    return {"router": "router", "prefetch": "prefetch Jobs", "vllm-pd-router": "P/D routers", "epp": "endpoint pickers",
            "image-prepull": "image pre-pull DaemonSets"}.get(comp or "", {"vllm-pd-router": "P/D routers", "epp": "endpoint pickers"}
                                                              .get(app or "", name))  # fmt: skip


@dataclass
class PlanFacts:
    """What the plan says that decides its flows (read from its objects and records)."""

    name: str
    objects: list[dict]
    door: str
    public: bool
    pods: list[Endpoint]
    charts: set[str]
    vpc: str
    endpoints: list[tuple[str, str]] = field(default_factory=list)  # (model, URL) from models[].env / extra_args
    hub_mirrors: list[tuple[str, str]] = field(default_factory=list)  # (model, HF_ENDPOINT) the prefetch Jobs download from
    uses_nfs: bool = False
    monitors: list[dict] = field(default_factory=list)  # the plan's PodMonitors
    spaces: bool = False
    doks_exporter: bool = False  # a PodMonitor scrapes DOKS's AMD exporter in kube-system
    alert_receiver: bool = False
    installers: frozenset[str] = frozenset()  # workloads whose pods install vllm-router from PyPI
    token_pods: frozenset[tuple[str, str]] = frozenset()  # (namespace, sorted labels) of pods mounting a token

    @property
    def monitoring(self) -> bool:
        return "kube-prometheus-stack" in self.charts

    def nfs(self) -> Endpoint:
        return Endpoint("vpc-address", ip=self.vpc.split("/")[0].rsplit(".", 1)[0] + ".20", role=VPC_ROLE)


def plan_facts(name: str, plan) -> PlanFacts:
    objects = kubernetes_objects(plan)
    pods = []
    for t in all_pod_templates(objects):
        if t.spec.get("hostNetwork"):
            continue  # node traffic: no pod identity
        ports = {p["name"]: p["containerPort"] for c in t.containers(init=False) for p in c.get("ports") or [] if p.get("name")}
        pod_name = t.owner["metadata"]["name"] + (f"-{t.role}" if t.role else "")
        pods.append(Endpoint(pod_name, t.namespace, t.labels, ports, role=_role(t.labels, t.owner["metadata"]["name"])))
    charts = {str((r.get("inputs") or {}).get("chart", "")).rsplit("/", 1)[-1] for r in plan.resources if "helm.sh" in r["type"]}
    vpc = next(r for r in plan.resources if r["type"] == "digitalocean:index/vpc:Vpc")["inputs"]["ipRange"]
    kind = plan.front_door["kind"]
    door = kind if kind in ("gateway", "service") else "router"
    public = bool(plan.front_door.get("public_url")) or any(o["kind"] == "Service" and o["spec"].get("type") == "LoadBalancer" for o in objects)
    facts = PlanFacts(name, objects, door, public, pods, charts, vpc)
    facts.uses_nfs = any(o["kind"] == "PersistentVolume" for o in objects)
    facts.monitors = [o for o in objects if o["kind"] == "PodMonitor"]
    facts.spaces = any("AWS_ENDPOINT_URL" in str(o) for o in objects if o["kind"] in ("Deployment", "LeaderWorkerSet"))
    facts.doks_exporter = any(o["kind"] == "PodMonitor" and (o["spec"].get("namespaceSelector") or {}).get("matchNames") == ["kube-system"]
                              for o in objects)  # fmt: skip
    facts.alert_receiver = any(o["kind"] == "Secret" and o["metadata"]["name"] == "alertmanager-webhook" for o in objects)
    templates = all_pod_templates(objects)
    facts.installers = frozenset(t.owner["metadata"]["name"] for t in templates
                                 if any("install" in c["name"] for c in t.spec.get("initContainers") or []))  # fmt: skip
    facts.token_pods = frozenset(
        (t.namespace, repr(sorted(t.labels.items()))) for t in templates
        if any(src.get("serviceAccountToken") for v in t.spec.get("volumes") or [] for src in (v.get("projected") or {}).get("sources") or [])
        or t.spec.get("automountServiceAccountToken", True) is not False
    )  # fmt: skip
    from infra.render.network_policy import ENDPOINT_ENV, ENDPOINT_FLAGS

    for t in all_pod_templates(objects):
        if t.labels.get("app.kubernetes.io/component") == "prefetch":
            facts.hub_mirrors += [(t.labels.get("inference-platform/model", ""), e["value"]) for c in t.containers()
                                  for e in c.get("env") or [] if e.get("name") == "HF_ENDPOINT" and e.get("value")]  # fmt: skip
        if t.labels.get("app.kubernetes.io/component") != "engine":
            continue
        model = t.labels.get("inference-platform/model", "")
        for c in t.containers(init=False):
            facts.endpoints += [(model, e["value"]) for e in c.get("env") or [] if e.get("name") in ENDPOINT_ENV and e.get("value")]
            args = [str(a) for a in c.get("args") or []]
            facts.endpoints += [(model, args[i + 1]) for i, a in enumerate(args[:-1]) if a in ENDPOINT_FLAGS]
    return facts


def universe(facts: PlanFacts) -> list[Endpoint]:
    """Every endpoint probed: the plan's pods, the charts' pods, clients, CoreDNS, addresses, entities."""
    out = list(facts.pods) + list(CLIENTS) + [COREDNS]
    if facts.monitoring:
        out += MONITORING_PODS
        if facts.doks_exporter:
            out.append(DOKS_EXPORTER)
    for chart, ns in CONTROLLER_CHARTS.items():
        if chart in facts.charts:
            out += CONTROLLER_PODS[ns]
    if facts.door == "gateway":
        out.append(GATEWAY_PROXY)
    for _model, url in facts.endpoints:  # an in-cluster endpoint a setting names: a pod of its namespace
        host = url.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].split(".")
        if len(host) >= 3 and host[2] == "svc" and host[1] not in {e.namespace for e in out}:
            out.append(Endpoint(host[0], host[1], {"app": host[0]}, role=f"{host[0]} ({host[1]})"))
    return out + [INTERNET, METADATA, facts.nfs(), API, *NODES]


# --------------------------------------------------------------------------- what the plan needs


def _mounts_token(pod: Endpoint, facts: PlanFacts) -> bool:
    if any(p is pod for p in facts.pods):
        return (pod.namespace, repr(sorted(pod.labels.items()))) in facts.token_pods
    return pod.namespace in CONTROLLER_PODS or pod.namespace == "monitoring"  # the charts' controllers watch the API


def _scrapes(facts: PlanFacts, dst: Endpoint, port: int) -> bool:
    """Does a PodMonitor of the plan (or a chart monitor) scrape `dst:port`?"""
    for o in facts.monitors:
        sel = pod_selector(o)
        if sel is None or not dst.is_pod or not sel.matches(dst.labels, dst.namespace):
            continue
        for e in o["spec"].get("podMetricsEndpoints") or []:
            if e.get("portNumber") == port or (e.get("port") and dst.ports.get(e["port"]) == port):
                return True
    return any(dst.role == role and port in ports for role, ports in CHART_SCRAPES)


def needed(facts: PlanFacts, src: Endpoint, dst: Endpoint, port: int, protocol: str) -> str | None:  # noqa: C901 - one rule a line
    """Why the plan needs `src` → `dst:port/protocol` open, or None."""
    s, d = src.role, dst.role
    engine_model = lambda e: e.labels.get("inference-platform/model") if e.role == "engines" else None  # noqa: E731
    callers = {"router": ("router",), "gateway": ("gateway proxies", "endpoint pickers"), "service": ()}[facts.door]
    if d == "CoreDNS" and port == 53 and src.is_pod:
        return "DNS"
    if src.entity == "kube-apiserver" or src.entity in ("host", "remote-node"):
        ports = FROM_CONTROL_PLANE.get(dst.namespace or "", ()) + FROM_CONTROL_PLANE.get(dst.role, ())
        return "the API server calls a webhook / aggregated API" if port in ports and protocol == "TCP" else None
    if dst.entity == "kube-apiserver":
        if port == 443 and src.is_pod and _mounts_token(src, facts):
            return "watches the API"
        return None
    if dst.entity in ("host", "remote-node"):
        node_ports = NODE_SCRAPES + ((5000,) if facts.doks_exporter else ())  # DOKS's exporter may run on the host network
        return "node-level scrape" if s == "Prometheus" and port in node_ports else None
    if src.is_pod and dst.is_pod and src.namespace == dst.namespace and src.namespace in CONTROLLER_PODS:
        return "inside the controller's namespace"
    if s == d == "engines" and engine_model(src) == engine_model(dst):
        return "engines of one model (KV transfer, collectives)"
    if protocol != "TCP" and not (s == d == "Alertmanager" and port == 9094):
        return None
    # the front door: clients are pods of namespaces the stack does not govern (and the internet
    # when the front door is public); pods of its own namespaces reach only what they need
    lb = facts.public and (src is INTERNET or src.role == VPC_ROLE)  # DO's HTTP load balancer proxies from the VPC
    client_side = (src.is_pod and src.namespace not in OWNED) or lb
    if facts.door == "router" and d == "router" and port == 8000 and client_side:
        return "clients → the router's client proxy"
    if facts.door == "gateway" and d == "gateway proxies" and port == 80 and client_side:
        return "clients → the gateway listener"
    serving = dst.labels.get("app.kubernetes.io/name") == "vllm"  # a multi-node replica's workers serve no HTTP
    if d == "engines" and port == 8000 and serving and (s in callers or (facts.door == "service" and client_side) or s == "P/D routers"):
        if s == "P/D routers" and engine_model(dst) and src.labels.get("inference-platform/model") not in (None, engine_model(dst)):
            return None
        return "front door → engines"
    if d == "P/D routers" and port == 8000 and (s in callers or (facts.door == "service" and client_side)):
        return "front door → P/D router"
    if s == d == "engines" and engine_model(src) == engine_model(dst):
        return "engines of one model (KV transfer, collectives)"
    if s == "engines" and d == "P/D routers" and port == 36367 and src.labels.get("inference-platform/model") == dst.labels.get("inference-platform/model"):
        return "MoRI-IO registration"
    if s == "gateway proxies" and d == "endpoint pickers" and port == 9002:
        return "ext-proc"
    if s == "gateway proxies" and d == "agentgateway controller" and port == 9978:
        return "xDS"
    # weights and what the settings name
    uses_nfs, spaces = facts.uses_nfs, facts.spaces
    if s in ("engines", "prefetch Jobs") and dst.role == VPC_ROLE and port == 2049 and uses_nfs:
        return "weights (NFS)"
    if s == "prefetch Jobs" and dst is INTERNET and port == 443:
        return "weights download (hub, Spaces)"
    if s == "engines" and dst is INTERNET and port == 443 and (spaces or not uses_nfs):
        return "weights (Spaces, or the hub without a cache)"
    if s in ("router", "P/D routers") and dst is INTERNET and port == 443 and src.name in facts.installers:
        return "the hash-locked vllm-router install (PyPI)"
    if s == "engines" and not dst.entity:
        for model, url in facts.endpoints:
            if model == engine_model(src) and _endpoint_matches(url, dst, port, facts):
                return f"a setting names {url}"
    if s == "prefetch Jobs" and not dst.entity:
        for model, url in facts.hub_mirrors:
            if model == src.labels.get("inference-platform/model") and _endpoint_matches(url, dst, port, facts):
                return f"a setting names {url}"
    # monitoring
    if s == "Prometheus" and _scrapes(facts, dst, port):
        return "scrape"
    if d == "Prometheus" and port == 9090 and (s == "Grafana" or s == "KEDA"):
        return "queries Prometheus"
    if s == "Prometheus" and d == "Alertmanager" and port == 9093:
        return "alerts"
    if s == d == "Alertmanager" and port == 9094:
        return "Alertmanager gossip"
    if s == "Alertmanager" and dst is INTERNET and port == 443 and facts.alert_receiver:
        return "alert receiver (HTTPS)"
    return None


def _endpoint_matches(url: str, dst: Endpoint, port: int, facts: PlanFacts) -> bool:
    from infra.render.network_policy import endpoint_egress

    rule = endpoint_egress(url, facts.vpc)
    if rule is None or port not in [p["port"] for p in rule["ports"]]:
        return False
    import ipaddress

    for peer in rule["to"]:
        if "ipBlock" in peer and dst.ip:
            block = peer["ipBlock"]
            ip = ipaddress.ip_address(dst.ip)
            if ip in ipaddress.ip_network(block["cidr"]) and not any(ip in ipaddress.ip_network(e) for e in block.get("except", [])):
                return True
        if "namespaceSelector" in peer and dst.is_pod:
            if dst.namespace == peer["namespaceSelector"]["matchLabels"].get("kubernetes.io/metadata.name"):
                return True
    return False


# --------------------------------------------------------------------------- probing


OWNED = ("inference", "inference-engines", "monitoring", *CONTROLLER_PODS)


def probes(facts: PlanFacts, everything: list[Endpoint]):
    """(src, dst, port, protocol) worth asking: at least one side in a namespace the stack governs."""
    owned = {e.namespace for e in everything if e.namespace in OWNED}
    for src in everything:
        for dst in everything:
            if src is dst:
                continue  # a pod to itself is loopback, not a flow any policy governs
            if not ((src.is_pod and src.namespace in owned) or (dst.is_pod and dst.namespace in owned)):
                continue
            if not src.is_pod and not dst.is_pod:
                continue
            ports = sorted(set(WELL_KNOWN) | set(dst.ports.values()))
            for port in ports:
                yield src, dst, port, "TCP"
            for port in (53, 9094):
                yield src, dst, port, "UDP"


@dataclass
class MatrixResult:
    name: str
    allowed: list[tuple[Endpoint, Endpoint, int, str, str]]  # with the reason
    unexpected: list[tuple[str, str, int, str]]  # allowed, not needed
    missing: list[tuple[str, str, int, str, str]]  # needed, denied
    probed: int


def analyse(name: str, plan) -> MatrixResult:
    facts = plan_facts(name, plan)
    everything = universe(facts)
    conn = Connectivity.analyse(facts.objects, everything)
    allowed, unexpected, missing, count = [], [], [], 0
    for src, dst, port, proto in probes(facts, everything):
        count += 1
        why = needed(facts, src, dst, port, proto)
        ok = conn.allows(src, dst, port, proto)
        if ok and why:
            allowed.append((src, dst, port, proto, why))
        elif ok:
            unexpected.append((src.key, dst.key, port, proto))
        elif why:
            missing.append((src.key, dst.key, port, proto, why))
    return MatrixResult(name, allowed, unexpected, missing, count)


# --------------------------------------------------------------------------- the table


def table(results: list[MatrixResult]) -> str:
    """docs/security.md's who-can-reach-what table: one row per (from, to) role pair and reason,
    with its ports and the stacks where the flow exists."""
    names = [r.name for r in results]
    rows: dict[tuple[str, str, str], tuple[set[str], set[str]]] = {}
    for r in results:
        for src, dst, port, proto, why in r.allowed:
            src_role = "any pod of another namespace" if src.is_pod and src.namespace not in OWNED else src.role
            key = (src_role, dst.role, why)
            ports, stacks = rows.setdefault(key, (set(), set()))
            ports.add(f"{port}" + ("/UDP" if proto == "UDP" else ""))
            stacks.add(r.name)
    lines = ["| From | To | Ports | Why | Stacks |", "|---|---|---|---|---|"]
    for (src, dst, why), (ports, stacks) in sorted(rows.items()):
        shown = "any" if len(ports) >= len(WELL_KNOWN) else ", ".join(sorted(ports, key=lambda p: (int(p.split("/")[0]), p)))
        absent = [n for n in names if n not in stacks]
        where = "all" if not absent else f"all but {', '.join(absent)}" if len(absent) <= 3 else ", ".join(n for n in names if n in stacks)
        lines.append(f"| {src} | {dst} | {shown} | {why} | {where} |")
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- who-can-reach-what: generated by `python -m tests.policy_matrix --write` -->", "<!-- end of the generated table -->"


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile
    from pathlib import Path

    from tests.conftest import ROOT
    from tests.security_variants import NAMES, plan_named

    parser = argparse.ArgumentParser(description="the who-can-reach-what table of docs/security.md")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = [analyse(n, plan_named(n, Path(tmp))) for n in NAMES]
    text = table(results)
    if args.write:
        doc = ROOT / "docs" / "security.md"
        body = doc.read_text()
        start, end = body.index(BEGIN) + len(BEGIN), body.index(END)
        doc.write_text(body[:start] + "\n" + text + body[end:])
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
