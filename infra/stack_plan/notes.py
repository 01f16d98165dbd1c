"""The notes a reader of the plan should see about a model or the stack: a P/D layout that would
carry more, a thin KV cache, a peak beyond the pool, a measurement off the prediction, images
pinned by tag only, how clients get the API key. Notes never stop a plan; problems do.
"""

from __future__ import annotations

from infra.config.client_keys import ClientKeys, key_names_note
from infra.config.router import RouterConfig, public_exposure_gaps
from infra.planner.choice import MIN_KV_SHARE, held_back_reason
from infra.planner.search import NEAR_TIE
from infra.stack_plan.facts import ModelFacts

# Measured below this share of the prediction: the factors are off enough to mislead the search.
CALIBRATE_BELOW = 0.7



def pd_notes(m: ModelFacts, efficiency=None) -> list[str]:
    """`layout: auto` plans colocated layouts; when a prefill/decode layout would carry clearly more
    (beyond the near-tie margin), say so: switching is the user's call (a second router, a KV
    connector, no autoscaling for a unit over nodes — docs/serving.md)."""
    from infra.planner.disaggregation import pd_candidates
    from infra.planner.efficiency import load_efficiency

    chosen = m.plan.chosen
    if not chosen.fits or chosen.goodput_rps_per_node <= 0:
        return []
    table = efficiency if efficiency is not None else load_efficiency()
    gpu = m.pool.gpu
    pds = pd_candidates(
        m.arch, gpu, m.config.workload.to_workload(), m.config.slo.to_slo(), table.for_family(gpu.accelerator.family, moe=m.arch.is_moe),
        table.band(gpu.accelerator.family, m.arch.is_moe), m.pool.node_usd_per_hour, fabric=m.pool.fabric,
        pool_nodes=m.pool.max_node_count,
    )
    best = min((c for c in pds if c.fits), key=lambda c: (-c.goodput_rps_per_node, c.name), default=None)
    if best is None or best.goodput_rps_per_node <= chosen.goodput_rps_per_node * (1 + NEAR_TIE):
        return []
    ratio = best.goodput_rps_per_node / chosen.goodput_rps_per_node
    workload, slo = m.config.workload.to_workload(), m.config.slo.to_slo()
    thin = held_back_reason(best, workload, slo)
    advice = (
        f"but {thin}, so it is not advised unmeasured (planner/choice.py): bench it first"
        if thin
        else f"set layout: {best.name} to serve it disaggregated (docs/serving.md, P/D), and measure both"
    )
    return [
        f"model {m.config.name}: prefill/decode layout {best.name} would carry {best.goodput_rps_per_node:.2f} req/s per node, "
        f"{ratio:.2f}× {chosen.name} ({best.short_reason}); {advice} with `infra bench`"
    ]


# Below this share of the memory budget left for KV cache, a layout's fit rests on the memory
# model's estimate of everything else: `layout: auto` does not choose such a layout unmeasured
# (planner/choice.py, the same margin); an explicit one gets this note.
THIN_KV_SHARE = MIN_KV_SHARE


def thin_kv_notes(m: ModelFacts, stack: str) -> list[str]:
    """A chosen, unmeasured layout whose KV cache is a sliver of the GPU's memory: say how thin, and
    name the best layout with room to spare, so the bench compares the two before production."""
    chosen = m.plan.chosen
    memory = chosen.memory
    if m.measured is not None or not chosen.fits or memory.budget_gb <= 0:
        return []
    share = memory.kv_cache_gb / memory.budget_gb
    if share >= THIN_KV_SHARE:
        return []
    roomy = next(
        (c for c in m.plan.candidates
         if c.fits and c is not chosen and c.goodput_rps_per_node > 0
         and c.memory.kv_cache_gb / c.memory.budget_gb >= THIN_KV_SHARE),
        None,
    )
    alternative = (
        f"; the best layout with room, {roomy.layout.name}, predicts {roomy.goodput_rps_per_node:.2f} req/s/node "
        f"with {roomy.memory.kv_cache_gb:.0f} GB of KV per GPU. Bench both: `infra bench {stack} {m.config.name} "
        f"--layouts {chosen.layout.name},{roomy.layout.name}`"
        if roomy is not None
        else ""
    )
    return [
        f"model {m.config.name}: {chosen.layout.name} leaves {memory.kv_cache_gb:.1f} GB of the "
        f"{memory.budget_gb:.0f} GB budget per GPU for KV cache ({share:.0%}); its fit rests on the memory "
        f"model's estimate of everything else, and a few GB more in the real engine leave no room{alternative}"
    ]


