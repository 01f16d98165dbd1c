"""The cluster as planned and as declared under Pulumi mocks: inputs, safety options, provider and
secret handling."""

import dataclasses

import pytest

from infra.catalog.doks import is_exact_version
from infra.errors import ConfigError
from infra.mock_runtime import MOCK_KUBECONFIG_TOKEN, resolve
from infra.specs import ClusterSpec, GpuAddonFlags, gpu_addon_flags
from infra.stack_resources.foundation import looked_up_version, version_prefix_for_lookup
from tests.stack_resources.conftest import run_graph, with_cluster

CLUSTER = "digitalocean:index/kubernetesCluster:KubernetesCluster"
K8S_PROVIDER = "pulumi:providers:kubernetes"

PROD = ClusterSpec(
    name="inference-prod",
    region="atl1",
    version="1.33",
    version_key="inference-platform:cluster.version",
    system_pool_size="s-8vcpu-16gb",
    system_pool_nodes=3,
    ha=True,
    auto_upgrade=True,
    surge_upgrade=True,
    maintenance_day="sunday",
    maintenance_start_time="04:00",
    control_plane_allowed_cidrs=("203.0.113.0/24",),
    cluster_subnet="10.244.0.0/16",
    service_subnet="10.245.0.0/16",
    kubeconfig_expire_seconds=86400,
    gpu_flags=GpuAddonFlags(amd_device_plugin=True, amd_metrics_exporter=True, nvidia_device_plugin=False),
    protect=True,
    tags=("env:prod", "app:inference-platform"),
)


@pytest.mark.parametrize(
    ("vendors", "mode", "observability", "expected"),
    [
        ({"amd"}, "doks-managed", True, GpuAddonFlags(True, True, False)),
        ({"amd"}, "doks-managed", False, GpuAddonFlags(True, False, False)),
        # DOKS's exporter add-on does not depend on its device plugin: keep it with our own plugin
        ({"amd"}, "device-plugin", True, GpuAddonFlags(False, True, False)),
        ({"amd"}, "device-plugin", False, GpuAddonFlags(False, False, False)),
        ({"amd"}, "gpu-operator", True, GpuAddonFlags(False, False, False)),
        ({"nvidia"}, "doks-managed", True, GpuAddonFlags(False, False, True)),
        ({"amd", "nvidia"}, "device-plugin", False, GpuAddonFlags(False, False, True)),
        (set(), "doks-managed", True, GpuAddonFlags(False, False, False)),
    ],
)
def test_gpu_addon_flags(vendors, mode, observability, expected):
    assert gpu_addon_flags(vendors, mode, observability) == expected


def test_version_prefix_lookup_is_dot_terminated():
    assert version_prefix_for_lookup("1.33") == "1.33."


def _run(spec, stack="prod", mocks=None):
    run = run_graph(lambda b: with_cluster(b, spec), stack=stack, mocks=mocks)
    rec = run.recording
    rec.value = run.declared.group_outputs[run.result[1].replace(CLUSTER, "inference-platform:cluster:DoksCluster")]
    return rec


def test_prod_cluster_inputs():
    rec = _run(PROD)
    c = rec.one(CLUSTER).inputs
    assert c["region"] == "atl1"
    assert c["version"] == "1.33.6-do.1"  # latest patch for the prefix, from the lookup
    assert c["ha"] is True and c["autoUpgrade"] is True and c["surgeUpgrade"] is True
    assert c["vpcUuid"] == "net-vpc-id"
    assert c["clusterSubnet"] == "10.244.0.0/16" and c["serviceSubnet"] == "10.245.0.0/16"
    assert c["maintenancePolicy"] == {"day": "sunday", "startTime": "04:00"}
    assert c["controlPlaneFirewall"] == {"enabled": True, "allowedAddresses": ["203.0.113.0/24"]}
    assert c["kubeconfigExpireSeconds"] == 86400
    assert c["amdGpuDevicePlugin"] == {"enabled": True}
    assert c["amdGpuDeviceMetricsExporterPlugin"] == {"enabled": True}
    assert c["nvidiaGpuDevicePlugin"] == {"enabled": False}
    assert c["tags"] == ["env:prod", "app:inference-platform"]
    pool = c["nodePool"]
    assert pool["name"] == "inference-prod-system"
    assert pool["size"] == "s-8vcpu-16gb" and pool["nodeCount"] == 3 and pool["autoScale"] is False
    assert pool["labels"] == {"inference-platform/pool": "system"}


def test_prod_cluster_options():
    rec = _run(PROD)
    cluster = rec.one(CLUSTER)
    assert cluster.protect is True
    # A prefix only picks the version at creation; the fixed system pool needs no nodeCount ignore.
    assert cluster.ignore_changes == ["version"]
    assert cluster.parent == rec.one("inference-platform:cluster:DoksCluster").urn


def test_without_auto_upgrade_a_prefix_still_ignores_the_version_and_dev_is_unprotected():
    # Following the lookup would upgrade the control plane on an unrelated `pulumi up`.
    args = dataclasses.replace(PROD, name="inference-dev", auto_upgrade=False, protect=False, ha=False)
    cluster = _run(args, stack="dev").one(CLUSTER)
    assert cluster.ignore_changes == ["version"]
    assert cluster.inputs["autoUpgrade"] is False
    assert not cluster.protect
    assert cluster.inputs["ha"] is False


def test_subnets_are_omitted_when_not_configured():
    args = dataclasses.replace(PROD, cluster_subnet=None, service_subnet=None)
    c = _run(args).one(CLUSTER).inputs
    assert "clusterSubnet" not in c and "serviceSubnet" not in c


