"""Security contexts at the Pod Security `restricted` level, for every container that needs no more.

restricted (kubernetes.io/docs/concepts/security/pod-security-standards): non-root, every
capability dropped, no privilege escalation, seccomp RuntimeDefault; plus a read-only root
filesystem where the program writes nothing outside its volumes. Engines need more and say why
(infra/render/model_service.py `engine_security`).
"""

from __future__ import annotations

NOBODY = 65534


def restricted_container(*, uid: int = NOBODY, read_only: bool = True) -> dict:
    ctx: dict = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if read_only:
        ctx["readOnlyRootFilesystem"] = True
    return ctx


def restricted_pod(*, uid: int = NOBODY) -> dict:
    return {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "seccompProfile": {"type": "RuntimeDefault"}}


def hardened_root_container() -> dict:
    """For containers that must stay root (they write root-owned shared caches): still no
    capabilities, no privilege escalation, seccomp RuntimeDefault."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
