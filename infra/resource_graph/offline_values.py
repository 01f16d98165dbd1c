"""What the offline plan shows for values only the cloud knows: ids, addresses, lookups.

Without a cloud account nothing is created, so a resource's id, the NFS share's address or the
Kubernetes release DigitalOcean would pick do not exist. The plan shows a stable stand-in for each,
fixed per resource name so the same stack always plans byte-identically, and realistic where a
reader or a check looks at it (an address in a PersistentVolume, a release of the configured
minor). Generated secrets are never a value here: they are `[secret]`.

These are also the answers the mock runtime gives the component tests (infra/mock_runtime.py),
so a program run under the mocks and the plan show the same values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SECRET_MARKER = "[secret]"
UNKNOWN_MARKER = "[unknown]"

# What DigitalOcean offers, as the offline plan assumes (newest first per minor); `1.29` is
# retired (no release), so a stack pinned to it is refused offline as DigitalOcean would.
OFFLINE_K8S_VERSIONS = ("1.34.1-do.0", "1.33.6-do.1", "1.33.1-do.5", "1.32.10-do.2", "1.31.14-do.3")
OFFLINE_NFS_HOST = "10.0.0.10"
# Kubeconfig tokens: the live one `get_kubernetes_cluster` returns on every run, and the stale one
# the cluster resource's state holds (DOKS renews it only on `pulumi refresh`). Tests assert that
# the provider uses the live one and that neither appears in plain text.
OFFLINE_KUBECONFIG_TOKEN = "mock-doks-token-5f1e2d"  # noqa: S105 - test fixture, not a credential
STALE_KUBECONFIG_TOKEN = "stale-doks-token-in-state"  # noqa: S105 - test fixture, not a credential

KUBERNETES_VERSIONS_TOKEN = "digitalocean:index/getKubernetesVersions:getKubernetesVersions"
KUBERNETES_CLUSTER_TOKEN = "digitalocean:index/getKubernetesCluster:getKubernetesCluster"


def offline_id(name: str) -> str:
    """The id a resource gets offline: fixed per name, so plans are byte-identical across runs."""
    return f"{name}-id"


def _kubeconfig(token: str, endpoint: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: doks\n"
        f"  cluster: {{server: {endpoint}}}\nusers:\n- name: admin\n  user: {{token: {token}}}\n"
    )


def _kube_configs(token: str, endpoint: str) -> list[dict[str, str]]:
    """A DOKS cluster's `kubeConfigs` with every field the SDK's result type requires."""
    return [
        {
            "rawConfig": _kubeconfig(token, endpoint),
            "host": endpoint,
            "token": token,
            "clusterCaCertificate": "",
            "clientCertificate": "",
            "clientKey": "",
            "expiresAt": "2030-01-01T00:00:00Z",
        }
    ]


def _endpoint(rid: str) -> str:
    return f"https://{rid}.k8s.ondigitalocean.com"


def offline_state(type_: str, name: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A created resource's outputs offline: its inputs echoed (as the providers do for plain
    arguments) and the outputs the stack reads back (ids, URNs, endpoint, kubeconfig, NFS address)."""
    state = dict(inputs)
    rid = offline_id(name)
    if type_ == "digitalocean:index/kubernetesCluster:KubernetesCluster":
        state.setdefault("endpoint", _endpoint(rid))
        state["kubeConfigs"] = _kube_configs(STALE_KUBECONFIG_TOKEN, state["endpoint"])
        state.setdefault("clusterUrn", f"do:kubernetes:{rid}")
    elif type_ == "digitalocean:index/nfs:Nfs":
        state.setdefault("host", OFFLINE_NFS_HOST)
        state.setdefault("mountPath", f"/{rid}")
        state.setdefault("status", "ACTIVE")
    elif type_ == "digitalocean:index/vpc:Vpc":
        state.setdefault("vpcUrn", f"do:vpc:{rid}")
    elif type_ == "digitalocean:index/spacesKey:SpacesKey":
        state.setdefault("accessKey", f"{rid}-access")
        state.setdefault("secretKey", f"{rid}-secret")
    elif type_ == "random:index/randomPassword:RandomPassword":
        state.setdefault("result", SECRET_MARKER)  # a generated secret: never a value in a plan
        state.setdefault("bcryptHash", SECRET_MARKER)
    elif type_ == "digitalocean:index/spacesBucket:SpacesBucket":
        state.setdefault("endpoint", f"{state.get('region', 'nyc3')}.digitaloceanspaces.com")
    if type_.startswith("digitalocean:index/"):
        kind = type_.rsplit(":", 1)[-1].lower()
        state.setdefault("urn", f"do:{kind}:{rid}")
    return state


def offline_answer(token: str, args: Mapping[str, Any], k8s_versions: tuple[str, ...] = OFFLINE_K8S_VERSIONS) -> dict[str, Any]:
    """A provider function's answer offline: the Kubernetes releases DigitalOcean offers, and a
    cluster looked up by name (the program names clusters after their logical name)."""
    if token == KUBERNETES_VERSIONS_TOKEN:
        prefix = args.get("versionPrefix") or ""
        valid = [v for v in k8s_versions if v.startswith(prefix)]
        return {"latestVersion": valid[0] if valid else "", "validVersions": valid, "versionPrefix": prefix}
    if token == KUBERNETES_CLUSTER_TOKEN:
        name = args.get("name") or ""
        rid = offline_id(name)
        return {
            "id": rid,
            "name": name,
            "endpoint": _endpoint(rid),
            "kubeConfigs": _kube_configs(OFFLINE_KUBECONFIG_TOKEN, _endpoint(rid)),
            "kubeconfigExpireSeconds": args.get("kubeconfigExpireSeconds"),
            "status": "running",
            "urn": f"do:kubernetes:{rid}",
        }
    return {}
