"""The plan file's records follow the engine's rules (infra/resource_graph/records.py).

These are the rules `test_declare_matches_plan.py` checks against Pulumi itself on whole stacks;
here each one on its own, so a wrong record says which rule broke.
"""

from __future__ import annotations

import pytest

from infra.errors import ConfigError, Problem
from infra.resource_graph.graph import GraphBuilder, Options, PlannedResource, ResourceGraph, kubernetes_type
from infra.resource_graph.records import expanded, offline_value, plan_record, plan_records
from infra.resource_graph.values import (
    Apply,
    Invoke,
    Ref,
    Secret,
    SecretInput,
    is_secret,
    referenced_resources,
)

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}


def test_a_group_stands_for_every_descendant_but_not_a_custom_resources_children():
    graph = ResourceGraph()
    b = GraphBuilder(graph)
    outer = b.group("t:m:Outer", "outer")
    inner = graph.add(PlannedResource("t:m:Inner", "inner", {}, outer, custom=False))
    a = b.resource("t:index/a:A", "a", {}, parent=outer)
    c = b.resource("t:index/c:C", "c", {}, parent=inner)
    child_of_custom = b.resource("t:index/d:D", "d", {}, parent=a)
    remote = b.resource("kubernetes:yaml/v2:ConfigFile", "f", {"file": "u"}, parent=None, remote=True)
    assert expanded([outer], graph) == {a, c}
    assert child_of_custom not in expanded([outer], graph)
    assert expanded([remote], graph) == {remote}


def test_inputs_that_read_a_resource_make_it_a_dependency():
    graph = ResourceGraph()
    b = GraphBuilder(graph)
    vpc = b.resource("digitalocean:index/vpc:Vpc", "net-vpc", {"name": "net-vpc"}, parent=None)
    nfs = b.resource("digitalocean:index/nfs:Nfs", "share", {"vpcId": Ref(vpc, "id"), "size": 50}, parent=None)
    record = plan_record(graph[nfs], graph, project="p", stack="s")
    assert record["inputs"] == {"size": 50, "vpcId": "net-vpc-id"}
    assert record["options"]["dependsOn"] == [vpc]
    assert record["inputDependencies"] == {"vpcId": [vpc]}
    assert record["parent"] == "pulumi:pulumi:Stack::p-s"


def test_secrets_are_shown_as_the_placeholder_and_taint_what_they_flow_into():
    graph = ResourceGraph()
    b = GraphBuilder(graph)
    key = b.resource("random:index/randomPassword:RandomPassword", "k", {"length": 48}, parent=None)
    value = {"stringData": Secret({"f": Apply(str.upper, (Ref(key, "result", secret=True),))}), "token": SecretInput("api_key")}
    assert offline_value(value, graph) == {"stringData": "[secret]", "token": "[secret]"}
    assert is_secret(Apply(str.upper, (Ref(key, "result", secret=True),)))
    assert not is_secret(Apply(str.upper, (Ref(key, "id"),)))
    assert offline_value(Apply(str.upper, ("ab",)), graph) == "AB"
    assert referenced_resources(value) == [key]


def test_an_output_nobody_knows_offline_is_unknown_not_invented():
    graph = ResourceGraph()
    b = GraphBuilder(graph)
    svc = b.resource(kubernetes_type({"apiVersion": "v1", "kind": "Service"}), "svc", {"apiVersion": "v1", "kind": "Service"}, parent=None)
    assert offline_value(Ref(svc, "status"), graph) == "[unknown]"
    assert offline_value(Apply(str, (Ref(svc, "status"),)), graph) == "[unknown]"


def test_a_lookup_is_answered_offline_and_its_check_runs():
    graph = ResourceGraph()

    def check(latest):
        if not latest:
            raise ConfigError([Problem("cluster.version", "no release")])
        return latest

    lookup = Invoke("digitalocean:index/getKubernetesVersions:getKubernetesVersions", {"versionPrefix": "1.33."},
                    ("latestVersion",), blocking=True, check=check)  # fmt: skip
    assert offline_value(lookup, graph) == "1.33.6-do.1"
    retired = Invoke(lookup.token, {"versionPrefix": "1.29."}, ("latestVersion",), blocking=True, check=check)
    with pytest.raises(ConfigError):
        offline_value(retired, graph)


def test_records_are_sorted_and_a_name_is_planned_once():
    graph = ResourceGraph()
    b = GraphBuilder(graph)
    b.resource(kubernetes_type(CM), "b", CM, parent=None)
    b.resource(kubernetes_type(CM), "a", CM, parent=None)
    assert [r["name"] for r in plan_records(graph, project="p", stack="s")] == ["a", "b"]
    with pytest.raises(ValueError, match="two planned resources"):
        b.resource(kubernetes_type(CM), "a", CM, parent=None)
    with pytest.raises(ValueError, match="planned after it or not at all"):
        b.resource(kubernetes_type(CM), "c", CM, parent=None, options=Options(depends_on=("nope",)))


def test_the_kubernetes_type_token_names_the_core_group():
    assert kubernetes_type({"apiVersion": "v1", "kind": "Service"}) == "kubernetes:core/v1:Service"
    assert kubernetes_type({"apiVersion": "apps/v1", "kind": "Deployment"}) == "kubernetes:apps/v1:Deployment"
    assert kubernetes_type({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject"}) == "kubernetes:keda.sh/v1alpha1:ScaledObject"