def test_version_follows_the_prefix():
    args = dataclasses.replace(PROD, version="1.34")
    assert _run(args).one(CLUSTER).inputs["version"] == "1.34.1-do.0"


def test_provider_is_bound_to_the_cluster_id_and_never_deletes_unreachable():
    rec = _run(PROD)
    provider = rec.one(K8S_PROVIDER)
    assert provider.inputs["clusterIdentifier"] == "inference-prod-id"
    assert "deleteUnreachable" not in provider.inputs
    assert provider.parent == rec.one("inference-platform:cluster:DoksCluster").urn


def test_kubeconfig_is_secret_everywhere():
    rec = _run(PROD)
    value, secret = resolve(rec.value["kubeconfig"])
    assert MOCK_KUBECONFIG_TOKEN in value and secret
    # The provider receives it wrapped as a secret, and no registered input holds it in clear.
    assert MOCK_KUBECONFIG_TOKEN in rec.wire_text()
    assert not rec.plain_text_contains(MOCK_KUBECONFIG_TOKEN)
    assert rec.plain_text_contains("203.0.113.0/24")  # the check does see plain inputs


def test_the_dra_driver_is_never_enabled():
    # Model pods request the amd.com/gpu extended resource, which only a device plugin advertises.
    assert "amdGpuDraDriver" not in _run(PROD).one(CLUSTER).inputs


# --------------------------------------------------------------------------- deployment fixes

GET_CLUSTER = "digitalocean:index/getKubernetesCluster:getKubernetesCluster"
GET_VERSIONS = "digitalocean:index/getKubernetesVersions:getKubernetesVersions"


def test_provider_kubeconfig_is_fetched_fresh_on_every_run_not_read_from_state():
    from infra.mock_runtime import STALE_KUBECONFIG_TOKEN

    rec = _run(PROD)
    provider = rec.one(K8S_PROVIDER)
    wire = str(provider.wire)
    # The DO provider renews the cluster's stored kube_configs only on `pulumi refresh`.
    assert MOCK_KUBECONFIG_TOKEN in wire and STALE_KUBECONFIG_TOKEN not in wire
    assert not rec.plain_text_contains(MOCK_KUBECONFIG_TOKEN)
    exported, secret = resolve(rec.value["kubeconfig"])
    assert MOCK_KUBECONFIG_TOKEN in exported and STALE_KUBECONFIG_TOKEN not in exported and secret
    # Looked up only once the cluster exists (in a preview of a new cluster: unknown, not stale).
    (registered_before,) = [urns for tok, urns in rec.invokes if tok == GET_CLUSTER]
    assert rec.one(CLUSTER).urn in registered_before
    # The changing kubeconfig must update, never replace, the provider.
    assert provider.inputs["clusterIdentifier"] == "inference-prod-id"


def test_cluster_lookup_asks_for_the_configured_name_and_token_lifetime():
    from infra.mock_runtime import PlanMocks

    mocks = PlanMocks()
    _run(PROD, mocks=mocks)
    (args,) = [a for tok, a in mocks.calls if tok == GET_CLUSTER]
    assert args["name"] == "inference-prod" and args["kubeconfigExpireSeconds"] == 86400


def test_exact_version_slug_is_sent_verbatim_and_not_ignored():
    args = dataclasses.replace(PROD, version="1.33.1-do.5", auto_upgrade=False)
    rec = _run(args)
    cluster = rec.one(CLUSTER)
    assert cluster.inputs["version"] == "1.33.1-do.5"
    assert cluster.ignore_changes == []  # editing the slug is the explicit upgrade
    assert GET_VERSIONS not in [tok for tok, _ in rec.invokes]
    assert GET_VERSIONS in [tok for tok, _ in _run(PROD).invokes]  # a prefix is looked up


@pytest.mark.parametrize(
    ("version", "exact"),
    [("1.33", False), ("1.33.1", False), ("1.33.1-do.5", True), ("1.33.1-do.", False), ("1.33-do.5", False)],
)
def test_exact_version_recognition(version, exact):
    assert is_exact_version(version) is exact


def test_three_part_prefix_looks_up_its_doks_builds():
    assert version_prefix_for_lookup("1.33.1") == "1.33.1-"  # slugs are 1.33.1-do.N, never 1.33.1.x


def test_retired_prefix_is_a_config_error_naming_the_key_and_prefix():
    retired = dataclasses.replace(PROD, version="1.29")
    with pytest.raises(ConfigError) as err:
        looked_up_version(retired)("")
    (problem,) = err.value.problems
    assert problem.path == "inference-platform:cluster.version"
    assert "'1.29'" in problem.message and "'1.29.'" in problem.message and "1.33.1-do.5" in problem.message
    assert looked_up_version(PROD)("1.33.1-do.5") == "1.33.1-do.5"


def test_retired_prefix_stops_the_program_before_the_cluster_is_declared():
    args = dataclasses.replace(PROD, version="1.29")
    with pytest.raises(ConfigError, match=r"cluster\.version: '1\.29'"):
        _run(args)


def test_empty_allow_list_sends_the_firewall_explicitly_disabled():
    # None would make the provider keep an existing firewall with its old list.
    args = dataclasses.replace(PROD, control_plane_allowed_cidrs=())
    c = _run(args).one(CLUSTER).inputs
    assert c["controlPlaneFirewall"] == {"enabled": False, "allowedAddresses": []}


def test_destroy_all_associated_resources_is_passed_through():
    assert _run(PROD).one(CLUSTER).inputs.get("destroyAllAssociatedResources") in (None, False)
    dev = dataclasses.replace(PROD, name="inference-dev", protect=False, destroy_all_associated_resources=True)
    assert _run(dev, stack="dev").one(CLUSTER).inputs["destroyAllAssociatedResources"] is True
