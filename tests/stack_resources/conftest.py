"""Planning one concern into a graph and declaring it under Pulumi's mock runtime.

`run_graph(build)` plans what `build(builder)` adds to an empty graph, declares the graph with the
real `declare_graph` under the mock runtime, and returns the recording (what the engine would
receive), the graph (the plan's value) and the declared resources' outputs — so each test checks
a concern both as planned and as Pulumi receives it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infra.declare import DeclaredGraph, Secrets, declare_graph
from infra.mock_runtime import PlanMocks, Recording, run_program
from infra.resource_graph.graph import GraphBuilder, ResourceGraph
from infra.specs import ClusterSpec, NetworkSpec
from infra.stack_resources.foundation import plan_cluster, plan_network


@dataclass
class GraphRun:
    recording: Recording
    graph: ResourceGraph
    declared: DeclaredGraph
    result: Any  # what `build` returned (keys of what it planned)


def run_graph(build: Callable[[GraphBuilder], Any], *, stack: str = "prod", secrets: Secrets | None = None,
              mocks: PlanMocks | None = None) -> GraphRun:  # fmt: skip
    graph = ResourceGraph()
    result = build(GraphBuilder(graph))
    holder: dict[str, DeclaredGraph] = {}

    def program() -> None:
        holder["declared"] = declare_graph(graph, secrets or Secrets())

    recording = run_program(program, stack=stack, mocks=mocks)
    return GraphRun(recording, graph, holder["declared"], result)


def with_cluster(b: GraphBuilder, spec: ClusterSpec | None = None) -> tuple[str, str, str]:
    """A VPC and a cluster with its provider, for concerns that stand on them: (vpc, cluster, provider)."""
    spec = spec or ClusterSpec(name="inference-prod", region="atl1", version="1.33")
    vpc = plan_network(b, NetworkSpec(name="net", region=spec.region, vpc_cidr="10.20.0.0/20"))
    cluster, provider = plan_cluster(b, spec, vpc)
    return vpc, cluster, provider
