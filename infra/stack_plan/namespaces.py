"""The Kubernetes namespaces the stack's serving objects live in (issue 30, least privilege).

`inference` (Pod Security `restricted`): the front door — the router, or the gateway with its
proxies and policies — and the image pre-pull DaemonSets. `inference-engines` (Pod Security
`privileged`, audit/warn `baseline`): the engines and everything they reference by namespace (their
Secrets, the weight cache's claim, fabric NIC attachments, ScaledObjects, P/D routers, prefetch and
warm-up Jobs, rollout candidates) and, with the gateway, the InferencePools, endpoint pickers and
HTTPRoutes, because an InferencePool selects pods of its own namespace only. docs/security.md.
"""

from __future__ import annotations

from infra.render.model_service import ENGINES_NAMESPACE, NAMESPACE

INFERENCE_NAMESPACE = NAMESPACE

__all__ = ["ENGINES_NAMESPACE", "INFERENCE_NAMESPACE"]
