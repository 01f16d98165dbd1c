"""The model cache as planned and as declared under Pulumi mocks: the NFS share, its safety
options, and the static PV/PVC."""

import pytest

from infra.mock_runtime import MOCK_NFS_HOST
from infra.specs import ModelCacheSpec
from infra.stack_resources.foundation import plan_namespaces
from infra.stack_resources.weights import plan_model_cache
from tests.stack_resources.conftest import run_graph, with_cluster

NFS = "digitalocean:index/nfs:Nfs"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
NAMESPACE = "kubernetes:core/v1:Namespace"
GROUP = "inference-platform:model_cache:ModelCache"


def _spec(protect, retain_on_delete=None, size_gib=2048):
    return ModelCacheSpec(name="model-cache", region="atl1", size_gib=size_gib, tier="high", namespace="inference",
                          protect=protect, retain_on_delete=retain_on_delete, tags=("env:prod",))  # fmt: skip


def _run(protect, retain_on_delete=None, size_gib=2048):
    def build(b):
        vpc, cluster, provider = with_cluster(b)
        (namespace,) = plan_namespaces(b, "prod", [{"metadata": {"name": "inference"}}], provider, cluster)
        return plan_model_cache(b, _spec(protect, retain_on_delete, size_gib), vpc, provider, namespace)

    return run_graph(build)


def test_nfs_share_inputs_and_prod_safety():
    share = _run(protect=True).recording.one(NFS)
    assert share.inputs == {
        "name": "model-cache-nfs",
        "region": "atl1",
        "vpcId": "net-vpc-id",
        "size": 2048,
        "performanceTier": "high",
        "tags": ["env:prod"],
    }
    assert share.protect is True and share.retain_on_delete is True


def test_dev_share_is_neither_protected_nor_retained_unless_asked():
    dev = _run(protect=False).recording.one(NFS)
    assert not dev.protect
    assert not dev.retain_on_delete
    assert _run(protect=False, retain_on_delete=True).recording.one(NFS).retain_on_delete is True


def test_static_pv_points_at_the_share_and_the_claim_binds_to_it():
    run = _run(protect=True)
    rec = run.recording
    provider = rec.one("pulumi:providers:kubernetes")
    pv, pvc = rec.one(PV), rec.one(PVC)
    spec = pv.inputs["spec"]
    assert spec["nfs"] == {"server": MOCK_NFS_HOST, "path": "/model-cache-nfs-id"}
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["mountOptions"] == ["nfsvers=4.1"]
    assert spec["capacity"] == {"storage": "2048Gi"}
    assert pvc.inputs["metadata"] == {
        "name": "model-cache",
        "namespace": "inference",
        "labels": pvc.inputs["metadata"]["labels"],
    }
    assert pvc.inputs["spec"]["storageClassName"] == ""
    assert pvc.inputs["spec"]["volumeName"] == pv.inputs["metadata"]["name"]
    assert pv.provider_urn == provider.urn and pvc.provider_urn == provider.urn
    assert pv.parent == pvc.parent == rec.one(GROUP).urn
    namespace = rec.one(NAMESPACE)
    assert pv.urn in pvc.dependencies and namespace.urn in pvc.dependencies
    outputs = run.declared.group_outputs[run.result]
    assert outputs["pvc_name"] == "model-cache" and isinstance(outputs["pvc_name"], str)
    assert outputs["mount_path"] == "/models"


def test_share_below_the_do_minimum_is_rejected():
    with pytest.raises(ValueError, match="minimum"):
        _run(protect=False, size_gib=10)


def test_growing_the_share_grows_the_pv_in_place_and_leaves_the_claim_as_created():
    small, large = _run(protect=True, size_gib=2048).recording, _run(protect=True, size_gib=4096).recording
    # The PV's capacity is mutable and follows the share.
    assert large.one(PV).inputs["spec"]["capacity"] == {"storage": "4096Gi"}
    assert large.one(NFS).inputs["size"] == 4096
    # The claim's request is ignored after creation: a new value would fail or replace the claim
    # every model pod mounts. Everything else about the claim is the same for both sizes.
    for rec in (small, large):
        assert rec.one(PVC).ignore_changes == ["spec.resources"]

    def without_request(inputs):
        spec = {k: v for k, v in inputs["spec"].items() if k != "resources"}
        return {**inputs, "spec": spec}

    assert without_request(small.one(PVC).inputs) == without_request(large.one(PVC).inputs)
    assert not small.one(PV).ignore_changes
