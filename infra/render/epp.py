"""Per-model objects of `router.kind: gateway`: InferencePool, endpoint picker (EPP), HTTPRoute.

For every model the gateway gets (facts of the pinned versions, infra/catalog/versions.py):

- an `InferencePool` (inference.networking.k8s.io/v1, gateway-api-inference-extension
  api/v1/inferencepool_types.go @ v1.6.0) whose `selector.matchLabels` are exactly the engine
  pods' selector labels (infra/render/model_service.py `selector_labels`: the vLLM app label and
  the model label), `targetPorts` the engines' port 8000, and `endpointPickerRef` the model's EPP
  Service on its ext_proc port;
- an endpoint picker: the llm-d-router EPP (`ghcr.io/llm-d/llm-d-router-endpoint-picker`) as a
  one-replica Deployment (`Recreate`: its prefix index is in-process state; the llm-d chart
  config/charts/routerlib/templates/_deployment.yaml @ v0.10.0 runs it the same way), a Service
  (ext_proc 9002, gRPC over TLS; metrics 9090), a ConfigMap with its `EndpointPickerConfig`
  (apix/config/v1alpha1/endpointpickerconfig_types.go), and a namespaced Role that can only read
  pods, its InferencePool and InferenceObjectives (the reconcilers of pkg/epp/controller and the
  chart's llm-d-router-gateway/templates/rbac.yaml);
- an `HTTPRoute` on the environment's Gateway whose one rule matches the header
  `X-Gateway-Base-Model-Name: <served model name>` (set by the gateway from the request body's
  `model`, infra/render/gateway.py) and sends it to this pool only, with a request timeout sized
  from the model's SLO;
- optional `InferenceObjective`s (llm-d.ai/v1alpha2, apix/v1alpha2/inferenceobjective_types.go):
  a request naming one in `x-llm-d-inference-objective` gets its priority.

The EPP serves ext_proc over TLS with a self-signed certificate (`--secure-serving`, its default);
Agentgateway connects to it without verifying (controller/pkg/agentgateway/plugins/
inference_plugin.go @ v1.4.1, as the Inference Extension spec mandates). Its metrics are served
without authentication (`--metrics-endpoint-auth=false`), like vLLM's, so scraping needs no
cluster-wide TokenReview/SubjectAccessReview rights.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from infra.catalog import versions
from infra.catalog.epp import SCORERS, SESSION_AFFINITY
from infra.catalog.vllm_flags import VLLM_PORT
from infra.render import scan_exceptions
from infra.render.model_service import ENGINES_NAMESPACE, LABEL_MODEL, NAMESPACE, PART_OF, selector_labels
from infra.render.scan_exceptions import accept

INFERENCE_GROUP = "inference.networking.k8s.io"
INFERENCE_POOL_API = f"{INFERENCE_GROUP}/v1"
OBJECTIVE_API = "llm-d.ai/v1alpha2"
EPP_CONFIG_API = "llm-d.ai/v1alpha1"
GATEWAY_GROUP = "gateway.networking.k8s.io"

# The header the gateway copies the request body's `model` into, and the HTTPRoutes match on
# (llm-d-router config/charts/llm-d-router-gateway/templates/httproute.yaml @ v0.10.0).
MODEL_HEADER = "X-Gateway-Base-Model-Name"
# The header a client names an InferenceObjective in (pkg/epp/metadata/consts.go `ObjectiveKey`).
OBJECTIVE_HEADER = "x-llm-d-inference-objective"

EPP_APP = "epp"
EPP_GRPC_PORT = 9002
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
EPP_CONFIG_FILE = "epp.yaml"
EPP_CONFIG_DIR = "/config"
# The chart's grace period ("should mirror the longest grace period of the pods within the pool").
EPP_TERMINATION_GRACE_SECONDS = 130
FAILURE_MODES = {"open": "FailOpen", "close": "FailClose"}


@dataclass(frozen=True)
class PoolSpec:
    """One model's InferencePool, endpoint picker and route.

    model: the model name (ModelServiceSpec.name): object names, labels, the pool's selector.
    served_model_name: the `model` clients send; the route matches it exactly.
    scorers: (plugin type, weight) pairs of the EPP's scheduling profile (infra/catalog/epp.py).
    session_header: the header session-affinity-scorer keys on (when that scorer is used).
    failure_mode: FailOpen | FailClose — what the gateway does when the EPP does not answer.
    request_timeout_seconds: the route's `timeouts.request` (request_timeout_seconds()).
    objectives: (name, priority) InferenceObjectives of this pool.
    gateway_name: the Gateway the route attaches to.
    namespace: the engines' namespace: an InferencePool selects pods of its own namespace only
        (Inference Extension v1.6.0 `spec.selector`), so the pool, its picker and its route live
        beside the engines.
    gateway_namespace: the Gateway's namespace (the front door's). The route attaches to it across
        namespaces, which the Gateway's listener admits (`allowedRoutes.namespaces.from: Selector`);
        the route is not left beside the Gateway with a ReferenceGrant because Agentgateway v1.4.1
        honours ReferenceGrants to Services, Secrets and its own backends only
        (controller/pkg/agentgateway/plugins/reference_indexes.go `KnownToReferences`; InferencePool
        was added after v1.4.1, agentgateway/agentgateway#3169).
    system_node_selector: where the EPP runs (the system pool).
    """

    model: str
    served_model_name: str
    scorers: tuple[tuple[str, float], ...]
    gateway_name: str
    namespace: str = ENGINES_NAMESPACE
    gateway_namespace: str = NAMESPACE
    session_header: str | None = None
    failure_mode: str = "FailOpen"
    request_timeout_seconds: int = 300
    objectives: tuple[tuple[str, int], ...] = ()
    system_node_selector: dict[str, str] = field(default_factory=dict)
    image: str = versions.EPP_IMAGE
    target_port: int = VLLM_PORT

    @property
    def name(self) -> str:
        """The InferencePool's (and the HTTPRoute's) name: the model's."""
        return self.model

    @property
    def epp_name(self) -> str:
        return f"{self.model}-epp"

    @property
    def selector(self) -> dict[str, str]:
        """Exactly the model's engine pods (the labels its Deployment selects on)."""
        return selector_labels(self.model)

    @property
    def experimental_plugins(self) -> bool:
        """Whether a scorer of Alpha stability is configured (the EPP then needs a flag to load it)."""
        return any(SCORERS[name].stability == "alpha" for name, _ in self.scorers if name in SCORERS)


