"""The weight-cache PV/PVC renderers: Kubernetes 1.33 schema validity and binding."""

import kubernetes_validate
import pytest

from infra.render.model_cache import (
    MODEL_CACHE_PVC_NAME,
    pv_name_for,
    render_model_cache_pv,
    render_model_cache_pvc,
)


def _pair(namespace="inference", size_gib=2048):
    pv = render_model_cache_pv("10.20.0.7", "/1234/share-abc", size_gib, namespace)
    pvc = render_model_cache_pvc(size_gib, namespace)
    return pv, pvc


@pytest.mark.parametrize("index", [0, 1], ids=["pv", "pvc"])
def test_validates_against_kubernetes_1_33(index):
    kubernetes_validate.validate(_pair()[index], "1.33", strict=True)


def test_pv_is_a_retained_readwritemany_nfs41_volume():
    pv, _ = _pair()
    spec = pv["spec"]
    assert spec["nfs"] == {"server": "10.20.0.7", "path": "/1234/share-abc"}
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["mountOptions"] == ["nfsvers=4.1"]
    assert spec["capacity"]["storage"] == "2048Gi"
    assert "namespace" not in pv["metadata"]  # cluster-scoped


def test_pv_and_pvc_bind_only_to_each_other():
    pv, pvc = _pair(namespace="team-a", size_gib=100)
    assert pv["metadata"]["name"] == pv_name_for("team-a") == "team-a-model-cache"
    assert pv["spec"]["claimRef"] == {"namespace": "team-a", "name": MODEL_CACHE_PVC_NAME}
    assert pvc["metadata"]["namespace"] == "team-a"
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    # "" (not absent): no StorageClass, so the default do-block-storage cannot provision it.
    assert pvc["spec"]["storageClassName"] == "" == pv["spec"]["storageClassName"]
    assert pvc["spec"]["accessModes"] == pv["spec"]["accessModes"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == pv["spec"]["capacity"]["storage"] == "100Gi"



def _flat(value, prefix=""):
    """{"spec.resources.requests.storage": "100Gi", ...}"""
    if isinstance(value, dict):
        return {p: v for k, sub in value.items() for p, v in _flat(sub, f"{prefix}.{k}" if prefix else k).items()}
    return {prefix: value}


def _changed(a, b):
    fa, fb = _flat(a), _flat(b)
    return {p for p in fa.keys() | fb.keys() if fa.get(p) != fb.get(p)}


def test_a_share_size_change_touches_only_ignored_claim_fields_and_the_pv_capacity():
    from infra.render.model_cache import PVC_IGNORE_CHANGES

    (pv_a, pvc_a), (pv_b, pvc_b) = _pair(size_gib=100), _pair(size_gib=5000)
    pvc_changed = _changed(pvc_a, pvc_b)
    assert pvc_changed == {"spec.resources.requests.storage"}
    assert all(any(p == i or p.startswith(i + ".") for i in PVC_IGNORE_CHANGES) for p in pvc_changed)
    assert _changed(pv_a, pv_b) == {"spec.capacity.storage"}  # mutable in place
