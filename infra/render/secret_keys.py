"""The key names of a Secret whose values are Pulumi secrets, as an annotation the plan can read.

The offline plan records a Secret's `stringData` as one redacted value (the mock runtime marks the
whole map secret), so without this the plan would not know which keys a Secret holds and could not
check that every `secretKeyRef` and mounted `items[].key` names one (infra/invariants/kubelet.py).
Names only: a key's name is no secret (it is in every pod spec that reads it); its value never
leaves the Pulumi secret Output.
"""

from __future__ import annotations

from collections.abc import Iterable

KEYS_ANNOTATION = "inference-platform/keys"


def secret_keys_annotation(keys: Iterable[str]) -> dict[str, str]:
    """`{inference-platform/keys: "a,b"}` for a Secret holding keys `a` and `b`."""
    return {KEYS_ANNOTATION: ",".join(sorted(str(k) for k in keys))}


def with_keys(metadata: dict, keys: Iterable[str]) -> dict:
    """`metadata` with the key-names annotation added (a new dict; the rest kept)."""
    return {**metadata, "annotations": {**(metadata.get("annotations") or {}), **secret_keys_annotation(keys)}}
