"""Which pinned charts and images do not support a given Kubernetes minor.

The data lives in infra/catalog/support_matrix.yaml: for every pin in infra/catalog/versions.py
that runs in the cluster, the Kubernetes minors its upstream supports for that release and where
that was read. `unsupported_pins("1.34")` answers "what would break (or leave its tested window)
if the cluster were on 1.34?" without any I/O beyond reading that file once; the config layer and
`infra doctor` call it with the stack's `cluster.version`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml

MATRIX_PATH = Path(__file__).resolve().parent / "catalog" / "support_matrix.yaml"

_MINOR = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:-do\.\d+)?$")


def parse_minor(version: str) -> tuple[int, int]:
    """`1.33`, `1.33.1`, `1.33.1-do.5` or `v1.33` → (1, 33). ValueError for anything else."""
    match = _MINOR.match(str(version).strip())
    if not match:
        raise ValueError(f"{version!r} is not a Kubernetes version (expected e.g. 1.33 or 1.33.1-do.5)")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class SupportEntry:
    """One pin's supported Kubernetes minors (inclusive; None = no bound stated)."""

    pin: str
    what: str
    constant: str
    version: str
    min_minor: tuple[int, int] | None
    max_minor: tuple[int, int] | None
    basis: str
    source: str
    end_of_life: str | None = None
    notes: str = ""

    @property
    def supported(self) -> str:
        """The range as a person reads it: `1.31–1.33`, `≥ 1.25`, `any`."""
        lo = _fmt(self.min_minor)
        hi = _fmt(self.max_minor)
        if lo and hi:
            return f"{lo}–{hi}"
        if lo:
            return f"≥ {lo}"
        if hi:
            return f"≤ {hi}"
        return "any"

    def supports(self, minor: tuple[int, int]) -> bool:
        if self.min_minor is not None and minor < self.min_minor:
            return False
        return not (self.max_minor is not None and minor > self.max_minor)


class UnsupportedPin(NamedTuple):
    """A pin outside its supported range: unpacks as (pin, supported range, source)."""

    pin: str
    supported: str
    source: str


def _fmt(minor: tuple[int, int] | None) -> str:
    return f"{minor[0]}.{minor[1]}" if minor else ""


def _bound(value: Any, where: str) -> tuple[int, int] | None:
    if value is None:
        return None
    try:
        return parse_minor(str(value))
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def parse_matrix(data: Any) -> tuple[SupportEntry, ...]:
    """Validate the YAML document's shape and turn it into entries (ValueError on a bad file)."""
    if not isinstance(data, dict) or data.get("format") != 1 or not isinstance(data.get("pins"), list):
        raise ValueError("support matrix: expected a mapping with format: 1 and a list `pins`")
    entries = []
    for index, raw in enumerate(data["pins"]):
        where = f"support matrix pins[{index}]"
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: expected a mapping")
        missing = [k for k in ("pin", "constant", "version", "kubernetes", "basis", "source") if not raw.get(k)]
        if missing:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        kube = raw["kubernetes"]
        if not isinstance(kube, dict) or set(kube) - {"min", "max"}:
            raise ValueError(f"{where}.kubernetes: expected {{min, max}}")
        entry = SupportEntry(
            pin=str(raw["pin"]),
            what=str(raw.get("what", "")),
            constant=str(raw["constant"]),
            version=str(raw["version"]),
            min_minor=_bound(kube.get("min"), f"{where}.kubernetes.min"),
            max_minor=_bound(kube.get("max"), f"{where}.kubernetes.max"),
            basis=str(raw["basis"]),
            source=" ".join(str(raw["source"]).split()),
            end_of_life=str(raw["end_of_life"]) if raw.get("end_of_life") else None,
            notes=" ".join(str(raw.get("notes", "")).split()),
        )
        if entry.min_minor and entry.max_minor and entry.min_minor > entry.max_minor:
            raise ValueError(f"{where}.kubernetes: min {entry.supported} is above max")
        entries.append(entry)
    names = [e.pin for e in entries]
    if len(set(names)) != len(names):
        raise ValueError("support matrix: a pin is listed twice")
    return tuple(entries)


@functools.cache
def load_matrix(path: Path = MATRIX_PATH) -> tuple[SupportEntry, ...]:
    with open(path, encoding="utf-8") as fh:
        return parse_matrix(yaml.safe_load(fh))


def unsupported_pins(
    k8s_minor: str, matrix: Sequence[SupportEntry] | None = None, pins: Sequence[str] | None = None
) -> list[UnsupportedPin]:
    """Every pin (or every one named in `pins`) whose upstream does not support `k8s_minor`.

    `k8s_minor` may be a minor (`1.33`), a patch (`1.33.1`) or a DOKS slug (`1.33.1-do.5`).
    Pure: same arguments, same answer; the default matrix is the committed YAML.
    """
    minor = parse_minor(k8s_minor)
    entries = load_matrix() if matrix is None else matrix
    wanted = None if pins is None else set(pins)
    return [
        UnsupportedPin(e.pin, e.supported, e.source)
        for e in entries
        if (wanted is None or e.pin in wanted) and not e.supports(minor)
    ]
