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
    STACK_NAME_RULE,
    load_config,
    parse_stack_text,
    read_stack_file,
    stack_name_problem,
)
from infra.errors import Problem, UserError, yaml_error_line
from infra.layout_fit import require_layouts_fit
from infra.project import project_root
from infra.stackschema import MODELINE
from infra.tuning.stackfile import guess_indent


def register(subparsers) -> None:
    p = subparsers.add_parser("new-env", help="write a commented stack file for a new environment",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help=f"new stack name, {STACK_NAME_RULE}; the file is stacks/Pulumi.<name>.yaml")
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


def load_round_trip(yaml: YAML, path: Path, text: str | None = None):
    """The stack file as a comment-preserving document, or one clear UserError naming the file."""
    try:
        doc = yaml.load(text if text is not None else path.read_text(encoding="utf-8"))
    except YAMLError as err:
        raise UserError(yaml_error_line(path, err)) from None
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise UserError(f"{path}: expected a mapping with a `config:` mapping (as `pulumi config` writes it)")
    return doc


def round_trip_yaml(text: str) -> YAML:
    """A round-trip dumper that writes the file as it is indented (a re-indented list would leave its
    comments behind at the old column) and never re-wraps a long line."""
    mapping_indent, dash_offset = guess_indent(text)
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=mapping_indent, sequence=mapping_indent + dash_offset, offset=dash_offset)
    return yaml


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _key_lines(lines: list[str], line: int, col: int) -> range:
    """The lines of a block-mapping key and its value, with the comment lines just above it at its
    indentation (they introduce it) but not the comments after it (they introduce what follows)."""
    end = line + 1
    while end < len(lines):
        stripped = lines[end].strip()
        if stripped and not stripped.startswith("#") and _indent(lines[end]) <= col:
            break
        end += 1
    while end > line + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    start = line
    while start > 0 and lines[start - 1].lstrip().startswith("#") and _indent(lines[start - 1]) == col:
        start -= 1
    return range(start, end)


def drop_keys(text: str, doc, drop: dict[str, list[str]]) -> str:
    """`text` without the given keys (config key → its sub-keys to drop, or [] for the key itself),
    each with the comment lines that introduce it: a comment about custom subnets must not survive
    the subnets. Flow-style mappings hold no own comment lines and are edited in the tree later."""
    config = doc["config"]
    doomed: set[int] = set()
    for key, subkeys in drop.items():
        if key not in config:
            continue
        if not subkeys:
            line, col = config.lc.key(key)
            doomed.update(_key_lines(text.splitlines(), line, col))
            continue
        section = config[key]
        if not isinstance(section, CommentedMap) or section.fa.flow_style():
            continue
        for sub in subkeys:
            if sub in section:
                line, col = section.lc.key(sub)
                doomed.update(_key_lines(text.splitlines(), line, col))
    lines = text.splitlines(keepends=True)
    return "".join(line for i, line in enumerate(lines) if i not in doomed)


ENVIRONMENT_DEFAULTS = {
    "dev": "dev defaults: no HA control plane, nothing protected, no monitoring stack.",
    "staging": "staging defaults: no HA control plane, not protected, monitoring on.",
    "prod": "prod defaults: HA control plane, protect on stateful resources, monitoring on.",
}


def retarget_comments(text: str, source: str, name: str, old_env: str | None, new_env: str) -> str:
    """Comments copied from the source that name it as a command argument (`infra doctor dev`,
    `--stack dev`, `Pulumi.dev.yaml`) now name the new stack; a statement of the source
    environment's defaults is replaced by the new environment's when the environment changed."""
    stack_ref = re.compile(
        rf"((?:infra (?:plan|doctor|diff|bench)|pulumi stack (?:select|init))\s+|--stack[ =]|Pulumi\.)"
        rf"{re.escape(source)}(?![\w-])"
    )
    env_ref = re.compile(rf"\b{re.escape(old_env)} defaults:[^.]*\.") if old_env and old_env != new_env else None
    out = []
    for line in text.splitlines(keepends=True):
        head, hash_, comment = line.partition("#")
        if hash_:
            comment = stack_ref.sub(lambda m: m.group(1) + name, comment)
            if env_ref is not None:
                comment = env_ref.sub(ENVIRONMENT_DEFAULTS.get(new_env, f"{new_env} defaults apply."), comment)
            line = head + hash_ + comment
        out.append(line)
    return "".join(out)


