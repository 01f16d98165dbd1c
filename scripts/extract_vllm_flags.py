#!/usr/bin/env python3
"""Extract every option `vllm serve` accepts from the pinned vLLM wheel, without installing it.

Why: the toolkit generates vLLM command lines (layout flags plus users' `extra_args`). A flag that
the pinned release does not know makes the pod crash-loop at start, long after `pulumi up` said
everything was fine. This script reads the release's own parser-building source so tests can check
every generated flag offline against the real release.

How the pinned release builds its parser (vLLM 0.33, `vllm/entrypoints/common/cli_args.py`
`make_arg_parser`): a few explicit `add_argument` calls, then `FrontendArgs.add_cli_args` (one
`--<field>` per dataclass field of FrontendArgs and its bases) and `AsyncEngineArgs.add_cli_args`
(explicit `add_argument("--flag", **<group>_kwargs["field"])` calls whose argparse kwargs come
from `get_kwargs(<ConfigClass>)`). `get_kwargs` turns a field typed `bool` (or `bool | None`)
into `argparse.BooleanOptionalAction` (so `--x` and `--no-x`), `bool | str | None` into an
optional value, and everything else into an option that takes a value. This script mirrors those
rules on the AST of the release's source: nothing is imported or executed.

vLLM's FlexibleArgumentParser registers its own action for BooleanOptionalAction
(`vllm/utils/argparse_utils.py` `EnableDisableAction`, 0.33): besides `--no-x`, an option named
`--enable-x` also answers to `--disable-x` and one named `--disable-x` to `--enable-x` (the inverse
sets the same dest to the opposite value). The script detects that registration in the wheel and
records each inverse as the option's `inverse`, and in `accepted`.

Usage:
    python scripts/extract_vllm_flags.py                 # pip download the pinned wheel, write JSON
    python scripts/extract_vllm_flags.py --wheel W.whl   # use an already downloaded wheel
Regenerate whenever `VLLM_VERSION` in infra/catalog/versions.py changes; tests fail until you do.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
OUTPUT = REPO_ROOT / "infra" / "catalog" / "vllm_flags.json"

# Source files that define the serve parser and the config dataclasses it draws from.
_SOURCE_PREFIXES = ("vllm/config/", "vllm/engine/", "vllm/entrypoints/common/")
_SOURCE_FILES = ("vllm/envs.py", "vllm/entrypoints/cli/serve.py", "vllm/utils/argparse_utils.py")
_ARGPARSE_MODULE = "vllm/utils/argparse_utils.py"
_INVERSE_PREFIXES = {"--enable-": "--disable-", "--disable-": "--enable-"}


def enable_disable_inverses(modules: dict[str, ast.Module]) -> bool:
    """Whether the release's parser registers an action for BooleanOptionalAction that adds the
    `--enable-x`/`--disable-x` inverse (a `self.register("action", BooleanOptionalAction, X)` call
    whose class X names the inverse prefixes)."""
    module = modules.get(_ARGPARSE_MODULE)
    if module is None:
        return False
    registered = {
        _name_of(call.args[2])
        for call in ast.walk(module)
        if isinstance(call, ast.Call) and _name_of(call.func).endswith("register") and len(call.args) == 3
        and _const(call.args[0]) == "action" and _name_of(call.args[1]).endswith("BooleanOptionalAction")
    }
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef) and node.name in registered:
            strings = {_const(c) for c in ast.walk(node) if isinstance(c, ast.Constant)}
            if {"--enable-", "--disable-"} <= strings:
                return True
    return False
_PARSER_MODULE = "vllm/entrypoints/common/cli_args.py"
_PARSER_FUNCTION = "make_arg_parser"


def pinned_vllm_version() -> str:
    sys.path.insert(0, str(REPO_ROOT))
    from infra.catalog.versions import VLLM_VERSION

    return VLLM_VERSION


def download_wheel(version: str, dest: Path) -> Path:
    """`pip download vllm==<version> --no-deps`: one wheel, no dependency resolution."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            f"vllm=={version}",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            str(dest),
            "-q",
        ],
        check=True,
    )
    wheels = sorted(dest.glob(f"vllm-{version}-*.whl"))
    if not wheels:
        raise SystemExit(f"pip did not produce a vllm {version} wheel in {dest}")
    return wheels[0]


def read_sources(wheel: Path) -> dict[str, ast.Module]:
    modules: dict[str, ast.Module] = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.endswith(".py") and (name.startswith(_SOURCE_PREFIXES) or name in _SOURCE_FILES):
                modules[name] = ast.parse(zf.read(name), filename=name)
    if _PARSER_MODULE not in modules:
        raise SystemExit(f"{_PARSER_MODULE} not in the wheel: the parser moved, update this script")
    return modules


def wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- type rules (mirror vllm.engine.arg_utils._compute_kwargs) ----------------------------------


@dataclass
class SourceIndex:
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    aliases: dict[str, ast.expr] = field(default_factory=dict)  # module-level type aliases

    @classmethod
    def build(cls, modules: dict[str, ast.Module]) -> SourceIndex:
        index = cls()
        for module in modules.values():
            for node in module.body:
                if isinstance(node, ast.ClassDef):
                    index.classes.setdefault(node.name, node)
                elif (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                ):
                    index.aliases.setdefault(node.targets[0].id, node.value)
                elif (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and node.value is not None
                ):
                    if _name_of(node.annotation) == "TypeAlias":
                        index.aliases.setdefault(node.target.id, node.value)
                elif type(node).__name__ == "TypeAlias":  # `type X = ...` (3.12+)
                    index.aliases.setdefault(node.name.id, node.value)
        return index

    def is_dataclass(self, name: str) -> bool:
        node = self.classes.get(name)
        if node is None:
            return False
        for deco in node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            if _name_of(target) in {"config", "dataclass"}:
                return True
        return False

    def fields(self, class_name: str) -> dict[str, ast.expr]:
        """Annotated fields of a class and its bases (base fields first, like dataclasses)."""
        node = self.classes.get(class_name)
        if node is None:
            raise SystemExit(f"class {class_name} not found in the vLLM sources")
        result: dict[str, ast.expr] = {}
        for base in node.bases:
            base_name = _name_of(base)
            if base_name in self.classes:
                result.update(self.fields(base_name))
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if _name_of(stmt.annotation) == "ClassVar" or _subscript_base(stmt.annotation) == "ClassVar":
                    continue
                result[stmt.target.id] = stmt.annotation
        return result

    def method(self, class_name: str, method_name: str) -> ast.FunctionDef | None:
        """Resolve a method through the (single-inheritance, in-index) MRO."""
        node = self.classes.get(class_name)
        while node is not None:
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == method_name:
                    return stmt
            bases = [_name_of(b) for b in node.bases if _name_of(b) in self.classes]
            node = self.classes[bases[0]] if bases else None
        return None

    def type_atoms(self, annotation: ast.expr, depth: int = 0) -> set[str]:
        """The members of a (possibly nested, aliased, Annotated) union, as names."""
        if depth > 20:
            return {"?"}
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            return self.type_atoms(ast.parse(annotation.value, mode="eval").body, depth + 1)
        if isinstance(annotation, ast.Constant) and annotation.value is None:
            return {"None"}
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            return self.type_atoms(annotation.left, depth + 1) | self.type_atoms(annotation.right, depth + 1)
        if isinstance(annotation, ast.Subscript):
            base = _subscript_base(annotation)
            args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
            if base == "Annotated":
                return self.type_atoms(args[0], depth + 1)
            if base == "Optional":
                return self.type_atoms(args[0], depth + 1) | {"None"}
            if base == "Union":
                out: set[str] = set()
                for arg in args:
                    out |= self.type_atoms(arg, depth + 1)
                return out
            return {base}  # list[...], dict[...], Literal[...]: opaque containers
        name = _name_of(annotation)
        if name in self.aliases and name not in self.classes:
            return self.type_atoms(self.aliases[name], depth + 1)
        return {name}

    def kind_of_field(self, annotation: ast.expr) -> str:
        """ "bool" (BooleanOptionalAction), "optional_value" (nargs='?') or "value"."""
        atoms = self.type_atoms(annotation)
        if any(self.is_dataclass(a) for a in atoms):
            return "value"
        if atoms == {"bool", "str", "None"}:
            return "optional_value"
        if "bool" in atoms:
            return "bool"
        return "value"


