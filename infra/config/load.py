"""Reading a stack file: the YAML itself (duplicate keys refused as Pulumi refuses them, `secure:`
values never decrypted), where the file of a stack is, and keys in namespaces nobody reads."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from infra.config.base import NS, PROJECT, stack_name_problem
from infra.errors import ConfigError, Problem, yaml_error_line

# Config namespaces a stack file may use besides ours: the providers the program runs and Pulumi's
# own (`pulumi:tags`, ...). A key in any other namespace would be read by nobody, so it is refused:
# `inference-platfrom:observability` once switched monitoring off without a word.
OTHER_NAMESPACES = ("digitalocean", "kubernetes", "pulumi")


def foreign_key_problems(key: str) -> list[Problem]:
    """A key outside our namespace is fine in a provider's or Pulumi's; in any other namespace nobody
    reads it, and one that looks like ours is a typo whose setting silently does nothing."""
    namespace = key.split(":", 1)[0]
    if namespace in OTHER_NAMESPACES:
        return []
    allowed = ", ".join(f"{n}:" for n in (PROJECT, *OTHER_NAMESPACES))
    close = difflib.get_close_matches(namespace, [PROJECT, *OTHER_NAMESPACES], n=1, cutoff=0.75)
    if close:
        fixed = f"{close[0]}:{key.split(':', 1)[1]}"
        return [Problem(key, f"unknown namespace {namespace!r} (did you mean {fixed!r}?); nothing reads this key. Namespaces: {allowed}")]
    return [Problem(key, f"unknown namespace {namespace!r}: no provider of this program reads it. Namespaces: {allowed}")]


def stack_file(stack: str, root: Path) -> Path:
    """`stacks/Pulumi.<stack>.yaml` of the project at `root` (`infra.project.project_root`); a name
    that is not a stack name (`../etc/passwd`) is refused before any path is built from it."""
    problem = stack_name_problem(stack)
    if problem:
        raise ConfigError([Problem("stack", problem)])
    return root / "stacks" / f"Pulumi.{stack}.yaml"


class _StackFileLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys as Pulumi's YAML parser does (PyYAML would
    silently keep the last value, so the file would mean one thing here and fail in `pulumi up`)."""


def _construct_mapping_once(loader: _StackFileLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: the constructor below says so
            continue
        if first is not None:
            raise _DuplicateKey(key, first, key_node.start_mark.line + 1)
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StackFileLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping_once)


class _DuplicateKey(Exception):
    def __init__(self, key: Any, first_line: int, line: int):
        super().__init__(key)
        self.key, self.first_line, self.line = key, first_line, line


def parse_stack_text(text: str, source: Any) -> tuple[dict[str, Any], set[str]]:
    """Raw config values and the set of keys given as `secure:` secrets (values never decrypted),
    from a stack file's text; `source` names it in errors."""
    try:
        doc = yaml.load(text, Loader=_StackFileLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as dup:
        raise ConfigError(
            f"{source}: line {dup.line}: duplicate key {dup.key!r} (first at line {dup.first_line}); Pulumi refuses "
            "a stack file with a key given twice: keep one"
        ) from None
    except yaml.YAMLError as err:
        raise ConfigError(yaml_error_line(source, err)) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: expected a mapping with a `config:` key, got {_yaml_kind(doc)}")
    if "config" not in doc:
        stray = [str(k) for k in doc if ":" in str(k)]
        if stray:
            raise ConfigError(
                f"{source}: no `config:` mapping; the keys {', '.join(stray[:3])}{' ...' if len(stray) > 3 else ''} "
                "sit at the top level: indent them under `config:` (as `pulumi config set` writes them)"
            )
        raise ConfigError(f"{source}: no `config:` mapping; a stack file holds its settings under `config:` (see stacks/Pulumi.dev.yaml)")
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: `config:` must be a mapping, got {_yaml_kind(config)}")
    values: dict[str, Any] = {}
    secret_keys: set[str] = set()
    problems = []
    for key, value in config.items():
        key = str(key)
        if isinstance(value, dict) and set(value) == {"secure"}:
            cipher = value["secure"]
            if not isinstance(cipher, str) or not cipher.strip():
                short = key.removeprefix(NS)
                problems.append(
                    Problem(
                        key if ":" in key else NS + key,
                        f"`secure:` holds no ciphertext, so the secret is not set; set it again with "
                        f"`pulumi config set --secret {short} ...` (never edit `secure:` by hand)",
                    )
                )
                continue
            secret_keys.add(key)
            values[key] = None
        else:
            values[key] = value
    if problems:
        raise ConfigError(problems, source=str(source))
    return values, secret_keys


def _yaml_kind(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(type(value), type(value).__name__)


def read_stack_file(path: Path) -> tuple[dict[str, Any], set[str]]:
    """Raw config values and the set of keys given as `secure:` secrets (values never decrypted)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    return parse_stack_text(text, path)

