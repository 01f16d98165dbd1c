"""`infra rollout promote|abort`: the stack-file edits that move a rollout, validated before writing.

Like `infra tune ingest --write` (infra/tuning/stackfile.py), the hand-written, commented stack file
is edited with ruamel.yaml's round-trip mode, and only one model's entry changes:

  promote   `rollout.weight` moves to the next of `rollout.steps`; from the last step the candidate
            becomes the model: its `layout` (and `image` / `extra_args` when the candidate sets
            them) replace the model's, and the `rollout:` block goes.
  abort     the `rollout:` block goes; the model's layout is untouched.

The new text is checked by the caller's `validate` (load the config and plan the stack) before the
file is replaced, so a promotion the stack cannot run writes nothing.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infra.errors import Problem, UserError
from infra.tuning.stackfile import MODELS_KEY, load_model_entry, render_key, value_span

PROMOTE, ABORT = "promote", "abort"
CANDIDATE_OVERRIDES = ("image", "extra_args")  # candidate keys that replace the model's on promotion


@dataclass(frozen=True)
class RolloutEdit:
    """What an edit did, for the command's report."""

    action: str  # promote | abort
    model: str
    before_weight: int | None
    after_weight: int | None  # None: the rollout block is gone
    promoted: bool  # the candidate became the model's layout
    removed: tuple[str, ...]  # what the next `pulumi up` deletes

    def summary(self) -> str:
        if self.action == ABORT:
            return f"{self.model}: rollout aborted at {self.before_weight} %; the candidate's engines go with the next `pulumi up`"
        if self.promoted:
            return (
                f"{self.model}: candidate promoted from {self.before_weight} % to the model's layout; the next `pulumi up` "
                "rolls the model's engines to it and removes the candidate's Deployment"
            )
        return f"{self.model}: candidate weight {self.before_weight} % → {self.after_weight} %"


def _rollout_block(path: Path, model: str, entry) -> dict:
    block = entry.get("rollout")
    if not isinstance(block, dict):
        raise UserError([Problem(f"{path}: models[{model}].rollout", "this model has no rollout; nothing to promote or abort")])
    return block


def edit_rollout(path: Path, model: str, action: str, validate: Callable[[str], None] | None = None) -> RolloutEdit:
    """Apply `action` to models[<model>].rollout in the stack file at `path`; return what changed."""
    yaml, data, entry = load_model_entry(path, model)
    block = _rollout_block(path, model, entry)
    steps = [int(s) for s in block.get("steps") or []]
    weight = int(block.get("weight")) if block.get("weight") is not None else None
    candidate_engines = f"Deployment {model}-engine-candidate"
    original = path.read_text(encoding="utf-8")
    later = [s for s in steps if weight is not None and s > weight]
    if action == PROMOTE and later:
        block["weight"] = later[0]  # one scalar: ruamel's round trip keeps every other line as it was
        buffer = io.StringIO()
        yaml.dump(data, buffer)
        text = buffer.getvalue()
        edit = RolloutEdit(PROMOTE, model, weight, later[0], False, ())
    elif action in (PROMOTE, ABORT):
        if entry.fa.flow_style():
            raise UserError([Problem(f"{path}: models[{model}]", "is written on one line; write it as a block to edit its rollout")])
        text = _splice_out_rollout(original, yaml, entry, path, model, promote=action == PROMOTE)
        edit = RolloutEdit(
            action, model, weight, None, action == PROMOTE,
            (candidate_engines, *([f"the {model} engines of the old layout (rolled to the candidate's)"] if action == PROMOTE else [])),
        )
    else:
        raise ValueError(f"unknown rollout action {action!r}")
    _check_only_model_changed(yaml, original, text, model)
    if validate is not None:
        validate(text)
    path.write_text(text, encoding="utf-8")
    return edit


def _splice_out_rollout(original: str, yaml, entry, path: Path, model: str, *, promote: bool) -> str:
    """Remove the `rollout:` lines; on promotion first put the candidate's layout (and image,
    extra_args) in place of the model's. Text splices at ruamel's line numbers, bottom up, so the
    comments between keys stay byte for byte (ruamel would drop those attached to removed values)."""
    lines = original.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement)
    start, end, _ = value_span(lines, entry, "rollout")
    edits.append((start, end, ""))
    if promote:
        candidate = entry["rollout"].get("candidate") or {}
        if "layout" not in candidate:
            raise UserError([Problem(f"{path}: models[{model}].rollout.candidate.layout", "missing; nothing to promote")])
        for key in ("layout", *CANDIDATE_OVERRIDES):
            if key not in candidate:
                continue
            if key in entry:
                s, e, col = value_span(lines, entry, key)
                edits.append((s, e, render_key(yaml, key, candidate[key], col)))
            else:  # a key the model did not set: after the layout
                s, e, col = value_span(lines, entry, "layout")
                edits.append((e, e, render_key(yaml, key, candidate[key], col)))
    for s, e, new in sorted(edits, key=lambda x: (x[0], x[1]), reverse=True):
        lines[s:e] = [new] if new else []
    return "".join(lines)


def _check_only_model_changed(yaml, before: str, after: str, model: str) -> None:
    """Everything but this model's entry must parse to the same data (a bug otherwise)."""
    old, new = yaml.load(before), yaml.load(after)
    for doc in (old, new):
        models = doc["config"][MODELS_KEY]
        for i, entry in enumerate(models):
            if isinstance(entry, dict) and entry.get("name") == model:
                models[i] = None
    if _plain(old) != _plain(new):
        raise AssertionError("editing the rollout changed other values in the stack file")


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
