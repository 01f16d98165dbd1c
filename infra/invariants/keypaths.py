"""Which stack-file key an object or a number comes from, as the user wrote it.

A broken invariant is reported against the key that made the object (`inference-platform:models[1].name`,
`inference-platform:gpu_pools[0].size`), never against the object: the user fixes the stack file,
not the rendered YAML. Objects are traced back by what every renderer puts on them — the model
label on everything a model owns, the pool in a pod's node selector — so the mapping is as generic
as the invariants themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infra.config import NS, StackConfig
from infra.invariants.objects import labels

MODEL_LABEL = "inference-platform/model"
POOL_LABEL = "doks.digitalocean.com/node-pool"
RELEASE_ANNOTATION = "meta.helm.sh/release-name"  # on every object a Helm release installs
# The stack section whose keys give each chart its values (what a user changes when a chart's
# objects do not fit): the chart as the release names it, without its repository.
CHART_SECTIONS = {
    "kube-prometheus-stack": "observability", "keda": "models", "lws": "models",
    "agentgateway": "router.gateway", "agentgateway-crds": "router.gateway",
    "gpu-operator-charts": "gpu_runtime", "cert-manager": "gpu_runtime",
}


@dataclass(frozen=True)
class KeyPaths:
    cfg: StackConfig
    releases: dict[str, str] = field(default_factory=dict)  # Helm release name → its chart's name

    def model_index(self, name: str | None) -> int | None:
        for i, model in enumerate(self.cfg.models):
            if model.name == name:
                return i
        return None

    def model(self, name: str | None, key: str = "") -> str | None:
        i = self.model_index(name)
        if i is None:
            return None
        return f"{NS}models[{i}]" + (f".{key}" if key else "")

    def pool(self, pool_name: str | None, key: str = "") -> str | None:
        for i, pool in enumerate(self.cfg.gpu_pools):
            if pool.name == pool_name:
                return f"{NS}gpu_pools[{i}]" + (f".{key}" if key else "")
        return None

    def system_pool(self, key: str = "") -> str:
        """`cluster.system_pool.<key>` as written; where the user left it to its default, the
        deepest key they did write (the message then says to set it)."""
        cluster = self.cfg.cluster
        if "system_pool" not in cluster.model_fields_set:
            return f"{NS}cluster"
        if key and key not in cluster.system_pool.model_fields_set:
            return f"{NS}cluster.system_pool"
        return f"{NS}cluster.system_pool" + (f".{key}" if key else "")

    def section(self, key: str) -> str:
        return f"{NS}{key}"

    def release(self, obj: dict) -> str | None:
        """The stack section behind `obj` when a Helm release installed it (chart objects)."""
        release = ((obj.get("metadata") or {}).get("annotations") or {}).get(RELEASE_ANNOTATION)
        if release is None:
            return None
        chart = self.releases.get(str(release), "")
        return self.section(CHART_SECTIONS[chart]) if chart in CHART_SECTIONS else None

    def of_object(self, obj: dict, key: str = "name") -> str:
        """The key responsible for `obj`: its model's, else its Helm release's section, else the
        front door's (`router`)."""
        return self.model(labels(obj).get(MODEL_LABEL), key) or self.release(obj) or self.section("router")
