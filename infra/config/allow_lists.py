"""Source allow-lists judged by the address space they open (issues 30, 37).

Two lists let the internet in: the Kubernetes API's (`cluster.control_plane_allowed_cidrs`, the
DOKS control-plane firewall) and the public front door's (`router.allowed_source_cidrs`, the
load balancer's source ranges, read only with `router.public`). Both are judged alike, by the
union of their entries rather than entry by entry — `0.0.0.0/1` and `128.0.0.0/1` (or sixteen
`/4`s) open exactly what `0.0.0.0/0` opens:

- a list whose ranges together cover half the IPv4 space or more opens the internet: refused in
  every environment (an empty list says "open" explicitly where that is allowed: dev and staging);
- an empty list: refused in prod, noted elsewhere;
- ranges nobody reaches a public endpoint from (documentation, benchmarking, CGNAT, loopback,
  link-local, multicast, reserved) are noted; a prod list made only of them, or only of private
  ranges, is a blocker (the plan lists it, `pulumi up` refuses it): nobody, Pulumi or your
  clients included, could connect. The shipped prod stack carries documentation ranges as
  placeholders for exactly this reason.

IPv6 ranges are refused where the lists are parsed (`AllowedCidr`): the API endpoint and the load
balancer are reached over IPv4, and `::/0` would open every IPv6 address.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

from infra.config.base import NS
from infra.errors import Problem

# Ranges from which nobody reaches a public endpoint: documentation (RFC 5737), benchmarking (RFC
# 2544), shared address space (RFC 6598), loopback, link-local, multicast and reserved.
UNREACHABLE_CIDRS = {
    "192.0.2.0/24": "a documentation range (RFC 5737)",
    "198.51.100.0/24": "a documentation range (RFC 5737)",
    "203.0.113.0/24": "a documentation range (RFC 5737)",
    "198.18.0.0/15": "the benchmarking range (RFC 2544)",
    "100.64.0.0/10": "the carrier-grade NAT range (RFC 6598)",
    "127.0.0.0/8": "loopback",
    "169.254.0.0/16": "link-local",
    "224.0.0.0/4": "multicast",
    "240.0.0.0/4": "reserved",
}
PRIVATE = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
# A list whose union covers at least this share of the IPv4 space opens the internet.
OPEN_SHARE = 0.5
IPV4_ADDRESSES = 2**32


def _allowed_cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        raise ValueError(f"{value!r} is not a valid CIDR ({err}); e.g. 203.0.113.0/24") from None
    if net.version != 4:
        opens = "; ::/0 would open every IPv6 address" if net.prefixlen == 0 else ""
        raise ValueError(f"{value!r} is an IPv6 range: the API endpoint and the load balancer are reached over IPv4, so list IPv4 ranges{opens}")
    return str(net)


AllowedCidr = Annotated[str, AfterValidator(_allowed_cidr)]


@dataclass(frozen=True)
class AllowList:
    """One allow-list as written: its key, what it guards, its entries."""

    key: str  # `cluster.control_plane_allowed_cidrs` (without the namespace)
    guards: str  # "the Kubernetes API", "the public front door"
    who: str  # who must be in it: "Pulumi (CI) and your operators", "your clients"
    cidrs: tuple[str, ...]

    @property
    def path(self) -> str:
        return f"{NS}{self.key}"


@dataclass(frozen=True)
class Exposure:
    problems: tuple[Problem, ...] = ()  # refused by every command
    blockers: tuple[Problem, ...] = ()  # the plan lists them; `pulumi up` refuses them
    notes: tuple[str, ...] = ()


def ipv4_share(cidrs: tuple[str, ...] | list[str]) -> float:
    """The share of the IPv4 address space the union of `cidrs` covers."""
    nets = [ipaddress.ip_network(c, strict=False) for c in cidrs]
    union = ipaddress.collapse_addresses(n for n in nets if n.version == 4)
    return sum(n.num_addresses for n in union) / IPV4_ADDRESSES


def _unreachable(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str | None:
    return next((w for r, w in UNREACHABLE_CIDRS.items() if net.version == 4 and net.subnet_of(ipaddress.ip_network(r))), None)


def _private(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    return net.version == 4 and any(net.subnet_of(ipaddress.ip_network(p)) for p in PRIVATE)


def exposure(allow: AllowList, environment: str, *, empty_note: str) -> Exposure:
    """What `allow` opens, in `environment` (see the module doc). `empty_note`: the note an empty
    list gets outside prod."""
    problems: list[Problem] = []
    blockers: list[Problem] = []
    notes: list[str] = []
    cidrs = list(allow.cidrs)
    nets = [ipaddress.ip_network(c, strict=False) for c in cidrs]
    whole = [i for i, n in enumerate(nets) if n.prefixlen == 0]
    for i in whole:
        problems.append(Problem(f"{allow.path}[{i}]", (
            f"{cidrs[i]!r} opens {allow.guards} to the internet; list the ranges {allow.who} connect from (dev/staging: an "
            "empty list says \"open\" explicitly)")))
    share = ipv4_share(cidrs)
    if not whole and share >= OPEN_SHARE:
        problems.append(Problem(allow.path, (
            f"{cidrs} together cover {share:.0%} of the IPv4 address space, which opens {allow.guards} to the internet as "
            f"0.0.0.0/0 would; list the ranges {allow.who} connect from (dev/staging: an empty list says \"open\" explicitly)")))
    if problems:
        return Exposure(tuple(problems))
    if not cidrs:
        if environment == "prod":
            problems.append(Problem(allow.path, (
                f"not set or empty, which opens the prod {allow.guards.removeprefix('the ')} to the internet; list the public ranges "
                f"{allow.who} connect from")))
        else:
            notes.append(empty_note)
        return Exposure(tuple(problems), (), tuple(notes))
    dead = [(i, why) for i, n in enumerate(nets) if (why := _unreachable(n))]
    if len(dead) == len(nets):
        said = "; ".join(f"{allow.key}[{i}] {cidrs[i]!r} is {why}" for i, why in dead)
        text = f"{said}: nobody, {allow.who} included, could reach {allow.guards}; list the public ranges they connect from"
        (blockers.append(Problem(allow.path, text)) if environment == "prod" else notes.append(f"{allow.key}: {text}"))
    elif all(_private(n) for n in nets):
        text = (f"{cidrs} holds private ranges only: {allow.guards} is a public endpoint, so {allow.who} outside the VPC could "
                "not reach it; add their public ranges")
        (blockers.append(Problem(allow.path, text)) if environment == "prod" else notes.append(f"{allow.key}: {text}"))
    else:
        notes += [f"{allow.key}[{i}] {cidrs[i]!r} is {why}: nobody connects from it; replace it with a range {allow.who} use"
                  for i, why in dead]
    return Exposure(tuple(problems), tuple(blockers), tuple(notes))


def control_plane_list(cidrs) -> AllowList:
    return AllowList("cluster.control_plane_allowed_cidrs", "the Kubernetes API", "Pulumi (CI) and your operators", tuple(str(c) for c in cidrs))


def front_door_list(cidrs) -> AllowList:
    return AllowList("router.allowed_source_cidrs", "the public front door", "your clients", tuple(str(c) for c in cidrs))


def stack_exposure(environment: str, control_plane_cidrs, router) -> Exposure:
    """Both lists of a stack: the API's always, the front door's when it is public (a list on a
    private front door is refused as a key that takes no effect: infra/invariants/ignores.py).
    An empty front-door list is judged by `public_exposure_gaps` (infra/config/router.py).
    `control_plane_cidrs` None: the API is not the stack's (cluster.existing), so only the front door's."""
    if control_plane_cidrs is None:
        api = Exposure((), (), ())
    else:
        api = exposure(control_plane_list(control_plane_cidrs), environment, empty_note=(
            f"{environment}: the Kubernetes API is open to the internet (token-protected); set "
            "cluster.control_plane_allowed_cidrs to the ranges Pulumi and your operators connect from"))
    if not router.public or not router.allowed_source_cidrs:
        return api
    door = exposure(front_door_list(router.allowed_source_cidrs), environment, empty_note="")
    return Exposure(api.problems + door.problems, api.blockers + door.blockers, api.notes + door.notes)
