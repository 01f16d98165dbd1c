"""One vLLM model service: Secrets, weight-prefetch Job, Deployment (or, for a replica that spans
nodes, a LeaderWorkerSet), Service, PodDisruptionBudget.

Thin by design: every manifest comes from `infra.render.model_service` (pure, tested without
Pulumi); this component only turns the dicts into typed pulumi-kubernetes resources and adds what
only Pulumi can express:

- Secrets get their values from Pulumi secret Outputs (`string_data`), marked as secret outputs,
  so a token never appears in plain text in state, the plan or logs;
- the Deployment `depends_on` the prefetch Job (pulumi-kubernetes waits for a Job to complete)
  — the pods' init container additionally waits for the cache's completion marker, so the order
  also holds for anyone applying the rendered YAML with kubectl;
- `custom_timeouts` long enough for a large model's first load (Pulumi's default is 10 minutes);
- `delete_before_replace` on every workload that holds GPUs (engines, P/D sides, candidates): a GPU
  pool has no spare GPUs, so Pulumi's default create-before-delete would leave the new pods
  Pending until `pulumi up` times out. A replacement (a namespace move, a selector change) takes
  the model down for the new pods' load time instead (docs/upgrade/engines-namespace.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.custom_resources import custom_resource
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
from infra.render.secret_keys import with_keys


@dataclass(frozen=True)
class ModelServiceArgs:
    """Inputs of one model service.

    spec: the rendered shape (layout, pool, image, cache, Secret names...).
    provider: the cluster's Kubernetes provider.
    hf_token: Hugging Face token as a Pulumi secret; stored as Secret `spec.hf_token_secret`.
        None: no token, or `spec.hf_token_secret` exists already.
    api_key: the key the engines check, as a Pulumi secret: the engine key behind a front door,
        else the client key; stored as Secret `spec.api_key_secret`. None: no key, or the Secret
        exists already.
    protect: protect the children (they are stateless; usually False).
    depends_on: e.g. the namespace and the weight-cache claim.
    candidate: a rollout's candidate engines (models[].rollout): one more Deployment, reached
        through the model's Service like the model's own engines.
    engine_depends_on: what only the engines wait for (a multi-node layout or a P/D unit over
        nodes: the fabric component, whose LWS release brings the LeaderWorkerSet CRD and whose
        NIC attachments the pods name).
    """

    spec: ModelServiceSpec
    candidate: ModelServiceSpec | None = None
    provider: k8s.Provider | None = None
    hf_token: pulumi.Input[str] | None = None
    api_key: pulumi.Input[str] | None = None
    protect: bool = False
    depends_on: Sequence[pulumi.Resource] = ()
    engine_depends_on: Sequence[pulumi.Resource] = ()  # engines over nodes: the fabric (LWS CRD, NADs)


class ModelService(pulumi.ComponentResource):
    """Prefetch Job → Deployment (waits for the Job) → Service + PDB, with their Secrets."""

    spec: ModelServiceSpec
    hf_token_secret: k8s.core.v1.Secret | None
    api_key_secret: k8s.core.v1.Secret | None
    prefetch_job: k8s.batch.v1.Job | None
    deployment: k8s.apps.v1.Deployment | k8s.apiextensions.CustomResource  # a LeaderWorkerSet for multi-node
    candidate_deployment: k8s.apps.v1.Deployment | None  # a rollout's candidate engines
    service: k8s.core.v1.Service
    pdb: k8s.policy.v1.PodDisruptionBudget
    endpoint: str  # in-cluster base URL of the OpenAI API

    def __init__(self, name: str, args: ModelServiceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("inference-platform:model_service:ModelService", name, None, opts)
        self.spec = spec = args.spec
        # Pulumi hands a component's protect and providers down to its children, not deleted_with:
        # passed on here, so that tearing down the cluster skips deleting every object one by one.
        deleted_with = opts.deleted_with if opts else None

        def child_opts(*, depends_on: Sequence[pulumi.Resource] = (), **extra) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                protect=args.protect,
                depends_on=[*args.depends_on, *depends_on],
                deleted_with=deleted_with,
                **extra,
            )

        self.hf_token_secret = self._secret(
            f"{name}-hf-token", spec.hf_token_secret, HF_TOKEN_KEY, args.hf_token, child_opts
        )
        # The engine key behind a front door, else the client key; the logical name follows the Secret's.
        key_kind = "engine-key" if spec.api_key_secret == engine_key_secret_name(spec.name) else "api-key"
        self.api_key_secret = self._secret(f"{name}-{key_kind}", spec.api_key_secret, API_KEY_KEY, args.api_key, child_opts)
        secrets = [s for s in (self.hf_token_secret, self.api_key_secret) if s is not None]
        self.candidate_deployment = None
        if getattr(spec.layout, "disaggregated", False):
            self._declare_pd(name, spec, secrets, child_opts, args.engine_depends_on)
            return

        self.prefetch_job = None
        job = render_prefetch_job(spec)
        if job is not None:
            prefetch_timeout = f"{prefetch_timeout_seconds(spec)}s"
            self.prefetch_job = k8s.batch.v1.Job(
                f"{name}-prefetch",
                metadata=job["metadata"],
                spec=job["spec"],
                opts=child_opts(
                    depends_on=secrets,
                    custom_timeouts=pulumi.CustomTimeouts(create=prefetch_timeout, update=prefetch_timeout),
                ),
            )

        # Create: all replicas load in parallel (one wave). Update: maxSurge 0 → sequential waves.
        create_timeout = f"{pod_ready_budget_seconds(spec)}s"
        update_timeout = f"{deployment_timeout_seconds(spec)}s"
        engine_opts = child_opts(
            depends_on=[*secrets, *([self.prefetch_job] if self.prefetch_job else []), *args.engine_depends_on],
            custom_timeouts=pulumi.CustomTimeouts(create=create_timeout, update=update_timeout),
            ignore_changes=deployment_ignore_changes(spec) or None,
            delete_before_replace=True,  # no spare GPUs for a second set (module docstring)
        )
        if spec.layout.multi_node:
            # A replica over several nodes: one LeaderWorkerSet group per replica
            # (infra/render/multi_node.py); its CRD comes with the fabric component's LWS release.
            lws = render_leader_worker_set(spec)
            self.deployment = custom_resource(f"{name}-engine", lws, engine_opts)
        else:
            deployment = render_deployment(spec)
            self.deployment = k8s.apps.v1.Deployment(
                f"{name}-engine", metadata=deployment["metadata"], spec=deployment["spec"], opts=engine_opts
            )

        if args.candidate is not None:
            # Same secrets, weights and timeouts as the model's engines; waits for them so that a
            # first `pulumi up` with a rollout never loads both variants' weights at once.
            cand = render_deployment(args.candidate)
            self.candidate_deployment = k8s.apps.v1.Deployment(
                f"{name}-engine-candidate", metadata=cand["metadata"], spec=cand["spec"],
                opts=child_opts(
                    depends_on=[*secrets, *([self.prefetch_job] if self.prefetch_job else []), self.deployment],
                    custom_timeouts=pulumi.CustomTimeouts(
                        create=f"{pod_ready_budget_seconds(args.candidate)}s",
                        update=f"{deployment_timeout_seconds(args.candidate)}s",
                    ),
                    delete_before_replace=True,
                ),
            )

        service = render_service(spec)
        self.service = k8s.core.v1.Service(
            f"{name}-service", metadata=service["metadata"], spec=service["spec"], opts=child_opts()
        )
        pdb = render_pdb(spec)
        self.pdb = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=child_opts()
        )

        self.endpoint = f"http://{service_name(spec)}.{spec.namespace}.svc.cluster.local:8000/v1"
        self.register_outputs(
            {
                "endpoint": self.endpoint,
                "service_name": service_name(spec),
                "layout": spec.layout.name,
                "replicas": spec.replicas,
                "gpus_per_replica": spec.gpus_per_replica,
            }
        )

    def _declare_pd(self, name: str, spec: ModelServiceSpec, secrets: list, child_opts, engine_depends_on: Sequence[pulumi.Resource]) -> None:
        """A prefill/decode layout: prefill and decode Deployments, their PDBs and the P/D router
        (infra/render/pd_service.py); the model's Service selects the router."""
        objects = render_pd_service(PdServiceSpec(spec, spec.layout, units=spec.replicas))
        kinds = {
            "ConfigMap": k8s.core.v1.ConfigMap,
            "Job": k8s.batch.v1.Job,
            "Deployment": k8s.apps.v1.Deployment,
            "PodDisruptionBudget": k8s.policy.v1.PodDisruptionBudget,
            "ServiceAccount": k8s.core.v1.ServiceAccount,
            "Role": k8s.rbac.v1.Role,
            "RoleBinding": k8s.rbac.v1.RoleBinding,
            "Service": k8s.core.v1.Service,
        }
        self.prefetch_job = None
        created: dict[str, pulumi.Resource] = {}
        budget = f"{pod_ready_budget_seconds(spec)}s"
        for obj in objects:
            kind, meta = obj["kind"], obj["metadata"]
            body = {("role_ref" if k == "roleRef" else k): v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
            extra: dict = {}
            depends: list = []
            if kind == "Job":
                timeout = f"{prefetch_timeout_seconds(spec)}s"
                extra["custom_timeouts"] = pulumi.CustomTimeouts(create=timeout, update=timeout)
                depends = secrets
            elif kind == "Deployment" and meta["name"] != f"{spec.name}-pd-router":
                extra["custom_timeouts"] = pulumi.CustomTimeouts(create=budget, update=f"{deployment_timeout_seconds(spec)}s")
                extra["delete_before_replace"] = True  # a P/D side holds GPUs (module docstring)
                # autoscaled: each side's count belongs to its ScaledObject's HPA after creation
                if deployment_ignore_changes(spec):
                    extra["ignore_changes"] = deployment_ignore_changes(spec)
                # a unit over nodes: the engines' NIC attachments come with the fabric component
                depends = [*secrets, *([self.prefetch_job] if self.prefetch_job else []), *engine_depends_on]
            resource = kinds[kind](
                f"{name}-{kind.lower()}-{meta['name']}", metadata=meta, **body, opts=child_opts(depends_on=depends, **extra)
            )
            created[f"{kind}/{meta['name']}"] = resource
            if kind == "Job":
                self.prefetch_job = resource
        self.deployment = created[f"Deployment/{spec.name}-engine-decode"]
        self.service = created[f"Service/{service_name(spec)}"]
        self.pdb = created[f"PodDisruptionBudget/{spec.name}-engine-decode"]
        self.endpoint = f"http://{service_name(spec)}.{spec.namespace}.svc.cluster.local:8000/v1"
        self.register_outputs(
            {"endpoint": self.endpoint, "service_name": service_name(spec), "layout": spec.layout.name, "replicas": spec.replicas}
        )

    def _secret(self, logical_name, secret_name, key, value, child_opts) -> k8s.core.v1.Secret | None:
        """A Secret whose only value comes from a Pulumi secret Output (never a plain string)."""
        if value is None or not secret_name:
            return None
        shape = render_secret_shape(secret_name, self.spec.namespace, key, self.spec.name)
        return k8s.core.v1.Secret(
            logical_name,
            metadata=with_keys(shape["metadata"], [key]),
            type=shape["type"],
            string_data={key: pulumi.Output.secret(value)},
            opts=child_opts(additional_secret_outputs=["data", "stringData"]),
        )
