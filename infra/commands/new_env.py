"""`infra new-env NAME --from STACK`: start a new environment from an existing, commented stack file.

The new file keeps every comment of the source (round-trip YAML), gets a VPC range that overlaps no
other stack's VPC (DigitalOcean refuses overlapping VPCs in one account) nor the DOKS default
networks, and is validated before it is written.
"""

from __future__ import annotations

import argparse
import io
import ipaddress
import re
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from infra.catalog.doks import DEFAULT_CLUSTER_SUBNET, DEFAULT_SERVICE_SUBNET
from infra.config import (
    ENVIRONMENTS,
    NS,
    load_config,
    read_stack_file,
)
from infra.errors import UserError, yaml_error_line
from infra.project import project_root
from infra.stackschema import MODELINE

_STACK_NAME = re.compile(r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$")


def register(subparsers) -> None:
    p = subparsers.add_parser("new-env", help="write a commented stack file for a new environment",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="new stack name (e.g. staging-eu); the file is stacks/Pulumi.<name>.yaml")
    p.add_argument("--from", dest="source", required=True, help="existing stack to copy (dev, staging, prod, ...)")
    p.add_argument("--environment", choices=ENVIRONMENTS, help="environment kind (default: the source's)")
    p.add_argument("--region", help="DigitalOcean region (default: the source's)")
    p.add_argument("--vpc-cidr", help="VPC range (default: the next free /20 in 10.0.0.0/8)")
    p.add_argument("--root", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--force", action="store_true", help="overwrite an existing stack file")
    p.set_defaults(func=run)


def used_networks(stacks_dir: Path, exclude: Path | None = None) -> list[tuple[ipaddress.IPv4Network, str]]:
    """Every VPC and cluster/service range the other stacks use, plus the DOKS defaults.

    Each range comes with who uses it, so an overlap can be named. `exclude` is the file being
    overwritten with --force: its own old ranges are not taken by anyone else.
    """
    nets = [
        (ipaddress.ip_network(DEFAULT_CLUSTER_SUBNET), "the DOKS default pod network"),
        (ipaddress.ip_network(DEFAULT_SERVICE_SUBNET), "the DOKS default service network"),
    ]
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        if exclude is not None and path.resolve() == exclude.resolve():
            continue
        for key, net in _stack_networks(path).items():
            nets.append((net, f"{path.name} network.{key}"))
    return nets


def _stack_networks(path: Path) -> dict[str, ipaddress.IPv4Network]:
    values, _ = read_stack_file(path)
    network = values.get(NS + "network") or {}
    found = {}
    for key in ("vpc_cidr", "cluster_subnet", "service_subnet"):
        if isinstance(network, dict) and network.get(key):
            try:
                found[key] = ipaddress.ip_network(network[key])
            except ValueError:
                pass
    return found


def next_free_vpc(used: list[tuple[ipaddress.IPv4Network, str]], prefix: int = 20) -> str:
    for candidate in ipaddress.ip_network("10.0.0.0/8").subnets(new_prefix=prefix):
        if not any(candidate.overlaps(u) for u, _ in used):
            return str(candidate)
    raise UserError("no free /20 left in 10.0.0.0/8; pass --vpc-cidr")


def check_vpc_is_free(vpc: str, used: list[tuple[ipaddress.IPv4Network, str]]) -> None:
    """DigitalOcean refuses a VPC range that overlaps another in the account: say so before `pulumi up`."""
    try:
        net = ipaddress.ip_network(vpc)
    except ValueError:
        raise UserError(f"--vpc-cidr {vpc!r} is not a network in CIDR notation (e.g. 10.40.0.0/20)") from None
    clashes = [who for u, who in used if net.overlaps(u)]
    if clashes:
        raise UserError(
            f"--vpc-cidr {vpc} overlaps {', '.join(clashes)}; pick a free range or omit --vpc-cidr "
            "to get the next free /20"
        )


def choose_vpc(requested: str | None, target: Path, stacks_dir: Path) -> str:
    """The new stack's VPC range: as requested, else the overwritten stack's own, else the next free /20.

    Overwriting a stack with --force keeps its VPC when nothing else uses it, since a new range
    would replace the live VPC and everything inside it.
    """
    used = used_networks(stacks_dir, exclude=target)
    if requested:
        check_vpc_is_free(requested, used)
        return requested
    own = _stack_networks(target).get("vpc_cidr") if target.is_file() else None
    if own is not None and not any(own.overlaps(u) for u, _ in used):
        return str(own)
    return next_free_vpc(used)


def load_round_trip(yaml: YAML, path: Path):
    """The stack file as a comment-preserving document, or one clear UserError naming the file."""
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"))
    except YAMLError as err:
        raise UserError(yaml_error_line(path, err)) from None
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise UserError(f"{path}: expected a mapping with a `config:` mapping (as `pulumi config` writes it)")
    return doc


def run(args) -> int:
    root = project_root(args.root)
    stacks_dir = root / "stacks"
    if not _STACK_NAME.match(args.name):
        raise UserError(f"{args.name!r} is not a valid stack name; use lowercase letters, digits and '-'")
    source = stacks_dir / f"Pulumi.{args.source}.yaml"
    if not source.is_file():
        existing = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))
        raise UserError(f"--from {args.source!r}: no stack file {source}; stacks: {', '.join(existing)}")
    target = stacks_dir / f"Pulumi.{args.name}.yaml"
    if target.exists() and not args.force:
        raise UserError(f"{target} exists; pass --force to overwrite")

    yaml = YAML()
    yaml.preserve_quotes = True
    doc = load_round_trip(yaml, source)
    config = doc["config"]
    environment = args.environment or config.get(NS + "environment")
    config[NS + "environment"] = environment
    if args.region:
        config[NS + "region"] = args.region
    vpc = choose_vpc(args.vpc_cidr, target, stacks_dir)
    if config.get(NS + "network") is None:
        config[NS + "network"] = CommentedMap()
    elif not isinstance(config[NS + "network"], dict):
        raise UserError(f"{source}: `{NS}network` must be a mapping (e.g. `vpc_cidr: 10.10.0.0/20`)")
    config[NS + "network"]["vpc_cidr"] = vpc
    # Custom cluster/service subnets must not be shared with the source either: drop them (the new
    # cluster then uses the DOKS defaults) unless the user edits them in afterwards.
    for key in ("cluster_subnet", "service_subnet"):
        if key in config[NS + "network"]:
            del config[NS + "network"][key]
    for key in list(config):
        if isinstance(config[key], dict) and set(config[key]) == {"secure"}:
            del config[key]  # ciphertext is bound to the source stack's secrets provider
    doc.yaml_set_start_comment(
        f"{MODELINE.removeprefix('# ')}\n"
        f"{args.name}: created with `infra new-env {args.name} --from {args.source}`. Review every value below —\n"
        "it is a copy of that stack's — then set this stack's secrets with `pulumi config set --secret`.\n"
        "Every key is documented in docs/configuration.md."
    )
    buf = io.StringIO()
    yaml.dump(doc, buf)
    text = buf.getvalue()

    from ruamel.yaml import YAML as _Plain

    plain = _Plain(typ="safe").load(text)["config"]
    secret_keys = {k for k, v in plain.items() if isinstance(v, dict) and set(v) == {"secure"}}
    load_config(plain, stack=args.name, secret_keys=secret_keys, base_dir=root, source=str(target.name))
    target.write_text(text)
    print(f"wrote {target.relative_to(root)} (environment {environment}, VPC {vpc}); next: `pulumi stack init {args.name}`")
    return 0
