"""Stack configuration: every committed stack validates; each kind of mistake gets one clear line."""

from __future__ import annotations

import pytest
import yaml

from infra.config import NS, load_config, load_stack_file
from infra.errors import ConfigError
from infra.layout_fit import require_layouts_fit
from tests.conftest import ROOT, STACKS, make_project, run_cli, stack_values


def _load(values, secrets=frozenset(), stack="prod"):
    """The config's checks and then the plan's layout-fit check: what `infra plan` refuses before planning."""
    return require_layouts_fit(load_config(values, stack=stack, secret_keys=set(secrets), base_dir=ROOT))


@pytest.mark.parametrize("stack", STACKS)
def test_committed_stacks_validate(stack):
    cfg = load_stack_file(stack, ROOT)
    assert cfg.environment == stack
    assert cfg.models, "every stack serves at least one model"


def test_environment_defaults():
    dev = load_stack_file("dev", ROOT)
    prod = load_stack_file("prod", ROOT)
    staging = load_stack_file("staging", ROOT)
    assert (dev.cluster.ha, dev.protect, dev.observability.enabled) == (False, False, False)
    assert (prod.cluster.ha, prod.protect, prod.observability.enabled) == (True, True, True)
    assert (staging.cluster.ha, staging.protect, staging.observability.enabled) == (False, False, True)
    assert prod.pool("mi325x").autoscale and prod.pool("mi325x").max_node_count == 6


def _set(path: str, value):
    """A mutation setting `a.b[0].c` (relative to the inference-platform namespace) to value."""

    def mutate(values):
        parts = path.replace("]", "").replace("[", ".").split(".")
        key = NS + parts[0]
        if len(parts) == 1:
            values[key] = value
            return
        node = values[key]
        for part in parts[1:-1]:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        last = parts[-1]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _delete(path: str):
    def mutate(values):
        parts = path.split(".")
        node = values[NS + parts[0]]
        for part in parts[1:-1]:
            node = node[int(part)] if part.isdigit() else node[part]
        del node[parts[-1]]

    return mutate


def _both(*mutations):
    def mutate(values):
        for m in mutations:
            m(values)

    return mutate


def _add_model(**fields):
    def mutate(values):
        model = dict(values[NS + "models"][0])
        model.update(fields)
        values[NS + "models"].append(model)

    return mutate


def _add_pool(**fields):
    def mutate(values):
        pool = dict(values[NS + "gpu_pools"][0])
        pool.update(fields)
        values[NS + "gpu_pools"].append(pool)

    return mutate


