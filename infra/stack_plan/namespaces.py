"""The Kubernetes namespace the stack's serving objects live in.
"""

from __future__ import annotations

INFERENCE_NAMESPACE = "inference"
