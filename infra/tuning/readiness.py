"""Time-to-ready of a benchmarked layout, recorded in its results (issue 20).

The sweep Job and the layout's engine Deployment are applied together, land on the same node
(the Job prefers the engines' node) and run the same vLLM image, so the Job's first init
container starts when the engines' containers do: once the image is on the node. That init
container already waits until the headless Service resolves to every engine replica (only Ready
pods are published). It now also times that wait and writes the seconds to a small shared
volume; the benchmark client passes them on as `--metadata ready_seconds=<s>` next to
`weights_source=<huggingface|nfs|spaces>`. So `ready_seconds` is the slowest replica's container
start → Ready (image pull excluded, to within WAIT_POLL_SECONDS), the quantity the plan's load
model estimates. `infra tune ingest --write` keeps both in the layout's provenance, and the plan
prefers the measurement to the model when the stack reads weights from the same source.

No Kubernetes API access is needed (the Job keeps `automountServiceAccountToken: false`). A
wait that cannot be timed (the volume missing) only leaves `ready_seconds` empty.
"""

from __future__ import annotations

READY_FILE_DIR = "/bench-meta"
READY_FILE = f"{READY_FILE_DIR}/ready_seconds"
READY_ENV = "READY_SECONDS"
READY_MOUNT = {"name": "bench-meta", "mountPath": READY_FILE_DIR}
READY_VOLUME = {"name": "bench-meta", "emptyDir": {"sizeLimit": "1Mi"}}
WAIT_POLL_SECONDS = 5


def weights_source_of(has_spaces: bool, has_cache: bool) -> str:
    """The bench engines' weight source, as Provenance.weights_source names it."""
    return "spaces" if has_spaces else "nfs" if has_cache else "huggingface"


def timed_wait(check: str) -> str:
    """POSIX sh: poll `check` until it succeeds, then write the seconds it took to READY_FILE."""
    return (
        "started=$(date +%s); "
        f"until {check}; do sleep {WAIT_POLL_SECONDS}; done; "
        f"echo $(( $(date +%s) - started )) > {READY_FILE} || true"
    )


def ready_seconds_value(raw: str | None) -> float | None:
    """`--metadata ready_seconds=...` as a number of seconds, None when not recorded."""
    if raw is None or not str(raw).strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if value > 0 else None
