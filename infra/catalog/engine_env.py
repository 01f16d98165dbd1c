"""Environment variables and flags of the engine container that the platform owns or reads.

Two lists, shared by the stack-file checks (infra/config/model_env.py) and the renderers
(infra/render/model_service.py sets PLATFORM_ENV; infra/render/network_policy.py derives an egress
rule from every ENDPOINT setting):

- PLATFORM_ENV: names the platform sets on every engine from other keys. A `models[].env` entry
  of the same name would replace the platform's value (the env list is a dict merge), so it is
  refused, naming the key that owns it: HF_HOME=/tmp/hf with HF_HUB_OFFLINE=0 on a cached model
  sends the engine to a hub its policies do not reach, and the weights the prefetch Job wrote are
  never read. The vendor switches (VLLM_ROCM_USE_AITER...) are tuning choices and stay open.
- ENDPOINT_ENV / ENDPOINT_FLAGS: settings that name an endpoint the engines call (a hub mirror, an
  OTLP collector); each gets an egress rule of its own, so each must name a place a policy may open.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

# name → the key (or the platform's reason) that owns it.
PLATFORM_ENV: dict[str, str] = {
    "HF_HOME": "model_cache / models[].weights (where the weights were written: the cache's hf/ tree, or scratch)",
    "HF_HUB_OFFLINE": "model_cache / models[].weights (engines of a cached or bucket-loaded model never call the hub)",
    "VLLM_ASSETS_CACHE": "models[].weights (the bucket's small files go to scratch)",
    "VLLM_CACHE_ROOT": "the compile cache (warm_start: the cache's vllm/ tree)",
    "TRITON_CACHE_DIR": "the compile cache (warm_start: the cache's triton/ tree)",
    "AITER_JIT_DIR": "the compile cache (warm_start: the cache's aiter/ tree)",
    "AWS_ENDPOINT_URL": "model_cache kind spaces (the bucket's endpoint)",
    "AWS_REGION": "model_cache kind spaces (the bucket's region)",
    "AWS_DEFAULT_REGION": "model_cache kind spaces (the bucket's region)",
    "AWS_EC2_METADATA_DISABLED": "the platform (the S3 client never asks the metadata service for credentials)",
    "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "model_cache kind spaces (Spaces is read path-style)",
    "HF_HUB_DISABLE_TELEMETRY": "the platform (engines send no telemetry; docs/security.md)",
    "VLLM_NO_USAGE_STATS": "the platform (engines send no usage statistics; docs/security.md)",
}

ENDPOINT_ENV = ("HF_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
ENDPOINT_FLAGS = ("--otlp-traces-endpoint",)

# Link-local space holds every cloud's instance metadata service (DigitalOcean's droplet metadata
# at 169.254.169.254 among them): no policy of ours ever opens it (docs/security.md).
_LINK_LOCAL = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),
)


def endpoint_host(url: str) -> tuple[str | None, int | None, str]:
    """(host, port, scheme) of an endpoint setting; host None when it is not a URL."""
    try:
        parts = urlsplit(url if "://" in url else f"//{url}")
        return parts.hostname, parts.port, parts.scheme
    except ValueError:
        return None, None, ""


def literal_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address a host names literally (an IPv4-mapped IPv6 address as its IPv4 one), else None."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def metadata_space(host: str) -> bool:
    """Whether a host is a literal address in link-local space (instance metadata lives there)."""
    address = literal_address(host)
    return address is not None and any(
        address in net for net in _LINK_LOCAL if net.version == address.version
    )


def endpoint_settings(env: dict[str, str], extra_args: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """(key relative to the model, URL) of every endpoint setting: `env.HF_ENDPOINT`, ...,
    `extra_args[j]` for `--otlp-traces-endpoint URL` (j: the URL's index) or `--flag=URL`."""
    out = [(f"env.{k}", env[k]) for k in ENDPOINT_ENV if env.get(k)]
    args = list(extra_args)
    for j, arg in enumerate(args):
        for flag in ENDPOINT_FLAGS:
            if arg == flag and j + 1 < len(args):
                out.append((f"extra_args[{j + 1}]", args[j + 1]))
            elif arg.startswith(flag + "="):
                out.append((f"extra_args[{j}]", arg.split("=", 1)[1]))
    return out