def sizing_notes(m: ModelFacts, stack: str) -> list[str]:
    """A peak beyond the pool, and a measurement that contradicts the prediction."""
    notes = []
    name, pool, peak = m.config.name, m.pool, m.config.workload.peak_rps
    needed = m.nodes_needed
    if peak and needed and needed > pool.max_node_count:
        notes.append(
            f"model {name}: peak {peak:g} req/s needs {needed} nodes of {pool.name} at the "
            + (f"measured goodput ({m.goodput_rps_per_node:.2f} req/s/node); " if m.measured else
               f"predicted goodput's low end ({m.plan.chosen.goodput_low_rps_per_node:.2f} req/s/node); ")
            + f"the pool allows at most {pool.max_node_count}"
        )
    if m.measured is None:
        return notes
    predicted = m.plan.chosen.goodput_rps_per_node
    measured = float(m.measured.measured_goodput_rps)
    if predicted > 0 and measured < CALIBRATE_BELOW * predicted:
        notes.append(
            f"model {name}: measured goodput {measured:.2f} req/s/node ({m.measured.label()}) is "
            f"{measured / predicted:.2f}× the planner's {predicted:.2f} for {m.layout.name}; the pool is sized from "
            f"the measurement. Re-fit the {pool.gpu.accelerator.family} factors: "
            f"`infra tune calibrate <results> --stack {stack} --model {name}` (docs/tuning.md §6)"
        )
    changes = m.measured.changed_conditions(m.config.slo.to_slo(), m.config.workload.to_workload(), pool.gpu.slug)
    if changes:
        notes.append(
            f"model {name}: the measured goodput of {m.layout.name} ({m.measured.label()}) was measured under "
            f"other conditions ({'; '.join(changes)}); it still sizes the pool. Re-run infra bench: "
            f"`infra bench {stack} {name}`, then `infra tune ingest <results> --stack {stack} --model {name} --write`"
        )
    return notes


def api_key_note(keys: ClientKeys, *, front_door: bool, checked: bool = True) -> str:
    """Which client keys exist (names only), where they are checked, how to read one (issue 30);
    none checked behind a gateway with authentication none (issue 37)."""
    return key_names_note(keys, front_door=front_door, checked=checked)


def open_front_door_notes(router: RouterConfig) -> list[str]:
    """A public front door (router or gateway) in dev or staging without TLS or a source allow-list:
    noted here, refused in prod (infra/config/router.py `public_exposure_gaps`)."""
    return [f"router.public {gap} (prod refuses this; docs/security.md)" for gap in public_exposure_gaps(router)]


def override_notes(cfg) -> list[str]:
    """Every override of the catalog says what it overrides (issue 37): a pool planned in a region
    the GPU catalog does not list its size in (`available_in_region: true`), with the catalog's
    regions and date and how to confirm it online; an override the catalog no longer needs."""
    notes = []
    for i, pool in enumerate(cfg.gpu_pools):
        if not pool.available_in_region:
            continue
        listed, when = pool.gpu.regions, pool.gpu.availability_as_of or "an unrecorded date"
        at = f"gpu_pools[{i}].available_in_region"
        if not listed:
            notes.append(f"{at}: true overrides nothing: the GPU catalog of {when} lists no regions for {pool.size} (contract "
                         "sizes are not listed; regions are per account); `infra doctor` checks it online")
        elif cfg.region in listed:
            notes.append(f"{at}: true is no longer needed: the GPU catalog of {when} lists {pool.size} in {cfg.region}; remove it")
        else:
            notes.append(f"{at}: true plans {pool.size} in {cfg.region} although the GPU catalog of {when} lists it only in "
                         f"{', '.join(listed)}; confirm with `infra doctor {cfg.stack}` before `pulumi up` (DOKS fails to "
                         "create the pool mid-deploy otherwise), and `infra catalog sync` to refresh the catalog")
    return notes


