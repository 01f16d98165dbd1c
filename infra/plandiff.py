"""Diff two offline Plans into a Markdown report fit for a pull-request comment.

What reviewers need first is what would be destroyed: a change to a field the provider cannot
update in place replaces the resource (delete + create), and for a cluster, a node pool, a VPC or
the NFS share that means downtime or lost data. Those are listed loudly at the top, using the
providers' real replace-on-change fields; everything else follows as added / removed / changed
with each input path's old → new value.

A replacement also replaces whatever points at the replaced resource through a replace-on-change
input (a node pool's `clusterId`, the NFS share's `vpcId`), even though that input's text does not
change in the plan; those are followed through the recorded input dependencies and flagged too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import ConfigDict, StringConstraints

from infra.errors import json_kind
from infra.front_door import endpoint_changes
from infra.json_shapes import Shape, ShapeError, expected, validate
from infra.offline import money, offline_id

# Resource types whose loss costs data, capacity or a long rebuild.
STATEFUL_TYPES = {
    "digitalocean:index/kubernetesCluster:KubernetesCluster": "DOKS cluster",
    "digitalocean:index/kubernetesNodePool:KubernetesNodePool": "node pool",
    "digitalocean:index/vpc:Vpc": "VPC",
    "digitalocean:index/nfs:Nfs": "NFS share",
    "kubernetes:core/v1:PersistentVolumeClaim": "PersistentVolumeClaim",
    "kubernetes:core/v1:PersistentVolume": "PersistentVolume",
}

# Input paths (engine camelCase, dotted; a trailing ".*" matches the subtree) whose change the
# provider cannot apply in place. Sources: pulumi-digitalocean / terraform-provider-digitalocean
# schemas (ForceNew), DOKS behaviour for the default node pool, Kubernetes API immutability.
REPLACE_ON_CHANGE: dict[str, list[str]] = {
    "digitalocean:index/kubernetesCluster:KubernetesCluster": [
        "region",
        "vpcUuid",
        "clusterSubnet",
        "serviceSubnet",
        "nodePool.size",  # the default pool's size: DOKS replaces the whole cluster
    ],
    "digitalocean:index/kubernetesNodePool:KubernetesNodePool": ["clusterId", "size", "gpuPartitionMode"],
    "digitalocean:index/vpc:Vpc": ["region", "ipRange"],
    "digitalocean:index/nfs:Nfs": ["region", "vpcId"],
    "kubernetes:core/v1:PersistentVolume": ["spec.nfs.*", "spec.accessModes.*", "spec.storageClassName"],
    # spec.resources: a static claim cannot be resized; the request fails or replaces the claim.
    "kubernetes:core/v1:PersistentVolumeClaim": [
        "spec.accessModes.*", "spec.storageClassName", "spec.volumeName", "spec.selector.*", "spec.resources.*",
    ],
    "kubernetes:apps/v1:Deployment": ["spec.selector.*"],
    "kubernetes:apps/v1:DaemonSet": ["spec.selector.*"],
    "kubernetes:batch/v1:Job": ["spec.template.*"],
    "kubernetes:core/v1:Namespace": ["metadata.name"],
}

# Values that may change without the field changing meaningfully (mock ids, engine bookkeeping).
_IGNORED_INPUT_KEYS = {"__defaults"}


@dataclass
class ResourceChange:
    key: tuple[str, str]
    changes: list[tuple[str, Any, Any]] = field(default_factory=list)
    option_changes: list[tuple[str, Any, Any]] = field(default_factory=list)
    replace_paths: list[str] = field(default_factory=list)
    # "replaced with its DOKS cluster `prod-doks`": replaced because a resource it references is.
    replaced_with: list[str] = field(default_factory=list)

    @property
    def replaced(self) -> bool:
        return bool(self.replace_paths or self.replaced_with)


@dataclass
class PlanDiff:
    stack: str
    added: list[dict]
    removed: list[dict]
    changed: list[ResourceChange]
    model_changes: list[tuple[str, Any, Any]]
    cost_change: tuple[Any, Any] | None
    endpoint_changes: list[tuple[str, Any, Any]] = field(default_factory=list)
    rollout_changes: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # model, before, after
    old_index: dict = field(default_factory=dict, repr=False)
    new_index: dict = field(default_factory=dict, repr=False)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.model_changes or self.cost_change
                    or self.endpoint_changes or self.rollout_changes)

    def dangerous(self) -> list[str]:
        """One line per replacement or deletion of a stateful or protected resource."""
        old_index, new_index = self.old_index, self.new_index
        out = []
        for res in self.removed:
            if res["type"] in STATEFUL_TYPES or res["options"].get("protect"):
                why = "protected" if res["options"].get("protect") else STATEFUL_TYPES[res["type"]]
                out.append(f"**DELETE** {_label(res)} ({why})")
        for ch in self.changed:
            if ch.replaced:
                res = new_index[ch.key]
                kind = STATEFUL_TYPES.get(res["type"], res["type"].rsplit(":", 1)[-1])
                protected = " — protected: `pulumi up` will refuse until protect is lifted" if old_index[ch.key]["options"].get("protect") else ""
                out.append(f"**REPLACE** {_label(res)} ({kind}) {_replace_reason(ch)}{protected}")
        return out


def _replace_reason(ch: ResourceChange) -> str:
    reasons = [f"because of {', '.join(f'`{p}`' for p in ch.replace_paths)}"] if ch.replace_paths else []
    return "; ".join(reasons + ch.replaced_with)


def _label(res: dict) -> str:
    return f"`{res['name']}` ({res['type']})"


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested inputs → {"spec.template.spec.containers[0].image": ...}."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = {}
        for k, v in value.items():
            if k in _IGNORED_INPUT_KEYS:
                continue
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list):
        if not value and prefix:
            out[prefix] = []
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


def _matches(path: str, pattern: str) -> bool:
    bare = path.split("[", 1)[0] if "[" in path.split(".")[0] else path
    norm = ".".join(part.split("[", 1)[0] for part in bare.split("."))
    if pattern.endswith(".*"):
        base = pattern[:-2]
        return norm == base or norm.startswith(base + ".")
    return norm == pattern


def _replace_paths(res_type: str, changed_paths: list[str]) -> list[str]:
    patterns = REPLACE_ON_CHANGE.get(res_type, [])
    hits = []
    for pattern in patterns:
        if any(_matches(p, pattern) for p in changed_paths):
            hits.append(pattern.removesuffix(".*"))
    return hits


def _input_sources(res: dict, pattern: str) -> set[str]:
    """The resources (`type::name`) the inputs under a replace-on-change `pattern` come from.

    The plan's input values are the mocks' resolved ids, which look unchanged when the resource
    behind them is replaced; the recorded input dependencies say where they come from. Plans
    written before those were recorded fall back to matching a mock id against `dependsOn`.
    """
    deps = res.get("inputDependencies")
    if deps is not None:
        return set(deps.get(pattern.split(".", 1)[0].split("[", 1)[0], []))
    values = {v for p, v in flatten(res["inputs"]).items() if _matches(p, pattern)}
    return {d for d in res["options"].get("dependsOn", []) if offline_id(d.split("::", 1)[-1]) in values}


def follow_replacements(changed: list[ResourceChange], old_index: dict, new_index: dict) -> list[ResourceChange]:
    """`changed` plus every kept resource replaced because something it references is, transitively
    (a VPC replaced → its cluster → the cluster's node pools), sorted by key."""
    by_key = {ch.key: ch for ch in changed}
    replaced = {ch.key for ch in changed if ch.replaced}
    grew = True
    while grew:
        grew = False
        for key in sorted(new_index.keys() & old_index.keys()):
            if key in replaced:
                continue
            res = new_index[key]
            for pattern in REPLACE_ON_CHANGE.get(key[0], []):
                sources = sorted(s for s in _input_sources(res, pattern) if tuple(s.split("::", 1)) in replaced)
                if not sources:
                    continue
                dep_type, dep_name = sources[0].split("::", 1)
                kind = STATEFUL_TYPES.get(dep_type, dep_type.rsplit(":", 1)[-1])
                ch = by_key.setdefault(key, ResourceChange(key))
                ch.replaced_with.append(f"replaced with its {kind} `{dep_name}` (`{pattern.removesuffix('.*')}`)")
                replaced.add(key)
                grew = True
                break
    return sorted(by_key.values(), key=lambda ch: ch.key)


def _version_lowered(old: Any, new: Any) -> bool:
    def key(v: Any) -> tuple:
        nums = []
        for part in str(v).split("-")[0].split("."):
            nums.append(int(part) if part.isdigit() else 0)
        return tuple(nums)

    return old is not None and new is not None and key(new) < key(old)


def chart_resources(plan: dict, skip: set[str] = frozenset()) -> list[dict]:
    """The templated objects of a plan's Helm releases as resource records, so a chart bump or a
    values change diffs object by object: type `chart:<release>:<Kind>` (`chart:<release>:hook:Job`,
    `chart:<release>:crd:CustomResourceDefinition` for hooks and CRDs), name `<namespace>/<name>`.
    Releases named in `skip` (templated on one side only) are left out."""
    out = []
    for entry in plan.get("charts") or []:
        if entry.get("resource") in skip:
            continue
        for part in entry.get("parts") or []:
            obj = part["object"]
            meta = obj.get("metadata") or {}
            role = "" if part["part"] == "template" else f"{part['part']}:"
            out.append({
                "type": f"chart:{entry['release']}:{role}{obj.get('kind')}",
                "name": f"{meta.get('namespace') or 'cluster'}/{meta.get('name')}",
                "inputs": obj, "options": {}, "parent": entry.get("resource"), "custom": True,
            })
    return out


def _templated_on_one_side(old: dict, new: dict) -> set[str]:
    """Releases in both plans but templated in one only (an archive present on one side): their
    objects are not compared, or every one would show as added or removed."""
    def templated(plan: dict) -> dict[str, bool]:
        return {e["resource"]: bool(e.get("templated")) for e in plan.get("charts") or []}

    a, b = templated(old), templated(new)
    return {name for name in a.keys() & b.keys() if a[name] != b[name]}


def diff_plans(old: dict, new: dict) -> PlanDiff:
    """Compare two Plan dicts (as written by `infra plan --json`), chart objects included."""
    skip = _templated_on_one_side(old, new)
    old_index = {(r["type"], r["name"]): r for r in old.get("resources", []) + chart_resources(old, skip)}
    new_index = {(r["type"], r["name"]): r for r in new.get("resources", []) + chart_resources(new, skip)}
    added = [new_index[k] for k in sorted(new_index.keys() - old_index.keys())]
    removed = [old_index[k] for k in sorted(old_index.keys() - new_index.keys())]
    changed = []
    for key in sorted(old_index.keys() & new_index.keys()):
        a, b = old_index[key], new_index[key]
        fa, fb = flatten(a["inputs"]), flatten(b["inputs"])
        changes = [(p, fa.get(p), fb.get(p)) for p in sorted(fa.keys() | fb.keys()) if fa.get(p) != fb.get(p)]
        oa, ob = flatten(a["options"]), flatten(b["options"])
        option_changes = [(p, oa.get(p), ob.get(p)) for p in sorted(oa.keys() | ob.keys()) if oa.get(p) != ob.get(p)]
        if a.get("parent") != b.get("parent"):
            option_changes.append(("parent", a.get("parent"), b.get("parent")))
        if not changes and not option_changes:
            continue
        # The engine keeps the old value of an ignored path, so a change there replaces nothing.
        ignored = b["options"].get("ignoreChanges", [])
        paths = [p for p, _, _ in changes if not any(_matches(p, f"{i}.*") for i in ignored)]
        replace = _replace_paths(key[0], paths)
        if (
            key[0] == "digitalocean:index/kubernetesCluster:KubernetesCluster"
            and "version" not in ignored
            and _version_lowered(fa.get("version"), fb.get("version"))
        ):
            replace.append("version (lowered)")
        changed.append(ResourceChange(key, changes, option_changes, replace))
    changed = follow_replacements(changed, old_index, new_index)
    model_changes = []
    rollout_changes: list[tuple[str, str | None, str | None]] = []
    om = {m["name"]: m for m in old.get("models", [])}
    nm = {m["name"]: m for m in new.get("models", [])}
    for name in sorted(om.keys() | nm.keys()):
        a, b = om.get(name), nm.get(name)
        la = a["layout"]["name"] if a else None
        lb = b["layout"]["name"] if b else None
        if a is None or b is None or flatten(a["layout"]) != flatten(b["layout"]):
            model_changes.append((name, la, lb))
        ra, rb = rollout_words(a), rollout_words(b)
        if ra != rb:
            rollout_changes.append((name, ra, rb))
    oc, nc = old.get("cost", {}), new.get("cost", {})
    cost_key = ("usd_per_month_min", "usd_per_month_max")
    cost_change = None
    if tuple(oc.get(k) for k in cost_key) != tuple(nc.get(k) for k in cost_key):
        cost_change = (tuple(oc.get(k) for k in cost_key), tuple(nc.get(k) for k in cost_key))
    stack = new.get("stack") or old.get("stack", "?")
    endpoint = endpoint_changes(old.get("front_door") or None, new.get("front_door") or None)
    return PlanDiff(stack, added, removed, changed, model_changes, cost_change, endpoint, rollout_changes, old_index, new_index)


def rollout_words(model: dict | None) -> str | None:
    """A model's rollout in one line for the diff: both variants, the split, the cost of both and
    what `promote` would remove (None: no rollout)."""
    r = (model or {}).get("rollout")
    if not r:
        return None
    cand = r["candidate"]
    cost = "" if r.get("usd_per_hour_extra") is None else f", +{money(r['usd_per_hour_extra'])}/h"
    removes = "; promote removes " + ", ".join(r["promote_removes"]) if r.get("promote_removes") else f"; promote → {r['next_step']} %"
    return (
        f"{model['layout']['name']} ×{r['current_replicas']} + candidate {cand['layout']['name']} ×{cand['replicas']} at "
        f"{r['weight_percent']} % (realised {r['realised_percent']:g} %), +{r['extra_nodes']} node(s){cost}{removes}"
    )


def _fmt(value: Any, limit: int = 80) -> str:
    if value is None:
        return "∅"
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return f"`{text[: limit - 1]}…`" if len(text) > limit else f"`{text}`"


def _cost_range(side: tuple[Any, Any], absent: str) -> str:
    """A plan without a cost (the stack does not exist on that side) reads as such, not as `$None`."""
    low, high = side
    return absent if low is None and high is None else f"{money(low)}–{money(high)}"


def render_markdown(diff: PlanDiff, *, max_paths: int = 25) -> str:
    """The PR comment: danger first, then models, cost, and the resource changes."""
    lines = [f"### Offline plan diff — stack `{diff.stack}`", ""]
    if diff.empty:
        lines.append("No changes.")
        return "\n".join(lines) + "\n"
    danger = diff.dangerous()
    counts = f"**{len(diff.added)}** to add, **{len(diff.changed)}** to change, **{len(diff.removed)}** to remove"
    if danger:
        lines += ["> [!CAUTION]", f"> **{len(danger)} stateful or protected resource(s) would be replaced or deleted.**", ""]
        lines += ["#### Replacements and deletions", ""] + [f"- {d}" for d in danger] + [""]
    if diff.endpoint_changes:
        lines += ["> [!WARNING]", "> **Endpoint change: clients must follow the front door** (router kind, URL or models).", ""]
        lines += ["#### Front door", "", "| field | before | after |", "|---|---|---|"]
        lines += [f"| {f} | {_fmt(a)} | {_fmt(b)} |" for f, a, b in diff.endpoint_changes]
        lines.append("")
    lines += [counts, ""]
    if diff.model_changes:
        lines += ["#### Model layouts", "", "| model | before | after |", "|---|---|---|"]
        lines += [f"| {n} | {_fmt(a)} | {_fmt(b)} |" for n, a, b in diff.model_changes]
        lines.append("")
    if diff.rollout_changes:
        lines += ["#### Layout rollouts", "", "| model | before | after |", "|---|---|---|"]
        lines += [f"| {n} | {_fmt(a, 240)} | {_fmt(b, 240)} |" for n, a, b in diff.rollout_changes]
        lines.append("")
    if diff.cost_change:
        before, after = diff.cost_change
        lines += [f"**Monthly cost**: {_cost_range(before, '— (new stack)')} → {_cost_range(after, '— (stack removed)')}", ""]
    if diff.added:
        lines += ["#### Added", ""] + [f"- {_label(r)}" for r in diff.added] + [""]
    if diff.removed:
        lines += ["#### Removed", ""] + [f"- {_label(r)}" for r in diff.removed] + [""]
    if diff.changed:
        lines += ["#### Changed", ""]
        for ch in diff.changed:
            res = diff.new_index[ch.key]
            tag = " **(replace)**" if ch.replaced else ""
            lines.append(f"<details><summary>{res['name']} ({res['type']}){tag}</summary>")
            lines.append("")
            for why in ch.replaced_with:
                lines += [f"{why[0].upper()}{why[1:]}.", ""]
            rows = [(p, a, b) for p, a, b in ch.changes] + [(f"options.{p}", a, b) for p, a, b in ch.option_changes]
            if rows:
                lines += ["| path | before | after |", "|---|---|---|"]
                lines += [f"| `{p}` | {_fmt(a)} | {_fmt(b)} |" for p, a, b in rows[:max_paths]]
                if len(rows) > max_paths:
                    lines.append(f"| … {len(rows) - max_paths} more | | |")
                lines.append("")
            lines += ["</details>", ""]
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- input validation

_PLAN_HINT = "write plans with `infra plan STACK --json FILE`"
_MAX_SHAPE_PROBLEMS = 5


NonBlank = Annotated[str, StringConstraints(pattern=r"\S")]


class PlanOptions(Shape):
    dependsOn: list[Any] | None = expected("a list", None)  # noqa: N815 - the engine's key
    ignoreChanges: list[Any] | None = expected("a list", None)  # noqa: N815


class PlanResource(Shape):
    model_config = ConfigDict(json_schema_extra={"expected": "an object with type, name, inputs and options"})

    type: NonBlank = expected("a resource type token")
    name: NonBlank = expected("a resource name")
    inputs: dict[str, Any] = expected("an object")
    options: PlanOptions = expected("an object")
    parent: str | None = expected("a resource name or null", None)
    inputDependencies: dict[str, Any] | None = expected("an object", None)  # noqa: N815


class PlanLayout(Shape):
    name: NonBlank = expected("a layout name")


class PlanModel(Shape):
    model_config = ConfigDict(json_schema_extra={"expected": "an object with name and layout"})

    name: NonBlank = expected("a model name")
    layout: PlanLayout = expected("an object")


class PlanFile(Shape):
    """What `diff_plans` reads of a plan `infra plan --json` writes (other keys are ignored):
    `stack` and `project` names and `resources`, each with a `type`, `name`, `inputs` and
    `options`; `models` (each with a `name` and a `layout` holding its `name`) and `cost` are
    optional."""

    stack: NonBlank = expected("a name")
    project: NonBlank = expected("a name")
    resources: list[PlanResource] = expected("a list of resources")
    models: list[PlanModel] | None = expected("a list", None)
    cost: dict[str, Any] | None = expected("an object", None)
    front_door: dict[str, Any] | None = expected("an object", None)


def plan_shape_problems(data: Any) -> list[tuple[str, str]]:
    """(where, what is wrong) for every way `data` is not a `PlanFile`, plus resources listed
    twice. Empty when the plan can be diffed."""
    if not isinstance(data, dict):
        return [("", f"the plan is {json_kind(data)}, expected an object with stack, project and resources")]
    try:
        validate(PlanFile, data)
        problems: list[tuple[str, str]] = []
    except ShapeError as err:
        problems = list(err.problems)
    seen: set[tuple[str, str]] = set()
    for i, res in enumerate(data["resources"] if isinstance(data.get("resources"), list) else []):
        if not isinstance(res, dict) or not all(isinstance(res.get(k), str) for k in ("type", "name")):
            continue
        key = (res["type"], res["name"])
        if key in seen:
            problems.append((f"resources[{i}]", f"{res['type']} `{res['name']}` appears twice"))
        seen.add(key)
    return problems


def validate_plan(data: Any, source: str) -> dict:
    """`data` if it is a plan `diff_plans` can compare; otherwise one UserError naming `source`."""
    from infra.errors import Problem, UserError

    problems = plan_shape_problems(data)
    if not problems:
        return data
    if len(problems) == 1:
        where, what = problems[0]
        raise UserError(f"{source}: not an offline plan: {where + ' ' if where else ''}{what}; {_PLAN_HINT}")
    shown = [Problem(where, what) for where, what in problems[:_MAX_SHAPE_PROBLEMS]]
    if len(problems) > _MAX_SHAPE_PROBLEMS:
        shown.append(Problem("", f"… and {len(problems) - _MAX_SHAPE_PROBLEMS} more"))
    raise UserError(shown, source=f"{source}: not an offline plan ({_PLAN_HINT})")
