"""Edit `stacks/Pulumi.<stack>.yaml` in place: record a measured layout with its evidence.

The stack file is hand-written and commented, so it is edited with ruamel.yaml's round-trip mode:
comments, key order, quoting and indentation survive, and the only lines that change are the
model's `layout:` (from `auto` or an older explicit layout to the measured one, with a
`provenance:` block). `pulumi up` then deploys the measured winner, and a reviewer sees in the
diff what was measured, when, with which vLLM, and how it compared with the planner.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from infra.domain import LAYOUT_KEYS, PROVENANCE_KEYS, Provenance
from infra.errors import Problem, UserError, yaml_error_line

PROJECT = "inference-platform"
MODELS_KEY = f"{PROJECT}:models"


def provenance_yaml(provenance: Provenance) -> CommentedMap:
    """The `provenance:` block as the stack file writes it: every key (None as an explicit
    null), strings quoted so a date never reads back as a YAML timestamp, SLO and workload on
    one line as the stack files write them."""
    p = provenance
    block = CommentedMap()
    block["measured_at"] = _quoted(p.measured_at)
    block["vllm_version"] = _quoted(p.vllm_version)
    block["image"] = _quoted(p.image)
    block["measured_goodput_rps"] = None if p.measured_goodput_rps is None else round(float(p.measured_goodput_rps), 3)
    block["predicted_goodput_rps"] = None if p.predicted_goodput_rps is None else round(float(p.predicted_goodput_rps), 3)
    block["source_results"] = CommentedSeq(str(s) for s in p.source_results)
    block["slo"] = None if p.slo is None else _flow({"ttft_p90_ms": _num(p.slo.ttft_p90_ms), "tpot_p90_ms": _num(p.slo.tpot_p90_ms)})
    block["workload"] = (
        None
        if p.workload is None
        else _flow(_workload_record(p.workload))
    )
    block["gpu"] = _quoted(p.gpu)
    block["ready_seconds"] = None if p.ready_seconds is None else round(float(p.ready_seconds))
    block["weights_source"] = _quoted(p.weights_source)
    assert tuple(block) == PROVENANCE_KEYS, "provenance_yaml must write every Provenance field"
    return block


def _workload_record(w) -> dict:
    """Token counts, plus the sessions of a multi-turn replay when it was one."""
    out = {"input_tokens": w.input_tokens, "output_tokens": w.output_tokens}
    if w.turns_per_session is not None:
        out |= {"turns_per_session": w.turns_per_session, "think_time_s": _num(w.think_time_s)}
    return out


def _flow(values: dict) -> CommentedMap:
    """A one-line `{a: 1, b: 2}` mapping, as the stack files write slo and workload."""
    block = CommentedMap(values)
    block.fa.set_flow_style()
    return block


def _num(value: float):
    """2000.0 → 2000: SLOs read back as the stack file writes them."""
    return int(value) if float(value).is_integer() else float(value)


def stack_file_path(stack: str, stacks_dir: Path | None = None) -> Path:
    """`stacks/Pulumi.<stack>.yaml` of the project around the cwd (or under `stacks_dir`)."""
    if stacks_dir is None:
        from infra.project import project_root

        stacks_dir = project_root() / "stacks"
    base = stacks_dir
    return base / f"Pulumi.{stack}.yaml"


def read_model_entry(path: Path, model: str) -> dict:
    """The raw `inference-platform:models[]` entry named `model` as plain Python data."""
    _, _, entry = _load_model(path, model)
    return _plain(entry)


def write_measured_layout(
    path: Path, model: str, layout: dict, provenance: Provenance, validate: Callable[[str], None] | None = None
) -> str:
    """Set models[<model>].layout to `layout` plus `provenance`; write the file; return its new text.

    `layout` holds keys from LAYOUT_KEYS (unknown keys are a bug in the caller). Everything else
    in the file is left exactly as it was. `validate` sees the new text before it is written and
    raises (a UserError) to write nothing: a layout from a result file may be one the stack cannot run.
    """
    unknown = set(layout) - set(LAYOUT_KEYS)
    if unknown:
        raise ValueError(f"not layout keys: {sorted(unknown)}")
    yaml, data, entry = _load_model(path, model)
    mapping = CommentedMap()
    for key in LAYOUT_KEYS:
        if key in layout:
            value = layout[key]
            mapping[key] = _quoted(value) if isinstance(value, str) else value
    mapping["provenance"] = provenance_yaml(provenance)
    original = path.read_text(encoding="utf-8")
    if entry.fa.flow_style():
        # `- {name: x, layout: auto, ...}` on one line: no lines to splice, let ruamel re-emit it.
        entry["layout"] = mapping
        text = _dump(yaml, data)
    else:
        text = _splice_layout(original, yaml, entry, mapping)
    _check_only_layout_changed(yaml, original, text, model, mapping)
    if validate is not None:
        validate(text)
    path.write_text(text, encoding="utf-8")
    return text


def _splice_layout(original: str, yaml: YAML, entry: CommentedMap, mapping: CommentedMap) -> str:
    """Replace the lines of the old `layout:` value with the new block; keep every other line.

    ruamel attaches comment lines that follow a value to that value, so replacing the value in
    the round-trip tree would drop the comment that introduces the next key. Splicing text at
    the line numbers ruamel reports keeps those comments byte for byte.
    """
    lines = original.splitlines(keepends=True)
    key_line, end, key_col = value_span(lines, entry, "layout")
    block = CommentedMap()
    block["layout"] = mapping
    block.yaml_add_eol_comment("measured winner, written by `infra tune ingest --write`", "layout")
    rendered = _dump(yaml, block)
    new = "".join(" " * key_col + line if line.strip() else line for line in rendered.splitlines(keepends=True))
    return "".join(lines[:key_line]) + new + "".join(lines[end:])


def value_span(lines: list[str], entry: CommentedMap, key: str) -> tuple[int, int, int]:
    """(first line, line after the last, column) of `key` and its value in a block-style entry.

    Blank and comment lines at the end of the value introduce what follows, so they are not part
    of it (replacing or removing the span keeps them)."""
    key_line, key_col = entry.lc.key(key)
    end = key_line + 1
    while end < len(lines):
        stripped = lines[end].strip()
        if stripped and not stripped.startswith("#") and _indent(lines[end]) <= key_col:
            break
        end += 1
    while end > key_line + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    return key_line, end, key_col


def render_key(yaml: YAML, key: str, value, col: int) -> str:
    """`key: value` as the file's YAML settings write it, indented to column `col`."""
    block = CommentedMap()
    block[key] = value
    return "".join(" " * col + line if line.strip() else line for line in _dump(yaml, block).splitlines(keepends=True))


