"""The GPU size catalog (infra/catalog/gpu_sizes.json): every price and availability is dated and
sourced, the file is in the canonical form `infra catalog sync` writes, and only evidenced slugs
are in it."""

from __future__ import annotations

import re

from infra.catalog.gpus import ACCELERATORS, GPU_SIZES, PACKAGED_CATALOG
from infra.catalog_sync import dump_catalog, read_catalog

DOC = read_catalog(PACKAGED_CATALOG)
DATE = re.compile(r"^20\d\d-\d\d-\d\d$")


def test_file_is_canonical():
    """A sync rewrites the file byte for byte from its content: hand edits must keep that form."""
    assert PACKAGED_CATALOG.read_text(encoding="utf-8") == dump_catalog(DOC)


def test_every_price_and_availability_has_a_date_and_a_source():
    for entry in DOC["sizes"]:
        price = entry["price"]
        assert DATE.match(price["as_of"]) and price["source"] in DOC["sources"], entry["slug"]
        if entry["offer"] == "contract":
            assert entry["usd_per_hour"] is None, entry["slug"]
        else:
            assert entry["usd_per_hour"] > 0, entry["slug"]
            availability = entry["availability"]
            assert DATE.match(availability["as_of"]) and availability["source"] in DOC["sources"]
            assert isinstance(entry["regions"], list) and isinstance(entry["available"], bool)
        assert entry["specs"] and all(s in DOC["sources"] for s in entry["specs"]), entry["slug"]
        assert entry["accelerator"] in ACCELERATORS


def test_loaded_sizes_carry_their_price_date():
    mi300x = GPU_SIZES["gpu-mi300x8-1536gb"]
    assert mi300x.usd_per_hour == 20.72 and mi300x.price_as_of == "2026-10-08"
    assert "GET /v2/sizes" in mi300x.price_source and mi300x.regions is not None


def test_self_serve_mi325x_and_the_2026_prices():
    listing = {
        "gpu-mi300x8-1536gb": 20.72,
        "gpu-h100x8-640gb": 35.28,
        "gpu-h200x8-1128gb": 35.76,
        "gpu-mi325x1-256gb": 3.80,
        "gpu-mi325x8-2048gb": 30.40,
    }
    for slug, price in listing.items():
        assert GPU_SIZES[slug].usd_per_hour == price, slug
    for slug in ("gpu-mi325x1-256gb", "gpu-mi325x8-2048gb"):
        assert GPU_SIZES[slug].regions == ("nyc2", "tor1") and not GPU_SIZES[slug].contract_only


def test_mi350x_and_mi355x_only_as_evidenced():
    assert "gpu-mi350x8-2304gb" not in GPU_SIZES  # no listing shows the plain slug
    mi35 = sorted(s for s in GPU_SIZES if s.startswith(("gpu-mi350x", "gpu-mi355x")))
    assert mi35 == [
        "gpu-mi350x1-288gb-contracted",
        "gpu-mi350x1-288gb-spot",
        "gpu-mi350x8-2304gb-contracted",
        "gpu-mi350x8-2304gb-fabric-contracted",
        "gpu-mi350x8-2304gb-spot",
        "gpu-mi355x1-288gb-spot",
        "gpu-mi355x8-2304gb-spot",
    ]
    for slug in mi35:
        size = GPU_SIZES[slug]
        assert size.spot == slug.endswith("-spot") and size.contract_only == slug.endswith("-contracted")
        assert size.fabric == ("-fabric-" in slug)


def test_boot_disks_are_filled():
    assert GPU_SIZES["gpu-mi325x8-2048gb-fabric-contracted"].boot_disk_gib == 720
    assert all(size.boot_disk_gib for size in GPU_SIZES.values())