def run(args) -> int:
    root = project_root(args.root)
    stacks_dir = root / "stacks"
    for what, name in (("NAME", args.name), ("--from", args.source)):
        problem = stack_name_problem(name)
        if problem:
            raise UserError([Problem(f"{what} {name!r}" if what == "--from" else what, problem)])
    source = stacks_dir / f"Pulumi.{args.source}.yaml"
    if not source.is_file():
        existing = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))
        raise UserError(f"--from {args.source!r}: no stack file {source}; stacks: {', '.join(existing)}")
    target = stacks_dir / f"Pulumi.{args.name}.yaml"
    if target.exists() and not args.force:
        raise UserError(f"{target} exists; pass --force to overwrite")

    try:
        original = source.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{source}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    yaml = round_trip_yaml(original)
    doc = load_round_trip(yaml, source, original)
    # Custom cluster/service subnets must not be shared with the source either: drop them (the new
    # cluster then uses the DOKS defaults) unless the user edits them in afterwards. Secrets go too:
    # their ciphertext is bound to the source stack's secrets provider.
    drop: dict[str, list[str]] = {NS + "network": ["cluster_subnet", "service_subnet"]}
    drop.update({key: [] for key, value in doc["config"].items() if isinstance(value, dict) and set(value) == {"secure"}})
    text = drop_keys(original, doc, drop)
    doc = load_round_trip(yaml, source, text)
    config = doc["config"]
    old_environment = config.get(NS + "environment")
    environment = args.environment or old_environment
    config[NS + "environment"] = environment
    if args.region:
        config[NS + "region"] = args.region
    vpc = choose_vpc(args.vpc_cidr, target, stacks_dir)
    if config.get(NS + "network") is None:
        config[NS + "network"] = CommentedMap()
    elif not isinstance(config[NS + "network"], dict):
        raise UserError(f"{source}: `{NS}network` must be a mapping (e.g. `vpc_cidr: 10.10.0.0/20`)")
    config[NS + "network"]["vpc_cidr"] = vpc
    for key, subkeys in drop.items():  # what drop_keys could not remove as lines (flow style)
        section = config.get(key)
        if subkeys and isinstance(section, dict):
            for sub in subkeys:
                section.pop(sub, None)
        elif not subkeys:
            config.pop(key, None)
    changed = f" (environment {environment}, was {old_environment})" if environment != old_environment else ""
    doc.yaml_set_start_comment(
        f"{MODELINE.removeprefix('# ')}\n"
        f"{args.name}: created with `infra new-env {args.name} --from {args.source}`{changed}. Review every value\n"
        f"below — it is a copy of that stack's, and so are the comments about its sizes and traffic — then set\n"
        "this stack's secrets with `pulumi config set --secret`. Every key is documented in docs/configuration.md."
    )
    buf = io.StringIO()
    yaml.dump(doc, buf)
    text = retarget_comments(buf.getvalue(), args.source, args.name, old_environment, str(environment))

    values, secret_keys = parse_stack_text(text, target.name)
    cfg = load_config(values, stack=args.name, secret_keys=secret_keys, base_dir=root, source=str(target.name))
    require_layouts_fit(cfg, source=str(target.name))  # the copy must plan, not only validate
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target.relative_to(root)} (environment {environment}, VPC {vpc}); next: `pulumi stack init {args.name}`")
    return 0
