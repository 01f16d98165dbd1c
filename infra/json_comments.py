"""Comments in the JSON files a user edits by hand (a stack's `stacks/factors.<stack>.json`, an
efficiency table given with `--efficiency`).

JSON has no comments; the usual convention is a key that starts with `_` (`"_comment": "..."`).
Such a key is dropped before the file is read through its schema, at any depth — it can also
comment out a whole entry (`"_cdna3": {...}`) — while every other unknown key is still refused:
a typo never starts with `_`.
"""

from __future__ import annotations

from typing import Any

COMMENT_PREFIX = "_"


def is_comment(key: object) -> bool:
    return isinstance(key, str) and key.startswith(COMMENT_PREFIX)


def without_comments(doc: Any) -> Any:
    """`doc` with every object key that starts with `_` removed, at every depth (lists included)."""
    if isinstance(doc, dict):
        return {k: without_comments(v) for k, v in doc.items() if not is_comment(k)}
    if isinstance(doc, list):
        return [without_comments(v) for v in doc]
    return doc


def top_level_comments(doc: Any) -> dict[str, Any]:
    """The comments at the top of a file: kept when a tool rewrites it (nested ones are not)."""
    return {k: v for k, v in doc.items() if is_comment(k)} if isinstance(doc, dict) else {}
