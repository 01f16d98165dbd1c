"""DigitalOcean GPU Droplet sizes usable as DOKS node-pool sizes.

Sources: docs.digitalocean.com droplets/details/features and /pricing (self-serve prices), vendor
datasheets for the accelerators (dense, no sparsity). Contract-only slugs do not appear in
`GET /v2/sizes` and have no public price: their `usd_per_hour` is None and the stack must state
the contract price (`gpu_pools[].usd_per_hour`) for cost figures.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    fabric: bool = False  # multi-node RDMA fabric sizes

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
#  - MI350X: 288 GiB (marketing 288 GB × 2^30; no device report at hand).
#  - H100 SXM: 79.2 GiB (≈ 85.0e9 bytes), the `total_gpu_memory` vLLM logs on an 80 GB H100
#    (79.1–79.3 GiB across drivers and log samples; nvidia-smi shows 81559 MiB).
#  - H200 SXM: 139.8 GiB, vLLM's `total_gpu_memory (139.81GiB)` on an H200 (nvidia-smi 143771 MiB).
#  - L40S: 46068 MiB (≈ 45.0 GiB), nvidia-smi's total with ECC on, as DO ships it.
#  - RTX 4000 Ada / RTX 6000 Ada: 20 GiB / 48 GiB (marketing × 2^30; no device report at hand).
MI300X = Accelerator("amd", "mi300x", "cdna3", 192, 205_822_885_888, 5.3, 1307, 2615, 448)
MI325X = Accelerator("amd", "mi325x", "cdna3", 256, 256 * GIB, 6.0, 1307, 2615, 448)
MI350X = Accelerator("amd", "mi350x", "cdna4", 288, 288 * GIB, 8.0, 2300, 4600, 1075, fp4_tflops=9200)
# Accelerators the planner is calibrated on that no DO size offers (published benchmarks run them):
# AMD MI355X datasheet (dense): 2516.6 BF16, 5033.2 FP8, 10066 MXFP4 TFLOPS, 8 TB/s HBM3E, 7 Infinity
# Fabric links of 153.6 GB/s; NVIDIA B200 (HGX, dense): 2250 BF16, 4500 FP8, 9000 FP4 TFLOPS, 8 TB/s,
# NVLink 5 at 900 GB/s per direction.
MI355X = Accelerator("amd", "mi355x", "cdna4", 288, 288 * GIB, 8.0, 2516.6, 5033.2, 1075, fp4_tflops=10066)
B200 = Accelerator("nvidia", "b200", "blackwell", 180, int(178.4 * GIB), 8.0, 2250, 4500, 900, fp4_tflops=9000)
H100 = Accelerator("nvidia", "h100", "hopper", 80, int(79.2 * GIB), 3.35, 989, 1979, 450)
H200 = Accelerator("nvidia", "h200", "hopper", 141, int(139.8 * GIB), 4.8, 989, 1979, 450)
L40S = Accelerator("nvidia", "l40s", "ada", 48, 46068 << 20, 0.864, 362, 733, 32)
RTX4000ADA = Accelerator("nvidia", "rtx4000ada", "ada", 20, 20 * GIB, 0.36, 82, 164, 32)
RTX6000ADA = Accelerator("nvidia", "rtx6000ada", "ada", 48, 48 * GIB, 0.96, 364, 728, 32)

_SIZES = [
    GpuSize("gpu-mi300x1-192gb", MI300X, 1, 20, 240, 720, 5120, 1.99),
    GpuSize("gpu-mi300x8-1536gb", MI300X, 8, 160, 1920, 2046, 40960, 15.92),
    GpuSize("gpu-mi325x1-256gb-contracted", MI325X, 1, 20, 164, 720, 5120, None, True),
    GpuSize("gpu-mi325x8-2048gb-contracted", MI325X, 8, 160, 1310, 2046, 40960, None, True),
    GpuSize(
        "gpu-mi325x8-2048gb-fabric-contracted", MI325X, 8, 160, 1310, None, 40960, None, True, True
    ),
    # Not yet documented by DO; figures from AMD's MI350X datasheet.
    GpuSize("gpu-mi350x8-2304gb", MI350X, 8, 160, 1310, 2046, 40960, None, True),
    GpuSize("gpu-h100x1-80gb", H100, 1, 20, 240, 720, 5120, 3.39),
    GpuSize("gpu-h100x8-640gb", H100, 8, 160, 1920, 2046, 40960, 23.92),
    GpuSize("gpu-h200x1-141gb", H200, 1, 24, 240, 720, 5120, 3.44),
    GpuSize("gpu-h200x8-1128gb", H200, 8, 192, 1920, 2046, 40960, 27.52),
    GpuSize("gpu-l40sx1-48gb", L40S, 1, 8, 64, 500, None, 1.57),
    GpuSize("gpu-4000adax1-20gb", RTX4000ADA, 1, 8, 32, 500, None, 0.76),
    GpuSize("gpu-6000adax1-48gb", RTX6000ADA, 1, 8, 64, 500, None, 1.57),
]

GPU_SIZES: dict[str, GpuSize] = {s.slug: s for s in _SIZES}

HOURS_PER_MONTH = 730  # DO bills monthly caps at 672 h for Droplets; 730 h is the calendar month.


def gpu_size(slug: str) -> GpuSize | None:
    """The catalog entry for a slug, or None if it is not a GPU size we know."""
    return GPU_SIZES.get(slug)
