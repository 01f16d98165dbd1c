"""The fabric as planned and as declared under Pulumi mocks: the LWS release, Multus and the NIC
attachments a fabric cluster gets, on the cluster provider, in the order the API server needs them."""

from infra.catalog import versions
from infra.render.multi_node import FABRIC_NICS
from infra.specs import FabricSpec
from infra.stack_resources.fabric import plan_fabric
from tests.stack_resources.conftest import run_graph, with_cluster

RELEASE = "kubernetes:helm.sh/v3:Release"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
NAD = "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition"
DS = "kubernetes:apps/v1:DaemonSet"
PROVIDER = "pulumi:providers:kubernetes"
CLUSTER = "digitalocean:index/kubernetesCluster:KubernetesCluster"


def _run():
    def build(b):
        _, cluster, provider = with_cluster(b)
        spec = FabricSpec(name="fabric", fabric_pools=("mi325x-fabric",), namespace="inference")
        return plan_fabric(b, spec, provider, [], cluster)

    return run_graph(build).recording


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


def test_every_child_is_on_the_cluster_provider_under_the_group():
    rec = _run()
    provider = rec.one(PROVIDER)
    group = rec.one("inference-platform:fabric:Fabric")
    cluster = rec.one(CLUSTER)
    children = [r for r in rec.registrations if r.type.startswith("kubernetes:")]
    assert children
    assert all(r.provider_urn == provider.urn and r.parent == group.urn for r in children)
    assert all(r.deleted_with == cluster.urn for r in children)
