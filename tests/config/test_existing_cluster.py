"""cluster.existing (issue 38): what an existing-cluster stack may say, and each key it refuses —
every error names the key path, the value given and what is allowed instead."""

from __future__ import annotations

import base64
import copy
from pathlib import Path

import pytest

from infra.config import NS, load_config, parse_stack_text
from infra.errors import ConfigError
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "existing_cluster" / "Pulumi.gpu-shared.yaml"


def fixture_values() -> tuple[dict, set[str]]:
    return parse_stack_text(FIXTURE.read_text(), FIXTURE)


def _load(values: dict, secret_keys: set[str]):
    return load_config(values, stack="gpu-shared", secret_keys=secret_keys, base_dir=ROOT)


def _problems(mutate, *, secrets=None) -> list[str]:
    values, secret_keys = fixture_values()
    values = copy.deepcopy(values)
    mutate(values)
    if secrets is not None:
        secrets(secret_keys)
    try:
        _load(values, secret_keys)
    except ConfigError as err:
        return [f"{p.path}: {p.message}" for p in err.problems]
    return []


def _cluster(**keys):
    def mutate(values):
        values[NS + "cluster"].update(keys)
    return mutate


def _pool(i: int, **keys):
    def mutate(values):
        values[NS + "gpu_pools"][i].update(keys)
    return mutate


def _pool_without(i: int, key: str):
    def mutate(values):
        del values[NS + "gpu_pools"][i][key]
    return mutate


def test_the_fixture_loads_with_its_defaults():
    cfg = _load(*fixture_values())
    assert cfg.existing_cluster and cfg.network is None
    assert cfg.cluster.existing.context == "platform-admin"
    assert cfg.model_cache.kind == "none", "the weight cache defaults to none: nfs and spaces are DigitalOcean resources"
    assert (cfg.cluster.ha, cfg.protect) == (False, False)
    assert "kubeconfig" in cfg.secrets_required and not cfg.missing_secrets
    assert cfg.pool_selector("mi300x") == {"example.com/gpu-pool": "mi300x"}
    assert cfg.cluster.api_allow_list is None


@pytest.mark.parametrize("key, value", [
    ("version", "1.33"), ("ha", True), ("protect", True), ("auto_upgrade", False), ("surge_upgrade", False),
    ("system_pool", {"size": "s-4vcpu-8gb", "nodes": 2}), ("maintenance", {"day": "monday"}),
    ("control_plane_allowed_cidrs", ["81.2.69.0/24"]), ("kubeconfig_expire_seconds", 3600),
])
def test_each_doks_only_cluster_key_is_refused_with_its_value(key, value):
    problems = _problems(_cluster(**{key: value}))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{NS}cluster.{key}: ")
    assert "cluster.existing" in problems[0] and f"remove cluster.{key}" in problems[0]
    shown = repr(value) if not isinstance(value, dict) else next(iter(value))
    assert str(shown) in problems[0]


def test_two_doks_only_keys_are_two_errors():
    problems = _problems(_cluster(version="1.33", ha=True))
    assert [p.split(":")[1] for p in problems] == ["cluster.version", "cluster.ha"]


def test_network_is_refused_and_required_only_without_existing():
    problems = _problems(lambda v: v.update({NS + "network": {"vpc_cidr": "10.20.0.0/20"}}))
    assert problems == [f"{NS}network: {{'vpc_cidr': '10.20.0.0/20'}} is given, but cluster.existing deploys onto a cluster the "
                        "stack does not create: it creates no VPC (the cluster's network is its owner's); remove network"]
    values = load_dev()
    del values[NS + "network"]
    with pytest.raises(ConfigError, match=r"inference-platform:network: required key is missing"):
        load_config(values, stack="dev", base_dir=ROOT)


def load_dev() -> dict:
    values, _ = parse_stack_text((ROOT / "stacks" / "Pulumi.dev.yaml").read_text(), "dev")
    return values


