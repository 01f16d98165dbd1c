"""The VPC, the DO project and the tag helper, as planned and as declared under Pulumi mocks."""

import re

from infra.mock_runtime import resolve
from infra.specs import ClusterSpec, NetworkSpec, ProjectSpec, standard_tags
from infra.stack_resources.foundation import plan_cluster, plan_network, plan_project
from tests.stack_resources.conftest import run_graph

VPC = "digitalocean:index/vpc:Vpc"
PROJECT = "digitalocean:index/project:Project"
NETWORK = "inference-platform:network:Network"
ENVIRONMENT_PROJECT = "inference-platform:network:EnvironmentProject"
# DO API, Tags: "Tags may contain letters, numbers, colons, dashes, and underscores", max 255.
DO_TAG = re.compile(r"^[A-Za-z0-9:_-]{1,255}$")


def test_standard_tags_are_valid_do_tags_and_name_the_environment():
    tags = standard_tags("staging")
    assert tags == ["env:staging", "app:inference-platform"]
    assert all(DO_TAG.match(t) for t in tags)


def test_vpc_inputs_and_parent():
    rec = run_graph(lambda b: plan_network(b, NetworkSpec("inference-dev", "atl1", "10.30.0.0/20")), stack="dev").recording
    vpc = rec.one(VPC)
    assert vpc.inputs["region"] == "atl1"
    assert vpc.inputs["ipRange"] == "10.30.0.0/20"
    assert vpc.inputs["name"] == "inference-dev-vpc"
    assert vpc.parent == rec.one(NETWORK).urn
    assert not vpc.protect


def test_prod_vpc_is_protected_and_exposes_its_id():
    # A VPC replacement would orphan the cluster and the NFS share.
    run = run_graph(lambda b: plan_network(b, NetworkSpec("inference-prod", "atl1", "10.20.0.0/20", protect=True)))
    assert run.recording.one(VPC).protect is True
    assert run.graph[run.result].options.protect is True
    group = f"{NETWORK}::inference-prod"
    assert resolve(run.declared.group_outputs[group]["vpc_id"])[0] == "inference-prod-vpc-id"


def test_project_groups_do_urns_with_the_do_environment_name():
    # DO projects take DO URNs (`do:kubernetes:<id>`), never Pulumi URNs; VPCs and NFS shares
    # cannot be assigned, so the cluster is the project's only resource.
    def build(b):
        vpc = plan_network(b, NetworkSpec("net", "atl1", "10.20.0.0/20"))
        cluster, _ = plan_cluster(b, ClusterSpec(name="inference-prod", region="atl1", version="1.33"), vpc)
        return plan_project(b, ProjectSpec("inference-prod", "inference-platform-prod", "prod"), cluster)

    rec = run_graph(build).recording
    project = rec.one(PROJECT)
    assert project.inputs["name"] == "inference-platform-prod"
    assert project.inputs["environment"] == "Production"
    assert project.inputs["resources"] == ["do:kubernetes:inference-prod-id"]
    assert project.parent == rec.one(ENVIRONMENT_PROJECT).urn
