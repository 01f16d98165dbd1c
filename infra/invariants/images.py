"""Every image the plan runs that is pinned by tag only, from the rendered objects (issue 35).

A tag can be moved under a running stack; a digest cannot. The note lists every container image of
every pod template the plan renders — the engines and the router, and also the client proxy, the
node-tuning agent, the pre-pull pause container, the endpoint pickers, chart workloads when
templated — so the checkov skip for CKV_K8S_43 (infra/render/scan_exceptions.py) can say truly that
prod's plan names each one. The note used to be built from the model and router images alone and
left nginx-unprivileged, busybox and pause unsaid.
"""

from __future__ import annotations

from infra.invariants.objects import all_pod_templates


def is_digest_pinned(image: str) -> bool:
    return "@sha256:" in image


def tag_only_images(objects: list[dict]) -> list[str]:
    """Sorted, unique: every container (and init container) image without a digest."""
    images = {str(c.get("image")) for t in all_pod_templates(objects) for c in t.containers() if c.get("image")}
    return sorted(i for i in images if not is_digest_pinned(i))


def tag_only_image_notes(environment: str, objects: list[dict]) -> list[str]:
    """prod: the images pinned by tag only, and how to pin the ones a stack key sets."""
    if environment != "prod":
        return []
    tag_only = tag_only_images(objects)
    if not tag_only:
        return []
    return [f"prod: images pinned by tag only: {', '.join(tag_only)}; pin by digest with models[].image / router.image = "
            "<image>@sha256:<digest> (the others are pinned in infra/catalog/versions.py)"]