@pytest.mark.parametrize("kind, what", [("nfs", "an NFS share"), ("spaces", "a Spaces bucket")])
def test_a_weight_cache_that_is_a_digitalocean_resource_is_refused(kind, what):
    extra = {"bucket": "acme-weights"} if kind == "spaces" else {}
    problems = _problems(lambda v: v.update({NS + "model_cache": {"kind": kind, **extra}}))
    assert any(p.startswith(f"{NS}model_cache.kind: '{kind}' creates a DigitalOcean resource ({what}") and "use kind none" in p
               for p in problems), problems


def test_kind_none_written_is_accepted():
    assert _problems(lambda v: v.update({NS + "model_cache": {"kind": "none"}})) == []


@pytest.mark.parametrize("key, value, words", [
    ("min_nodes", 1, "does not scale"), ("max_nodes", 3, "does not scale"),
    ("partition_mode", "AMD_PARTITION_MODE_SPX_NPS1", "set when a DOKS pool is created"),
    ("labels", {"example.com/team": "ml"}, "cannot label nodes it does not manage"),
    ("fabric", False, "RDMA fabric"), ("available_in_region", True, "creates no node pool"),
])
def test_pool_keys_only_a_created_pool_reads_are_refused(key, value, words):
    problems = _problems(_pool(0, **{key: value}))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{NS}gpu_pools[0].{key}: {value!r} is given, but cluster.existing is set: ")
    assert words in problems[0] and f"remove {key}" in problems[0]


@pytest.mark.parametrize("key, words", [("node_selector", "the labels this pool's nodes already carry"), ("nodes", "how many Ready nodes")])
def test_node_selector_and_nodes_are_required(key, words):
    problems = _problems(_pool_without(0, key))
    assert any(p.startswith(f"{NS}gpu_pools[0].{key}: required with cluster.existing") and words in p for p in problems), problems


def test_node_selector_without_existing_is_refused():
    values = load_dev()
    values[NS + "gpu_pools"][0]["node_selector"] = {"example.com/gpu-pool": "a"}
    with pytest.raises(ConfigError) as err:
        load_config(values, stack="dev", base_dir=ROOT)
    (problem,) = err.value.problems
    assert problem.path == f"{NS}gpu_pools[0].node_selector"
    assert "{'example.com/gpu-pool': 'a'} is given, but the stack creates this pool" in problem.message
    assert "remove node_selector, or set cluster.existing" in problem.message


@pytest.mark.parametrize("selector, words", [
    ({}, "an empty selector matches every node"),
    ({"example.com/gpu pool": "a"}, "is not a valid label name"),
    ({"example.com/gpu-pool": "a b"}, "is not a valid label value"),
    ({"Example.COM/gpu": "a"}, "is not a DNS subdomain"),
])
def test_a_bad_node_selector_is_refused_at_its_label(selector, words):
    problems = _problems(_pool(0, node_selector=selector))
    assert any(p.startswith(f"{NS}gpu_pools[0].node_selector") and words in p for p in problems), problems


def test_reserved_prefixes_are_fine_in_a_selector():
    """A selector reads labels others set: DOKS's pool label, the well-known instance type."""
    assert _problems(_pool(0, node_selector={"doks.digitalocean.com/node-pool": "gpu-a", "node.kubernetes.io/instance-type": "gpu-mi300x8-1536gb"})) == []


def test_identical_selectors_are_refused():
    problems = _problems(_pool(1, node_selector={"example.com/gpu-pool": "mi300x"}))
    assert problems == [f"{NS}gpu_pools[1].node_selector: {{'example.com/gpu-pool': 'mi300x'}} is the node_selector of gpu_pools[0] "
                        "(mi300x): the same nodes would serve both pools; give each pool a selector no other pool's nodes match"]


def test_a_selector_that_is_a_subset_of_another_is_refused():
    problems = _problems(_pool(1, node_selector={"example.com/gpu-pool": "mi300x", "example.com/size": "small"}))
    assert len(problems) == 1 and problems[0].startswith(f"{NS}gpu_pools[1].node_selector: ")
    assert "every node gpu_pools[1] selects also carries the labels gpu_pools[0] selects" in problems[0]


