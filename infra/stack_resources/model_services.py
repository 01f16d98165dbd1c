"""One model service per model: its Secrets, weight-prefetch Job, engines (a Deployment, or a
LeaderWorkerSet for a replica over nodes, or prefill/decode Deployments and their router), a
rollout candidate's engines, the Service and the PodDisruptionBudget.

Every object comes from `infra.render` (model_service, multi_node, pd_service); what is planned
here is what only the engine can enforce:

- Secrets get their values from secrets (never a plain string) and are secret outputs;
- the engines wait for the prefetch Job (pulumi-kubernetes waits for a Job to complete); the pods'
  init container also waits for the cache's completion marker, so the order holds for anyone
  applying the rendered YAML with kubectl;
- timeouts long enough for a large model's first load (Pulumi's default is 10 minutes);
- `delete_before_replace` on every workload that holds GPUs (engines, P/D sides, candidates): a
  GPU pool has no spare GPUs, so Pulumi's default create-before-delete would leave the new pods
  Pending until `pulumi up` times out. A replacement takes the model down for the new pods' load
  time instead (docs/upgrade/engines-namespace.md).
"""

from __future__ import annotations

from typing import Any

from infra.render.model_service import (
    API_KEY_KEY,
    HF_TOKEN_KEY,
    ModelServiceSpec,
    deployment_ignore_changes,
    deployment_timeout_seconds,
    engine_key_secret_name,
    pod_ready_budget_seconds,
    prefetch_timeout_seconds,
    render_deployment,
    render_pdb,
    render_prefetch_job,
    render_secret_shape,
    render_service,
    service_name,
)
from infra.render.multi_node import render_leader_worker_set
from infra.render.pd_service import PdServiceSpec, render_pd_service
from infra.resource_graph.graph import GraphBuilder
from infra.stack_resources.kube import Group, open_group


def endpoint(spec: ModelServiceSpec) -> str:
    """The model's in-cluster base URL of the OpenAI API."""
    return f"http://{service_name(spec)}.{spec.namespace}.svc.cluster.local:8000/v1"


def _timeouts(spec: ModelServiceSpec) -> dict[str, str]:
    """Create: all replicas load in parallel (one wave). Update: maxSurge 0 → sequential waves."""
    return {"create": f"{pod_ready_budget_seconds(spec)}s", "update": f"{deployment_timeout_seconds(spec)}s"}


def _secret(group: Group, logical: str, spec: ModelServiceSpec, secret_name: str | None, key: str, value: Any) -> str | None:
    """A Secret whose only value is `value` (a secret), or None without a value or a name."""
    if value is None or not secret_name:
        return None
    return group.secret(logical, render_secret_shape(secret_name, spec.namespace, key, spec.name), {key: value})


def plan_model_service(
    b: GraphBuilder, spec: ModelServiceSpec, *, candidate: ModelServiceSpec | None, provider: str, cluster: str,
    hf_token: Any, api_key: Any, depends_on: list[str], engine_depends_on: list[str], name: str,
) -> str:  # fmt: skip
    """One model's objects inside its group (the group's key).

    hf_token / api_key: the secrets its Secrets hold (None: none); depends_on: what every member
    waits for (the namespace, the pool, the weights); engine_depends_on: what only the engines wait
    for (a layout over nodes: the fabric, whose LWS release brings the CRD and whose NIC
    attachments the pods name)."""
    group = open_group(b, "inference-platform:model_service:ModelService", name, provider=provider, depends_on=depends_on,
                       deleted_with=cluster, group_deleted_with=cluster)  # fmt: skip
    hf = _secret(group, f"{name}-hf-token", spec, spec.hf_token_secret, HF_TOKEN_KEY, hf_token)
    # The engine key behind a front door, else the client key; the logical name follows the Secret's.
    key_kind = "engine-key" if spec.api_key_secret == engine_key_secret_name(spec.name) else "api-key"
    key = _secret(group, f"{name}-{key_kind}", spec, spec.api_key_secret, API_KEY_KEY, api_key)
    secrets = [s for s in (hf, key) if s is not None]
    if getattr(spec.layout, "disaggregated", False):
        _plan_pd(group, spec, secrets, engine_depends_on)
    else:
        _plan_colocated(group, spec, candidate, secrets, engine_depends_on)
    outputs = {"endpoint": endpoint(spec), "service_name": service_name(spec), "layout": spec.layout.name, "replicas": spec.replicas}
    if not getattr(spec.layout, "disaggregated", False):
        outputs["gpus_per_replica"] = spec.gpus_per_replica
    b.set_group_outputs(group.key, outputs)
    return group.key


def _plan_colocated(group: Group, spec: ModelServiceSpec, candidate: ModelServiceSpec | None, secrets: list[str],
                    engine_depends_on: list[str]) -> None:  # fmt: skip
    name = group.name
    job = render_prefetch_job(spec)
    prefetch = None
    if job is not None:
        timeout = f"{prefetch_timeout_seconds(spec)}s"
        prefetch = group.object(f"{name}-prefetch", job, depends_on=secrets, custom_timeouts={"create": timeout, "update": timeout})
    waits = [*secrets, *([prefetch] if prefetch else [])]
    engines_obj = render_leader_worker_set(spec) if spec.layout.multi_node else render_deployment(spec)
    engines = group.object(
        f"{name}-engine", engines_obj, depends_on=[*waits, *engine_depends_on], custom_timeouts=_timeouts(spec),
        ignore_changes=tuple(deployment_ignore_changes(spec)),
        delete_before_replace=True,  # no spare GPUs for a second set (module docstring)
    )  # fmt: skip
    if candidate is not None:
        # Same secrets, weights and timeouts as the model's engines; waits for them so that a
        # first `pulumi up` with a rollout never loads both variants' weights at once.
        group.object(f"{name}-engine-candidate", render_deployment(candidate), depends_on=[*waits, engines],
                     custom_timeouts=_timeouts(candidate), delete_before_replace=True)  # fmt: skip
    group.object(f"{name}-service", render_service(spec))
    group.object(f"{name}-pdb", render_pdb(spec))


def _plan_pd(group: Group, spec: ModelServiceSpec, secrets: list[str], engine_depends_on: list[str]) -> None:
    """A prefill/decode layout: prefill and decode Deployments, their PDBs and the P/D router
    (infra/render/pd_service.py); the model's Service selects the router."""
    name = group.name
    prefetch = None
    for obj in render_pd_service(PdServiceSpec(spec, spec.layout, units=spec.replicas)):
        kind, meta = obj["kind"], obj["metadata"]
        extra: dict[str, Any] = {}
        depends: list[str] = []
        if kind == "Job":
            timeout = f"{prefetch_timeout_seconds(spec)}s"
            extra["custom_timeouts"] = {"create": timeout, "update": timeout}
            depends = secrets
        elif kind == "Deployment" and meta["name"] != f"{spec.name}-pd-router":
            extra["custom_timeouts"] = _timeouts(spec)
            extra["delete_before_replace"] = True  # a P/D side holds GPUs (module docstring)
            # autoscaled: each side's count belongs to its ScaledObject's HPA after creation
            extra["ignore_changes"] = tuple(deployment_ignore_changes(spec))
            # a unit over nodes: the engines' NIC attachments come with the fabric
            depends = [*secrets, *([prefetch] if prefetch else []), *engine_depends_on]
        key = group.object(f"{name}-{kind.lower()}-{meta['name']}", obj, depends_on=depends, **extra)
        if kind == "Job":
            prefetch = key
