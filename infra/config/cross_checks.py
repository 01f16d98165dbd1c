"""Every check that reads more than one section of the stack file, in one place, and the defaults
that do (a model's autoscaling, the secrets a stack needs, the pins it deploys).

Each section module (network.py, cluster.py, pools.py, models.py, router.py, ...) checks its own
keys and imports no other section; what one section says against another is here, on the whole
input (`StackInput`), or — for a model's keys — on the model and where it runs (`Placement`: its
pool, the front door, the weight cache, the environment). `CROSS_CHECKS`, at the end, is the table:
the key a check reports → the check, and what else it reads; `checks_for(path)` finds the checks
behind an error's key. infra/config/stack.py runs them with the sections' own checks, in the order
problems are reported.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.catalog import doks, versions
from infra.catalog.engine_images import PINNED, STACKS, VENDOR_NAMES, image_vendor
from infra.catalog.gpus import GPU_SIZES
from infra.catalog.lmcache import SERVER_MIN_VERSION, lmcache_in_image
from infra.catalog.vllm_admin import AdminSwitch
from infra.catalog.vllm_flags import canonical_flag
from infra.compat import unsupported_pins
from infra.config.admin_switches import offer, switches_on
from infra.config.base import NS, duplicates
from infra.config.layout import PdLayoutConfig
from infra.config.models import ModelConfig, engine_image, gated_models
from infra.config.observability import observability_on
from infra.config.pools import EVERY_NODE_LABELS, INSTANCE_TYPE_LABELS, GpuPoolConfig, every_node_selector
from infra.config.rollout import single_node_variants
from infra.config.router import EPP_SUFFIX, GatewayConfig
from infra.errors import Problem
from infra.rollout.split import MAX_STEP_PERCENT, router_split, split_problem

if TYPE_CHECKING:
    from infra.config.client_keys import ClientKeys
    from infra.config.model_keys import ModelKeys
    from infra.config.network import NetworkConfig
    from infra.config.stack_input import StackInput


def _pools(raw: StackInput) -> dict[str, GpuPoolConfig]:
    return {p.name: p for p in raw.gpu_pools}


def _models_by_pool(raw: StackInput) -> dict[str, list[int]]:
    """Pool name → the indices of the models on it (models naming no pool left out)."""
    pools = _pools(raw)
    by_pool: dict[str, list[int]] = {}
    for i, model in enumerate(raw.models):
        if model.pool in pools:
            by_pool.setdefault(model.pool, []).append(i)
    return by_pool


# ---------------------------------------------------------------------------------------------
# gpu_runtime

def runtime_problems(raw: StackInput) -> list[Problem]:
    """A runtime mode that manages AMD GPUs needs an AMD pool."""
    rt = raw.gpu_runtime
    amd = any(p.gpu.vendor == "amd" for p in raw.gpu_pools)
    problems = []
    if rt.mode != "doks-managed" and not amd:
        problems.append(Problem(NS + "gpu_runtime.mode", f"{rt.mode!r} manages AMD GPUs but no gpu_pools entry is an AMD size"))
    return problems


# ---------------------------------------------------------------------------------------------
# cluster.existing: what the stack does not create

def network_problems(raw: StackInput) -> list[Problem]:
    """`network` is required for the VPC the stack creates, and refused on an existing cluster."""
    if raw.cluster.existing is None:
        return [] if raw.network is not None else [Problem(NS + "network", "required key is missing")]
    if raw.network is None:
        return []
    return [Problem(NS + "network", (
        f"{raw.network.model_dump(exclude_unset=True)!r} is given, but cluster.existing deploys onto a cluster the stack "
        "does not create: it creates no VPC (the cluster's network is its owner's); remove network"))]


def existing_cache_problems(raw: StackInput) -> list[Problem]:
    """An NFS share or a Spaces bucket is a DigitalOcean resource, and an existing-cluster stack
    creates none (nor can it tell that the cluster is in a DigitalOcean VPC)."""
    if raw.cluster.existing is None or raw.model_cache.kind == "none":
        return []
    return [Problem(NS + "model_cache.kind", (
        f"{raw.model_cache.kind!r} creates a DigitalOcean resource ({'an NFS share in the VPC' if raw.model_cache.kind == 'nfs' else 'a Spaces bucket'}), "
        "and cluster.existing creates none; use kind none (each pod downloads from Hugging Face to its node's disk)"))]


def system_selector_problems(raw: StackInput) -> list[Problem]:
    """The system nodes must not be a GPU pool's: a system selector that a pool's nodes satisfy (or
    whose nodes satisfy a pool's) would put the router, Prometheus and the operators on GPU nodes —
    unschedulable behind the GPU taint, or taking the engines' CPU and memory without it."""
    existing = raw.cluster.existing
    if existing is None or not existing.system_node_selector:
        return []
    mine = existing.system_node_selector
    at = f"{NS}cluster.existing.system_node_selector"
    if every_node_selector(mine):
        return [Problem(at, (
            f"{mine!r} names only labels every node carries ({', '.join(EVERY_NODE_LABELS)}, beta.kubernetes.io/*): "
            "system pods would land on GPU nodes too; give the labels only the nodes for system workloads carry"))]
    for key in INSTANCE_TYPE_LABELS:
        if mine.get(key) in GPU_SIZES:
            return [Problem(at, (
                f"{{{key!r}: {mine[key]!r}}} names a GPU size: system pods would land on GPU nodes; give the labels "
                "(or the CPU size) only the nodes for system workloads carry"))]
    for i, pool in enumerate(raw.gpu_pools):
        theirs = pool.node_selector or {}
        if theirs and (mine.items() <= theirs.items() or theirs.items() <= mine.items()):
            return [Problem(f"{NS}cluster.existing.system_node_selector", (
                f"{mine!r} also selects the nodes of gpu_pools[{i}] ({pool.name}, node_selector {theirs!r}): system pods would "
                "land on GPU nodes; give the labels only the nodes for system workloads carry"))]
    return []


def kubeconfig_problems(raw: StackInput, kubeconfig_set: bool) -> list[Problem]:
    """The `kubeconfig` secret is the existing cluster's (its absence is a missing secret,
    `required_secrets`); set without cluster.existing, nothing would read it."""
    if raw.cluster.existing is not None or not kubeconfig_set:
        return []
    return [Problem(NS + "kubeconfig", (
        "is set, but cluster.existing is not: the stack creates its DOKS cluster and reads that cluster's credentials, "
        "so nothing would read it; remove it (`pulumi config rm kubeconfig`) or set cluster.existing"))]


def engine_key_problems(raw: StackInput, engine_key_set: bool) -> list[Problem]:
    """The `engine_key` secret is what a front door sends the engines; with router.kind service
    there is none (the engines check the client key themselves), so nothing would read it."""
    if raw.router.kind != "service" or not engine_key_set:
        return []
    return [Problem(NS + "engine_key", (
        "is set, but router.kind is 'service': the engines check the client key (api_key / api_keys) themselves and "
        "nothing reads engine_key — it is read only behind a front door (router.kind session, prefix, round-robin or "
        "gateway); remove it (`pulumi config rm engine_key`) or choose one of those router kinds"))]


def mode_defaults(raw: StackInput) -> StackInput:
    """Defaults that depend on cluster.existing: the weight cache is kind none there unless written
    (nfs, the default elsewhere, is a DigitalOcean resource)."""
    if raw.cluster.existing is None or "kind" in raw.model_cache.model_fields_set:
        return raw
    return raw.model_copy(update={"model_cache": raw.model_cache.model_copy(update={"kind": "none"})})


# ---------------------------------------------------------------------------------------------
# models: names and pools

def duplicate_model_name_problems(raw: StackInput) -> list[Problem]:
    """Two models of one name (the wording reads router.kind)."""
    # Under router.kind gateway a duplicate name is worse than a clash: the InferencePool selects
    # engine pods by their model label, so one model's pool would take in the other's engines.
    pool_hint = " (with router.kind gateway, one model's InferencePool would select the other's engine pods)"
    return duplicates(raw.models, "name", "models", pool_hint if raw.router.kind == "gateway" else "")


def unknown_pool_problems(raw: StackInput, i: int) -> list[Problem]:
    """models[i].pool names no pool (the model's other checks need its pool, so they are skipped)."""
    pools = _pools(raw)
    model = raw.models[i]
    if model.pool in pools:
        return []
    close = difflib.get_close_matches(model.pool, list(pools), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return [Problem(f"{NS}models[{i}].pool", f"{model.pool!r} is not a pool{hint}; defined pools: {', '.join(pools)}")]


def shared_pool_problems(raw: StackInput) -> list[Problem]:
    """Models sharing a pool need explicit layouts that fit its nodes together."""
    pools = _pools(raw)
    problems = []
    for pool_name, indices in _models_by_pool(raw).items():
        if len(indices) > 1:
            models = [raw.models[i] for i in indices]
            if any(m.layout is None for m in models):
                problems.append(
                    Problem(
                        f"{NS}models[{indices[1]}].pool",
                        f"pool {pool_name!r} is shared by several models; shared pools need explicit layouts "
                        "(layout: auto plans a whole node per model)",
                    )
                )
            else:
                gpus = pools[pool_name].gpu.gpus
                used = sum(m.layout.to_layout(gpus).gpus_per_node_used for m in models)
                if used > gpus:
                    problems.append(
                        Problem(f"{NS}models[{indices[-1]}].layout", f"models on pool {pool_name!r} use {used} GPUs per node; it has {gpus}")
                    )
    return problems


def endpoint_picker_name_problems(raw: StackInput) -> list[Problem]:
    """Under router.kind gateway each model gets an endpoint picker `<model>-epp` (infra/render/epp.py),
    whose Service, Deployment and labels must not be another model's."""
    if raw.router.kind != "gateway":
        return []
    problems = []
    names = {m.name: i for i, m in enumerate(raw.models)}
    for i, model in enumerate(raw.models):
        if model.name.endswith(EPP_SUFFIX) and model.name.removesuffix(EPP_SUFFIX) in names:
            other = names[model.name.removesuffix(EPP_SUFFIX)]
            problems.append(
                Problem(
                    f"{NS}models[{i}].name",
                    f"{model.name!r} is the name of the endpoint picker of models[{other}] under router.kind gateway; choose another name",
                )
            )
    return problems


# ---------------------------------------------------------------------------------------------
# models: autoscaling

def autoscaling_problems(raw: StackInput) -> list[Problem]:
    """`autoscaling.enabled: true` needs a pool range to scale in, a running replica to read the queue
    from (min_nodes ≥ 1), the pool to itself, and Prometheus."""
    pools, by_pool = _pools(raw), _models_by_pool(raw)
    problems = []
    for i, model in enumerate(raw.models):
        pool = pools.get(model.pool)
        if model.autoscaling.enabled is not True or pool is None:
            continue
        at = f"{NS}models[{i}].autoscaling.enabled"
        if model.rollout is not None:
            problems.append(Problem(at, "true cannot run with a rollout: KEDA scales the current engines only, which moves the traffic split; set it to false until the rollout is promoted or aborted"))
        if pool.min_node_count >= pool.max_node_count:
            problems.append(Problem(at, f"true needs pool {pool.name!r} to autoscale; give it min_nodes < max_nodes instead of a fixed count"))
        elif pool.min_node_count == 0:
            problems.append(
                Problem(
                    at,
                    f"true cannot start pool {pool.name!r} from min_nodes 0: the queue metric KEDA scales on exists only "
                    "while a vLLM pod runs; give the pool min_nodes ≥ 1 or set it to false",
                )
            )
        elif len(by_pool.get(model.pool, [])) > 1:
            problems.append(Problem(at, f"true needs pool {pool.name!r} to itself; models sharing a pool would compete for its nodes"))
        if not observability_on(raw.environment, raw.observability):
            problems.append(Problem(at, "true needs observability (the queue metric comes from Prometheus); enable observability or set it to false"))
    return problems


def pd_spans_nodes(layout: PdLayoutConfig, pool: GpuPoolConfig | None) -> bool:
    """Whether a P/D unit spans nodes of its pool (True when that cannot be told: the layout or
    pool is itself in error, reported elsewhere)."""
    try:
        return pool is None or layout.to_layout(pool.gpu.gpus).spans_nodes
    except (KeyError, ValueError):
        return True


def autoscaling_default(raw: StackInput, model: ModelConfig) -> tuple[bool, str]:
    """Whether a model autoscales when `autoscaling.enabled` is not written, and why not when it
    does not (the words a note or an error gives the reader)."""
    pools = _pools(raw)
    pool = pools[model.pool]
    if isinstance(model.layout, PdLayoutConfig) and pd_spans_nodes(model.layout, pool):
        return False, "its P/D unit spans nodes and grows in whole units only"
    if not 1 <= pool.min_node_count < pool.max_node_count:
        return False, (f"pool {pool.name!r} has min_nodes 0" if pool.min_node_count == 0 and pool.max_node_count > 0
                       else f"pool {pool.name!r} has a fixed node count")
    if sum(1 for n in raw.models if n.pool == model.pool) > 1:
        return False, f"pool {pool.name!r} is shared with other models"
    if not observability_on(raw.environment, raw.observability):
        return False, "observability is off (KEDA reads the queue from Prometheus)"
    return True, ""


def suspended_by_rollout(raw: StackInput, model: ModelConfig) -> bool:
    """The model would autoscale by default, but its rollout turns autoscaling off while it runs."""
    return (model.rollout is not None and model.autoscaling.enabled is not True
            and "enabled" not in model.autoscaling.model_fields_set and autoscaling_default(raw, model)[0])


ROLLOUT_SUSPENDS = ("KEDA would scale the current engines only and move the traffic split the rollout sets; it is "
                    "back once `infra rollout promote` from the last step or `infra rollout abort` removes the rollout")


def resolve_autoscaling(raw: StackInput) -> list[ModelConfig]:
    """Each model with `autoscaling.enabled` decided (never None afterwards)."""
    out = []
    for model in raw.models:
        enabled = model.autoscaling.enabled
        if enabled is None:
            # A rollout suspends it: KEDA would scale the current engines only and move the split.
            enabled = model.rollout is None and autoscaling_default(raw, model)[0]
        out.append(model.model_copy(update={"autoscaling": model.autoscaling.model_copy(update={"enabled": enabled})}))
    return out


# ---------------------------------------------------------------------------------------------
# a model's keys against where it runs (run for the model and for its rollout candidate)

@dataclass(frozen=True)
class Placement:
    """Where a model runs, as the checks of its keys read it: its pool, the front door's kind, the
    weight cache's kind and the environment."""

    environment: str
    router_kind: str
    pool: GpuPoolConfig
    cache_kind: str


def placement(raw: StackInput, model: ModelConfig) -> Placement | None:
    """Where `model` runs; None when it names no pool (`unknown_pool_problems`)."""
    pool = _pools(raw).get(model.pool)
    return None if pool is None else Placement(raw.environment, raw.router.kind, pool, raw.model_cache.kind)


def _refusal(environment: str, router_kind: str, s: AdminSwitch) -> str | None:
    """Why a switch that is on is refused here; None: the plan notes it."""
    if router_kind == "service":
        reach = "every client with the key" if s.keyed else "every pod of the cluster"
        fix = "" if s.keyed else ", or put a router in front (kind session, prefix or round-robin: its client proxy forwards /v1/ only)"
        return f"with router.kind service {reach} reaches the engines' :8000 directly: remove it{fix}"
    if router_kind == "gateway":
        return ("under router.kind gateway the gateway forwards a request on any path whose body names the model to the "
                "engines, so every client it admits could: remove it")
    if environment == "prod":
        return "prod refuses it: remove it"
    return None


def admin_switch_problems(model: ModelConfig, keys: ModelKeys, on: Placement) -> list[Problem]:
    """A vLLM administrative switch that is on (infra/config/admin_switches.py), where someone other
    than the platform's own pods reaches the engines (router.kind service or gateway) or in prod."""
    problems = []
    for switch in switches_on(model, keys)[0]:
        why = _refusal(on.environment, on.router_kind, switch.switch)
        if why is not None:
            problems.append(Problem(switch.key, f"{switch.written!r} {offer(switch.switch)}; {why}"))
    return problems


def platform_switch_problems(model: ModelConfig, keys: ModelKeys, on: Placement) -> list[Problem]:
    """A switch the platform itself sets against what the workload asks the plan to assume: a
    prefill/decode layout on AMD GPUs joins its engines with MoRI-IO, which needs prefix caching
    off (infra/render/pd_service.py starts them with --no-enable-prefix-caching), so a
    `prefix_cache_hit_rate` — which the P/D planner takes off every prompt's prefill — cannot hold."""
    rate = model.workload.prefix_cache_hit_rate
    if not (isinstance(model.layout, PdLayoutConfig) and on.pool.gpu.vendor == "amd" and rate > 0):
        return []
    return [Problem(keys("workload.prefix_cache_hit_rate"), (
        f"{rate:g} has the plan take {rate:.0%} of each prompt from the prefix cache, but a prefill/decode layout on AMD GPUs "
        "joins its engines with MoRI-IO, which needs prefix caching off (the platform starts them with "
        "--no-enable-prefix-caching): no prompt token comes from the cache; remove it, or use a colocated layout"))]


def image_vendor_problems(model: ModelConfig, keys: ModelKeys, on: Placement) -> list[Problem]:
    """An image built for the other GPU vendor finds no GPU on the pool's nodes and its engines
    crash-loop: refused for the families the catalog knows (infra/catalog/engine_images.py); a
    build the catalog cannot tell about is the user's."""
    if model.image is None:
        return []
    pool = on.pool
    vendor, what = image_vendor(model.image)
    want = pool.gpu.vendor
    if vendor is None or vendor == want:
        return []
    instead = (f"e.g. {PINNED[want]}; unset, the candidate runs its model's image" if keys.candidate
               else f"e.g. the pinned {PINNED[want]}: remove {keys.short('image')}")
    return [Problem(keys("image"), (
        f"{model.image!r} is {what}, built for {VENDOR_NAMES[vendor]} GPUs ({STACKS[vendor]}), and pool {pool.name!r} has "
        f"{VENDOR_NAMES[want]} GPUs ({pool.size}): its engines would find no GPU and crash-loop; give a {STACKS[want]} build "
        f"({instead})"))]


_SERVER_MIN = ".".join(map(str, SERVER_MIN_VERSION))


def lmcache_image_problems(model: ModelConfig, keys: ModelKeys, on: Placement) -> list[Problem]:
    """kind lmcache runs `lmcache server` in the engine container: an image known to carry no
    LMCache is refused (infra/catalog/lmcache.py knows which do); the model's own image left to
    the pinned one (the pool's GPU vendor's) is refused at kv_offload.kind, which asks for it."""
    if model.kv_offload.kind != "lmcache":
        return []
    vendor = on.pool.gpu.vendor
    image = engine_image(model, vendor)
    carries, why = lmcache_in_image(image)
    if carries is not False:
        return []
    example = ("a vLLM ROCm image built with LMCache installed" if vendor == "amd"
               else "vllm/vllm-openai v0.14.0 or later, or lmcache/vllm-openai")
    if model.image is None:
        return [Problem(
            keys("kv_offload.kind"),
            f"lmcache needs {keys.short('image')} set to an image with LMCache {_SERVER_MIN} or later "
            f"(`lmcache server`): the pinned {image} carries none ({why}); e.g. {example}",
        )]
    return [Problem(
        keys("image"),
        f"{image!r} carries no LMCache ({why}), and kv_offload.kind lmcache starts `lmcache server` in the engine "
        f"container: give an image with LMCache {_SERVER_MIN} or later (e.g. {example}), or kv_offload kind cpu",
    )]


# Flags the Spaces source sets on every replica.
_STREAMER_FLAGS = ("--load-format", "--model-loader-extra-config")


def streamer_problems(model: ModelConfig, keys: ModelKeys, on: Placement) -> list[Problem]:
    """Under model_cache.kind spaces every engine streams its weights: an image too old for the
    Run:ai Model Streamer, or extra_args that set the streamer's own flags, is refused."""
    if on.cache_kind != "spaces":
        return []
    problems = []
    minimum = versions.parse_version(versions.VLLM_RUNAI_STREAMER_MIN_VERSION)
    found = versions.vllm_version_of_image(model.image) if model.image else None
    if found is not None and found < minimum:
        problems.append(
            Problem(
                keys("image"),
                f"{model.image!r} is vLLM {'.'.join(map(str, found))}; model_cache.kind spaces streams weights with "
                f"the Run:ai Model Streamer, which needs vLLM ≥ {versions.VLLM_RUNAI_STREAMER_MIN_VERSION} "
                "(infra/catalog/versions.py); use a newer image or another model_cache.kind",
            )
        )
    for j, arg in enumerate(model.extra_args):
        if canonical_flag(arg) in _STREAMER_FLAGS:
            problems.append(Problem(keys(f"extra_args[{j}]"), f"{arg!r} is set by model_cache.kind spaces (the streamer's load format and concurrency)"))
    return problems


# ---------------------------------------------------------------------------------------------
# models[].rollout against the front door and the pool (its own keys: infra/config/rollout.py)

SPLITTING_ROUTERS = ("session", "prefix", "round-robin")


def rollout_front_door_problems(at: str, on: Placement) -> list[Problem]:
    """A rollout needs a front door that splits a model's requests by weight (`at`: the model's key)."""
    ra = f"{at}.rollout"
    if on.router_kind == "service":
        return [Problem(
            ra, "needs a front door that splits traffic, but router.kind is service (clients reach the engines' "
            "Service directly and kube-proxy balances connections, not requests); set router.kind to session, prefix or round-robin",
        )]
    if on.router_kind == "gateway":
        return [Problem(
            ra, "is not available with router.kind gateway yet: an InferencePool selects engines by matchLabels only, so "
            "the current variant's pool would also take in the candidate's engines unless the current engines were "
            "relabelled, which restarts them; use router.kind session, prefix or round-robin (docs/serving.md#layout-rollouts)",
        )]
    return []


def rollout_split_problems(model: ModelConfig, at: str, on: Placement) -> list[Problem]:
    """A running current variant on the pool's minimum, and each step a split the router can express
    with it (infra/rollout/split.py); only for the rollouts infra/config/rollout.py lets through."""
    if not single_node_variants(model):
        return []
    r, pool, ra = model.rollout, on.pool, f"{at}.rollout"
    problems = []
    current = model.layout.to_layout().replicas_for_nodes(pool.min_node_count)
    if current < 1:
        problems.append(Problem(ra, f"needs a running current variant; pool {pool.name!r} has min_nodes 0"))
    elif on.router_kind in SPLITTING_ROUTERS:
        for j, step in enumerate(r.steps):
            if 1 <= step <= MAX_STEP_PERCENT:
                why = split_problem(router_split(step, current))
                if why:
                    problems.append(Problem(f"{ra}.steps[{j}]", why))
    return problems


# ---------------------------------------------------------------------------------------------
# cluster.version against what the stack deploys

def install_gateway_api_crds(gateway: GatewayConfig, network: NetworkConfig | None) -> bool:
    """Whether the platform installs the Gateway API CRDs: DOKS manages them itself on VPC-native
    clusters (docs.digitalocean.com/products/kubernetes/how-to/use-gateway-api: enabled by default
    on VPC-native clusters from 1.33), so by default only elsewhere. On an existing cluster
    (`network` None) the stack cannot tell: it installs them unless told not to."""
    if gateway.install_gateway_api_crds is not None:
        return gateway.install_gateway_api_crds
    return network is None or network.cluster_subnet is None


def pins_in_use(raw: StackInput) -> list[str]:
    """The pinned charts and images this stack deploys (infra/catalog/support_matrix.yaml names)."""
    pins = []
    if any(p.gpu.vendor == "amd" for p in raw.gpu_pools):
        pins.append("vllm-rocm")
        if raw.gpu_runtime.mode == "device-plugin":
            pins += ["rocm-device-plugin", "rocm-node-labeller"]
        elif raw.gpu_runtime.mode == "gpu-operator":
            pins += ["amd-gpu-operator", "cert-manager"]
    if any(p.gpu.vendor == "nvidia" for p in raw.gpu_pools):
        pins.append("vllm-cuda")
    if observability_on(raw.environment, raw.observability):
        pins.append("kube-prometheus-stack")
        names = [p.name for p in raw.gpu_pools]
        if len(set(names)) == len(names) and all(m.pool in names for m in raw.models):
            if any(m.autoscaling.enabled for m in resolve_autoscaling(raw)):
                pins.append("keda")
    if raw.router.kind == "gateway":
        pins += ["agentgateway", "gateway-api-inference-extension", "llm-d-router-epp"]
        if install_gateway_api_crds(raw.router.gateway, raw.network):
            pins.append("gateway-api")
    elif raw.router.kind != "service":
        pins.append("router")
    return pins


def pinned_version_problems(raw: StackInput) -> list[Problem]:
    """A Kubernetes minor outside what a pin the stack deploys supports (infra/compat.py). An existing
    cluster runs whatever version it runs: `infra doctor` asks it."""
    if raw.cluster.existing is not None:
        return []
    version = raw.cluster.version
    return [
        Problem(
            f"{NS}cluster.version",
            f"{version!r}: the pinned {pin} supports Kubernetes {supported} only ({source.split(' @')[0].strip()}); "
            f"use a supported minor or move the {pin} pin in infra/catalog/versions.py",
        )
        for pin, supported, source in unsupported_pins(doks.kubernetes_minor(version), pins=pins_in_use(raw))
    ]


# ---------------------------------------------------------------------------------------------
# the router and the client keys against the models

def objective_model_problems(raw: StackInput) -> list[list[Problem]]:
    """Each gateway objective's problems, by index: the model it names must be one (reported
    objective by objective with router.py `objective_name_problems`)."""
    at = f"{NS}router.gateway"
    names = {m.name: i for i, m in enumerate(raw.models)}
    out: list[list[Problem]] = []
    for j, objective in enumerate(raw.router.gateway.objectives):
        problems = []
        if objective.model not in names:
            close = difflib.get_close_matches(objective.model, list(names), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(Problem(f"{at}.objectives[{j}].model", f"{objective.model!r} is not a model{hint}; models: {', '.join(names) or 'none'}"))
        out.append(problems)
    return out


def front_door_problems(keys: ClientKeys, router_kind: str, api_keys_path: str, *, checked: bool = True) -> list[Problem]:
    """Several keys need a front door: without one (router.kind service) each engine checks the
    client key itself, and vLLM reads one key from VLLM_API_KEY (several only on its command
    line, where `ps` would show them). Keys given to a front door that checks none
    (`checked` false: a gateway with authentication none) would protect nothing: refused, as a
    user who names keys expects them to be checked."""
    if not checked and not keys.generated:
        return [
            Problem(
                api_keys_path,
                f"gives {len(keys.names)} client key(s) ({', '.join(keys.names)}), but router.gateway.authentication is none: "
                "the gateway checks no client key, so they would let nobody in and keep nobody out; set "
                "router.gateway.authentication: api-key, or remove the keys (`pulumi config rm --path 'api_keys.<name>'`, "
                "`pulumi config rm api_key`)",
            )
        ]
    if keys.several and router_kind == "service":
        return [
            Problem(
                api_keys_path,
                f"{len(keys.names)} keys ({', '.join(keys.names)}) need a front door that checks them: set router.kind to "
                "session, prefix, round-robin or gateway, or keep one key (router.kind service: each engine checks the key itself, "
                "and vLLM takes one key from its environment)",
            )
        ]
    return []


def required_secrets(raw: StackInput) -> tuple[str, ...]:
    """The secret keys `pulumi up` needs for this stack (the models' and observability's)."""
    required = []
    # A gated repo (meta-llama/*, ...) downloads only with a token of an account that accepted its
    # terms: without one the prefetch Job fails with 401 at deploy time. `pulumi up` refuses to start
    # without it; the offline plan lists it under "secrets to set" and names the models.
    if gated_models(raw.models):
        required.append("huggingface_token")
    # api_key is never required (issue 30): every serving path checks a key, and when the stack
    # gives none the program generates one (pulumi-random, kept as a secret in the stack's state;
    # `pulumi stack output api_key --show-secrets` reads it).
    if raw.cluster.existing is not None:
        required.append("kubeconfig")  # the existing cluster's credentials
    if observability_on(raw.environment, raw.observability):
        required.append("grafana_admin_password")
        if raw.observability.alert_receiver.kind != "none":
            required.append("alert_webhook_url")
    return tuple(required)


# ---------------------------------------------------------------------------------------------
# The table: the key a check reports → the check, and the keys of other sections it reads.

@dataclass(frozen=True)
class CrossCheck:
    """A check of one key against other sections: `reads` names the keys it reads besides its own."""

    check: Callable[..., Any]
    reads: tuple[str, ...]


# Keys without the namespace, `[]` for any index. A check of a model's keys (`Placement`) reports at
# the rollout candidate's key instead where the candidate writes it (models[].rollout.candidate.image;
# infra/config/model_keys.py); `checks_for` reads it as the model's key.
CROSS_CHECKS: dict[str, tuple[CrossCheck, ...]] = {
    "api_key": (CrossCheck(front_door_problems, ("router.kind", "router.gateway.authentication")),),
    "api_keys": (CrossCheck(front_door_problems, ("router.kind", "router.gateway.authentication")),),
    "cluster.version": (CrossCheck(pinned_version_problems, (
        "gpu_pools[].size", "gpu_runtime.mode", "environment", "observability.enabled", "models[].pool",
        "models[].autoscaling.enabled", "router.kind", "router.gateway.install_gateway_api_crds", "network.cluster_subnet")),),
    "gpu_runtime.mode": (CrossCheck(runtime_problems, ("gpu_pools[].size",)),),
    "cluster.existing.system_node_selector": (CrossCheck(system_selector_problems, ("gpu_pools[].node_selector",)),),
    "kubeconfig": (CrossCheck(kubeconfig_problems, ("cluster.existing",)),),
    "engine_key": (CrossCheck(engine_key_problems, ("router.kind",)),),
    "model_cache.kind": (CrossCheck(existing_cache_problems, ("cluster.existing",)),),
    "network": (CrossCheck(network_problems, ("cluster.existing",)),),
    "models[].autoscaling.enabled": (CrossCheck(autoscaling_problems, (
        "gpu_pools[].nodes", "gpu_pools[].min_nodes", "gpu_pools[].max_nodes", "models[].pool", "environment", "observability.enabled")),),
    "models[].env": (CrossCheck(admin_switch_problems, ("environment", "router.kind")),),
    "models[].extra_args[]": (
        CrossCheck(admin_switch_problems, ("environment", "router.kind")),
        CrossCheck(streamer_problems, ("model_cache.kind",)),
    ),
    "models[].image": (
        CrossCheck(image_vendor_problems, ("gpu_pools[].size",)),
        CrossCheck(lmcache_image_problems, ("gpu_pools[].size",)),
        CrossCheck(streamer_problems, ("model_cache.kind",)),
    ),
    "models[].kv_offload.kind": (CrossCheck(lmcache_image_problems, ("gpu_pools[].size",)),),
    "models[].layout": (CrossCheck(shared_pool_problems, ("gpu_pools[].size",)),),
    "models[].name": (
        CrossCheck(duplicate_model_name_problems, ("router.kind",)),
        CrossCheck(endpoint_picker_name_problems, ("router.kind",)),
    ),
    "models[].pool": (
        CrossCheck(unknown_pool_problems, ("gpu_pools[].name",)),
        CrossCheck(shared_pool_problems, ("gpu_pools[].name",)),
    ),
    "models[].rollout": (
        CrossCheck(rollout_front_door_problems, ("router.kind",)),
        CrossCheck(rollout_split_problems, ("gpu_pools[].nodes", "gpu_pools[].min_nodes")),
    ),
    "models[].rollout.steps[]": (CrossCheck(rollout_split_problems, ("router.kind", "gpu_pools[].nodes", "gpu_pools[].min_nodes")),),
    "models[].workload.prefix_cache_hit_rate": (CrossCheck(platform_switch_problems, ("gpu_pools[].size",)),),
    "router.gateway.objectives[].model": (CrossCheck(objective_model_problems, ("models[].name",)),),
}


def checks_for(path: str) -> tuple[CrossCheck, ...]:
    """The cross-checks that report `path`, as an error names it
    (`inference-platform:models[2].rollout.candidate.extra_args[1]`, `...models[0].env.VLLM_SERVER_DEV_MODE`);
    none for a key only its own section checks."""
    key = re.sub(r"\[\d+\]", "[]", path.removeprefix(NS))
    key = re.sub(r"^models\[\]\.rollout\.candidate\.(image|extra_args)", r"models[].\1", key)  # written by the candidate
    key = re.sub(r"^models\[\]\.env\..*", "models[].env", key)  # one variable of the map
    return CROSS_CHECKS.get(key, ())
