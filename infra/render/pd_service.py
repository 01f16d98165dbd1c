"""A prefill/decode-disaggregated model service: prefill and decode Deployments joined by a KV
connector, and the P/D router in front of them (`render/pd_router.py`).

Each side is a colocated model service of one engine (`model_service.render_deployment` of the
side's layout) with the connector added, so probes, caches, GPUs and security stay one code path:

- `--kv-transfer-config` JSON (vLLM `vllm/config/kv_transfer.py`, 0.32/0.33): `kv_connector`,
  `kv_role` (`kv_producer` on prefill, `kv_consumer` on decode for MoRI-IO; NIXL engines are
  `kv_both`), `kv_connector_extra_config`;
- AMD: `MoRIIOConnector` (ROCm only, vLLM ≥ 0.14; bundled in `vllm/vllm-openai-rocm` ≥ v0.21)
  with `http_port`, `handshake_port` (6301), `notify_port` (a base: rank r uses base + r),
  `backend` `xgmi` when the unit shares a node, `rdma` across nodes, and `proxy_ip` /
  `proxy_ping_port` so each engine registers with the P/D router (vllm `moriio_common.py`).
  MoRI-IO needs prefix caching off ("as required by the connector", vLLM MoRI-IO blog
  2026-04-07), so `--enable-prefix-caching` becomes `--no-enable-prefix-caching`;
- NVIDIA: `NixlConnector` with `VLLM_NIXL_SIDE_CHANNEL_HOST` = the pod IP (the default
  `localhost` is unreachable from the peer) and `VLLM_NIXL_SIDE_CHANNEL_PORT` 5600 (vllm envs.py);
- across nodes the KV moves over RDMA: every engine pod takes its node's fabric NICs as a
  multi-node replica's pods do (`multi_node.attach_fabric_nics`: `rdma/fabric0..7` requested and
  limited, the Multus networks annotation, `IPC_LOCK` for memory registration). That needs each
  engine to be the one pod on its node — host-device moves a NIC into one pod's netns, and these
  Deployments' pods are kept apart only by their GPU requests — so a spanning unit renders only when
  both sides' engines take a whole node (`PdLayout.span_problem`: p1tp8-d1tp8, not p8tp1-d8tp1).

Pods carry `inference-platform/pd-role: prefill|decode`; the model's usual Service selects the
router, so whatever fronts the model (the front-door router) sees one worker per model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from infra.catalog.vllm_flags import VLLM_PORT, unknown_env_vars, unknown_flags, vllm_flags
from infra.domain import PdLayout
from infra.errors import Problem, UserError
from infra.render import pd_router
from infra.render.model_service import (
    ModelServiceSpec,
    common_labels,
    deployment_name,
    render_deployment,
    render_pdb,
    render_prefetch_job,
    selector_labels,
)
from infra.render.multi_node import FABRIC_NICS, attach_fabric_nics

PD_ROLE_LABEL = "inference-platform/pd-role"
MORIIO_HANDSHAKE_PORT = 6301  # moriio_common.py default constant
MORIIO_NOTIFY_PORT = 61005  # base; rank r of the engine listens on base + r
MORIIO_PROXY_PING_PORT = 36367  # the router's --vllm-discovery-address port (vLLM MoRI-IO docs)
NIXL_SIDE_CHANNEL_PORT = 5600  # vllm envs.py default (+ data-parallel index)
KV_PORT = 14579  # KVTransferConfig.kv_port default
CONNECTORS = {"amd": "MoRIIOConnector", "nvidia": "NixlConnector"}


@dataclass(frozen=True)
class PdServiceSpec:
    """A model service whose `base.layout` is replaced by the P/D layout `pd`.

    base: the model service as the stack describes it (name, source, image, cache, secrets...);
    its `layout` is ignored, each side's comes from `pd`. units: P/D units the stack runs (each
    N prefill + M decode engines).
    """

    base: ModelServiceSpec
    pd: PdLayout
    units: int = 1

    @property
    def connector(self) -> str | None:
        return CONNECTORS.get(self.base.vendor)

    @property
    def backend(self) -> str:
        return "rdma" if self.pd.spans_nodes else "xgmi"


def side_name(spec: PdServiceSpec, role: str) -> str:
    return f"{deployment_name(spec.base)}-{role}"


def side_spec(spec: PdServiceSpec, role: str) -> ModelServiceSpec:
    layout = spec.pd.side(role)
    if layout.max_model_len is None and spec.pd.max_model_len:
        layout = layout.with_(max_model_len=spec.pd.max_model_len)
    # Autoscaled (units within one node): KEDA scales each side's Deployment on its own (one
    # ScaledObject per side, infra/render/autoscaling.py); the Deployment declares the floor.
    return replace(spec.base, layout=layout, autoscaled=spec.base.autoscaled and not spec.pd.spans_nodes)


def kv_transfer_config(spec: PdServiceSpec, role: str) -> dict:
    """The `--kv-transfer-config` object of one side."""
    connector = spec.connector
    if connector == "MoRIIOConnector":
        return {
            "kv_connector": connector,
            "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
            "kv_connector_extra_config": {
                "http_port": str(VLLM_PORT),
                "handshake_port": str(MORIIO_HANDSHAKE_PORT),
                "notify_port": str(MORIIO_NOTIFY_PORT),
                "backend": spec.backend,
                "proxy_ip": pd_router.router_host(spec.base.name, spec.base.namespace),
                "proxy_ping_port": str(MORIIO_PROXY_PING_PORT),
            },
        }
    return {"kv_connector": connector, "kv_role": "kv_both", "kv_port": KV_PORT}


def connector_args(spec: PdServiceSpec, role: str) -> list[str]:
    return ["--kv-transfer-config", json.dumps(kv_transfer_config(spec, role), sort_keys=True, separators=(",", ":"))]


def validate(spec: PdServiceSpec, path: str) -> None:
    problems: list[Problem] = []
    if spec.connector is None:
        problems.append(
            Problem(f"{path}.layout", f"{spec.pd.name}: no KV connector for {spec.base.vendor} GPUs; P/D needs one of "
                    f"{', '.join(f'{v} ({c})' for v, c in sorted(CONNECTORS.items()))}")
        )
    if (span := spec.pd.span_problem()) is not None:
        problems.append(Problem(f"{path}.layout", f"{spec.pd.name} {span}"))
    if spec.pd.spans_nodes and not spec.base.gpu.fabric:
        problems.append(Problem(f"{path}.layout", f"{spec.pd.name} spans nodes; {spec.base.gpu.slug} has no RDMA fabric"))
    elif spec.pd.spans_nodes and spec.base.gpu.gpus != len(FABRIC_NICS):
        problems.append(Problem(f"{path}.layout", f"{spec.pd.name}: fabric nodes carry {len(FABRIC_NICS)} GPUs and NICs; {spec.base.gpu.slug} has {spec.base.gpu.gpus}"))
    for flag in unknown_flags(connector_args(spec, "prefill") + ["--no-enable-prefix-caching"]) if spec.connector else []:
        problems.append(Problem(f"{path}.layout", f"{flag} is not a `vllm serve` option in vLLM {vllm_flags()['vllm_version']}"))
    if problems:
        raise UserError(problems)


def _side_env(spec: PdServiceSpec) -> list[dict]:
    if spec.connector == "NixlConnector":
        return [
            {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)},
        ]
    # MoRI-IO advertises the pod IP to its peer (host_ip, else auto-detected; VLLM_HOST_IP pins it).
    return [{"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]


def connector_env_names(spec: PdServiceSpec) -> list[str]:
    return [e["name"] for e in _side_env(spec)]


def _side_ports(spec: PdServiceSpec, tp: int) -> list[dict]:
    if spec.connector == "NixlConnector":
        return [{"name": "nixl", "containerPort": NIXL_SIDE_CHANNEL_PORT, "protocol": "TCP"}]
    ports = [{"name": "moriio-hs", "containerPort": MORIIO_HANDSHAKE_PORT, "protocol": "TCP"}]
    ports += [{"name": f"moriio-n{r}", "containerPort": MORIIO_NOTIFY_PORT + r, "protocol": "TCP"} for r in range(tp)]
    return ports


def render_side(spec: PdServiceSpec, role: str) -> dict:
    """The Deployment of one side's engines (instances × units replicas)."""
    side = side_spec(spec, role)
    dep = render_deployment(side)
    name = side_name(spec, role)
    instances = spec.pd.prefill_instances if role == "prefill" else spec.pd.decode_instances
    dep["metadata"]["name"] = name
    dep["metadata"]["labels"][PD_ROLE_LABEL] = role
    dep["metadata"]["labels"]["inference-platform/layout"] = spec.pd.name
    dep["spec"]["replicas"] = instances * spec.units
    dep["spec"]["selector"]["matchLabels"][PD_ROLE_LABEL] = role
    template = dep["spec"]["template"]
    template["metadata"]["labels"][PD_ROLE_LABEL] = role
    template["metadata"]["labels"]["inference-platform/layout"] = spec.pd.name
    template["metadata"]["annotations"]["inference-platform/layout"] = spec.pd.name
    pod = template["spec"]
    for tsc in pod.get("topologySpreadConstraints", []):
        tsc["labelSelector"]["matchLabels"][PD_ROLE_LABEL] = role
    container = pod["containers"][0]
    args = container["args"]
    if spec.connector == "MoRIIOConnector":
        args = ["--no-enable-prefix-caching" if a == "--enable-prefix-caching" else a for a in args]
    container["args"] = args + connector_args(spec, role)
    container["env"] = container["env"] + _side_env(spec)
    container["ports"] = container["ports"] + _side_ports(spec, side.layout.tp)
    if spec.pd.fabric_nics:
        attach_fabric_nics(template)
    return dep