def test_selectors_on_different_keys_are_accepted():
    """Disjoint keys may still both match one node; the config cannot tell, `infra doctor` can."""
    assert _problems(_pool(1, node_selector={"example.com/small": "true"})) == []


@pytest.mark.parametrize("existing, words", [
    ({"context": ""}, "an empty context name"),
    ({"system_node_selector": {}}, "an empty selector pins nothing"),
    ({"kubeconfig": "x"}, "unknown key"),
])
def test_bad_existing_keys(existing, words):
    problems = _problems(_cluster(existing=existing))
    assert any(p.startswith(f"{NS}cluster.existing") and words.lower() in p.lower() for p in problems), problems


def test_kubeconfig_is_a_missing_secret_without_it_and_refused_without_existing():
    values, secret_keys = fixture_values()
    del values[NS + "kubeconfig"]
    cfg = _load(values, secret_keys - {NS + "kubeconfig"})
    assert cfg.missing_secrets == ["kubeconfig"]

    values = load_dev()
    values[NS + "kubeconfig"] = None
    with pytest.raises(ConfigError) as err:
        load_config(values, stack="dev", secret_keys={NS + "kubeconfig"}, base_dir=ROOT)
    (problem,) = err.value.problems
    assert problem.path == f"{NS}kubeconfig" and "cluster.existing is not" in problem.message
    assert "pulumi config rm kubeconfig" in problem.message


def test_a_plain_kubeconfig_is_the_plain_secret_error_and_never_quoted():
    values, secret_keys = fixture_values()
    values[NS + "kubeconfig"] = "apiVersion: v1\nkind: Config\nusers: [{name: a, user: {token: s3cr3t-t0ken-value}}]\n"
    with pytest.raises(ConfigError) as err:
        _load(values, secret_keys - {NS + "kubeconfig"})
    rendered = err.value.render()
    assert f"{NS}kubeconfig: given in plain text; secrets must be set with `pulumi config set --secret kubeconfig ...`" in rendered
    assert "s3cr3t" not in rendered


def test_engine_key_is_a_secret_of_any_mode():
    values = load_dev()
    values[NS + "router"] = {"kind": "session"}  # behind a front door: dev's router.kind service reads no engine key
    values[NS + "engine_key"] = None
    cfg = load_config(values, stack="dev", secret_keys={NS + "engine_key"}, base_dir=ROOT)
    assert "engine_key" in cfg.secrets_set
    values[NS + "engine_key"] = "plain-engine-key-0123456789"
    with pytest.raises(ConfigError) as err:
        load_config(values, stack="dev", base_dir=ROOT)
    assert "pulumi config set --secret engine_key" in err.value.render() and "plain-engine-key" not in err.value.render()


def test_engine_key_values_are_checked_like_client_keys_without_quoting_them():
    from infra.config.client_keys import key_value_problems

    short, bad = "short-key", "a key with spaces inside!!"
    problems = key_value_problems({"engine_key": short}, {"engine_key": f"{NS}engine_key"})
    problems += key_value_problems({"engine_key": bad}, {"engine_key": f"{NS}engine_key"})
    assert [p.path for p in problems] == [f"{NS}engine_key"] * 2
    assert all(short not in p.message and bad not in p.message for p in problems)


def test_the_prod_api_allow_list_rule_does_not_apply_to_a_cluster_the_stack_does_not_own():
    values, secret_keys = fixture_values()
    values[NS + "environment"] = "prod"
    cfg = _load(values, secret_keys)
    assert cfg.environment == "prod" and cfg.protect is False


def test_a_size_listed_only_elsewhere_is_not_refused_on_an_existing_cluster(tmp_path: Path):
    """The nodes exist already: the catalog's regions are the DOKS creation question only."""
    values, secret_keys = fixture_values()
    values[NS + "region"] = "tor1"
    assert _load(values, secret_keys).region == "tor1"