# (id, stack, mutation, expected key path, expected fragment of the message)
INVALID = [
    ("unknown top-level key", "prod", _set("regoin", "atl1"), "inference-platform:regoin", "unknown key"),
    ("unknown nested key", "prod", _set("cluster.hha", True), "cluster.hha", "did you mean 'ha'"),
    ("unknown key in a list item", "prod", _set("gpu_pools[0].node", 3), "gpu_pools[0].node", "unknown key"),
    ("unknown key in layout", "prod", _set("models[0].layout", {"tp": 4, "tpp": 2}), "models[0].layout.tpp", "unknown key"),
    ("wrong type: int as string", "prod", _set("cluster.system_pool.nodes", "three"), "cluster.system_pool.nodes", "expected an integer"),
    ("wrong type: bool as string", "prod", _set("cluster.ha", "yes"), "cluster.ha", "true or false"),
    ("wrong type: list expected", "prod", _set("gpu_pools", {"name": "x"}), "gpu_pools", "expected a list"),
    ("unknown environment", "prod", _set("environment", "production"), "environment", "allowed"),
    ("unknown region", "prod", _set("region", "atl9"), "region", "not a DigitalOcean region"),
    ("unknown GPU size", "prod", _set("gpu_pools[0].size", "gpu-mi300x8-1536"), "gpu_pools[0].size", "did you mean"),
    ("CPU size as GPU pool", "prod", _set("gpu_pools[0].size", "s-8vcpu-16gb"), "gpu_pools[0].size", "not a GPU Droplet size"),
    ("model on a missing pool", "prod", _set("models[0].pool", "mi325"), "models[0].pool", "not a pool"),
    ("duplicate pool names", "prod", _set("gpu_pools[1].name", "mi325x"), "gpu_pools[1].name", "duplicates"),
    ("duplicate model names", "prod", _set("models[1].name", "qwen3-235b"), "models[1].name", "duplicates"),
    ("min_nodes > max_nodes", "prod", _set("gpu_pools[0].min_nodes", 9), "gpu_pools[0].min_nodes", "greater than max_nodes"),
    ("negative nodes", "prod", _set("gpu_pools[1].nodes", -1), "gpu_pools[1].nodes", "it must be at least 1"),
    ("nodes and min/max both", "prod", _set("gpu_pools[0].nodes", 2), "gpu_pools[0]", "not both"),
    ("no node count", "prod", _delete("gpu_pools.1.nodes"), "gpu_pools[1]", "missing node count"),
    ("invalid CIDR", "prod", _set("network.vpc_cidr", "10.50.0.0/33"), "network.vpc_cidr", "not a valid CIDR"),
    ("host bits set in CIDR", "prod", _set("network.vpc_cidr", "10.50.0.1/20"), "network.vpc_cidr", "not a valid CIDR"),
    ("public VPC range", "prod", _set("network.vpc_cidr", "8.8.0.0/20"), "network.vpc_cidr", "private"),
    ("VPC overlaps cluster subnet", "prod", _set("network.cluster_subnet", "10.50.0.0/16"), "network.cluster_subnet", "overlaps"),
    ("VPC overlaps DOKS default", "dev", _set("network.vpc_cidr", "10.244.0.0/20"), "network.cluster_subnet", "overlaps"),
    ("service overlaps cluster subnet", "prod", _set("network.service_subnet", "10.100.16.0/20"), "network.service_subnet", "overlaps"),
    ("VPC too large", "prod", _set("network.vpc_cidr", "10.0.0.0/12"), "network.vpc_cidr", "/16 to /28"),
    ("TTFT SLO zero", "prod", _set("models[0].slo.ttft_p90_ms", 0), "models[0].slo.ttft_p90_ms", "greater than 0"),
    ("TPOT SLO negative", "prod", _set("models[0].slo.tpot_p90_ms", -5), "models[0].slo.tpot_p90_ms", "greater than 0"),
    ("tp does not divide the node", "prod", _set("models[0].layout", {"tp": 3, "ep": True}), "models[0].layout", "divide"),
    ("ep on a dense model", "dev", _set("models[0].layout", {"tp": 1, "ep": True}), "models[0].layout", "mixture-of-experts"),
    ("replicas x tp exceeds GPUs", "prod", _set("models[0].layout", {"tp": 4, "ep": True, "replicas_per_node": 3}), "models[0].layout", "GPUs"),
    ("weights do not fit", "staging", _both(_set("gpu_pools[0].size", "gpu-mi300x1-192gb"), _set("models[0].layout", {"tp": 1})), "models[0].layout", "exceed"),
    ("layout neither auto nor mapping", "prod", _set("models[0].layout", "fast"), "models[0].layout", "use 'auto', a P/D layout name"),
    ("plain-text secret", "prod", _set("api_key", "sk-123"), "inference-platform:api_key", "plain text"),
    ("plain-text provider token", "prod", lambda v: v.__setitem__("digitalocean:token", "dop_v1_abc"), "digitalocean:token", "plain text"),
    ("model id without org", "prod", _set("models[0].source", "Qwen3-235B"), "models[0].source", "Hugging Face model id"),
    ("model id with spaces", "prod", _set("models[0].source", "Qwen/Qwen3 235B"), "models[0].source", "Hugging Face model id"),
    ("custom histogram buckets", "prod", _set("models[0].extra_args", ["--custom-histogram-buckets", "{}"]), "models[0].extra_args[0]", "silence the burn-rate alerts"),
    ("revision as a branch name", "prod", _set("models[0].revision", "main"), "models[0].revision", "full 40-character commit id"),
    ("revision as a short hash", "prod", _set("models[0].revision", "a1b2c3d"), "models[0].revision", "not a commit hash"),
    ("model not in catalog, no config.json", "prod", _set("models[1].source", "acme/secret-model-7b"), "models[1].source", "hf_config"),
    ("hf_config path missing", "prod", _set("models[1].hf_config", "models/nope/config.json"), "models[1].hf_config", "not a file"),
    ("model named vllm", "prod", _set("models[1].name", "vllm"), "models[1].name", "reserved"),
    ("retention malformed", "prod", _set("observability.retention", "15 days"), "observability.retention", "not a Prometheus duration"),
    ("maintenance time malformed", "prod", _set("cluster.maintenance.start_time", "25:00"), "cluster.maintenance.start_time", "HH:MM"),
    ("partition mode on NVIDIA", "dev", _both(_set("gpu_pools[0].size", "gpu-h100x1-80gb"), _set("gpu_pools[0].partition_mode", "AMD_PARTITION_MODE_DPX_NPS2")), "gpu_pools[0].partition_mode", "AMD pools only"),
    ("removed dra_driver key", "prod", _set("gpu_runtime", {"mode": "doks-managed", "dra_driver": False}), "gpu_runtime.dra_driver", "unknown key"),
    ("unpinned image", "prod", _set("models[0].image", "vllm/vllm-openai-rocm:latest"), "models[0].image", "not pinned"),
    ("layout flag in extra_args", "prod", _set("models[0].extra_args", ["--tensor-parallel-size=8"]), "models[0].extra_args[0]", "set by the layout"),
    ("layout flag with underscores", "prod", _set("models[0].extra_args", ["--tensor_parallel_size=1"]), "models[0].extra_args[0]", "set by the layout"),
    ("layout flag as short alias", "prod", _set("models[0].extra_args", ["-tp", "8"]), "models[0].extra_args[0]", "set by the layout"),
    ("histogram buckets with underscores", "prod", _set("models[0].extra_args", ["--custom_histogram_buckets=1"]), "models[0].extra_args[0]", "silence the burn-rate alerts"),
    ("shared pool with auto layout", "prod", _add_model(name="second", served_model_name="second"), "models[2].pool", "shared"),
    ("NFS too small", "prod", _set("model_cache.size_gib", 10), "model_cache.size_gib", "it must be at least 50"),
    ("public router without router", "prod", _both(_set("router.kind", "service"), _set("router.public", True)), "router.public", "router"),
    ("fabric mixed with other sizes", "prod", _add_pool(name="fab", size="gpu-mi325x8-2048gb-fabric-contracted", min_nodes=None, max_nodes=None, nodes=1), "gpu_pools", "fabric"),
    ("version prefix malformed", "prod", _set("cluster.version", "latest"), "cluster.version", "version prefix"),
    ("autoscaling on a parked pool", "prod", _both(_set("gpu_pools[0].min_nodes", 0), _set("models[0].autoscaling.enabled", True)), "models[0].autoscaling.enabled", "true cannot start pool 'mi325x' from min_nodes 0"),
    ("retention below the SLO window", "prod", _set("observability.retention", "2d"), "observability.retention", "'2d' is below the minimum of 3d"),
    ("retention in hours below the SLO window", "prod", _set("observability.retention", "71h"), "observability.retention", "minimum of 3d"),
    ("model name starting with vllm-", "prod", _set("models[1].name", "vllm-small"), "models[1].name", "reserved"),
    ("unknown vllm serve flag", "prod", _set("models[0].extra_args", ["--enable-prefix-caching", "--tensor-paralel-size", "2"]), "models[0].extra_args[1]", "did you mean '--tensor-parallel-size'"),
    ("unknown VLLM_ env var", "prod", _set("models[0].env", {"HF_HUB_OFFLINE": "1", "VLLM_USE_TRITON_FLASH_ATTN": "0"}), "models[0].env.VLLM_USE_TRITON_FLASH_ATTN", "not read by vLLM"),
    ("system pool size typo", "prod", _set("cluster.system_pool.size", "s-4vcpu-8g"), "cluster.system_pool.size", "did you mean 's-4vcpu-8gb'"),
    ("GPU size as system pool", "prod", _set("cluster.system_pool.size", "gpu-mi300x1-192gb"), "cluster.system_pool.size", "not a CPU Droplet size slug"),
]