def render_side_pdb(spec: PdServiceSpec, role: str) -> dict:
    pdb = render_pdb(side_spec(spec, role))
    pdb["metadata"]["name"] = side_name(spec, role)
    pdb["spec"]["selector"]["matchLabels"][PD_ROLE_LABEL] = role
    return pdb


def render_pd_service(spec: PdServiceSpec, *, path: str | None = None) -> list[dict]:
    """Every object of a P/D model service, in apply order."""
    validate(spec, path or spec.base.stack_key)
    objects = []
    job = render_prefetch_job(side_spec(spec, "decode"))
    if job:
        objects.append(job)
    for role in ("prefill", "decode"):
        objects += [render_side(spec, role), render_side_pdb(spec, role)]
    objects += pd_router.render_pd_router(router_spec(spec))
    return objects


def router_spec(spec: PdServiceSpec) -> pd_router.PdRouterSpec:
    base = spec.base
    engine = selector_labels(base.name)
    return pd_router.PdRouterSpec(
        model=base.name,
        namespace=base.namespace,
        kv_connector="moriio" if spec.connector == "MoRIIOConnector" else "nixl",
        prefill_selector={**engine, PD_ROLE_LABEL: "prefill"},
        decode_selector={**engine, PD_ROLE_LABEL: "decode"},
        discovery_port=MORIIO_PROXY_PING_PORT if spec.connector == "MoRIIOConnector" else None,
        engine_port=VLLM_PORT,
        labels=common_labels(base.name, "pd-router"),
        node_selector=dict(base.system_node_selector or {}),
    )


__all__ = [
    "PD_ROLE_LABEL",
    "PdServiceSpec",
    "connector_env_names",
    "kv_transfer_config",
    "render_pd_service",
    "render_side",
    "unknown_env_vars",
]
