"""One stack against the running control plane: nodes shaped like its pools, its objects applied
in `pulumi up` order, the controllers and the scheduler left to act, then what they did, read
back (pods and where they landed, workloads that could not make their pods, resourceVersions).

Between stacks everything a stack brought is deleted again (its objects in reverse order, the
namespaces its releases created, its nodes; CRDs stay installed), so one control plane serves
the session.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tests.cluster import apply, crds, nodes
from tests.cluster.control_plane import ControlPlane

SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
DOKS_VERSION_LABEL = "1.33.13-do.0"
# What DOKS installs on every 1.33 VPC-native cluster before any stack object: the Gateway API
# CRDs (the plan leaves them to DOKS there, render/gateway.py `install_gateway_api_crds`), and
# Cilium's CRDs (its CNI on every cluster; the plan's CiliumNetworkPolicies use them).
DOKS_PREINSTALLED = ("gateway-api", "cilium")


@dataclass
class PodFact:
    namespace: str
    name: str
    labels: dict[str, str]
    owner: tuple[str, str]  # (kind, name) of the controller that made it (Deployment for a ReplicaSet's)
    node: str | None
    pool: str | None
    phase: str
    gpus: int
    pending_reason: str = ""


@dataclass
class StackRun:
    """What one stack did to the cluster."""

    name: str
    pools: list[nodes.Pool]
    outcome: apply.Outcome
    pods: list[PodFact] = field(default_factory=list)
    not_created: list[str] = field(default_factory=list)  # workloads short of pods, with the controller's reason
    installed: list[dict] = field(default_factory=list)  # objects installers brought (for clean-up)
    settle_seconds: float = 0.0

    @property
    def pending(self) -> list[PodFact]:
        return [p for p in self.pods if p.phase == "Pending" or not p.node]


class Cluster:
    def __init__(self, cp: ControlPlane, api_client):
        from kubernetes import client

        self.cp = cp
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.applier = apply.Applier(api_client)
        self.preinstalled = False
        self.lws = None  # the LeaderWorkerSet manager while a stack's lws release is installed

    @classmethod
    def connect(cls, cp: ControlPlane) -> Cluster:
        from kubernetes import config

        api_client = config.new_client_from_config(config_file=str(cp.kubeconfig))
        api_client.configuration.retries = 3
        return cls(cp, api_client)

    # ------------------------------------------------------------------ one stack

    def preinstall(self) -> None:
        if self.preinstalled:
            return
        for source in DOKS_PREINSTALLED:
            errors = self.applier.install_objects(crds.source_objects(source))
            if errors:
                raise RuntimeError(f"DOKS-preinstalled {source}: {errors}")
        self.preinstalled = True

    def add_nodes(self, pools: list[nodes.Pool]) -> None:
        for pool in pools:
            for node in nodes.node_objects(pool, DOKS_VERSION_LABEL):
                self.core.create_node(node)
        self._wait(lambda: all(self._ready(n) for n in self.core.list_node().items), 60, "nodes Ready")

    @staticmethod
    def _ready(node) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))

    def run_stack(self, name: str, resources: list[dict], *, settle_timeout: float = 120) -> StackRun:
        """Nodes, then every object in order, then wait for the controllers and the scheduler."""
        self.preinstall()
        pools = nodes.plan_pools(resources)
        self.add_nodes(pools)
        outcome = apply.apply_plan(self.applier, resources, self._on_release)
        run = StackRun(name, pools, outcome)
        start = time.monotonic()
        self.settle(run, settle_timeout)
        run.settle_seconds = time.monotonic() - start
        return run

    def reapply(self, resources: list[dict]) -> apply.Outcome:
        return apply.apply_plan(self.applier, resources, self._on_release)

    def _on_release(self, chart: str) -> None:
        if chart == "lws" and self.lws is None:
            from tests.cluster import lws

            self.lws = lws.start(self.cp, self.applier)

    # ------------------------------------------------------------------ reading back

    def settle(self, run: StackRun, timeout: float) -> None:
        """Wait until every workload has all its pods and none is Pending, or until nothing has
        changed for 15 s after the timeout's first half (then what is missing is reported)."""
        deadline = time.monotonic() + timeout
        last, stable_since = None, time.monotonic()
        while True:
            self.cp.check_alive()
            pods, missing = self.read_pods(run.pools), self.workloads_short()
            done = not missing and all(p.node and p.phase != "Pending" for p in pods)
            snapshot = (tuple(sorted((p.name, p.node, p.phase) for p in pods)), tuple(missing))
            if snapshot != last:
                last, stable_since = snapshot, time.monotonic()
            now = time.monotonic()
            if done or now > deadline or (now > deadline - timeout / 2 and now - stable_since > 15):
                run.pods, run.not_created = pods, missing
                return
            time.sleep(1)

    def read_pods(self, pools: list[nodes.Pool]) -> list[PodFact]:
        node_pool = {n.metadata.name: (n.metadata.labels or {}).get(nodes.POOL_LABEL) for n in self.core.list_node().items}
        rs_owner = {}
        for rs in self.apps.list_replica_set_for_all_namespaces().items:
            ref = next((o for o in rs.metadata.owner_references or [] if o.controller), None)
            rs_owner[(rs.metadata.namespace, rs.metadata.name)] = (ref.kind, ref.name) if ref else ("ReplicaSet", rs.metadata.name)
        facts = []
        for pod in self.core.list_pod_for_all_namespaces().items:
            ref = next((o for o in pod.metadata.owner_references or [] if o.controller), None)
            owner = (ref.kind, ref.name) if ref else ("", "")
            if owner[0] == "ReplicaSet":
                owner = rs_owner.get((pod.metadata.namespace, owner[1]), owner)
            gpus = 0
            for c in pod.spec.containers:
                req = (c.resources.requests or {}) if c.resources else {}
                gpus += int(req.get("amd.com/gpu", 0) or req.get("nvidia.com/gpu", 0) or 0)
            reason = ""
            for cond in pod.status.conditions or []:
                if cond.type == "PodScheduled" and cond.status != "True":
                    reason = cond.message or cond.reason or ""
            facts.append(PodFact(pod.metadata.namespace, pod.metadata.name, pod.metadata.labels or {}, owner,
                                 pod.spec.node_name, node_pool.get(pod.spec.node_name or ""), pod.status.phase, gpus, reason))  # fmt: skip
        return facts

    def workloads_short(self) -> list[str]:
        """Workloads whose controller has not made all their pods, with the reason it gives."""
        out = []
        events = self.core.list_event_for_all_namespaces().items
        failed = {}
        for ev in events:
            if ev.reason in ("FailedCreate", "FailedCreatePodSandBox") or ev.type == "Warning" and "forbidden" in (ev.message or ""):
                failed.setdefault((ev.involved_object.namespace, ev.involved_object.name), ev.message)
        for d in self.apps.list_deployment_for_all_namespaces().items:
            want, have = d.spec.replicas or 0, d.status.replicas or 0
            if have < want:
                why = next((m for (ns, n), m in failed.items() if ns == d.metadata.namespace and n.startswith(d.metadata.name)), "")
                out.append(f"Deployment {d.metadata.namespace}/{d.metadata.name}: {have}/{want} pods {why}".strip())
        for s in self.apps.list_stateful_set_for_all_namespaces().items:
            want, have = s.spec.replicas or 0, s.status.replicas or 0
            if have < want:
                out.append(f"StatefulSet {s.metadata.namespace}/{s.metadata.name}: {have}/{want} pods "
                           f"{failed.get((s.metadata.namespace, s.metadata.name), '')}".strip())
        for ds in self.apps.list_daemon_set_for_all_namespaces().items:
            st = ds.status
            if (st.current_number_scheduled or 0) < (st.desired_number_scheduled or 0) or (st.number_misscheduled or 0):
                out.append(f"DaemonSet {ds.metadata.namespace}/{ds.metadata.name}: {st.current_number_scheduled}/"
                           f"{st.desired_number_scheduled} scheduled {failed.get((ds.metadata.namespace, ds.metadata.name), '')}".strip())
        for job in self.batch.list_job_for_all_namespaces().items:
            st = job.status
            if not (st.active or st.succeeded or st.failed):
                out.append(f"Job {job.metadata.namespace}/{job.metadata.name}: no pod "
                           f"{failed.get((job.metadata.namespace, job.metadata.name), '')}".strip())
        return out

    def snapshots(self, run: StackRun) -> dict[tuple, dict]:
        """What an apply could change in every object the stack applied: its content — labels,
        annotations, every top-level field but status — and the apply's own managedFields entry
        (with its time: an apply that rewrites the object stamps it anew). Controllers' own
        writes (a Job's status, a Deployment's) are not the apply's and are left out."""
        out = {}
        for _, obj in run.outcome.applied:
            res = self.applier.resource(obj)
            meta = obj["metadata"]
            live = (res.get(name=meta["name"], namespace=meta.get("namespace")) if res.namespaced else res.get(name=meta["name"])).to_dict()
            m = live["metadata"]
            owners = [f for f in m.get("managedFields") or [] if f.get("manager") == apply.FIELD_MANAGER]
            content = {k: v for k, v in live.items() if k not in ("metadata", "status")}
            out[apply.object_key(obj)] = {"resourceVersion": m["resourceVersion"], "content": (m.get("labels"), m.get("annotations"), content, owners)}
        return out

    # ------------------------------------------------------------------ clean slate

    def reset(self, run: StackRun | None) -> None:
        """Delete what a stack brought, and wait until it is gone."""
        from kubernetes.client.exceptions import ApiException

        if self.lws is not None:
            from tests.cluster import lws

            lws.stop(self.cp, self.lws, self.applier)
            self.lws = None
        if run is not None:
            for _, obj in reversed(run.outcome.applied):
                try:
                    res = self.applier.resource(obj)
                    meta = obj["metadata"]
                    kwargs = {"namespace": meta.get("namespace")} if res.namespaced else {}
                    res.delete(name=meta["name"], propagation_policy="Background", **kwargs)
                except ApiException as err:
                    if err.status != 404:
                        raise
                except Exception:  # noqa: BLE001 - a kind whose CRD went with its namespace
                    pass
        for ns in self.core.list_namespace().items:
            if ns.metadata.name not in SYSTEM_NAMESPACES and not ns.metadata.deletion_timestamp:
                self.core.delete_namespace(ns.metadata.name)
        # CRDs stay: installing the Prometheus operator's again for every stack costs minutes, and
        # whether a stack's custom resources wait for their CRD's installer is checked from the
        # plan's dependencies (apply.undeclared_prerequisites), not by the order of applies here.
        for node in self.core.list_node().items:
            self.core.delete_node(node.metadata.name)

        def gone() -> bool:
            left_ns = [n for n in self.core.list_namespace().items if n.metadata.name not in SYSTEM_NAMESPACES]
            pods = self.core.list_pod_for_all_namespaces().items
            return not left_ns and not pods and not self.core.list_node().items

        self._wait(gone, 120, "previous stack deleted")
        self.applier.dyn.resources.invalidate_cache()

    def _wait(self, ok, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            self.cp.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: not after {timeout:.0f} s")
            time.sleep(0.5)


def describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}"
