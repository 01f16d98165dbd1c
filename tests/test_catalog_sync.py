"""Catalog drift (`infra doctor`) and `infra catalog sync` against a local server speaking /v2/sizes.

The fake answer is built from the committed catalog itself (every size it lists as self-serve or
spot, at the catalog's price and regions), then edited: that is the answer the catalog claims DO
gives, so any difference a test introduces is the only drift there is.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra import preflight
from infra.catalog.gpus import PACKAGED_CATALOG
from infra.catalog_sync import catalog_drift, dump_catalog, read_catalog, sync_catalog

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "dop_v1_" + "fedcba9876543210" * 4
DOC = read_catalog(PACKAGED_CATALOG)


def answer_from(doc) -> list[dict]:
    """The /v2/sizes GPU entries the catalog claims (contract sizes are never listed)."""
    sizes = []
    for entry in doc["sizes"]:
        if entry["offer"] == "contract":
            continue
        sizes.append(
            {
                "slug": entry["slug"],
                "memory": entry["ram_gib"] * 1024,
                "vcpus": entry["vcpus"],
                "disk": entry["boot_disk_gib"],
                "transfer": 15000.0,
                "price_monthly": round(entry["usd_per_hour"] * 744, 2),
                "price_hourly": entry["usd_per_hour"],
                "regions": list(entry["regions"]),
                "available": entry["available"],
                "description": entry["slug"],
                "gpu_info": {"count": entry["gpus"], "model": entry["accelerator"]},
            }
        )
    sizes.append(
        {"slug": "s-4vcpu-8gb", "memory": 8192, "vcpus": 4, "disk": 160, "price_hourly": 0.07143,
         "regions": ["atl1", "nyc2"], "available": True, "description": "Basic"}
    )
    return sizes


def _with(sizes, slug, **changes):
    out = copy.deepcopy(sizes)
    for size in out:
        if size["slug"] == slug:
            size.update(changes)
    return out


def _serve(httpserver, sizes):
    httpserver.expect_request("/v2/sizes").respond_with_json({"sizes": sizes, "links": {}, "meta": {"total": len(sizes)}})


# ------------------------------------------------------------------------------ drift (pure)


def test_the_answer_the_catalog_claims_is_no_drift():
    drift = catalog_drift(DOC, answer_from(DOC))
    assert not drift.any and drift.regions == [] and drift.new_slugs == []
    assert preflight.check_catalog_drift(answer_from(DOC), DOC).status == "pass"


def test_price_new_and_unlisted_sizes_are_drift():
    sizes = _with(answer_from(DOC), "gpu-mi300x8-1536gb", price_hourly=15.92)
    sizes = [s for s in sizes if s["slug"] != "gpu-h100x1-80gb"]
    sizes.append({"slug": "gpu-b300x8-2304gb-spot", "price_hourly": 64.0, "regions": ["mkc1"], "available": True,
                  "vcpus": 224, "memory": 3670016, "disk": 2046, "gpu_info": {"count": 8}})
    drift = catalog_drift(DOC, sizes)
    assert [(p.slug, p.catalog, p.api) for p in drift.prices] == [("gpu-mi300x8-1536gb", 20.72, 15.92)]
    assert drift.new_slugs == ["gpu-b300x8-2304gb-spot"] and drift.unlisted == ["gpu-h100x1-80gb"]


def test_regions_alone_do_not_warn():
    """Regions in /v2/sizes are the account's allocation: reported, not a warning."""
    sizes = _with(answer_from(DOC), "gpu-mi325x8-2048gb", regions=["atl1", "nyc2", "tor1"])
    check = preflight.check_catalog_drift(sizes, DOC)
    assert check.status == "pass" and "regions differ for 1 size(s)" in check.detail


# ------------------------------------------------------------------------------ doctor


def test_doctor_warns_when_the_api_prices_differ(httpserver):
    sizes = _with(answer_from(DOC), "gpu-mi300x8-1536gb", price_hourly=15.92)
    sizes = _with(sizes, "gpu-h100x8-640gb", price_hourly=23.92)
    _serve(httpserver, sizes)
    client = preflight.make_client(TOKEN, httpserver.url_for("").rstrip("/"))
    sizes_seen = preflight._all_pages(client.sizes.list, "sizes", "/v2/sizes", raw=True)
    check = preflight.check_catalog_drift(sizes_seen)
    assert check.status == "warn"
    assert "2 price(s) differ" in check.detail
    assert "gpu-mi300x8-1536gb $20.72/h (catalog, 2026-10-08) → $15.92/h" in check.detail
    assert "infra catalog sync" in check.fix


# ------------------------------------------------------------------------------ sync (pure)


