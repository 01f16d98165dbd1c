"""Fabric under Pulumi mocks: the LWS release, Multus and the NIC attachments a fabric cluster gets,
on the cluster provider, in the order the API server needs them. It runs on the dependency floors
too (scripts/check_floors.sh runs tests/components), so the constructor arguments are checked
against the oldest pulumi-kubernetes the project allows."""

import pulumi_kubernetes as k8s

from components.fabric import Fabric, FabricArgs
from infra.catalog import versions
from infra.mock_runtime import run_program
from infra.render.multi_node import FABRIC_NICS
from infra.specs import FabricSpec

RELEASE = "kubernetes:helm.sh/v3:Release"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
NAD = "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition"
DS = "kubernetes:apps/v1:DaemonSet"
PROVIDER = "pulumi:providers:kubernetes"


def _run():
    def program():
        provider = k8s.Provider("cluster-k8s", kubeconfig="unused", cluster_identifier="c-1")
        spec = FabricSpec(name="fabric", fabric_pools=("mi325x-fabric",), namespace="inference")
        return Fabric(spec.name, FabricArgs(spec=spec, provider=provider))

    return run_program(program)


def test_lws_release_is_pinned_with_its_image_tag():
    release = _run().one(RELEASE).inputs
    assert release["chart"] == f"{versions.LWS_CHART_REPO}/{versions.LWS_CHART}"
    assert release["chart"].startswith("oci://")
    assert release["version"] == versions.LWS_CHART_VERSION
    assert versions.LWS_IMAGE_TAG in str(release["values"])  # the chart's own default tag is `main`


def test_one_attachment_per_fabric_nic_after_the_crd():
    rec = _run()
    crd = rec.one(CRD)
    nads = rec.of_type(NAD)
    assert sorted(n.inputs["metadata"]["name"] for n in nads) == sorted(FABRIC_NICS)
    assert all(crd.urn in n.dependencies for n in nads)
    assert all(n.inputs["metadata"]["namespace"] == "inference" for n in nads)


def test_multus_runs_on_the_fabric_pools_with_the_pinned_image():
    ds = _run().one(DS).inputs
    pod = ds["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == versions.MULTUS_IMAGE
    assert "mi325x-fabric" in str(pod.get("affinity") or pod.get("nodeSelector"))


def test_every_child_is_on_the_cluster_provider_under_the_component():
    rec = _run()
    provider = rec.one(PROVIDER)
    component = rec.one("inference-platform:fabric:Fabric")
    children = [r for r in rec.registrations if r.type.startswith("kubernetes:")]
    assert children
    assert all(r.provider_urn == provider.urn and r.parent == component.urn for r in children)
