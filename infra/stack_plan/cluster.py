"""The stack-wide pieces named after the stack: the DO project, the fabric (LWS, Multus, NIC
attachments), and a pool's node count with the rollout's extra nodes.
"""

from __future__ import annotations

from infra.config import PROJECT, StackConfig
from infra.specs import FabricSpec
from infra.stack_plan.namespaces import INFERENCE_NAMESPACE


def plus_extra(count: int | None, extra: int) -> int | None:
    return None if count is None else count + extra


def fabric_spec(prefix: str, cfg: StackConfig) -> FabricSpec | None:
    """LWS, Multus and the NIC attachments, on clusters with a fabric pool only."""
    fabric = tuple(p.name for p in cfg.gpu_pools if p.fabric)
    if not fabric:
        return None
    return FabricSpec(name=f"{prefix}-fabric", fabric_pools=fabric, namespace=INFERENCE_NAMESPACE)


def project_name(stack: str) -> str:
    """The DigitalOcean project of a stack: `inference-platform-<stack>`.

    DO project names are unique per account, so the name follows the stack, not the environment
    (two `dev` stacks of one account would otherwise claim the same project). The shipped stacks are
    named after their environments, so their project names are unchanged.
    """
    return f"{PROJECT}-{stack}"
