"""DigitalOcean GPU Droplet sizes usable as DOKS node-pool sizes.

The accelerators' hardware figures live here (vendor datasheets, dense, no sparsity); the sizes —
slug, host resources, list price, regions, each price and availability with the date and source
it was taken from — live in gpu_sizes.json, which `infra catalog sync` rewrites from the live
`GET /v2/sizes` answer and `infra doctor` compares with it. Contract-only slugs do not appear in
`GET /v2/sizes` and have no public price: their `usd_per_hour` is None and the stack must state
the contract price (`gpu_pools[].usd_per_hour`) for cost figures. `INFRA_GPU_CATALOG` points the
toolkit at another catalog file (a synced copy under test, say).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.errors import Problem, UserError


@dataclass(frozen=True)
class Accelerator:
    """One GPU model's hardware figures (per GPU, dense)."""

    vendor: str  # "amd" | "nvidia"
    model: str  # DOKS label value of doks.digitalocean.com/gpu-model, e.g. "mi300x"
    family: str  # calibration family for the planner's efficiency factors
    hbm_gb: float  # marketing capacity (decimal GB, as sold and named in the slugs); display only
    hbm_bytes: int  # capacity the device reports, in bytes: what vLLM's budget is a fraction of
    hbm_bandwidth_tb_s: float
    bf16_tflops: float
    fp8_tflops: float
    link_gb_s: float  # GPU-to-GPU bandwidth per GPU, one direction (Infinity Fabric / NVLink)
    supports_fp8: bool = True
    fp4_tflops: float = 0.0  # dense FP4 (MXFP4/NVFP4) tensor throughput; 0: no FP4 units


# A fabric size's RDMA NIC per GPU: 400 Gb/s = 50 GB/s line rate, one direction (DO multinode GPU
# how-to: NICs fabric0..7, one per GPU). KV transfers across nodes (P/D) and collectives of a
# replica that spans nodes (all-to-all, TP all-reduce) move over it.
RDMA_GB_S = 50.0


@dataclass(frozen=True)
class GpuSize:
    """A DO GPU Droplet size: how many of which accelerator, host resources, price."""

    slug: str
    accelerator: Accelerator
    gpus: int
    vcpus: int
    ram_gib: int
    boot_disk_gib: int | None
    scratch_disk_gib: int | None
    usd_per_hour: float | None  # None: contract pricing, not public
    contract_only: bool = False
    fabric: bool = False  # multi-node RDMA fabric sizes (one RDMA_GB_S NIC per GPU)
    spot: bool = False  # preemptible capacity at a spot price
    price_as_of: str | None = None  # date (YYYY-MM-DD) the price was taken
    price_source: str | None = None  # where, in words (gpu_sizes.json `sources`)
    regions: tuple[str, ...] | None = None  # regions the source listed (per account); None: unknown
    available: bool | None = None
    availability_as_of: str | None = None
    availability_source: str | None = None

    @property
    def vendor(self) -> str:
        return self.accelerator.vendor

    @property
    def hbm_gb_total(self) -> float:
        """Marketing HBM of the node (decimal GB, as in the slug)."""
        return self.accelerator.hbm_gb * self.gpus

    @property
    def gpu_resource_name(self) -> str:
        """The extended resource the device plugin advertises."""
        return "amd.com/gpu" if self.vendor == "amd" else "nvidia.com/gpu"

    @property
    def taint_key(self) -> str:
        """DOKS taints GPU nodes with `<vendor resource>:NoSchedule`."""
        return self.gpu_resource_name


GIB = 1 << 30

# HBM per GPU is sold in "GB" but the device's capacity is binary, and vLLM's budget is
# `gpu_memory_utilization × the total the device reports` (torch total_memory). `hbm_bytes` is that
# total; where no exact device report is at hand it is the marketing figure read as GiB (× 2^30):
# the marketing "GB" of these parts is GiB of DRAM (the MI300X's 192 "GB" reports 191.7 GiB).
#  - MI300X: rocm-smi `VRAM Total Memory (B): 205822885888` (≈ 191.7 GiB, 205.8e9 bytes).
#  - MI325X: 256 GiB (marketing 256 GB × 2^30; no device report at hand).
#  - MI350X / MI355X: 288 GiB (marketing 288 GB × 2^30; no device report at hand). The MI355X is
#    the MI350X's higher-clocked part (2516 BF16 / 5033 FP8 TFLOPS dense), same memory and links.
#  - H100 SXM: 79.2 GiB (≈ 85.0e9 bytes), the `total_gpu_memory` vLLM logs on an 80 GB H100
#    (79.1–79.3 GiB across drivers and log samples; nvidia-smi shows 81559 MiB).
#  - H200 SXM: 139.8 GiB, vLLM's `total_gpu_memory (139.81GiB)` on an H200 (nvidia-smi 143771 MiB).
#  - L40S: 46068 MiB (≈ 45.0 GiB), nvidia-smi's total with ECC on, as DO ships it.
#  - RTX 4000 Ada / RTX 6000 Ada: 20 GiB / 48 GiB (marketing × 2^30; no device report at hand).
MI300X = Accelerator("amd", "mi300x", "cdna3", 192, 205_822_885_888, 5.3, 1307, 2615, 448)
MI325X = Accelerator("amd", "mi325x", "cdna3", 256, 256 * GIB, 6.0, 1307, 2615, 448)
MI350X = Accelerator("amd", "mi350x", "cdna4", 288, 288 * GIB, 8.0, 2300, 4600, 1075, fp4_tflops=9200)
# MI355X (DO offers it as spot sizes) and B200 (no DO size; the planner is calibrated on published
# benchmarks that run it): AMD MI355X datasheet (dense): 2516.6 BF16, 5033.2 FP8, 10066 MXFP4 TFLOPS, 8 TB/s HBM3E, 7 Infinity
# Fabric links of 153.6 GB/s; NVIDIA B200 (HGX, dense): 2250 BF16, 4500 FP8, 9000 FP4 TFLOPS, 8 TB/s,
# NVLink 5 at 900 GB/s per direction.
MI355X = Accelerator("amd", "mi355x", "cdna4", 288, 288 * GIB, 8.0, 2516.6, 5033.2, 1075, fp4_tflops=10066)
B200 = Accelerator("nvidia", "b200", "blackwell", 180, int(178.4 * GIB), 8.0, 2250, 4500, 900, fp4_tflops=9000)
H100 = Accelerator("nvidia", "h100", "hopper", 80, int(79.2 * GIB), 3.35, 989, 1979, 450)
H200 = Accelerator("nvidia", "h200", "hopper", 141, int(139.8 * GIB), 4.8, 989, 1979, 450)
L40S = Accelerator("nvidia", "l40s", "ada", 48, 46068 << 20, 0.864, 362, 733, 32)
RTX4000ADA = Accelerator("nvidia", "rtx4000ada", "ada", 20, 20 * GIB, 0.36, 82, 164, 32)
RTX6000ADA = Accelerator("nvidia", "rtx6000ada", "ada", 48, 48 * GIB, 0.96, 364, 728, 32)

