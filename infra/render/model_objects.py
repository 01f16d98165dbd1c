"""All objects of one model service, whichever workload its engines run as.

The engines are a Deployment (infra/render/model_service.py) or, for a replica that spans nodes, a
LeaderWorkerSet built from the same pod template (infra/render/multi_node.py). Choosing between
them lives here, above both, so neither imports the other back.
"""

from __future__ import annotations

from infra.render.model_service import (
    ModelServiceSpec,
    render_deployment,
    render_pdb,
    render_prefetch_job,
    render_service,
)
from infra.render.multi_node import render_leader_worker_set


def render_engines(spec: ModelServiceSpec) -> dict:
    """The engines' workload: a Deployment, or a LeaderWorkerSet for a replica that spans nodes."""
    if spec.layout.multi_node:
        return render_leader_worker_set(spec)
    return render_deployment(spec)


def render_model_service(spec: ModelServiceSpec) -> list[dict]:
    """All objects of one model service, in apply order (Job first: the engines wait on it)."""
    objects = []
    job = render_prefetch_job(spec)
    if job:
        objects.append(job)
    objects += [render_engines(spec), render_service(spec), render_pdb(spec)]
    return objects