def test_a_system_selector_that_selects_a_gpu_pool_is_refused():
    problems = _problems(_cluster(existing={"system_node_selector": {"example.com/gpu-pool": "mi300x"}}))
    assert problems == [f"{NS}cluster.existing.system_node_selector: {{'example.com/gpu-pool': 'mi300x'}} also selects the nodes of "
                        "gpu_pools[0] (mi300x, node_selector {'example.com/gpu-pool': 'mi300x'}): system pods would land on GPU nodes; "
                        "give the labels only the nodes for system workloads carry"]


# --- audit of the existing-cluster mode (wave 38): kubeconfig content in plain keys ---

KUBECONFIG_WITH_CLIENT_KEY = (
    "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n"
    "    client-certificate-data: LS0tLS1CRUdJTg==\n    client-key-data: LS0tLS1CRUdJTg==\n"
)
KUBECONFIG_WITH_TOKEN = "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: MARKERSECRET}\n"


def _env(**env):
    def mutate(values):
        values[NS + "models"][0]["env"] = env
    return mutate


@pytest.mark.parametrize("value, words", [
    (KUBECONFIG_WITH_CLIENT_KEY, "holds a kubeconfig"),
    (KUBECONFIG_WITH_TOKEN, "holds a kubeconfig"),
    (base64.b64encode(KUBECONFIG_WITH_TOKEN.encode()).decode(), "decodes to a kubeconfig"),
    (base64.b64encode(KUBECONFIG_WITH_CLIENT_KEY.encode()).decode(), "decodes to a kubeconfig"),
])
def test_kubeconfig_content_in_any_plain_string_is_refused_without_quoting_it(value, words):
    problems = _problems(_env(CLUSTER_CONF=value))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{NS}models[0].env.CLUSTER_CONF: ") and words in problems[0]
    assert "pulumi config set --secret kubeconfig" in problems[0]
    assert "MARKERSECRET" not in problems[0] and "LS0t" not in problems[0] and value[:20] not in problems[0]


def test_kubeconfig_content_in_extra_args_is_refused():
    def mutate(values):
        values[NS + "models"][0]["extra_args"] = ["--disable-log-requests", KUBECONFIG_WITH_TOKEN]
    problems = _problems(mutate)
    assert any(p.startswith(f"{NS}models[0].extra_args[1]: holds a kubeconfig") for p in problems), problems


@pytest.mark.parametrize("path", ["/etc/kube/config", "~/.kube/config", "./kubeconfig"])
def test_a_kubeconfig_file_path_in_env_is_not_a_credential(path):
    assert _problems(_env(KUBECONFIG=path)) == []


def test_the_plain_credential_message_lists_every_secret_key():
    from infra.config import SECRET_KEYS
    problems = _problems(_env(MY_PASSWORD="not-a-number-but-a-secret"))
    assert len(problems) == 1, problems
    assert all(key in problems[0] for key in SECRET_KEYS), problems[0]


# --- audit: selectors on labels every node carries, sizes and hostnames ---

@pytest.mark.parametrize("selector", [
    {"kubernetes.io/arch": "amd64"}, {"kubernetes.io/os": "linux"},
    {"kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux"},
])
def test_a_system_selector_of_labels_every_node_carries_is_refused(selector):
    problems = _problems(_cluster(existing={"system_node_selector": selector}))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{NS}cluster.existing.system_node_selector: {selector!r} names only labels every node carries")


@pytest.mark.parametrize("key", ["node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"])
def test_a_system_selector_naming_a_gpu_size_is_refused(key):
    problems = _problems(_cluster(existing={"system_node_selector": {key: "gpu-mi300x8-1536gb"}}))
    assert problems == [f"{NS}cluster.existing.system_node_selector: {{{key!r}: 'gpu-mi300x8-1536gb'}} names a GPU size: system pods "
                        "would land on GPU nodes; give the labels (or the CPU size) only the nodes for system workloads carry"]


def test_a_system_selector_naming_a_cpu_size_is_accepted():
    assert _problems(_cluster(existing={"system_node_selector": {"node.kubernetes.io/instance-type": "s-4vcpu-8gb"}})) == []


