"""Identity: every object the cluster will hold has its own (group, kind, namespace, name).

Two objects with one identity are one object in the cluster: the second apply overwrites the
first (a model named `router` replaces the front door's Service), and `infra plan --out` would
write one file over the other. Objects controllers and charts create (implied.py) count too.
"""

from __future__ import annotations

from infra.errors import Problem
from infra.invariants.implied import is_implied
from infra.invariants.keypaths import MODEL_LABEL, KeyPaths
from infra.invariants.objects import describe, identity, labels


def _blame(paths: KeyPaths, objs: list[dict]) -> str:
    """The key to change: the model whose own name is the clashing name, else the last model
    involved (models come after the front door in the file), else the front door."""
    name = identity(objs[0])[3]
    index = paths.model_index(name)
    if index is not None:
        return paths.model(name, "name") or ""
    models = [m for m in (labels(o).get(MODEL_LABEL) for o in objs) if paths.model_index(m) is not None]
    if models:
        return paths.model(max(models, key=lambda m: paths.model_index(m) or 0), "name") or ""
    return paths.section("router")


def check_identity(objects: list[dict], paths: KeyPaths) -> list[Problem]:
    seen: dict[tuple, list[dict]] = {}
    for obj in objects:
        seen.setdefault(identity(obj), []).append(obj)
    problems = []
    for key, objs in sorted(seen.items()):
        if len(objs) < 2:
            continue
        owners = []
        for obj in objs:
            model = labels(obj).get(MODEL_LABEL)
            if is_implied(obj):
                owners.append(obj["metadata"]["annotations"]["inference-platform/implied"])
            elif model:
                owners.append(f"model {model!r}")
            else:
                owners.append("the front door" if key[2] else "the platform")
        problems.append(Problem(
            _blame(paths, objs),
            f"{describe(objs[0])} would be created {len(objs)} times ({'; '.join(owners)}): one would overwrite the "
            "other; choose another model name",
        ))
    return problems


def manifest_key(obj: dict) -> tuple[str, str, str]:
    """What `infra plan --out` names a file by (namespace, kind, name), case-insensitively."""
    group, kind, ns, name = identity(obj)
    return ns.lower(), f"{kind}.{group}".lower(), name.lower()
