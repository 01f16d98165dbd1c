"""Keep the GPU size catalog (infra/catalog/gpu_sizes.json) in step with `GET /v2/sizes`.

Two pure operations on the catalog document and an API answer (the list of size objects):

- `catalog_drift(doc, api_sizes)`: what differs — prices, sizes the API lists that the catalog
  lacks, self-serve sizes the API no longer lists, regions. `infra doctor` reports it.
- `sync_catalog(doc, api_sizes, as_of=..., source=...)`: the catalog with the API's prices,
  regions and availability for every size it lists, new GPU sizes added (when their accelerator
  is known), each touched value stamped with the date and source. Contract-only sizes never
  appear in /v2/sizes and are left as they are; so are sizes the answer omits (a stack may still
  use them; `infra doctor` names them).

`dump_catalog` writes the document canonically (sizes by slug, fixed key order, sources sorted,
two-space JSON), so a sync's diff shows exactly what changed and running it twice on the same
answer and date changes nothing.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.catalog.gpus import ACCELERATORS

FORMAT = 1
_ENTRY_KEYS = (
    "slug", "accelerator", "gpus", "vcpus", "ram_gib", "boot_disk_gib", "scratch_disk_gib", "offer",
    "fabric", "usd_per_hour", "price", "regions", "available", "availability", "specs",
)
# gpu-mi325x8-2048gb, gpu-h100x1-80gb, gpu-4000adax1-20gb, gpu-mi350x8-2304gb-fabric-contracted
_SLUG = re.compile(r"^gpu-(?P<model>[a-z0-9]+?)x(?P<count>\d+)-\d+gb(?P<suffix>(-[a-z]+)*)$")
_MODEL_ALIASES = {"4000ada": "rtx4000ada", "6000ada": "rtx6000ada"}
PRICE_TOLERANCE = 0.005  # dollars per hour; the API quotes cents


def _r(value: Any) -> Any:
    return round(float(value), 4) if isinstance(value, int | float) and not isinstance(value, bool) else value


def canonical(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The document with sizes sorted by slug, entries in a fixed key order and unused sources
    dropped: the one form the catalog is written in."""
    sizes = []
    for entry in sorted(doc["sizes"], key=lambda e: e["slug"]):
        ordered = {key: entry[key] for key in _ENTRY_KEYS if key in entry}
        ordered.update({key: entry[key] for key in sorted(entry) if key not in ordered})
        if ordered.get("regions") is not None:
            ordered["regions"] = sorted(ordered["regions"])
        if ordered.get("usd_per_hour") is not None:
            ordered["usd_per_hour"] = _r(ordered["usd_per_hour"])
        sizes.append(ordered)
    used = set()
    for entry in sizes:
        for key in ("price", "availability"):
            if isinstance(entry.get(key), dict) and entry[key].get("source"):
                used.add(entry[key]["source"])
        used.update(entry.get("specs") or [])
    sources = {key: value for key, value in sorted((doc.get("sources") or {}).items()) if key in used}
    out = {key: doc[key] for key in doc if key not in ("format", "sources", "sizes")}
    return {"format": FORMAT, **out, "sources": sources, "sizes": sizes}


def dump_catalog(doc: Mapping[str, Any]) -> str:
    return json.dumps(canonical(doc), indent=2, ensure_ascii=False) + "\n"


def read_catalog(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("sizes"), list):
        raise ValueError(f"{path}: not a GPU size catalog (expected format {FORMAT} with a list `sizes`)")
    return doc


def is_gpu_size(size: Mapping[str, Any]) -> bool:
    return str(size.get("slug", "")).startswith("gpu-") or bool(size.get("gpu_info"))


def _price(size: Mapping[str, Any]) -> float | None:
    value = size.get("price_hourly")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _regions(size: Mapping[str, Any]) -> list[str]:
    return sorted(str(r) for r in size.get("regions") or [])


@dataclass(frozen=True)
class PriceChange:
    slug: str
    catalog: float | None
    api: float | None
    catalog_as_of: str | None


@dataclass(frozen=True)
class Drift:
    """Differences between the catalog and one /v2/sizes answer (GPU sizes only)."""

    prices: list[PriceChange] = field(default_factory=list)
    new_slugs: list[str] = field(default_factory=list)  # listed by the API, not in the catalog
    unlisted: list[str] = field(default_factory=list)  # self-serve/spot in the catalog, not listed
    regions: list[str] = field(default_factory=list)  # slugs whose regions differ

    @property
    def any(self) -> bool:
        return bool(self.prices or self.new_slugs or self.unlisted)


def catalog_drift(doc: Mapping[str, Any], api_sizes: Sequence[Mapping[str, Any]]) -> Drift:
    by_slug = {str(s.get("slug")): s for s in api_sizes if is_gpu_size(s)}
    entries = {e["slug"]: e for e in doc["sizes"]}
    prices, regions = [], []
    for slug, entry in sorted(entries.items()):
        size = by_slug.get(slug)
        if size is None:
            continue
        api, ours = _price(size), entry.get("usd_per_hour")
        if (api is None) != (ours is None) or (api is not None and abs(api - ours) > PRICE_TOLERANCE):
            prices.append(PriceChange(slug, ours, api, (entry.get("price") or {}).get("as_of")))
        if entry.get("regions") is None or sorted(entry["regions"]) != _regions(size):
            regions.append(slug)
    new = sorted(slug for slug in by_slug if slug not in entries)
    unlisted = sorted(
        slug for slug, e in entries.items() if e.get("offer") != "contract" and slug not in by_slug
    )
    return Drift(prices, new, unlisted, regions)


