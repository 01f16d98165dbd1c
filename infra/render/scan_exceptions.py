"""Written reasons for the scanner findings the platform accepts, as checkov skip annotations —
attached only where the object has what the check flags, and worded from the object itself.

`scripts/scan_security.py` runs checkov 3.3.30 over every rendered object and fails CI on any
finding, unless the object carries `checkov.io/skip<N>: <check id>=<reason>` (checkov's own
suppression format for Kubernetes objects, one check per annotation). Issue 35 found reasons that
were not true of their objects (probes said to exist that did not work, images called pinned that
were not, a claim about how huggingface_hub reads its token) and skips that excused nothing. So:

- every skip has a **claim**: the property of the object that makes checkov flag it (a container
  without CPU limits, a token mounted, an added capability ...). `accept` attaches a skip only
  where its claim holds, so a skip never excuses nothing (checkov would pass without it) and a
  change that removes the property removes the skip;
- where a reason states facts about the object (which containers have no probe, which images are
  pinned by tag only, which env vars come from Secrets) the reason is **derived** from the object;
- `contradictions(obj)` re-derives every skip on an object and names each that no longer holds:
  tests/test_security_scan.py runs it over every stack and variant (no checkov needed), and
  scan_security.py runs it beside checkov, with checkov once more over the objects stripped of
  their skips to prove each skip needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

ANNOTATION_PREFIX = "checkov.io/skip"


# --------------------------------------------------------------------------- the object's facts


def _templates(node: Any) -> Iterator[dict]:
    if isinstance(node, dict):
        if isinstance(node.get("spec"), dict) and isinstance(node["spec"].get("containers"), list):
            yield node["spec"]
            return
        for value in node.values():
            yield from _templates(value)
    elif isinstance(node, list):
        for value in node:
            yield from _templates(value)


def pod_specs(obj: dict) -> list[dict]:
    """Every pod spec in a workload (a Deployment's, a Job's, a LeaderWorkerSet's leader and worker)."""
    return list(_templates(obj.get("spec") or {}))


def containers(obj: dict, *, init: bool = True) -> list[dict]:
    return [c for s in pod_specs(obj) for c in (s.get("containers") or []) + ((s.get("initContainers") or []) if init else [])]


def _sc(c: dict) -> dict:
    return c.get("securityContext") or {}


def _pod_sc(obj: dict) -> list[dict]:
    return [s.get("securityContext") or {} for s in pod_specs(obj)]


def without_probe(obj: dict, probe: str) -> list[str]:
    """The (non-init) containers with no `probe` (livenessProbe / readinessProbe)."""
    return sorted({c["name"] for c in containers(obj, init=False) if not c.get(probe)})


def tag_only(obj: dict) -> list[str]:
    return sorted({str(c["image"]) for c in containers(obj) if "@sha256:" not in str(c.get("image", ""))})


def secret_env(obj: dict) -> list[str]:
    return sorted({e["name"] for c in containers(obj) for e in c.get("env") or [] if (e.get("valueFrom") or {}).get("secretKeyRef")})


def mounts_token(obj: dict) -> bool:
    return any(s.get("automountServiceAccountToken", True) is not False for s in pod_specs(obj))


def _pod_user(obj: dict) -> int:
    return max([int(p.get("runAsUser") or 0) for p in _pod_sc(obj)] or [0])


def _caps(c: dict) -> dict:
    return _sc(c).get("capabilities") or {}


# Per check: what the object must have for checkov to flag it (checkov 3.3.30's Kubernetes checks).
CLAIMS: dict[str, Callable[[dict], bool]] = {
    "CKV_K8S_8": lambda o: bool(without_probe(o, "livenessProbe")),
    "CKV_K8S_9": lambda o: bool(without_probe(o, "readinessProbe")),
    "CKV_K8S_11": lambda o: any("cpu" not in ((c.get("resources") or {}).get("limits") or {}) for c in containers(o)),
    "CKV_K8S_13": lambda o: any("memory" not in ((c.get("resources") or {}).get("limits") or {}) for c in containers(o)),
    "CKV_K8S_15": lambda o: any(c.get("imagePullPolicy") != "Always" for c in containers(o)),
    "CKV_K8S_16": lambda o: any(_sc(c).get("privileged") for c in containers(o)),
    "CKV_K8S_17": lambda o: any(s.get("hostPID") for s in pod_specs(o)),
    "CKV_K8S_19": lambda o: any(s.get("hostNetwork") for s in pod_specs(o)),
    "CKV_K8S_20": lambda o: any(_sc(c).get("allowPrivilegeEscalation") is not False for c in containers(o)),
    "CKV_K8S_22": lambda o: any(not _sc(c).get("readOnlyRootFilesystem") for c in containers(o)),
    "CKV_K8S_23": lambda o: not all(_sc(c).get("runAsNonRoot") or any(p.get("runAsNonRoot") for p in _pod_sc(o)) for c in containers(o)),
    "CKV_K8S_25": lambda o: any(_caps(c).get("add") for c in containers(o)),
    "CKV_K8S_28": lambda o: any(not {"ALL", "NET_RAW"} & set(_caps(c).get("drop") or []) for c in containers(o)),
    "CKV_K8S_29": lambda o: any(_sc(c).get("privileged") for c in containers(o)),
    "CKV_K8S_31": lambda o: any((_sc(c).get("seccompProfile") or {}).get("type") not in (None, "RuntimeDefault") for c in containers(o))
    or any((p.get("seccompProfile") or {}).get("type") != "RuntimeDefault" for p in _pod_sc(o)),
    "CKV_K8S_35": lambda o: bool(secret_env(o)),
    "CKV_K8S_37": lambda o: any("ALL" not in (_caps(c).get("drop") or []) for c in containers(o)),
    "CKV_K8S_38": mounts_token,
    "CKV_K8S_40": lambda o: any(int(_sc(c).get("runAsUser") or _pod_user(o)) < 10000 for c in containers(o)),
    "CKV_K8S_43": lambda o: bool(tag_only(o)),
    "CKV_K8S_49": lambda o: any("*" in (r.get("verbs") or []) for r in o.get("rules") or []),
}


# --------------------------------------------------------------------------- reasons


@dataclass(frozen=True)
class Skip:
    """One accepted finding: its check and why; `reason` is text, or words derived from the object."""

    check: str
    reason: str | Callable[[dict], str]

    def text(self, obj: dict) -> str:
        return self.reason(obj) if callable(self.reason) else self.reason


def _no_probe(probe: str, why: str) -> Callable[[dict], str]:
    def words(obj: dict) -> str:
        names = without_probe(obj, probe)
        probed = sorted({c["name"] for c in containers(obj, init=False)} - set(names))
        return (f"no {probe} on {', '.join(names)}: {why}"
                + (f"; {', '.join(probed)} {'has' if len(probed) == 1 else 'have'} one" if probed else ""))  # fmt: skip
    return words


def _tag_only_words(obj: dict) -> str:
    return (f"pinned by tag, not digest: {', '.join(tag_only(obj))} (tags in infra/catalog/versions.py or the stack's image keys, "
            "which accept image@sha256:<digest>); prod's plan notes every tag-only image")


def _secret_env_words(why: str) -> Callable[[dict], str]:
    def words(obj: dict) -> str:
        return f"{', '.join(secret_env(obj))} from Secrets by secretKeyRef (never a literal value): {why}"
    return words


CPU_LIMITS = Skip("CKV_K8S_11", "no CPU limits by design: CFS quota throttling adds latency spikes to serving; CPU requests reserve the cores")
PULL_POLICY = Skip("CKV_K8S_15", "every image is pinned (a tag or a digest, never :latest: the config and the policy pack refuse it); "
                                 "IfNotPresent keeps multi-GB images cached on the node")  # fmt: skip
DIGEST = Skip("CKV_K8S_43", _tag_only_words)
COMMON = (CPU_LIMITS, PULL_POLICY, DIGEST)

# vLLM engines (infra/render/model_service.py engine_security explains each).
ENGINE = COMMON + (
    Skip("CKV_K8S_23", "the vLLM ROCm image runs as root: the shared weight and compile caches on NFS are root-owned"),
    Skip("CKV_K8S_40", "the vLLM ROCm image runs as root: the shared weight and compile caches on NFS are root-owned"),
    Skip("CKV_K8S_22", "vLLM, Triton and AITER write JIT artefacts and temp files across the image's filesystem"),
    Skip("CKV_K8S_31", "ROCm: seccomp Unconfined as AMD documents for vLLM (NUMA syscalls); see engine_security"),
    Skip("CKV_K8S_25", "ROCm multi-GPU pods add SYS_PTRACE (pidfd_getfd for GPU IPC handles); fabric pods add IPC_LOCK (RDMA memory registration)"),
    Skip("CKV_K8S_35", _secret_env_words("vLLM reads its key (VLLM_API_KEY) only from the environment or its command line; env keeps "
                                         "keys off the command line (the Hugging Face token and S3 keys could be files: accepted as env)")),
)  # fmt: skip
# Jobs running the vLLM image to download weights into the root-owned cache.
PREFETCH = COMMON + (
    Skip("CKV_K8S_23", "writes the root-owned shared weight cache with the vLLM image (runs as root)"),
    Skip("CKV_K8S_40", "writes the root-owned shared weight cache with the vLLM image (runs as root)"),
    Skip("CKV_K8S_22", "the Hugging Face and S3 clients write temp files and their caches"),
    Skip("CKV_K8S_35", _secret_env_words("huggingface_hub reads HF_TOKEN from the environment (or a token file) and the S3 client its "
                                         "keys from the environment (or a credentials file): accepted as env, one run, no shell")),
)  # fmt: skip
# Privileged node agents (kube-system): they change node settings or attach NICs.
_AGENT = "a node agent: writes /proc/sys (NUMA balancing) or attaches host NICs (Multus); privileged by purpose"
NODE_AGENT = COMMON + tuple(Skip(check, _AGENT) for check in (
    "CKV_K8S_16", "CKV_K8S_20", "CKV_K8S_23", "CKV_K8S_40", "CKV_K8S_22", "CKV_K8S_31", "CKV_K8S_37", "CKV_K8S_28", "CKV_K8S_29")) + (
    Skip("CKV_K8S_8", _no_probe("livenessProbe", "a one-shot node setting then sleep, or the Multus daemon: nothing to probe")),
    Skip("CKV_K8S_38", "Multus reads pod annotations from the API with its service account token"),
)  # fmt: skip
# Multus (thick plugin), as upstream's deployments/multus-daemonset-thick.yml renders it.
MULTUS = NODE_AGENT + (
    Skip("CKV_K8S_17", "Multus attaches host NICs to pods: it runs in the host PID namespace (upstream manifest)"),
    Skip("CKV_K8S_19", "Multus configures pod networking from the host network namespace (upstream manifest)"),
    Skip("CKV_K8S_13", "upstream's resources for the Multus daemon are kept; it is a node agent, not a workload"),
    Skip("CKV_K8S_9", _no_probe("readinessProbe", "the Multus daemon serves the CNI socket on the host: nothing to probe over the pod network")),
)  # fmt: skip
MULTUS_RBAC = (Skip("CKV_K8S_49", "Multus's upstream ClusterRole: every verb on its own API group (k8s.cni.cncf.io) only"),)
ROUTER = COMMON + (
    Skip("CKV_K8S_8", _no_probe("livenessProbe", "the registrar sidecar serves nothing to probe")),
    Skip("CKV_K8S_9", _no_probe("readinessProbe", "the registrar sidecar serves nothing to probe")),
)
# Pods that watch the API with their token (endpoint pickers, P/D routers' service discovery).
API_WATCHER = COMMON + (Skip("CKV_K8S_38", "watches pods / EndpointSlices with the service account token (a read-only, namespaced Role)"),)
PAUSE = COMMON + (
    Skip("CKV_K8S_8", _no_probe("livenessProbe", "a pause container that only holds the pre-pulled image: nothing to probe")),
    Skip("CKV_K8S_9", _no_probe("readinessProbe", "a pause container that only holds the pre-pulled image: nothing to probe")),
)
ALL_FAMILIES = (ENGINE, PREFETCH, NODE_AGENT, MULTUS, MULTUS_RBAC, ROUTER, API_WATCHER, PAUSE)


def annotations(obj: dict, skips: tuple[Skip, ...]) -> dict[str, str]:
    """checkov skip annotations for the skips whose claim holds on `obj`, one per check (first
    reason of a check wins, order kept)."""
    seen: dict[str, str] = {}
    for skip in skips:
        if skip.check not in seen and CLAIMS[skip.check](obj):
            seen[skip.check] = skip.text(obj)
    return {f"{ANNOTATION_PREFIX}{i}": f"{check}={reason}" for i, (check, reason) in enumerate(seen.items(), start=1)}


def accept(obj: dict[str, Any], skips: tuple[Skip, ...]) -> dict[str, Any]:
    """`obj` with the skip annotations that apply to it added to its metadata (returned for chaining)."""
    meta = obj.setdefault("metadata", {})
    meta["annotations"] = {**meta.get("annotations", {}), **annotations(obj, skips)}
    return obj


def skips_on(obj: dict) -> list[tuple[str, str]]:
    return [tuple(v.split("=", 1)) for k, v in ((obj.get("metadata") or {}).get("annotations") or {}).items()
            if k.startswith(ANNOTATION_PREFIX)]  # type: ignore[misc]  # fmt: skip


def contradictions(obj: dict) -> list[str]:
    """Each skip on `obj` that the object does not bear out: an unknown check, a claim that does not
    hold (the skip excuses nothing), or words no longer what the object says."""
    out = []
    for check, reason in skips_on(obj):
        if check not in CLAIMS:
            out.append(f"{check}: no claim known for this check")
            continue
        if not CLAIMS[check](obj):
            out.append(f"{check}: the object does not have what the check flags; the skip excuses nothing")
            continue
        worded = {s.text(obj) for family in ALL_FAMILIES for s in family if s.check == check}
        if reason not in worded:
            out.append(f"{check}: reason {reason!r} is not what the object says ({' | '.join(sorted(worded))})")
    return out