def _check_only_layout_changed(yaml: YAML, before: str, after: str, model: str, mapping: CommentedMap) -> None:
    """The edited file must parse to the same data except this model's layout (a bug otherwise)."""
    old, new = _plain(yaml.load(before)), _plain(yaml.load(after))
    for doc in (old, new):
        for entry in doc["config"][MODELS_KEY]:
            if isinstance(entry, dict) and entry.get("name") == model:
                layout = entry.pop("layout", None)
                if doc is new and layout != _plain(mapping):
                    raise AssertionError(f"layout written as {layout!r}, expected {_plain(mapping)!r}")
    if old != new:
        raise AssertionError("editing the layout changed other values in the stack file")


def _dump(yaml: YAML, data) -> str:
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue()


def _load_model_list(path: Path):
    if not path.is_file():
        raise UserError([Problem(str(path), "stack file not found")])
    text = path.read_text(encoding="utf-8")
    mapping_indent, dash_offset = guess_indent(text)
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap long lines the user wrote
    # Unknown provenance reads as an explicit `null`, not an empty value that looks like a slip.
    yaml.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    yaml.indent(mapping=mapping_indent, sequence=mapping_indent + dash_offset, offset=dash_offset)
    try:
        data = yaml.load(text)
    except YAMLError as err:
        raise UserError(yaml_error_line(path, err)) from None
    config = data.get("config") if isinstance(data, dict) else None
    models = config.get(MODELS_KEY) if isinstance(config, dict) else None
    if not isinstance(models, list):
        raise UserError([Problem(f"{path}: config.{MODELS_KEY}", "no models list in this stack file")])
    return yaml, data, models


def load_model_entry(path: Path, model: str):
    """(round-trip YAML, document, the model's entry) of a stack file, for in-place edits."""
    return _load_model(path, model)


def _load_model(path: Path, model: str):
    yaml, data, models = _load_model_list(path)
    for entry in models:
        if isinstance(entry, dict) and entry.get("name") == model:
            return yaml, data, entry
    names = [e.get("name") for e in models if isinstance(e, dict)]
    raise UserError([Problem(f"{path}: config.{MODELS_KEY}", f"no model named {model!r}; the stack has {names}")])


def guess_indent(text: str) -> tuple[int, int]:
    """(mapping indent, dash offset under its parent key) as the file is written, so re-dumping
    does not re-indent it. Pulumi writes 2 and 2 (`  key:` / `    - item`); 2 and 0 is also common.
    """
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    mapping_indent = 2
    for previous, line in zip(lines, lines[1:], strict=False):
        if previous.rstrip().endswith(":") and not line.lstrip().startswith("- "):
            step = _indent(line) - _indent(previous)
            if step > 0:
                mapping_indent = step
                break
    dash_offset = 0
    for previous, line in zip(lines, lines[1:], strict=False):
        if previous.rstrip().endswith(":") and line.lstrip().startswith("- "):
            dash_offset = max(0, _indent(line) - _indent(previous))
            break
    return mapping_indent, dash_offset


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _quoted(value):
    return None if value is None else DoubleQuotedScalarString(str(value))


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value
