"""Key paths in error lines, and whether they exist in a stack file as the user wrote it.

An error line is `error: stacks/Pulumi.X.yaml: PATH: message` (or one `  - PATH: message` per
problem); PATH is a top-level `namespace:key` then `.key` and `[index]` parts, where a map key may
itself hold dots and slashes (a label `example.com/team`).
"""

from __future__ import annotations

import re

_START = re.compile(r"^[a-z][\w-]*:[A-Za-z_]")


def error_key_paths(line: str) -> list[str]:
    """The key path an error line (or one problem line) names, if it names one."""
    body = line.split("error: ", 1)[-1]
    body = re.sub(r"^stacks/Pulumi\.[\w.-]+\.yaml: ", "", body)
    body = re.sub(r"^\d+ problems:\s*", "", body)
    body = re.sub(r"^\s*- ", "", body)
    if not _START.match(body) or ": " not in body:
        return []
    return [body.split(": ", 1)[0]]


def _walk(node, rest: str) -> bool:
    if not rest:
        return True
    if rest.startswith("["):
        match = re.match(r"^\[(\d+)\]", rest)
        if not match or not isinstance(node, list) or int(match.group(1)) >= len(node):
            return False
        return _walk(node[int(match.group(1))], rest[match.end():])
    rest = rest[1:] if rest.startswith(".") else rest
    if not isinstance(node, dict):
        return False
    # The longest key that the path starts with and that ends where a part ends.
    for key in sorted((str(k) for k in node), key=len, reverse=True):
        if rest.startswith(key) and (len(rest) == len(key) or rest[len(key)] in ".["):
            if _walk(node[key], rest[len(key):]):
                return True
    return False


def key_exists(doc: dict, path: str) -> bool:
    """Whether `path` is in `doc`'s config as written."""
    return _walk((doc or {}).get("config") or {}, path)


def parent_path(path: str) -> str | None:
    """`a:b.c[0].d` → `a:b.c[0]`; a top-level key → "" (the file itself)."""
    match = re.match(r"^(.*?)(\.[\w-]+|\[\d+\])$", path)
    return match.group(1) if match else ""
