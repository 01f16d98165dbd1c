"""ModelService and Router components under Pulumi mocks: secrets, ordering, timeouts, parents."""

from __future__ import annotations

import pulumi

from components.model_service import ModelService, ModelServiceArgs
from components.router import Router, RouterArgs
from infra.mock_runtime import resolve, run_program
from infra.render.model_service import ModelServiceSpec, startup_budget_seconds
from infra.render.router import RoutedModel, RouterSpec
from tests.render.test_model_service import make_spec as render_spec

HF_TOKEN = "hf_plaintext_token_7d1c"  # noqa: S105 - test fixture
API_KEY = "sk-plaintext-key-93ab"  # noqa: S105 - test fixture

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
JOB = "kubernetes:batch/v1:Job"
SECRET = "kubernetes:core/v1:Secret"
SERVICE = "kubernetes:core/v1:Service"


def make_spec(**overrides) -> ModelServiceSpec:
    """The renderer tests' spec on two nodes, with its two Secrets named as the plan names them."""
    base = dict(nodes_min=2, nodes_max=2, estimated_load_seconds=1800, max_model_len=None)
    return render_spec(**{**base, **overrides})


def _program(spec: ModelServiceSpec, public: bool = True, kind: str = "session"):
    def program():
        service = ModelService(
            "qwen3-235b",
            ModelServiceArgs(
                spec=spec, hf_token=pulumi.Output.secret(HF_TOKEN), api_key=pulumi.Output.secret(API_KEY)
            ),
        )
        router = Router(
            "qwen3-235b-router",
            RouterArgs(
                spec=RouterSpec(
                    models=(RoutedModel(spec.name, spec.served_model_name),), kind=kind,
                    public=public and kind != "service", api_key_secret=service.spec.api_key_secret,
                ),
                depends_on=[service],
            ),
        )
        return service, router

    return program


def test_secrets_come_from_pulumi_secrets_and_never_appear_in_plain_text():
    rec = run_program(_program(make_spec()))
    secrets = rec.of_type(SECRET)
    assert {s.name for s in secrets} == {"qwen3-235b-hf-token", "qwen3-235b-api-key"}
    for s in secrets:
        assert "stringData" in s.additional_secret_outputs
    assert not rec.plain_text_contains(HF_TOKEN)
    assert not rec.plain_text_contains(API_KEY)
    # The values are there, but only inside Pulumi's secret wrapper.
    assert HF_TOKEN in rec.wire_text() and API_KEY in rec.wire_text()


def test_deployment_waits_for_the_prefetch_job_and_the_secrets():
    rec = run_program(_program(make_spec()))
    deployment = rec.one(DEPLOYMENT, "qwen3-235b-engine")
    job = rec.one(JOB, "qwen3-235b-prefetch")
    assert job.urn in deployment.dependencies
    for s in rec.of_type(SECRET):
        assert s.urn in deployment.dependencies
    # Pods reference the Secrets the component created, by name.
    pod = deployment.inputs["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "qwen3-235b-api-key"
    job_env = {e["name"]: e for e in job.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert job_env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "qwen3-235b-hf-token"


def test_timeouts_cover_a_model_load():
    spec = make_spec()
    rec = run_program(_program(spec))
    deployment = rec.one(DEPLOYMENT, "qwen3-235b-engine")
    create_s = int(deployment.custom_timeouts["create"].rstrip("s"))
    update_s = int(deployment.custom_timeouts["update"].rstrip("s"))
    assert create_s >= startup_budget_seconds(spec) >= spec.estimated_load_seconds
    assert update_s >= create_s
    assert (
        int(deployment.inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])
        >= spec.estimated_load_seconds
    )
    job = rec.one(JOB, "qwen3-235b-prefetch")
    assert int(job.custom_timeouts["create"].rstrip("s")) >= 3600


def test_children_are_parented_and_typed():
    rec = run_program(_program(make_spec()))
    ms = rec.one("inference-platform:model_service:ModelService")
    router = rec.one("inference-platform:router:Router")
    for r in rec.registrations:
        if r.type.startswith("kubernetes:"):
            assert r.parent in {ms.urn, router.urn}, r.name
    names = {(r.type, r.name) for r in rec.registrations}
    assert ("kubernetes:policy/v1:PodDisruptionBudget", "qwen3-235b-pdb") in names
    assert ("kubernetes:rbac.authorization.k8s.io/v1:Role", "qwen3-235b-router-role") in names
    public = rec.one(SERVICE, "qwen3-235b-router-public")
    assert public.inputs["spec"]["type"] == "LoadBalancer"
    assert public.inputs["metadata"]["annotations"]["inference-platform/api-key-required"] == "true"


def test_no_cache_means_no_job_and_no_wait():
    rec = run_program(_program(make_spec(cache=None), public=False))
    assert rec.of_type(JOB) == []
    deployment = rec.one(DEPLOYMENT, "qwen3-235b-engine")
    assert "initContainers" not in deployment.inputs["spec"]["template"]["spec"]


def test_kind_service_creates_no_router_workload():
    rec = run_program(_program(make_spec(), public=False, kind="service"))
    assert [r.name for r in rec.of_type(DEPLOYMENT)] == ["qwen3-235b-engine"]
    service, router = rec.value
    assert router.endpoint is None
    assert resolve(service.endpoint)[0] == "http://qwen3-235b.inference-engines.svc.cluster.local:8000/v1"


def test_existing_secret_names_are_referenced_not_created():
    def program():
        return ModelService(
            "m", ModelServiceArgs(spec=make_spec(hf_token_secret="shared-hf", api_key_secret=None))
        )

    rec = run_program(program)
    assert rec.of_type(SECRET) == []
    job = rec.one(JOB)
    env = {e["name"]: e for e in job.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "shared-hf"
