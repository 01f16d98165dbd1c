"""How fast a GPU reads and writes host memory: the link KV blocks offloaded to CPU memory cross.

A KV block the offload tier (vLLM's native OffloadingConnector or LMCache's CPU tier) returns to
the GPU crosses the GPU's host interface, each TP rank its own shard over its own link, so the
per-GPU figure is what bounds a reload. Host DRAM (DDR5, hundreds of GB/s per socket) is faster
than any of these links and is not modelled.

Figures are one direction, theoretical, per GPU:
- PCIe 5.0 x16: 32 GT/s × 16 lanes, 128b/130b → 63 GB/s per direction ("128 GB/s" bidirectional
  in AMD's MI300X and MI325X datasheets, "PCIe Gen5 128 GB/s" in NVIDIA's H100/H200 SXM datasheets;
  AMD MI350X/MI355X datasheet: PCIe 5.0 x16).
- PCIe 4.0 x16: half of that, 32 GB/s per direction (NVIDIA L40S, RTX 4000/6000 Ada datasheets:
  "PCIe Gen4 x16 64 GB/s bidirectional").
- NVIDIA B200 (HGX): PCIe 5.0 x16 to the host (HGX B200 platform brief).

HOST_LINK_EFFICIENCY is the share of that a KV reload achieves: the vLLM team's write-up of the
OffloadingConnector (vLLM blog, "Inside vLLM's New KV Offloading Connector", IBM Research, 2026)
reports host↔device copies of large contiguous blocks near the link's practical rate and small
scattered blocks far below it; 0.6 is a middle we have not measured on DigitalOcean nodes (an
assumption: `infra bench --workload multi-turn` measures the real effect end to end).
"""

from __future__ import annotations

PCIE5_X16_GB_S = 63.0
PCIE4_X16_GB_S = 31.5

HOST_LINK_GB_S: dict[str, float] = {
    "mi300x": PCIE5_X16_GB_S,
    "mi325x": PCIE5_X16_GB_S,
    "mi350x": PCIE5_X16_GB_S,
    "mi355x": PCIE5_X16_GB_S,
    "h100": PCIE5_X16_GB_S,
    "h200": PCIE5_X16_GB_S,
    "b200": PCIE5_X16_GB_S,
    "l40s": PCIE4_X16_GB_S,
    "rtx4000ada": PCIE4_X16_GB_S,
    "rtx6000ada": PCIE4_X16_GB_S,
}

HOST_LINK_EFFICIENCY = 0.6


def host_link_gb_s(accelerator_model: str) -> float:
    """Effective GB/s one GPU moves KV from host memory (theoretical × HOST_LINK_EFFICIENCY).

    An accelerator missing here is a catalog gap (KeyError), not a silent default.
    """
    return HOST_LINK_GB_S[accelerator_model] * HOST_LINK_EFFICIENCY
