"""`network:` — the environment's VPC and, optionally, VPC-native cluster subnets."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator, Field

from infra.catalog import doks
from infra.config.base import NS, StrictModel
from infra.errors import Problem


def _cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        raise ValueError(f"{value!r} is not a valid CIDR ({err}); e.g. 10.20.0.0/20") from None
    if net.version != 4:
        raise ValueError(f"{value!r} is not an IPv4 CIDR; DigitalOcean VPCs and DOKS subnets are IPv4")
    return str(net)


def _private_cidr(value: str) -> str:
    value = _cidr(value)
    if not ipaddress.ip_network(value).is_private:
        raise ValueError(f"{value!r} is not a private (RFC 1918) range; use e.g. 10.20.0.0/20")
    return value


Cidr = Annotated[str, AfterValidator(_cidr)]
PrivateCidr = Annotated[str, AfterValidator(_private_cidr)]


class NetworkConfig(StrictModel):
    """The environment's VPC and, optionally, VPC-native cluster subnets."""

    vpc_cidr: PrivateCidr = Field(description="IPv4 range of the VPC (RFC 1918), e.g. 10.20.0.0/20. Changing it replaces the VPC.")
    cluster_subnet: PrivateCidr | None = Field(None, description="Pod network for a VPC-native cluster; unset: DOKS default 10.244.0.0/16. Create-time only.")
    service_subnet: PrivateCidr | None = Field(None, description="Service network for a VPC-native cluster; unset: DOKS default 10.245.0.0/16. Create-time only.")


def check_network(net: NetworkConfig) -> list[Problem]:
    """The VPC's prefix, both subnets or neither, and no two of the three ranges overlapping."""
    named = [("network.vpc_cidr", net.vpc_cidr)]
    named.append(("network.cluster_subnet", net.cluster_subnet or doks.DEFAULT_CLUSTER_SUBNET))
    named.append(("network.service_subnet", net.service_subnet or doks.DEFAULT_SERVICE_SUBNET))
    problems = []
    prefix = ipaddress.ip_network(net.vpc_cidr).prefixlen
    if not 16 <= prefix <= 28:
        problems.append(Problem(NS + "network.vpc_cidr", f"{net.vpc_cidr} has prefix /{prefix}; DigitalOcean VPCs must be /16 to /28"))
    if (net.cluster_subnet is None) != (net.service_subnet is None):
        problems.append(Problem(NS + "network", "set both cluster_subnet and service_subnet (VPC-native cluster) or neither"))
    written = {"network.vpc_cidr", *(f"network.{k}" for k in ("cluster_subnet", "service_subnet") if getattr(net, k) is not None)}
    for i, (path_a, a) in enumerate(named):
        for path_b, b in named[i + 1 :]:
            if not ipaddress.ip_network(a).overlaps(ipaddress.ip_network(b)):
                continue
            if path_b in written:
                problems.append(Problem(NS + path_b, f"{b} overlaps {NS}{path_a} ({a}); the ranges must be disjoint"))
            else:  # the error names a key the user wrote, not the default it collides with
                problems.append(Problem(NS + path_a, (
                    f"{a} overlaps {path_b} ({b}, the DOKS default subnet while it is unset); the ranges must be disjoint; "
                    "choose another vpc_cidr or set custom subnets")))
    return problems

