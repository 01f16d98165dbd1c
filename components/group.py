"""A group of planned resources: what a component is once the plan holds every object.

Each group of the plan (`Network`, `DoksCluster`, `ModelService`, `Router`, ...) keeps its
component type token and logical name, so `pulumi stack` shows the same tree and live stacks keep
every URN; its members are declared with it as their parent, and its outputs (what it exports:
an endpoint, a cluster id) are registered once they exist (`infra/declare.py`). Nothing is
rendered or decided here.
"""

from __future__ import annotations

import pulumi


class PlannedGroup(pulumi.ComponentResource):
    """A component of the planned type `type_` (e.g. `inference-platform:model_service:ModelService`)."""

    def __init__(self, type_: str, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_, name, None, opts)