def epp_selector(model: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": EPP_APP, LABEL_MODEL: model}


def epp_labels(spec: PoolSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/component": "endpoint-picker",
        "app.kubernetes.io/instance": spec.model,
        **epp_selector(spec.model),
    }


def _meta(name: str, spec: PoolSpec, labels: dict[str, str] | None = None) -> dict:
    return {"name": name, "namespace": spec.namespace, "labels": labels or epp_labels(spec)}


# --- the endpoint picker ------------------------------------------------------------------------


def epp_config(spec: PoolSpec) -> dict:
    """The EPP's EndpointPickerConfig: the scorers and one `default` profile with their weights.

    The loader adds what is left out (pkg/epp/config/loader/defaults.go @ v0.10.0): the
    single-profile handler, the max-score picker, the OpenAI parsers, the vLLM metrics data source
    and, for prefix-cache-scorer, its default producer.
    """
    plugins = []
    for name, _weight in spec.scorers:
        plugin: dict = {"type": name, "name": name}
        if name == SESSION_AFFINITY:
            plugin["parameters"] = {
                "strategy": "session_id",
                "sessionIdConfig": {"sources": [{"header": spec.session_header or "x-session-id"}]},
            }
        plugins.append(plugin)
    return {
        "apiVersion": EPP_CONFIG_API,
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": [
            {"name": "default", "plugins": [{"pluginRef": name, "weight": float(weight)} for name, weight in spec.scorers]}
        ],
    }