ACCELERATORS: dict[str, Accelerator] = {
    a.model: a for a in (MI300X, MI325X, MI350X, MI355X, H100, H200, L40S, RTX4000ADA, RTX6000ADA)
}

PACKAGED_CATALOG = Path(__file__).resolve().parent / "gpu_sizes.json"
CATALOG_ENV_VAR = "INFRA_GPU_CATALOG"
REQUIRED_FIELDS = ("slug", "accelerator", "gpus", "vcpus", "ram_gib", "offer")


def catalog_path() -> Path:
    """The catalog file in use: `INFRA_GPU_CATALOG` if set, else the packaged gpu_sizes.json."""
    override = os.environ.get(CATALOG_ENV_VAR, "").strip()
    return Path(override) if override else PACKAGED_CATALOG


def size_from_entry(entry: dict[str, Any], sources: dict[str, str]) -> GpuSize:
    """One gpu_sizes.json entry as a GpuSize (KeyError/ValueError on a malformed entry)."""
    offer = entry["offer"]
    if offer not in ("self-serve", "spot", "contract"):
        raise ValueError(f"offer {offer!r} is not self-serve, spot or contract")
    price = entry.get("price") or {}
    availability = entry.get("availability") or {}
    regions = entry.get("regions")
    return GpuSize(
        slug=entry["slug"],
        accelerator=ACCELERATORS[entry["accelerator"]],
        gpus=int(entry["gpus"]),
        vcpus=int(entry["vcpus"]),
        ram_gib=int(entry["ram_gib"]),
        boot_disk_gib=entry.get("boot_disk_gib"),
        scratch_disk_gib=entry.get("scratch_disk_gib"),
        usd_per_hour=entry.get("usd_per_hour"),
        contract_only=offer == "contract",
        fabric=bool(entry.get("fabric", False)),
        spot=offer == "spot",
        price_as_of=price.get("as_of"),
        price_source=sources.get(price.get("source", ""), price.get("source")),
        regions=None if regions is None else tuple(regions),
        available=entry.get("available"),
        availability_as_of=availability.get("as_of"),
        availability_source=sources.get(availability.get("source", ""), availability.get("source")),
    )


def load_sizes(path: Path | None = None) -> dict[str, GpuSize]:
    """slug → GpuSize from a catalog file (default: `catalog_path()`)."""
    path = path or catalog_path()
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    sources = doc.get("sources") or {}
    sizes: dict[str, GpuSize] = {}
    for index, entry in enumerate(doc.get("sizes") or []):
        try:
            size = size_from_entry(entry, sources)
        except (KeyError, ValueError, TypeError) as err:
            raise _catalog_error(path, index, entry, err) from None
        sizes[size.slug] = size
    return sizes


def _catalog_error(path: Path, index: int, entry: Any, err: Exception) -> UserError:
    """A malformed catalog entry (a hand-edited INFRA_GPU_CATALOG) as one line naming the file, the
    entry and the field, instead of a traceback at import."""
    slug = entry.get("slug") if isinstance(entry, dict) else None
    where, what = f"sizes[{index}]", str(err)
    if isinstance(err, KeyError):
        where, what = f"{where}.{err.args[0]}", f"missing (every entry needs {', '.join(REQUIRED_FIELDS)})"
    if slug:
        what += f"; entry {slug!r}"
    return UserError([Problem(where, what)], source=f"GPU catalog {path}")


GPU_SIZES: dict[str, GpuSize] = load_sizes()

HOURS_PER_MONTH = 730  # DO bills monthly caps at 672 h for Droplets; 730 h is the calendar month.


def modelling_node(accelerator: Accelerator, gpus: int = 8) -> GpuSize:
    """A node of `gpus` × `accelerator` for the planner's arithmetic (memory fit, link groups): not
    a size anyone can order, so no slug, host resources or price."""
    return GpuSize(f"model-{accelerator.model}x{gpus}", accelerator, gpus, 0, 0, None, None, None)


def gpu_size(slug: str) -> GpuSize | None:
    """The catalog entry for a slug, or None if it is not a GPU size we know."""
    return GPU_SIZES.get(slug)