def lmcache_image_notes(cfg) -> list[str]:
    """kind lmcache on an image the catalog cannot tell about (a custom build): the plan says what
    the image must carry, since the engine starts anyway and finds no server without it."""
    from infra.catalog.lmcache import SERVER_MIN_VERSION, lmcache_in_image
    from infra.config.models import engine_image

    notes = []
    for model in cfg.models:
        if model.kv_offload.kind != "lmcache":
            continue
        images = [("", engine_image(model, cfg.pool(model.pool).gpu.vendor))]
        if model.rollout is not None and model.rollout.candidate.image is not None:
            images.append((" (rollout candidate)", model.rollout.candidate.image))
        for whose, image in images:
            carries, why = lmcache_in_image(image)
            if carries is None:
                notes.append(f"model {model.name}{whose}: kv_offload lmcache runs `lmcache server` from {image} ({why}): "
                             f"it must carry LMCache {'.'.join(map(str, SERVER_MIN_VERSION))} or later, or vLLM starts "
                             "without its tier (the pod logs say `lmcache: not found`)")
    return notes


def admin_switch_notes(cfg) -> list[str]:
    """vLLM switches that add administrative routes, behind a router in dev or staging (the config
    refuses them in prod and under router.kind service or gateway: infra/config/admin_switches.py)."""
    from infra.config.admin_switches import admin_switch_note, switches_on
    from infra.config.model_keys import candidate_as_model, candidate_keys, model_keys

    notes = []
    for i, model in enumerate(cfg.models):
        seen = set()
        candidate = candidate_as_model(model)
        for which, keys in ((model, model_keys(i)), (candidate, candidate_keys(i, model.rollout.candidate) if candidate else None)):
            if which is None:
                continue
            for on in switches_on(which, keys)[0]:
                if on.key not in seen:
                    seen.add(on.key)
                    notes.append(admin_switch_note(model, keys, on))
    return notes


def existing_cluster_notes(cfg) -> list[str]:
    """What an existing-cluster stack (cluster.existing) leaves to the cluster's owner, said where
    it matters: unpinned system pods, a device plugin the stack does not install."""
    existing = cfg.cluster.existing
    if existing is None:
        return []
    where = f"context {existing.context!r}" if existing.context else "its current-context"
    notes = [
        f"existing cluster: the stack deploys onto the cluster of the `kubeconfig` secret ({where}) and creates no VPC, "
        "cluster, node pool, firewall or weight cache; `infra doctor "
        f"{cfg.stack} --kubeconfig FILE` checks its nodes against gpu_pools[].node_selector (docs/existing-cluster.md)"
    ]
    if not existing.system_node_selector:
        notes.append(
            "existing cluster: system pods are not pinned — cluster.existing.system_node_selector is not set, so the router, "
            "Prometheus, the operators and KEDA may land on any node without a taint (GPU nodes included, if untainted)"
        )
    if cfg.router.public:
        # Found by the engine tests (tests/pulumi_engine): without a controller that gives the Service an
        # address, pulumi-kubernetes waits for one (10 min by default) and fails: "Service was not
        # allocated an IP address; does your cloud provider support this?"
        notes.append(
            "existing cluster: router.public creates a LoadBalancer Service, which needs the cluster's load-balancer "
            "controller to give it an address (DOKS: DigitalOcean's cloud controller, which reads the "
            "service.beta.kubernetes.io/do-loadbalancer-* annotations); without one, `pulumi up` waits 10 minutes "
            "for the address and fails"
        )
    if cfg.digitalocean_token_set:
        notes.append(
            "existing cluster: digitalocean:token is set, but the stack creates no DigitalOcean resource, so nothing reads "
            "it; `pulumi config rm digitalocean:token` if you like (keep it only for another tool that reads this stack)"
        )
    if cfg.gpu_runtime.mode == "doks-managed" and any(p.gpu.vendor == "amd" for p in cfg.gpu_pools):
        notes.append(
            "existing cluster: gpu_runtime.mode doks-managed installs no AMD device plugin — the cluster must already "
            "advertise amd.com/gpu on the AMD pools' nodes (DOKS does; elsewhere set gpu_runtime.mode device-plugin or gpu-operator)"
        )
    return notes