def test_a_pool_selector_of_labels_every_node_carries_is_refused():
    problems = _problems(_pool(0, node_selector={"kubernetes.io/arch": "amd64"}))
    assert any(p.startswith(f"{NS}gpu_pools[0].node_selector: {{'kubernetes.io/arch': 'amd64'}} names only labels every node carries")
               for p in problems), problems


def test_a_pool_selector_naming_another_size_is_refused():
    problems = _problems(_pool(1, node_selector={"node.kubernetes.io/instance-type": "gpu-mi300x8-1536gb"}))
    assert f"{NS}gpu_pools[1].node_selector: {{'node.kubernetes.io/instance-type': 'gpu-mi300x8-1536gb'}} selects nodes of size " \
           "gpu-mi300x8-1536gb, but the pool's size is gpu-mi300x1-192gb; give node.kubernetes.io/instance-type: gpu-mi300x1-192gb, " \
           "or set size to the nodes' size" in problems, problems


def test_a_pool_selector_naming_its_own_size_is_accepted():
    assert _problems(_pool(1, node_selector={"node.kubernetes.io/instance-type": "gpu-mi300x1-192gb"})) == []


def test_a_hostname_selector_is_refused_for_more_than_one_node_and_accepted_for_one():
    problems = _problems(_pool(0, node_selector={"kubernetes.io/hostname": "gpu-node-1"}))
    assert problems == [f"{NS}gpu_pools[0].node_selector: {{'kubernetes.io/hostname': 'gpu-node-1'}} selects one node, but nodes "
                        "is 2; give a label all the pool's nodes carry, or nodes: 1"]
    assert _problems(_pool(1, node_selector={"kubernetes.io/hostname": "gpu-small-1"})) == []


# --- audit: keys nothing would read ---

def test_engine_key_with_router_kind_service_is_refused_at_engine_key():
    def service(values):
        values[NS + "router"] = {"kind": "service"}
    problems = _problems(service)
    assert problems == [f"{NS}engine_key: is set, but router.kind is 'service': the engines check the client key (api_key / "
                        "api_keys) themselves and nothing reads engine_key — it is read only behind a front door (router.kind "
                        "session, prefix, round-robin or gateway); remove it (`pulumi config rm engine_key`) or choose one of "
                        "those router kinds"]


def test_router_kind_service_without_engine_key_is_accepted():
    def service(values):
        values[NS + "router"] = {"kind": "service"}
        del values[NS + "engine_key"]
    assert _problems(service, secrets=lambda keys: keys.discard(NS + "engine_key")) == []


def test_a_kubernetes_kubeconfig_secret_is_refused_naming_the_kubeconfig_secret():
    def provider_kubeconfig(values):
        values["kubernetes:kubeconfig"] = None  # a secret: parse_stack_text keeps no value
    problems = _problems(provider_kubeconfig, secrets=lambda keys: keys.add("kubernetes:kubeconfig"))
    assert len(problems) == 1, problems
    assert problems[0].startswith("kubernetes:kubeconfig: is set, but the program's Kubernetes provider reads the "
                                  "inference-platform:kubeconfig secret")
    assert "pulumi config set --secret kubeconfig < FILE" in problems[0]


def test_a_digitalocean_token_on_an_existing_cluster_is_loaded_and_marked():
    values, secret_keys = fixture_values()
    values["digitalocean:token"] = None
    cfg = _load(values, secret_keys | {"digitalocean:token"})
    assert cfg.digitalocean_token_set


def test_a_multi_node_layout_says_existing_mode_has_no_fabric():
    from infra.layout_fit import layout_fit_problems

    values, secret_keys = fixture_values()
    values[NS + "models"][0]["layout"] = {"tp": 16, "nodes_per_replica": 2}
    try:
        cfg = _load(values, secret_keys)
        problems = [f"{p.path}: {p.message}" for p in layout_fit_problems(cfg)]
    except ConfigError as err:
        problems = [f"{p.path}: {p.message}" for p in err.problems]
    (problem,) = [p for p in problems if "nodes_per_replica" in p]
    assert "multi-node replicas are not available in existing-cluster mode" in problem
    assert "fabric: true" not in problem