def epp_args(spec: PoolSpec) -> list[str]:
    """Command line of the EPP (flags of pkg/epp/server/options.go @ v0.10.0)."""
    args = [
        "--pool-name",
        spec.name,
        "--pool-namespace",
        spec.namespace,
        "--pool-group",
        INFERENCE_GROUP,
        "--config-file",
        f"{EPP_CONFIG_DIR}/{EPP_CONFIG_FILE}",
        "--grpc-port",
        str(EPP_GRPC_PORT),
        "--grpc-health-port",
        str(EPP_HEALTH_PORT),
        "--metrics-port",
        str(EPP_METRICS_PORT),
        "--zap-encoder",
        "json",
        "--tracing=false",
        "--metrics-endpoint-auth=false",
        "--enable-pprof=false",
    ]
    if spec.experimental_plugins:
        args.append("--allow-experimental-plugins")
    return args


def render_epp_service_account(spec: PoolSpec) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(spec.epp_name, spec)}


def render_epp_role(spec: PoolSpec) -> dict:
    """Read-only and namespaced: the pods it scores, its pool, the objectives that name the pool.

    The InferenceModelRewrite reconciler only starts when that CRD exists, which the platform
    does not install, and the pool's status is written by the gateway, not the EPP.
    """
    read = ["get", "list", "watch"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(spec.epp_name, spec),
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": read},
            {"apiGroups": [INFERENCE_GROUP], "resources": ["inferencepools"], "verbs": read},
            {"apiGroups": ["llm-d.ai"], "resources": ["inferenceobjectives"], "verbs": read},
        ],
    }


def render_epp_role_binding(spec: PoolSpec) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(spec.epp_name, spec),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": spec.epp_name},
        "subjects": [{"kind": "ServiceAccount", "name": spec.epp_name, "namespace": spec.namespace}],
    }


def render_epp_config_map(spec: PoolSpec) -> dict:
    text = yaml.safe_dump(epp_config(spec), sort_keys=False)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(spec.epp_name, spec), "data": {EPP_CONFIG_FILE: text}}


def render_epp_deployment(spec: PoolSpec) -> dict:
    """One replica, replaced (not rolled): a second picker would keep its own prefix index and
    split the cache-affinity signal; while it restarts the pool's failure mode applies."""
    probe = {"grpc": {"port": EPP_HEALTH_PORT, "service": "inference-extension"}}
    container = {
        "name": "epp",
        "image": spec.image,
        "args": epp_args(spec),
        "ports": [
            {"name": "grpc", "containerPort": EPP_GRPC_PORT, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": EPP_METRICS_PORT, "protocol": "TCP"},
        ],
        "env": [
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        # The chart asks for 8 CPUs and 8 GiB; one model's picker scoring a handful of engines
        # needs a fraction of that, and the system pool is small.
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        "readinessProbe": {**probe, "periodSeconds": 2},
        "livenessProbe": {**probe, "initialDelaySeconds": 5, "periodSeconds": 10},
        "volumeMounts": [{"name": "config", "mountPath": EPP_CONFIG_DIR, "readOnly": True}],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,  # the image runs as 65532 (Dockerfile.epp @ v0.10.0)
            "runAsUser": 65532,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
            "readOnlyRootFilesystem": True,  # a Go binary: its TLS certificate is generated in memory
        },
    }
    pod_spec: dict = {
        "serviceAccountName": spec.epp_name,
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": EPP_TERMINATION_GRACE_SECONDS,
        "containers": [container],
        "volumes": [{"name": "config", "configMap": {"name": spec.epp_name}}],
    }
    if spec.system_node_selector:
        pod_spec["nodeSelector"] = dict(spec.system_node_selector)
    return accept({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(spec.epp_name, spec),
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 3,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": epp_selector(spec.model)},
            "template": {"metadata": {"labels": epp_labels(spec)}, "spec": pod_spec},
        },
    }, scan_exceptions.API_WATCHER)