def _name_of(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    return type(node).__name__


def _subscript_base(node: ast.expr) -> str:
    return _name_of(node.value) if isinstance(node, ast.Subscript) else ""


# --- parser walk --------------------------------------------------------------------------------


@dataclass
class Option:
    names: list[str]  # option strings, long first as written
    kind: str  # "value" | "optional_value" | "bool" | "store_true"
    dest: str


class ParserWalker:
    def __init__(self, index: SourceIndex):
        self.index = index
        self.options: list[Option] = []
        self._visited: set[tuple[str, str]] = set()

    def walk_function(self, func: ast.FunctionDef, owner: str | None) -> None:
        symbols: dict[str, tuple[str, str | None]] = {}  # var -> (config class, field or None)
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                resolved = self._resolve_kwargs_expr(node.value, symbols, owner)
                if resolved:
                    symbols[node.targets[0].id] = resolved
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "add_argument":
                    self._add_argument(node, symbols, owner)
                elif node.func.attr == "add_cli_args":
                    target = _name_of(node.func.value)
                    if target in {"cls", "self"}:
                        target = owner
                    if target in self.index.classes:
                        self.walk_class_add_cli_args(target)

    def walk_class_add_cli_args(self, class_name: str) -> None:
        key = (class_name, "add_cli_args")
        if key in self._visited:
            return
        self._visited.add(key)
        method = self.index.method(class_name, "add_cli_args")
        if method is None:
            raise SystemExit(f"{class_name}.add_cli_args not found")
        if self._is_field_loop(method):
            self._add_fields_as_flags(class_name)
        self.walk_function(method, class_name)

    @staticmethod
    def _is_field_loop(method: ast.FunctionDef) -> bool:
        """`for key, value in <x>_kwargs.items(): group.add_argument(..., f"--{key...}")`."""
        for node in ast.walk(method):
            if (
                isinstance(node, ast.For)
                and isinstance(node.iter, ast.Call)
                and _name_of(node.iter.func) == "items"
            ):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.JoinedStr):
                        return True
        return False

    def _add_fields_as_flags(self, class_name: str) -> None:
        extra = self._extra_flags(class_name)
        for fname, annotation in self.index.fields(class_name).items():
            names = [f"--{fname.replace('_', '-')}", *extra.get(fname, [])]
            self.options.append(Option(names, self.index.kind_of_field(annotation), fname))

    def _extra_flags(self, class_name: str) -> dict[str, list[str]]:
        """`kwargs["field"]["flags"] = ["-x"]` in `_customize_cli_kwargs` along the MRO."""
        out: dict[str, list[str]] = {}
        node = self.index.classes.get(class_name)
        while node is not None:
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "_customize_cli_kwargs":
                    for a in ast.walk(stmt):
                        if (
                            isinstance(a, ast.Assign)
                            and isinstance(a.targets[0], ast.Subscript)
                            and isinstance(a.targets[0].slice, ast.Constant)
                            and a.targets[0].slice.value == "flags"
                            and isinstance(a.targets[0].value, ast.Subscript)
                            and isinstance(a.targets[0].value.slice, ast.Constant)
                            and isinstance(a.value, ast.List)
                        ):
                            out.setdefault(a.targets[0].value.slice.value, []).extend(
                                e.value for e in a.value.elts if isinstance(e, ast.Constant)
                            )
            bases = [_name_of(b) for b in node.bases if _name_of(b) in self.index.classes]
            node = self.index.classes[bases[0]] if bases else None
        return out

    def _resolve_kwargs_expr(self, expr, symbols, owner) -> tuple[str, str | None] | None:
        """`get_kwargs(Cls)` -> (Cls, None); `get_kwargs(Cls)["f"]` / `var["f"]` -> (Cls, "f")."""
        if isinstance(expr, ast.Call) and _name_of(expr.func) == "get_kwargs" and expr.args:
            cls = _name_of(expr.args[0])
            return (owner if cls == "cls" else cls, None)
        if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
            inner = self._resolve_kwargs_expr(expr.value, symbols, owner)
            if inner is None and isinstance(expr.value, ast.Name):
                inner = symbols.get(expr.value.id)
            if inner and inner[1] is None:
                return (inner[0], expr.slice.value)
        if isinstance(expr, ast.Name) and expr.id in symbols:
            return symbols[expr.id]
        if isinstance(expr, ast.Dict):  # {**x_kwargs["f"], "default": None}
            for key, value in zip(expr.keys, expr.values, strict=True):
                if key is None:
                    resolved = self._resolve_kwargs_expr(value, symbols, owner)
                    if resolved and resolved[1]:
                        return resolved
        return None

    def _add_argument(self, call: ast.Call, symbols, owner) -> None:
        names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        names = [n for n in names if n.startswith("-")]
        if not names:
            return  # positional (model_tag) or a dynamically built name handled by the field loop
        explicit = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        source_field: tuple[str, str | None] | None = None
        for kw in call.keywords:
            if kw.arg is None:
                source_field = self._resolve_kwargs_expr(kw.value, symbols, owner)
        dest = _const(explicit.get("dest")) or names[0].lstrip("-").replace("-", "_")
        kind = "value"
        if source_field and source_field[1]:
            annotation = self.index.fields(source_field[0]).get(source_field[1])
            if annotation is None:
                raise SystemExit(f"{source_field[0]} has no field {source_field[1]!r}")
            kind = self.index.kind_of_field(annotation)
        if "action" in explicit:
            action = explicit["action"]
            action_name = _const(action) or _name_of(action)
            if action_name in {"store_true", "store_false"}:
                kind = "store_true"
            elif action_name == "BooleanOptionalAction":
                kind = "bool"
            elif action_name == "version":
                kind = "store_true"
            else:
                kind = "value"
        elif "nargs" in explicit and _const(explicit["nargs"]) == "?":
            kind = "optional_value"
        elif "type" in explicit or "choices" in explicit:
            kind = "value" if kind != "optional_value" else kind
        self.options.append(Option(names, kind, dest))


