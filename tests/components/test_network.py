"""Network, EnvironmentProject and the tag helper under Pulumi mocks."""

import re

from components.network import EnvironmentProject, EnvironmentProjectArgs, Network
from infra.mock_runtime import resolve, run_program
from infra.specs import NetworkSpec, ProjectSpec, standard_tags

VPC = "digitalocean:index/vpc:Vpc"
PROJECT = "digitalocean:index/project:Project"
# DO API, Tags: "Tags may contain letters, numbers, colons, dashes, and underscores", max 255.
DO_TAG = re.compile(r"^[A-Za-z0-9:_-]{1,255}$")


def test_standard_tags_are_valid_do_tags_and_name_the_environment():
    tags = standard_tags("staging")
    assert tags == ["env:staging", "app:inference-platform"]
    assert all(DO_TAG.match(t) for t in tags)


def test_vpc_inputs_and_parent():
    rec = run_program(lambda: Network("inference-dev", NetworkSpec("inference-dev", "atl1", "10.30.0.0/20")))
    vpc = rec.one(VPC)
    assert vpc.inputs["region"] == "atl1"
    assert vpc.inputs["ipRange"] == "10.30.0.0/20"
    assert vpc.inputs["name"] == "inference-dev-vpc"
    component = rec.one("inference-platform:network:Network")
    assert vpc.parent == component.urn
    assert not vpc.protect


def test_prod_vpc_is_protected_and_exposes_its_id():
    rec = run_program(
        lambda: Network("inference-prod", NetworkSpec("inference-prod", "atl1", "10.20.0.0/20", protect=True)),
        stack="prod",
    )
    assert rec.one(VPC).protect is True
    assert resolve(rec.value.vpc_id)[0] == "inference-prod-vpc-id"


def test_project_groups_do_urns_with_the_do_environment_name():
    rec = run_program(
        lambda: EnvironmentProject(
            "inference-prod",
            EnvironmentProjectArgs(ProjectSpec("inference-prod", "inference-platform-prod", "prod"), resources=["do:kubernetes:abc", "do:droplet:1"]),
        ),
        stack="prod",
    )
    project = rec.one(PROJECT)
    assert project.inputs["name"] == "inference-platform-prod"
    assert project.inputs["environment"] == "Production"
    assert project.inputs["resources"] == ["do:kubernetes:abc", "do:droplet:1"]
    assert project.parent == rec.one("inference-platform:network:EnvironmentProject").urn