def test_sync_takes_prices_regions_and_new_sizes_and_is_idempotent():
    sizes = _with(answer_from(DOC), "gpu-mi300x8-1536gb", price_hourly=16.0, regions=["atl1"])
    sizes.append({"slug": "gpu-mi300x1-192gb-spot", "price_hourly": 1.2, "regions": ["atl1"], "available": True,
                  "vcpus": 20, "memory": 245760, "disk": 720, "gpu_info": {"count": 1}})
    sizes.append({"slug": "gpu-b300x8-2304gb-spot", "price_hourly": 64.0, "regions": [], "available": True,
                  "vcpus": 224, "memory": 3670016, "disk": 2046, "gpu_info": {"count": 8}})
    result = sync_catalog(DOC, sizes, as_of="2026-12-03", source_key="api-2026-12-03", source="GET /v2/sizes on 2026-12-03")
    entries = {e["slug"]: e for e in result.doc["sizes"]}
    mi300x = entries["gpu-mi300x8-1536gb"]
    assert mi300x["usd_per_hour"] == 16.0 and mi300x["regions"] == ["atl1"]
    assert mi300x["price"] == mi300x["availability"] == {"as_of": "2026-12-03", "source": "api-2026-12-03"}
    spot = entries["gpu-mi300x1-192gb-spot"]
    assert (spot["offer"], spot["accelerator"], spot["ram_gib"], spot["boot_disk_gib"]) == ("spot", "mi300x", 240, 720)
    assert result.added == ["gpu-mi300x1-192gb-spot"] and result.skipped == ["gpu-b300x8-2304gb-spot"]
    # Contract sizes are never listed: untouched.
    assert entries["gpu-mi325x8-2048gb-contracted"] == next(e for e in DOC["sizes"] if e["slug"] == "gpu-mi325x8-2048gb-contracted")
    assert DOC["sizes"] != result.doc["sizes"], "the input document must not change"
    again = sync_catalog(result.doc, sizes, as_of="2026-12-03", source_key="api-2026-12-03", source="GET /v2/sizes on 2026-12-03")
    assert dump_catalog(again.doc) == dump_catalog(result.doc)
    assert "api-2026-12-03" in result.doc["sources"] and "price gpu-mi300x8-1536gb: $20.72/h → $16.00/h" in result.summary()


# ------------------------------------------------------------------------------ the commands


def _plan_cost(catalog: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "INFRA_GPU_CATALOG"}
    if catalog is not None:
        env["INFRA_GPU_CATALOG"] = str(catalog)
    proc = subprocess.run([sys.executable, "-m", "infra.cli", "plan", "staging", "--json", "-"],
                          capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    return json.loads(proc.stdout)["cost"]


@pytest.fixture
def api(httpserver, monkeypatch):
    for var in ("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN", "DIGITALOCEAN_API_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    monkeypatch.setenv("DIGITALOCEAN_API_URL", httpserver.url_for("/").rstrip("/"))
    return httpserver


def test_catalog_sync_rewrites_the_catalog_and_the_plan_cost_follows(api, tmp_path, capsys):
    import infra.cli

    catalog = tmp_path / "gpu_sizes.json"
    shutil.copy(PACKAGED_CATALOG, catalog)
    # staging runs one gpu-mi300x8-1536gb node at the catalog price.
    _serve(api, _with(answer_from(DOC), "gpu-mi300x8-1536gb", price_hourly=16.0))

    assert infra.cli.main(["catalog", "sync", "--catalog", str(catalog), "--check"]) == 1
    assert catalog.read_text() == PACKAGED_CATALOG.read_text(), "--check must not write"
    assert infra.cli.main(["catalog", "sync", "--catalog", str(catalog), "--as-of", "2026-12-03"]) == 0
    out = capsys.readouterr().out
    assert "price gpu-mi300x8-1536gb: $20.72/h → $16.00/h" in out and TOKEN not in out

    synced = read_catalog(catalog)
    entry = next(e for e in synced["sizes"] if e["slug"] == "gpu-mi300x8-1536gb")
    assert entry["usd_per_hour"] == 16.0 and entry["price"]["as_of"] == "2026-12-03"
    source = synced["sources"]["api-2026-12-03"]
    assert source.startswith("GET /v2/sizes (") and source.endswith(") on 2026-12-03")
    assert catalog.read_text() == dump_catalog(synced)
    assert infra.cli.main(["catalog", "sync", "--catalog", str(catalog), "--check"]) == 0

    before, after = _plan_cost(None), _plan_cost(catalog)
    line = {i["item"]: i for i in after["items"]}["gpu:mi300x-8"]
    assert {i["item"]: i for i in before["items"]}["gpu:mi300x-8"]["usd_per_hour_min"] == 20.72
    assert line["usd_per_hour_min"] == 16.0 and line["price"] == "catalog list price of 2026-12-03"
    assert after["usd_per_month_min"] < before["usd_per_month_min"]


def test_catalog_sync_without_a_token_is_a_one_line_error(monkeypatch, tmp_path, capsys):
    import infra.cli

    for var in ("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    catalog = tmp_path / "gpu_sizes.json"
    shutil.copy(PACKAGED_CATALOG, catalog)
    assert infra.cli.main(["catalog", "sync", "--catalog", str(catalog)]) == 2
    assert "DIGITALOCEAN_TOKEN: not set" in capsys.readouterr().err


def test_catalog_sync_reports_an_api_failure_without_a_traceback(api, tmp_path, capsys):
    import infra.cli

    api.expect_request("/v2/sizes").respond_with_json({"id": "unauthorized", "message": "Unable to authenticate you"}, status=401)
    catalog = tmp_path / "gpu_sizes.json"
    shutil.copy(PACKAGED_CATALOG, catalog)
    assert infra.cli.main(["catalog", "sync", "--catalog", str(catalog)]) == 2
    err = capsys.readouterr().err
    assert "401 Unauthorized" in err and "Traceback" not in err and TOKEN not in err