def _const(node):
    return node.value if isinstance(node, ast.Constant) else None


def env_var_names(modules: dict[str, ast.Module]) -> list[str]:
    """Keys of `environment_variables = {...}` in vllm/envs.py: the VLLM_* variables vLLM reads."""
    names: set[str] = set()
    for node in modules["vllm/envs.py"].body:
        target = None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        if target == "environment_variables" and isinstance(value, ast.Dict):
            names.update(k.value for k in value.keys if isinstance(k, ast.Constant))
    if not names:
        raise SystemExit("environment_variables not found in vllm/envs.py")
    return sorted(names)


def extract(wheel: Path) -> dict:
    modules = read_sources(wheel)
    index = SourceIndex.build(modules)
    walker = ParserWalker(index)
    parser_fn = next(
        n
        for n in modules[_PARSER_MODULE].body
        if isinstance(n, ast.FunctionDef) and n.name == _PARSER_FUNCTION
    )
    walker.walk_function(parser_fn, None)

    flags: dict[str, dict] = {}
    for opt in walker.options:
        long_names = [n for n in opt.names if n.startswith("--")]
        canonical = long_names[0] if long_names else opt.names[0]
        entry = flags.setdefault(canonical, {"aliases": [], "dest": opt.dest, "kind": opt.kind})
        for alias in opt.names:
            if alias != canonical and alias not in entry["aliases"]:
                entry["aliases"].append(alias)
        entry["takes_value"] = opt.kind in {"value", "optional_value"}
        entry["negatable"] = opt.kind == "bool"
    inverses = enable_disable_inverses(modules)
    accepted: set[str] = set()
    for name, entry in flags.items():
        accepted.add(name)
        accepted.update(entry["aliases"])
        if entry["negatable"]:
            # argparse.BooleanOptionalAction adds --no-<x> for every long option string.
            accepted.update(f"--no-{n[2:]}" for n in [name, *entry["aliases"]] if n.startswith("--"))
            # vLLM's EnableDisableAction: --enable-x also answers to --disable-x, and the reverse.
            inverse = next((new + name.removeprefix(old) for old, new in _INVERSE_PREFIXES.items() if name.startswith(old)), None)
            if inverses and inverse is not None:
                entry["inverse"] = inverse
                accepted.add(inverse)
    return {
        "vllm_version": wheel_version(wheel),
        "wheel": wheel.name,
        "wheel_sha256": sha256(wheel),
        "generated_by": "scripts/extract_vllm_flags.py",
        "note": (
            "Options `vllm serve` accepts in this release, read from its parser source. "
            "The parser also accepts --flag=value, underscores for dashes, --json-flag.key=value "
            "for JSON-typed options and -O<level>."
        ),
        "flags": {k: {**v, "aliases": sorted(v["aliases"])} for k, v in sorted(flags.items())},
        "accepted": sorted(accepted),
        "takes_value": sorted(k for k, v in flags.items() if v["takes_value"]),
        "boolean": sorted(k for k, v in flags.items() if not v["takes_value"]),
        "negatable": sorted(k for k, v in flags.items() if v["negatable"]),
        "env_vars": env_var_names(modules),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", type=Path, help="use this vllm wheel instead of downloading the pinned one")
    ap.add_argument("--out", type=Path, default=OUTPUT)
    args = ap.parse_args(argv)

    version = pinned_vllm_version()
    if args.wheel:
        wheel = args.wheel
        data = extract(wheel)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            wheel = download_wheel(version, Path(tmp))
            data = extract(wheel)
    if data["vllm_version"] != version:
        print(f"warning: wheel is vllm {data['vllm_version']}, versions.py pins {version}", file=sys.stderr)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    print(
        f"{args.out}: vllm {data['vllm_version']}, {len(data['flags'])} options, "
        f"{len(data['accepted'])} accepted spellings, {len(data['env_vars'])} env vars"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