@pytest.mark.parametrize("case_id,stack,mutate,path,fragment", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_config_names_key_path(case_id, stack, mutate, path, fragment):
    values, secrets = stack_values(stack)
    mutate(values)
    with pytest.raises(ConfigError) as info:
        _load(values, secrets, stack=stack)
    message = info.value.render()
    assert path in message, message
    assert fragment in message, message
    assert "Traceback" not in message


def test_all_problems_reported_together():
    values, secrets = stack_values("prod")
    _set("region", "mars1")(values)
    _set("cluster.hha", True)(values)
    _set("gpu_pools[0].size", "gpu-nope")(values)
    with pytest.raises(ConfigError) as info:
        _load(values, secrets)
    assert len(info.value.problems) == 3
    rendered = info.value.render()
    for fragment in ("region", "cluster.hha", "gpu_pools[0].size"):
        assert fragment in rendered


def _serving_mistakes(values):
    _set("models[1].name", "vllm-small")(values)
    _set("models[1].env", {"VLLM_USE_TRITON_FLASH_ATTN": "0"})(values)
    _set("models[1].extra_args", ["--enable-turbo"])(values)


SERVING_MISTAKE_PATHS = ("models[1].name", "models[1].env.VLLM_USE_TRITON_FLASH_ATTN", "models[1].extra_args[0]")


def test_name_env_and_flag_mistakes_reported_together():
    values, secrets = stack_values("prod")
    _serving_mistakes(values)
    with pytest.raises(ConfigError) as info:
        _load(values, secrets)
    assert sorted(p.path for p in info.value.problems) == sorted(NS + p for p in SERVING_MISTAKE_PATHS)


def test_cli_reports_name_env_and_flag_mistakes_in_one_run(tmp_path, capsys):
    values, _ = stack_values("prod")
    _serving_mistakes(values)
    _write_stack(tmp_path, "prod", values)
    code, out, err = run_cli(["plan", "prod", "--root", str(tmp_path)], capsys)
    assert code == 2
    for path in SERVING_MISTAKE_PATHS:
        assert NS + path in err, err
    assert "Traceback" not in err + out


def test_parked_pool_is_valid_and_the_plan_says_its_model_serves_nothing():
    from infra.stack_plan import plan_stack

    values, secrets = stack_values("prod")
    _set("gpu_pools[0].min_nodes", 0)(values)
    cfg = _load(values, secrets)
    assert cfg.models[0].autoscaling.enabled is False  # the default cannot scale up from zero
    notes = plan_stack(cfg).notes
    assert any(n.startswith("model qwen3-235b:") and "0 replicas" in n and "min_nodes ≥ 1" in n for n in notes), notes
    assert not any("0 replicas" in n for n in plan_stack(_load(*stack_values("prod"))).notes)


def test_available_in_region_overrides_a_stale_catalog_listing():
    """The documented override of the offline availability check (issue 29): the size the catalog
    lists only in nyc2 and tor1 plans in atl1 once the stack says DigitalOcean offers it there."""
    values, secrets = stack_values("dev")
    _set("region", "atl1")(values)
    _set("gpu_pools[0].size", "gpu-mi325x1-256gb")(values)
    with pytest.raises(ConfigError, match=r"not offered in 'atl1'.*listed in: nyc2, tor1"):
        _load(values, secrets, stack="dev")
    _set("gpu_pools[0].available_in_region", True)(values)
    cfg = _load(values, secrets, stack="dev")
    assert cfg.region == "atl1" and cfg.gpu_pools[0].size == "gpu-mi325x1-256gb"


@pytest.mark.parametrize("retention", ["3d", "72h", "1w", "1y"])
def test_retention_at_or_above_the_slo_window_is_accepted(retention):
    values, secrets = stack_values("prod")
    _set("observability.retention", retention)(values)
    assert _load(values, secrets).observability.retention == retention


@pytest.mark.parametrize(
    "size",
    ["s-1vcpu-512mb-10gb", "s-2vcpu-8gb-160gb-intel", "s-4vcpu-8gb-amd", "c-8", "c-4-intel", "c2-4vcpu-8gb",
     "g-4vcpu-16gb", "gd-8vcpu-32gb-intel", "m-2vcpu-16gb", "m3-4vcpu-32gb", "so-2vcpu-16gb", "so1_5-4vcpu-32gb"],
)
def test_well_formed_system_pool_sizes_are_accepted(size):
    values, secrets = stack_values("prod")
    _set("cluster.system_pool.size", size)(values)
    assert _load(values, secrets).cluster.system_pool.size == size


@pytest.mark.parametrize("size", ["s-4vcpu-8g", "S-4vcpu-8gb", "s-4vcpu", "c-", "c-8-arm", "x-4vcpu-8gb", "s-4cpu-8gb"])
def test_malformed_system_pool_sizes_are_rejected(size):
    values, secrets = stack_values("prod")
    _set("cluster.system_pool.size", size)(values)
    with pytest.raises(ConfigError) as info:
        _load(values, secrets)
    assert [p.path for p in info.value.problems] == [NS + "cluster.system_pool.size"]
    assert repr(size) in info.value.render()


def test_well_formed_size_missing_from_the_price_list_keeps_the_cost_note():
    from infra.stack_plan import plan_stack

    values, secrets = stack_values("prod")
    _set("cluster.system_pool.size", "c-8-intel")(values)
    cost = plan_stack(_load(values, secrets)).cost_json()
    assert "system pool (c-8-intel: not in the CPU price list)" in cost["not_included"]


@pytest.mark.parametrize("context,expected", [(1000, 4096), (2300, 8192), (5000, 16384)])
def test_unset_max_model_len_follows_its_documented_rule(context, expected):
    from infra.catalog.models import resolve_model
    from infra.config import LayoutConfig
    from infra.planner.memory import default_max_model_len

    description = LayoutConfig.model_fields["max_model_len"].description
    assert "twice input+output tokens rounded up to a power of two, at least 4096" in description
    arch = resolve_model("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", None)
    assert default_max_model_len(arch, context) == expected


def test_semantic_problems_reported_together():
    values, secrets = stack_values("prod")
    _set("gpu_pools[0].min_nodes", 9)(values)
    _set("models[1].pool", "nowhere")(values)
    _set("network.cluster_subnet", "10.50.0.0/16")(values)
    with pytest.raises(ConfigError) as info:
        _load(values, secrets)
    assert len(info.value.problems) >= 3


def test_secret_presence_without_value():
    values, secrets = stack_values("prod")
    values[NS + "grafana_admin_password"] = "hunter2-do-not-leak"
    secrets.add(NS + "grafana_admin_password")
    cfg = _load(values, secrets)
    assert "grafana_admin_password" in cfg.secrets_set
    assert cfg.missing_secrets == []
    assert "hunter2" not in cfg.model_dump_json() and "hunter2" not in repr(cfg)


def test_api_key_is_never_a_missing_secret_it_is_generated():
    """issue 30: every serving path checks a key; without the api_key secret `pulumi up` generates one."""
    values, secrets = stack_values("prod")
    _set("router.public", True)(values)
    _set("router.tls_certificate_id", "5a1c2f4e-9b3d-4e7a-8c21-0f6d3b9a7e15")(values)  # prod's public front door needs both
    _set("router.allowed_source_cidrs", ["203.0.113.0/24"])(values)
    cfg = _load(values, secrets)
    assert "api_key" not in cfg.missing_secrets


def test_explicit_layout_accepted():
    values, secrets = stack_values("staging")
    _set("models[0].layout", {"tp": 4, "ep": True, "replicas_per_node": 2, "kv_cache_dtype": "fp8"})(values)
    cfg = _load(values, secrets, stack="staging")
    layout = cfg.models[0].layout.to_layout()
    assert (layout.tp, layout.ep, layout.replicas_per_node, layout.name) == (4, True, 2, "tp4-ep-r2")


def _write_stack(tmp_path, stack, values):
    make_project(tmp_path)
    doc = {"config": values}
    (tmp_path / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))