def describe_drift(drift: Drift, limit: int = 4) -> str:
    """One line: the first few differences of each kind, and how many there are."""

    def money(value: float | None) -> str:
        return "contract" if value is None else f"${value:.2f}/h"

    def few(items: list[str]) -> str:
        shown = ", ".join(items[:limit])
        return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")

    parts = []
    if drift.prices:
        changes = [
            f"{p.slug} {money(p.catalog)} (catalog{', ' + p.catalog_as_of if p.catalog_as_of else ''}) → {money(p.api)}"
            for p in drift.prices
        ]
        parts.append(f"{len(drift.prices)} price(s) differ: {few(changes)}")
    if drift.new_slugs:
        parts.append(f"not in the catalog: {few(drift.new_slugs)}")
    if drift.unlisted:
        parts.append(f"no longer listed by the API: {few(drift.unlisted)}")
    if drift.regions:
        parts.append(f"regions differ for {len(drift.regions)} size(s) (regions are per account)")
    return "; ".join(parts)


def accelerator_for(slug: str, size: Mapping[str, Any]) -> str | None:
    """The catalog accelerator of a new slug (`gpu-mi355x8-2304gb-spot` → mi355x), if known."""
    match = _SLUG.match(slug)
    if not match:
        return None
    # AMD slugs append the count to a name ending in x (mi300x + 8 = `mi300x8`), NVIDIA ones add
    # `x<count>` (h100 + x8): `mi300` + `x8` is read as mi300x first.
    stem = match.group("model")
    for model in (stem + "x", _MODEL_ALIASES.get(stem, stem)):
        if model in ACCELERATORS:
            return model
    return None


def _offer(slug: str) -> str:
    if slug.endswith("-contracted"):
        return "contract"
    return "spot" if slug.endswith("-spot") else "self-serve"


def _scratch_gib(size: Mapping[str, Any]) -> int | None:
    for disk in size.get("disk_info") or []:
        if isinstance(disk, Mapping) and disk.get("type") == "scratch":
            amount = (disk.get("size") or {}).get("amount")
            unit = str((disk.get("size") or {}).get("unit", "gib")).lower()
            if isinstance(amount, int | float):
                return int(amount * 1024) if unit == "tib" else int(amount)
    return None


def _new_entry(slug: str, size: Mapping[str, Any], accelerator: str, source: str) -> dict[str, Any]:
    gpus = (size.get("gpu_info") or {}).get("count")
    match = _SLUG.match(slug)
    return {
        "slug": slug,
        "accelerator": accelerator,
        "gpus": int(gpus) if isinstance(gpus, int) else int(match.group("count")),
        "vcpus": int(size.get("vcpus") or 0),
        "ram_gib": int(size.get("memory") or 0) // 1024,  # the API's memory is in MiB
        "boot_disk_gib": int(size["disk"]) if isinstance(size.get("disk"), int) else None,
        "scratch_disk_gib": _scratch_gib(size),
        "offer": _offer(slug),
        "fabric": "-fabric" in slug,
        "specs": [source],
    }


@dataclass(frozen=True)
class SyncResult:
    doc: dict[str, Any]
    drift: Drift  # what differed before the sync
    added: list[str]
    skipped: list[str]  # new GPU slugs without accelerator figures in gpus.py

    def summary(self) -> list[str]:
        lines = []
        for p in self.drift.prices:
            old = "contract" if p.catalog is None else f"${p.catalog:.2f}/h"
            new = "none" if p.api is None else f"${p.api:.2f}/h"
            lines.append(f"price {p.slug}: {old} → {new}")
        lines += [f"added {slug}" for slug in self.added]
        lines += [f"skipped {slug}: no accelerator figures for it in infra/catalog/gpus.py" for slug in self.skipped]
        lines += [f"kept {slug}: not listed by the API (stacks may still use it)" for slug in self.drift.unlisted]
        if self.drift.regions:
            lines.append(f"regions updated for {len(self.drift.regions)} size(s)")
        return lines


def sync_catalog(
    doc: Mapping[str, Any], api_sizes: Sequence[Mapping[str, Any]], *, as_of: str, source_key: str, source: str
) -> SyncResult:
    """The catalog updated from one /v2/sizes answer (pure: the input document is not changed)."""
    drift = catalog_drift(doc, api_sizes)
    out = copy.deepcopy(dict(doc))
    out.setdefault("sources", {})[source_key] = source
    by_slug = {str(s.get("slug")): s for s in api_sizes if is_gpu_size(s)}
    stamp = {"as_of": as_of, "source": source_key}
    entries = {e["slug"]: e for e in out["sizes"]}
    added, skipped = [], []
    for slug, size in sorted(by_slug.items()):
        entry = entries.get(slug)
        if entry is None:
            accelerator = accelerator_for(slug, size)
            if accelerator is None:
                skipped.append(slug)
                continue
            entry = _new_entry(slug, size, accelerator, source_key)
            out["sizes"].append(entry)
            added.append(slug)
        entry["usd_per_hour"] = _r(_price(size))
        entry["price"] = dict(stamp)
        entry["regions"] = _regions(size)
        entry["available"] = bool(size.get("available", True))
        entry["availability"] = dict(stamp)
    return SyncResult(canonical(out), drift, added, skipped)
