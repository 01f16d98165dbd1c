"""DoksCluster under Pulumi mocks: inputs, safety options, provider and secret handling."""

import dataclasses

import pytest

from components.cluster import (
    DoksCluster,
    DoksClusterArgs,
    GpuAddonFlags,
    gpu_addon_flags,
    version_prefix_for_lookup,
)
from tests.component_harness import FAKE_KUBECONFIG_TOKEN, resolve, run_program

CLUSTER = "digitalocean:index/kubernetesCluster:KubernetesCluster"
K8S_PROVIDER = "pulumi:providers:kubernetes"

PROD = DoksClusterArgs(
    environment="prod",
    region="atl1",
    version_prefix="1.33",
    vpc_id="vpc-123",
    system_pool_size="s-8vcpu-16gb",
    system_pool_nodes=3,
    ha=True,
    auto_upgrade=True,
    surge_upgrade=True,
    maintenance_day="sunday",
    maintenance_start_time="04:00",
    control_plane_allowed_cidrs=["203.0.113.0/24"],
    cluster_subnet="10.244.0.0/16",
    service_subnet="10.245.0.0/16",
    kubeconfig_expire_seconds=86400,
    gpu_flags=GpuAddonFlags(amd_device_plugin=True, amd_metrics_exporter=True, nvidia_device_plugin=False),
    protect=True,
    tags=["env:prod", "app:inference-platform"],
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
    assert version_prefix_for_lookup("1.33.") == "1.33."


def _run(args, stack="prod"):
    return run_program(lambda: DoksCluster(f"inference-{args.environment}", args), stack=stack)


def test_prod_cluster_inputs():
    rec = _run(PROD)
    c = rec.one(CLUSTER).inputs
    assert c["region"] == "atl1"
    assert c["version"] == "1.33.1-do.5"  # latest patch for the prefix, from the lookup
    assert c["ha"] is True and c["autoUpgrade"] is True and c["surgeUpgrade"] is True
    assert c["vpcUuid"] == "vpc-123"
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
    # Auto-upgrade owns the patch version; the fixed system pool needs no nodeCount ignore.
    assert cluster.ignore_changes == ["version"]
    assert cluster.parent == rec.one("inference-platform:cluster:DoksCluster").urn


def test_without_auto_upgrade_the_version_is_managed_and_dev_is_unprotected():
    args = dataclasses.replace(PROD, environment="dev", auto_upgrade=False, protect=False, ha=False)
    cluster = _run(args, stack="dev").one(CLUSTER)
    assert cluster.ignore_changes == []
    assert not cluster.protect
    assert cluster.inputs["ha"] is False


def test_firewall_and_subnets_are_omitted_when_not_configured():
    args = dataclasses.replace(PROD, control_plane_allowed_cidrs=(), cluster_subnet=None, service_subnet=None)
    c = _run(args).one(CLUSTER).inputs
    assert "controlPlaneFirewall" not in c
    assert "clusterSubnet" not in c and "serviceSubnet" not in c


def test_version_follows_the_prefix():
    args = dataclasses.replace(PROD, version_prefix="1.34")
    assert _run(args).one(CLUSTER).inputs["version"] == "1.34.0-do.1"


def test_provider_is_bound_to_the_cluster_id_and_never_deletes_unreachable():
    rec = _run(PROD)
    provider = rec.one(K8S_PROVIDER)
    assert provider.inputs["clusterIdentifier"] == "inference-prod-id"
    assert "deleteUnreachable" not in provider.inputs
    assert provider.parent == rec.one("inference-platform:cluster:DoksCluster").urn


def test_kubeconfig_is_secret_everywhere():
    rec = _run(PROD)
    value, secret = resolve(rec.value.kubeconfig)
    assert FAKE_KUBECONFIG_TOKEN in value and secret
    # The provider receives it wrapped as a secret, and no registered input holds it in clear.
    assert FAKE_KUBECONFIG_TOKEN in rec.wire_text()
    assert not rec.plain_text_contains(FAKE_KUBECONFIG_TOKEN)
    assert rec.plain_text_contains("203.0.113.0/24")  # the check does see plain inputs


def test_the_dra_driver_is_never_enabled():
    # Model pods request the amd.com/gpu extended resource, which only a device plugin advertises.
    assert "amdGpuDraDriver" not in _run(PROD).one(CLUSTER).inputs
