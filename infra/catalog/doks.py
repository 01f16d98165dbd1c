"""DOKS facts the config, the plan and the cluster component share: version grammar, default networks.

A version is either a prefix (`1.33`, `1.33.1`) the provider resolves with
`get_kubernetes_versions` when a cluster is created, or an exact DOKS slug (`1.33.1-do.5`, as
`doctl kubernetes options versions` lists) that is used verbatim.
"""

from __future__ import annotations

import re

VERSION_PREFIX = re.compile(r"^1\.[0-9]{2}(\.[0-9]+)?$")
VERSION_SLUG = re.compile(r"^1\.[0-9]+\.[0-9]+-do\.[0-9]+$")

# DOKS labels every node with the name of its node pool (DO docs: automatic node labels); a pool the
# stack creates is selected by it.
NODE_POOL_LABEL = "doks.digitalocean.com/node-pool"

# DOKS default pod and service networks; a VPC must not overlap them unless custom subnets are set.
DEFAULT_CLUSTER_SUBNET = "10.244.0.0/16"
DEFAULT_SERVICE_SUBNET = "10.245.0.0/16"


def is_exact_version(version: str) -> bool:
    """An exact DOKS slug (`1.33.1-do.5`) is used verbatim; anything else is a lookup prefix."""
    return bool(VERSION_SLUG.match(version))


def kubernetes_minor(version: str) -> str:
    """`1.33`, `1.33.1` or `1.33.1-do.5` → `1.33`."""
    return ".".join(version.split("-", 1)[0].split(".")[:2])


def pool_node_selector(pool_name: str) -> dict[str, str]:
    """The nodes of DOKS node pool `pool_name`."""
    return {NODE_POOL_LABEL: pool_name}
