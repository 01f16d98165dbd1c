"""A model service and the router in front of it, as planned and as declared under Pulumi mocks:
secrets, ordering, timeouts, parents."""

from __future__ import annotations

from infra.declare import Secrets
from infra.mock_runtime import resolve
from infra.render.model_service import ModelServiceSpec, startup_budget_seconds
from infra.render.router import RoutedModel, RouterSpec
from infra.resource_graph.values import Secret, SecretInput
from infra.stack_resources.front_door import plan_router
from infra.stack_resources.model_services import plan_model_service
from tests.render.test_model_service import make_spec as render_spec
from tests.stack_resources.conftest import run_graph, with_cluster

HF_TOKEN = "hf_plaintext_token_7d1c"  # noqa: S105 - test fixture
API_KEY = "sk-plaintext-key-93ab"  # noqa: S105 - test fixture
ENGINE_KEY = "engine-plaintext-key-5c2e"  # noqa: S105 - test fixture

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
JOB = "kubernetes:batch/v1:Job"
SECRET = "kubernetes:core/v1:Secret"
SERVICE = "kubernetes:core/v1:Service"
SECRETS = Secrets(huggingface_token=HF_TOKEN, api_key=API_KEY)


def make_spec(**overrides) -> ModelServiceSpec:
    """The renderer tests' spec on two nodes, with its two Secrets named as the plan names them."""
    base = dict(nodes_min=2, nodes_max=2, estimated_load_seconds=1800, max_model_len=None)
    return render_spec(**{**base, **overrides})


def _run(spec: ModelServiceSpec, public: bool = True, kind: str = "session"):
    """The model service (its keys from the stack's secrets) and the router in front of it; the
    run's result is (service group, router group)."""
    checks_keys = bool(spec.api_key_secret)

    def build(b):
        _, cluster, provider = with_cluster(b)
        service = plan_model_service(
            b, spec, candidate=None, provider=provider, cluster=cluster, hf_token=SecretInput("huggingface_token"),
            api_key=SecretInput("api_key"), depends_on=[], engine_depends_on=[], name="qwen3-235b",
        )  # fmt: skip
        router_spec = RouterSpec(
            models=(RoutedModel(spec.name, spec.served_model_name),), kind=kind,
            public=public and kind != "service", client_key_names=("default",) if checks_keys else (),
        )  # fmt: skip
        router, _ = plan_router(
            b, router_spec, client_keys={"default": SecretInput("api_key")} if checks_keys else {},
            engine_key=Secret(ENGINE_KEY) if checks_keys else None, provider=provider, depends_on=[service],
            name="qwen3-235b-router",
        )  # fmt: skip
        return service, router

    return run_graph(build, secrets=SECRETS)


def test_secrets_come_from_pulumi_secrets_and_never_appear_in_plain_text():
    rec = _run(make_spec()).recording
    secrets = rec.of_type(SECRET)
    assert {s.name for s in secrets} == {"qwen3-235b-hf-token", "qwen3-235b-api-key", "qwen3-235b-router-router-client-keys",
                                         "qwen3-235b-router-router-upstream-key"}
    for s in secrets:
        assert "stringData" in s.additional_secret_outputs
    for plain in (HF_TOKEN, API_KEY, ENGINE_KEY):
        assert not rec.plain_text_contains(plain)
        # The values are there, but only inside Pulumi's secret wrapper.
        assert plain in rec.wire_text()


def test_the_router_key_files_hold_the_client_keys_and_the_engine_key():
    rec = _run(make_spec()).recording
    client = rec.one(SECRET, "qwen3-235b-router-router-client-keys").inputs["stringData"]["value"]  # inside the secret wrapper
    engine = rec.one(SECRET, "qwen3-235b-router-router-upstream-key").inputs["stringData"]["value"]
    assert client["client-keys.map"].splitlines()[1:] == ['"~^Bearer sk-plaintext-key-93ab$" default;']
    assert engine == {"engine-key.map": f'default "Bearer {ENGINE_KEY}";\n'}
    deployment = rec.one(DEPLOYMENT, "qwen3-235b-router-deployment")
    assert {s.urn for s in rec.of_type(SECRET) if "router" in s.name} <= set(deployment.dependencies)


def test_deployment_waits_for_the_prefetch_job_and_the_secrets():
    rec = _run(make_spec()).recording
    deployment = rec.one(DEPLOYMENT, "qwen3-235b-engine")
    job = rec.one(JOB, "qwen3-235b-prefetch")
    assert job.urn in deployment.dependencies
    for s in rec.of_type(SECRET):
        assert s.urn in deployment.dependencies or "router" in s.name
    # Pods reference the Secrets the plan creates, by name.
    pod = deployment.inputs["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "qwen3-235b-api-key"
    job_env = {e["name"]: e for e in job.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert job_env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "qwen3-235b-hf-token"


def test_timeouts_cover_a_model_load():
    spec = make_spec()
    rec = _run(spec).recording
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
    rec = _run(make_spec()).recording
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
    rec = _run(make_spec(cache=None), public=False).recording
    assert rec.of_type(JOB) == []
    deployment = rec.one(DEPLOYMENT, "qwen3-235b-engine")
    assert "initContainers" not in deployment.inputs["spec"]["template"]["spec"]


def test_kind_service_creates_no_router_workload():
    run = _run(make_spec(), public=False, kind="service")
    assert [r.name for r in run.recording.of_type(DEPLOYMENT)] == ["qwen3-235b-engine"]
    service, router = run.result
    assert run.declared.group_outputs[router]["endpoint"] is None
    endpoint = run.declared.group_outputs[service]["endpoint"]
    assert resolve(endpoint)[0] == "http://qwen3-235b.inference-engines.svc.cluster.local:8000/v1"


def test_existing_secret_names_are_referenced_not_created():
    def build(b):
        _, cluster, provider = with_cluster(b)
        spec = make_spec(hf_token_secret="shared-hf", api_key_secret=None)
        return plan_model_service(b, spec, candidate=None, provider=provider, cluster=cluster, hf_token=None, api_key=None,
                                  depends_on=[], engine_depends_on=[], name="m")  # fmt: skip

    rec = run_graph(build).recording
    assert rec.of_type(SECRET) == []
    job = rec.one(JOB)
    env = {e["name"]: e for e in job.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "shared-hf"
