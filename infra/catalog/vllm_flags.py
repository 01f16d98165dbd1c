"""What the pinned vLLM release accepts: `vllm serve` flags, their aliases, and the VLLM_* variables.

`infra/catalog/vllm_flags.json` is extracted from the pinned vLLM wheel by
`scripts/extract_vllm_flags.py` (its parser and its `envs.py`). The config refuses a flag or a
variable the release does not know, and the renderer checks what it generates against the same
data, so a misspelt or removed option is an error at plan time instead of a crash-looping pod
after a 20-minute model load.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

FLAGS_FILE = Path(__file__).resolve().parent / "vllm_flags.json"
# vLLM's OpenAI server port (`--port` default); probes, Services and scrapes use it.
VLLM_PORT = 8000

_NUMBER = re.compile(r"^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$")


def clashes_with_service_env(name: str) -> bool:
    """Kubernetes derives `<NAME>_PORT`, `<NAME>_SERVICE_HOST`, ... from a Service's name, so `vllm`
    and `vllm-*` would hand vLLM variables it reads as its own settings (VLLM_PORT above all)."""
    return name == "vllm" or name.startswith("vllm-")


@lru_cache(maxsize=1)
def vllm_flags() -> dict:
    """The extracted option data of the pinned vLLM release."""
    return json.loads(FLAGS_FILE.read_text())


def canonical_flag(token: str) -> str:
    """`--max_num_seqs=8` → `--max-num-seqs`; `--compilation-config.mode` → `--compilation-config`.

    Mirrors vLLM's FlexibleArgumentParser: underscores in a long flag mean dashes, `=` joins a
    value, and `--json-flag.key` sets one key of a JSON-typed option. Short aliases are mapped to
    their long form.
    """
    name = token.split("=", 1)[0]
    if name.startswith("--"):
        name = "--" + name[2:].split(".", 1)[0].replace("_", "-")
        return _alias_to_canonical().get(name, name)
    if name.startswith("-O"):
        return "--optimization-level"
    return _alias_to_canonical().get(name, name)


@lru_cache(maxsize=1)
def _alias_to_canonical() -> dict[str, str]:
    out: dict[str, str] = {}
    for canonical, entry in vllm_flags()["flags"].items():
        for alias in entry["aliases"]:
            out[alias] = canonical
    return out


@lru_cache(maxsize=1)
def _inverse_to_canonical() -> dict[str, str]:
    """`--disable-prefix-caching` → `--enable-prefix-caching` (the option whose `inverse` it is)."""
    return {entry["inverse"]: canonical for canonical, entry in vllm_flags()["flags"].items() if entry.get("inverse")}


def flag_tokens(args: list[str]) -> list[str]:
    """The option tokens of an argument list, skipping the values of options that take one."""
    return [args[i] for i in option_indices(args)]


def unknown_flags(args: list[str]) -> list[str]:
    """Option tokens in `args` that the pinned `vllm serve` would reject."""
    accepted = set(vllm_flags()["accepted"])
    unknown = []
    for token in flag_tokens(args):
        canonical = canonical_flag(token)
        if canonical in accepted or canonical == "--optimization-level":
            continue
        if canonical.startswith("--no-") and canonical in accepted:
            continue
        unknown.append(token)
    return unknown


def unknown_env_vars(env: dict[str, str]) -> list[str]:
    """`VLLM_*` variables vLLM does not read in the pinned release (silently ignored otherwise)."""
    known = set(vllm_flags()["env_vars"])
    return sorted(k for k in env if k.startswith("VLLM_") and k not in known)


def option_indices(args: list[str]) -> list[int]:
    """The positions of the option tokens in an argument list (`flag_tokens`, by index)."""
    data = vllm_flags()
    takes_value = set(data["takes_value"])
    out: list[int] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token.startswith("-") and not _NUMBER.match(token):
            out.append(i)
            canonical = canonical_flag(token)
            optional = data["flags"].get(canonical, {}).get("kind") == "optional_value"
            inline = "=" in token or (token.startswith("-O") and token != "-O" and not token.startswith("--"))  # -O3
            if not inline and (canonical in takes_value and not optional or token == "-O") and i + 1 < len(args):
                i += 1  # skip the value, which may itself start with '-' (e.g. a negative number)
        i += 1
    return out


def flag_setting(token: str) -> tuple[str, bool | None] | None:
    """What one option token sets, as vLLM's parser stores it: (dest, True/False) for a boolean
    (`--enable-prefix-caching`, `--no-enable-prefix-caching`: argparse's BooleanOptionalAction
    writes one dest from both), (dest, None) for an option that takes a value; None for a token
    the pinned release does not know."""
    flags = vllm_flags()["flags"]
    canonical = canonical_flag(token)
    entry = flags.get(canonical)
    if entry is not None:
        return entry["dest"], (True if entry["kind"] in ("bool", "store_true") else None)
    inverse = _inverse_to_canonical().get(canonical)
    if inverse is not None:  # vLLM 0.33's EnableDisableAction: --disable-x sets --enable-x's dest off
        return flags[inverse]["dest"], False
    if canonical.startswith("--no-"):
        positive = flags.get("--" + canonical.removeprefix("--no-"))
        if positive is not None and positive.get("negatable"):
            return positive["dest"], False
    return None


def option_value(args: list[str], index: int) -> str | None:
    """The value of the option at `index` (`--x=v` or `--x v`), None for a switch."""
    token = args[index]
    if "=" in token:
        return token.split("=", 1)[1]
    if token.startswith("-O") and token != "-O" and not token.startswith("--"):
        return token[2:]
    if canonical_flag(token) in set(vllm_flags()["takes_value"]) and index + 1 < len(args):
        return args[index + 1]
    return None