def test_cli_reports_config_error_without_traceback(tmp_path, capsys):
    values, _ = stack_values("prod")
    _set("region", "atl9")(values)
    _set("gpu_pools[0].min_nodes", 9)(values)
    _write_stack(tmp_path, "prod", values)
    code, out, err = run_cli(["plan", "prod", "--root", str(tmp_path)], capsys)
    assert code == 2
    assert "inference-platform:region" in err
    assert "Traceback" not in err + out


def test_cli_unknown_stack(tmp_path, capsys):
    make_project(tmp_path)
    code, _, err = run_cli(["plan", "nope", "--root", str(tmp_path)], capsys)
    assert code == 2
    assert "no stack file" in err and "Traceback" not in err


def test_invalid_yaml_is_a_config_error(tmp_path):
    make_project(tmp_path)
    (tmp_path / "stacks" / "Pulumi.bad.yaml").write_text("config: [unclosed\n")
    with pytest.raises(ConfigError) as info:
        load_stack_file("bad", tmp_path)
    rendered = info.value.render()
    assert "Pulumi.bad.yaml: not valid YAML at line 2, column 1:" in rendered and "\n" not in rendered


def test_malformed_hf_config_is_a_config_error(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    values, secrets = stack_values("prod")
    _set("models[1].source", "acme/custom-7b")(values)
    _set("models[1].hf_config", str(bad))(values)
    with pytest.raises(ConfigError) as info:
        _load(values, secrets)
    assert "models[1].hf_config" in info.value.render()


def test_a_pinned_revision_reaches_the_prefetch_the_engine_and_its_tokenizer():
    from infra.render.model_service import completion_marker, prefetch_script, serve_args
    from infra.stack_plan import plan_stack
    from infra.tuning.bench import bench_tokenizer

    sha = "0123456789abcdef0123456789abcdef01234567"
    values, secrets = stack_values("staging")
    _set("models[0].revision", sha)(values)
    spec = plan_stack(_load(values, secrets, stack="staging")).services[0]
    args = serve_args(spec)
    assert args[args.index("--revision") + 1] == sha
    assert args[args.index("--tokenizer-revision") + 1] == sha  # offline replicas have no `main` ref
    assert f"--revision {sha}" in prefetch_script(spec)
    assert completion_marker(spec).endswith("@" + sha)  # a new pin prefetches again
    source_dir = "models--" + spec.source.replace("/", "--")
    assert bench_tokenizer(spec) == f"{spec.cache.hf_home}/hub/{source_dir}/snapshots/{sha}"
    # unpinned: `main`, and the client resolves the HF id
    unpinned = plan_stack(_load(*stack_values("staging"), stack="staging")).services[0]
    assert "--revision" not in serve_args(unpinned) and bench_tokenizer(unpinned) == unpinned.source


@pytest.mark.parametrize("version", ["1.33", "1.33.1", "1.33.1-do.5", "1.33.10-do.12"])
def test_cluster_version_accepts_prefixes_and_exact_doks_slugs(version):
    values, secrets = stack_values("prod")
    _set("cluster.version", version)(values)
    _set("cluster.auto_upgrade", False)(values)
    assert _load(values, secrets).cluster.version == version


@pytest.mark.parametrize("version", ["1.33.1-do", "1.33-do.5", "v1.33.1-do.5", "1.33.1-do.5-x", "latest"])
def test_cluster_version_rejects_what_is_neither_prefix_nor_slug(version):
    values, secrets = stack_values("prod")
    _set("cluster.version", version)(values)
    with pytest.raises(ConfigError) as info:
        _load(values, secrets)
    (problem,) = info.value.problems
    assert problem.path == NS + "cluster.version"
    assert repr(version) in problem.message and '"1.33"' in problem.message and '"1.33.1-do.5"' in problem.message


def test_exact_cluster_version_with_auto_upgrade_is_refused():
    # DOKS would upgrade past the slug and the next `pulumi up` would plan a downgrade (replacement).
    values, secrets = stack_values("staging")
    _set("cluster.version", "1.33.1-do.5")(values)
    with pytest.raises(ConfigError) as info:
        _load(values, secrets, stack="staging")
    (problem,) = info.value.problems
    assert problem.path == NS + "cluster.version"
    assert "'1.33.1-do.5'" in problem.message and "auto_upgrade: false" in problem.message


@pytest.mark.parametrize("version, pin", [("1.34", "keda"), ("1.30", "keda"), ("1.34.1-do.0", "keda")])
def test_a_kubernetes_minor_outside_a_deployed_pins_range_names_the_pin(version, pin):
    values, secrets = stack_values("prod")
    _set("cluster.version", version)(values)
    _set("cluster.auto_upgrade", False)(values)
    with pytest.raises(ConfigError) as info:
        _load(values, secrets)
    (problem,) = info.value.problems
    assert problem.path == NS + "cluster.version" and f"the pinned {pin} supports Kubernetes 1.31–1.33" in problem.message


def test_a_pin_the_stack_does_not_deploy_does_not_constrain_its_version():
    values, secrets = stack_values("dev")  # no observability, so no KEDA or kube-prometheus-stack
    _set("cluster.version", "1.34")(values)
    assert _load(values, secrets, stack="dev").cluster.version == "1.34"


# --- issue 15: typos that did nothing, secrets in plain text, impossible requests -----------------


def _problems(stack: str, *mutations, secrets_extra=()):
    values, secrets = stack_values(stack)
    for mutate in mutations:
        mutate(values)
    with pytest.raises(ConfigError) as info:
        _load(values, secrets | set(secrets_extra), stack=stack)
    return info.value.problems


def test_a_typo_in_our_namespace_is_refused_not_dropped():
    def typo(values):
        values["inference-platfrom:observability"] = {"enabled": True}

    (problem,) = _problems("dev", typo)
    assert problem.path == "inference-platfrom:observability"
    assert "did you mean 'inference-platform:observability'" in problem.message


def test_provider_and_pulumi_namespaces_are_theirs_to_validate():
    values, secrets = stack_values("dev")
    values.update({"kubernetes:enableServerSideApply": True, "pulumi:tags": {"team": "ml"}, "digitalocean:apiEndpoint": "x"})
    assert _load(values, secrets, stack="dev").environment == "dev"


def test_a_duplicate_key_is_refused_with_both_line_numbers(tmp_path):
    from infra.config import parse_stack_text

    text = "config:\n  inference-platform:environment: dev\n  inference-platform:region: tor1\n  inference-platform:environment: prod\n"
    with pytest.raises(ConfigError) as info:
        parse_stack_text(text, "Pulumi.x.yaml")
    assert info.value.render() == (
        "Pulumi.x.yaml: line 4: duplicate key 'inference-platform:environment' (first at line 2); Pulumi refuses a stack "
        "file with a key given twice: keep one"
    )


def test_a_stack_file_without_config_says_so_once(tmp_path):
    # Before: four "required key is missing" for keys that were in the file, one level too high.
    from infra.config import parse_stack_text

    with pytest.raises(ConfigError) as info:
        parse_stack_text("inference-platform:environment: dev\ninference-platform:region: tor1\n", "Pulumi.x.yaml")
    assert len(info.value.problems) == 1 and "indent them under `config:`" in info.value.render()


def test_an_empty_secure_value_is_not_a_set_secret():
    from infra.config import parse_stack_text

    with pytest.raises(ConfigError, match="`secure:` holds no ciphertext"):
        parse_stack_text("config:\n  inference-platform:api_key:\n    secure: ''\n", "Pulumi.x.yaml")


@pytest.mark.parametrize(
    ("name", "value", "points_to"),
    [
        ("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz012345", "huggingface_token"),
        ("EXTRA", "dop_v1_" + "ab" * 32, "plain-text secrets"),
        ("OPENAI_API_KEY", "sk-proj-abcdefghijklmnopqrstuv", "api_key"),
        ("DB_PASSWORD", "hunter2", "plain-text secrets"),
        ("SERVICE_TOKEN", "opaque-value", "plain-text secrets"),
    ],
)
def test_a_plain_text_secret_in_model_env_is_refused(name, value, points_to):
    (problem,) = _problems("dev", _set("models[0].env", {name: value}))
    assert problem.path == f"{NS}models[0].env.{name}" and points_to in problem.message


def test_counts_and_switches_named_like_secrets_are_not_secrets():
    values, secrets = stack_values("dev")
    _set("models[0].env", {"VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD": "1024", "HF_HUB_ETAG_TIMEOUT": "30", "VLLM_LOGGING_LEVEL": "INFO"})(values)
    assert _load(values, secrets, stack="dev").models[0].env["HF_HUB_ETAG_TIMEOUT"] == "30"


def test_a_request_longer_than_the_model_context_is_refused():
    (problem,) = _problems("dev", _set("models[0].workload.input_tokens", 200000))
    assert problem.path == f"{NS}models[0].workload"
    assert "200200 exceeds the 40960-token context of Qwen/Qwen3-8B" in problem.message


@pytest.mark.parametrize("path", ["models[0].slo.tpot_p90_ms", "models[0].workload.peak_rps", "gpu_pools[0].usd_per_hour"])
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_numbers_must_be_finite_everywhere(path, value):
    (problem,) = _problems("dev", _set(path, value))
    assert problem.path == NS + path and "not a finite number" in problem.message


def test_an_exponent_yaml_reads_as_text_is_named_as_such():
    # `peak_rps: 1e308` is the string '1e308' to YAML 1.1; "wrong type" alone left users puzzled.
    (problem,) = _problems("dev", _set("models[0].workload.peak_rps", "1e308"))
    assert "'1e308' is text, not a number" in problem.message and "1.0e+308" in problem.message


def test_valid_node_labels_pass_and_reach_the_pool():
    values, secrets = stack_values("dev")
    labels = {"example.com/team": "ml", "tier": "", "a.b-c_d": "x.y-z_1"}
    _set("gpu_pools[0].labels", labels)(values)
    assert _load(values, secrets, stack="dev").gpu_pools[0].labels == labels


@pytest.mark.parametrize(
    ("labels", "words"),
    [
        ({"kubernetes.io/role": "gpu"}, "reserved prefix kubernetes.io/"),
        ({"topology.k8s.io/zone": "a"}, "reserved prefix topology.k8s.io/"),
        ({"inference-platform/pool": "x"}, "reserved prefix inference-platform/"),
        ({"doks.digitalocean.com/node-pool": "x"}, "reserved prefix doks.digitalocean.com/"),
        ({"team": "a" * 64}, "not a valid label value"),
        ({"bad key": "x"}, "not a valid label name"),
        ({"Example.com/team": "x"}, "not a DNS subdomain"),
        ({("a" * 250) + ".example.com/x": "y"}, "not a DNS subdomain"),
    ],
)
def test_invalid_node_labels_are_refused(labels, words):
    (problem,) = _problems("dev", _set("gpu_pools[0].labels", labels))
    assert problem.path.startswith(f"{NS}gpu_pools[0].labels.") and words in problem.message


def test_a_gated_model_requires_the_huggingface_token():
    from infra.catalog.models import is_gated

    assert is_gated("meta-llama/Llama-3.1-8B-Instruct") and is_gated("mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert not is_gated("Qwen/Qwen3-8B") and not is_gated("NousResearch/Hermes-3-Llama-3.1-70B")
    values, secrets = stack_values("dev")
    _set("models[0].source", "meta-llama/Llama-3.1-8B-Instruct")(values)
    cfg = _load(values, secrets, stack="dev")
    assert cfg.missing_secrets == ["huggingface_token"]
    values[NS + "huggingface_token"] = None  # as read_stack_file passes a `secure:` value
    assert _load(values, secrets | {NS + "huggingface_token"}, stack="dev").missing_secrets == []


@pytest.mark.parametrize("stack", ["../etc/passwd", "Dev", "a", "x" * 41, "dev/prod", "-dev"])
def test_stack_names_are_checked_before_any_path_is_built(stack, tmp_path):
    make_project(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_stack_file(stack, tmp_path)
    assert "is not a valid stack name" in info.value.render() and "2 to 40 characters" in info.value.render()
