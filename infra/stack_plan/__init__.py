"""Decide everything about a stack, as a plain value: `plan_stack(config) -> StackPlan` (plan.py).

One module per concern, each pure: facts.py (one planned model), models.py (every model's layout,
notes and problems), notes.py and problems.py (what a reader sees; what stops the plan),
autoscaling.py, monitoring.py (the models as the monitoring sees them), services.py (engines and
image pre-pull), router.py (the router and the front door), gateway.py (router.kind gateway),
weights.py (weight cache, Spaces bucket, readiness), cluster.py (cluster, pools, GPU runtime, fabric,
project), namespaces.py.
The names below are the package's API: import them from `infra.stack_plan`.
"""

from infra.stack_plan.autoscaling import running_target, scaling_spec, scaling_specs
from infra.stack_plan.cluster import fabric_spec, project_name
from infra.stack_plan.facts import ModelFacts
from infra.stack_plan.gateway import gateway_pool_specs, gateway_spec
from infra.stack_plan.models import with_rollouts
from infra.stack_plan.monitoring import gpu_runtime_facts, observed_models, pd_observed, rollouts_observed
from infra.stack_plan.namespaces import ENGINES_NAMESPACE, INFERENCE_NAMESPACE
from infra.stack_plan.notes import (
    CALIBRATE_BELOW,
    THIN_KV_SHARE,
    api_key_note,
    pd_notes,
    thin_kv_notes,
)
from infra.stack_plan.plan import StackPlan, plan_stack
from infra.stack_plan.problems import multi_node_fit
from infra.stack_plan.router import front_door, router_spec
from infra.stack_plan.services import image_prepull_spec, model_service_spec
from infra.stack_plan.weights import cold_start_notes, readiness_plan, weight_bucket_spec, weight_source

__all__ = [
    "CALIBRATE_BELOW",
    "ENGINES_NAMESPACE",
    "INFERENCE_NAMESPACE",
    "THIN_KV_SHARE",
    "ModelFacts",
    "StackPlan",
    "api_key_note",
    "cold_start_notes",
    "fabric_spec",
    "front_door",
    "gateway_pool_specs",
    "gateway_spec",
    "gpu_runtime_facts",
    "image_prepull_spec",
    "model_service_spec",
    "multi_node_fit",
    "observed_models",
    "pd_notes",
    "pd_observed",
    "plan_stack",
    "project_name",
    "readiness_plan",
    "rollouts_observed",
    "router_spec",
    "running_target",
    "scaling_spec",
    "scaling_specs",
    "thin_kv_notes",
    "weight_bucket_spec",
    "weight_source",
    "with_rollouts",
]