def render_epp_service(spec: PoolSpec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec.epp_name, spec),
        "spec": {
            "type": "ClusterIP",
            "selector": epp_selector(spec.model),
            "ports": [
                # gRPC over TLS (the EPP's self-signed certificate): no appProtocol, Agentgateway
                # dials it with TLS regardless (inference_plugin.go @ v1.4.1, BackendTLS INSECURE_ALL).
                {"name": "grpc-ext-proc", "port": EPP_GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"},
                {"name": "http-metrics", "port": EPP_METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
            ],
        },
    }


# --- pool, route, objectives --------------------------------------------------------------------


def pool_labels(spec: PoolSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/component": "inference-pool",
        LABEL_MODEL: spec.model,
    }


def render_inference_pool(spec: PoolSpec) -> dict:
    return {
        "apiVersion": INFERENCE_POOL_API,
        "kind": "InferencePool",
        "metadata": _meta(spec.name, spec, pool_labels(spec)),
        "spec": {
            "selector": {"matchLabels": spec.selector},
            "targetPorts": [{"number": spec.target_port}],
            # group "" and kind Service are the defaults, and Agentgateway accepts only those.
            "endpointPickerRef": {"name": spec.epp_name, "port": {"number": EPP_GRPC_PORT}, "failureMode": spec.failure_mode},
        },
    }


def render_http_route(spec: PoolSpec) -> dict:
    """One rule: requests whose body names this model go to its pool, and nowhere else."""
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": _meta(spec.name, spec, pool_labels(spec)),
        "spec": {
            "parentRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": spec.gateway_name, "namespace": spec.gateway_namespace}],
            "rules": [
                {
                    "matches": [
                        {
                            "path": {"type": "PathPrefix", "value": "/"},
                            "headers": [{"type": "Exact", "name": MODEL_HEADER, "value": spec.served_model_name}],
                        }
                    ],
                    "backendRefs": [{"group": INFERENCE_GROUP, "kind": "InferencePool", "name": spec.name}],
                    "timeouts": {"request": f"{spec.request_timeout_seconds}s"},
                }
            ],
        },
    }


def render_objectives(spec: PoolSpec) -> list[dict]:
    return [
        {
            "apiVersion": OBJECTIVE_API,
            "kind": "InferenceObjective",
            "metadata": _meta(name, spec, pool_labels(spec)),
            "spec": {"priority": priority, "poolRef": {"group": INFERENCE_GROUP, "kind": "InferencePool", "name": spec.name}},
        }
        for name, priority in spec.objectives
    ]


def render_epp(spec: PoolSpec) -> list[dict]:
    """The endpoint picker's built-in objects, in apply order."""
    return [
        render_epp_service_account(spec),
        render_epp_role(spec),
        render_epp_role_binding(spec),
        render_epp_config_map(spec),
        render_epp_deployment(spec),
        render_epp_service(spec),
    ]


def render_pool_resources(spec: PoolSpec) -> list[dict]:
    """The custom resources (after their CRDs): InferencePool, HTTPRoute, InferenceObjectives."""
    return [render_inference_pool(spec), render_http_route(spec), *render_objectives(spec)]


def render_pool(spec: PoolSpec) -> list[dict]:
    """Every object of one model's pool, in apply order."""
    return [*render_epp(spec), *render_pool_resources(spec)]


def selector_matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """Whether `matchLabels` selects an object with `labels` (every pair present and equal)."""
    return all(labels.get(k) == v for k, v in selector.items())


def selection_conflicts(pools: tuple[PoolSpec, ...] | list[PoolSpec], pod_labels: dict[str, dict[str, str]]) -> list[tuple[str, str]]:
    """(pool's model, other model) for every pool whose selector takes in another model's engine
    pods; `pod_labels` maps each model to its engine pods' labels (the Deployment's template)."""
    return [
        (pool.model, other)
        for pool in pools
        for other, labels in pod_labels.items()
        if other != pool.model and selector_matches(pool.selector, labels)
    ]
