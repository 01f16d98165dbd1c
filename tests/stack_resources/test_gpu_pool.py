"""GPU node pools as planned and as declared under Pulumi mocks: sizes, autoscaling, labels,
taints, partition mode."""

from infra.catalog.gpus import gpu_size
from infra.specs import GpuPoolSpec
from infra.stack_resources.foundation import plan_gpu_pool
from infra.stack_resources.gpu_pools import gpu_pool_labels, pool_ignore_changes
from tests.stack_resources.conftest import run_graph, with_cluster

POOL = "digitalocean:index/kubernetesNodePool:KubernetesNodePool"
GROUP = "inference-platform:gpu_pool:GpuNodePool"
MI325X8 = gpu_size("gpu-mi325x8-2048gb-contracted")
H100X8 = gpu_size("gpu-h100x8-640gb")


def _spec(**spec) -> GpuPoolSpec:
    spec["tags"] = tuple(spec.get("tags", ()))
    return GpuPoolSpec(name=f"pool-{spec['pool_name']}", **spec)


def _run(spec: GpuPoolSpec):
    def build(b):
        _, cluster, _ = with_cluster(b)
        return plan_gpu_pool(b, spec, cluster)

    return run_graph(build).recording


def test_fixed_amd_pool():
    rec = _run(
        _spec(
            pool_name="mi325x",
            gpu=MI325X8,
            node_count=4,
            partition_mode="AMD_PARTITION_MODE_SPX_NPS1",
            labels={"team": "chat"},
            tags=["env:prod"],
        )
    )
    pool = rec.one(POOL)
    i = pool.inputs
    assert i["clusterId"] == "inference-prod-id"
    assert i["name"] == "mi325x"
    assert i["size"] == "gpu-mi325x8-2048gb-contracted"
    assert i["nodeCount"] == 4 and i["autoScale"] is False
    assert "minNodes" not in i and "maxNodes" not in i
    assert i["gpuPartitionMode"] == "AMD_PARTITION_MODE_SPX_NPS1"
    assert i["taints"] == [{"key": "amd.com/gpu", "value": "", "effect": "NoSchedule"}]
    assert i["labels"] == {
        "team": "chat",
        "inference-platform/pool": "mi325x",
        "inference-platform/gpu-vendor": "amd",
        "inference-platform/gpu-model": "mi325x",
    }
    assert i["tags"] == ["env:prod"]
    assert pool.ignore_changes == []  # a fixed count is ours to enforce
    assert pool.custom_timeouts == {"create": "60m"}
    assert pool.parent == rec.one(GROUP).urn


def test_autoscaled_pool_ignores_the_node_count():
    rec = _run(_spec(pool_name="mi325x-burst", gpu=MI325X8, min_nodes=0, max_nodes=6))
    pool = rec.one(POOL)
    assert pool.inputs["autoScale"] is True
    assert pool.inputs["minNodes"] == 0 and pool.inputs["maxNodes"] == 6
    assert "nodeCount" not in pool.inputs
    # the count belongs to the autoscaler; the partition mode, left unset, to DOKS
    assert pool.ignore_changes == ["nodeCount", "gpuPartitionMode"]
    assert "gpuPartitionMode" not in pool.inputs


def test_nvidia_pool_gets_the_nvidia_taint_and_labels():
    pool = _run(_spec(pool_name="h100", gpu=H100X8, node_count=1)).one(POOL)
    assert pool.inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}]
    assert pool.inputs["labels"]["inference-platform/gpu-vendor"] == "nvidia"
    assert pool.inputs["labels"]["inference-platform/gpu-model"] == "h100"
    assert pool.ignore_changes == []  # NVIDIA pools have no partition mode to leave to DOKS


def test_user_labels_cannot_override_the_platform_labels():
    labels = gpu_pool_labels("a", MI325X8, {"inference-platform/pool": "spoofed", "x": "y"})
    assert labels["inference-platform/pool"] == "a" and labels["x"] == "y"


def test_an_unset_partition_mode_is_left_to_doks_and_a_set_one_is_managed():
    # Unset on AMD: whatever default the API reports back must never read as a replacement.
    assert pool_ignore_changes(False, "amd", None) == ["gpuPartitionMode"]
    # Configured: managed, so a later change is a (flagged) replacement.
    assert pool_ignore_changes(False, "amd", "AMD_PARTITION_MODE_DPX_NPS2") == []
    assert pool_ignore_changes(True, "amd", "AMD_PARTITION_MODE_SPX_NPS1") == ["nodeCount"]
