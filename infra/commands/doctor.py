"""`infra doctor <stack>`: pre-flight checks against the DigitalOcean API before `pulumi up`; for an
existing-cluster stack, against the cluster's own API (infra/cluster_doctor.py).

Prints one table (pass / warn / fail, with a fix for each problem; a spinner on a terminal while
the API is asked) and exits 1 when anything
failed, 0 otherwise; a stack file that does not validate exits 2 like every other command.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.text import Text

from infra import cluster_doctor, preflight
from infra.cli_args import float_in, non_negative_int
from infra.commands import tables
from infra.commands.progress import status
from infra.errors import Problem, UserError
from infra.preflight import Check, DoctorTarget, PoolTarget
from infra.project import project_root


def target_from_config(cfg: Any) -> DoctorTarget:
    """Reduce a validated StackConfig to what the API can confirm.

    The system pool is a pool like any other here: its size must exist in the region and its
    nodes count against the account's Droplet limit.
    """
    system = cfg.cluster.system_pool
    pools = [PoolTarget("system", system.size, int(system.nodes))]
    pools += [PoolTarget(p.name, p.size, int(p.max_node_count)) for p in cfg.gpu_pools]
    nfs = cfg.model_cache.size_gib if cfg.model_cache.kind == "nfs" else None
    return DoctorTarget(
        region=cfg.region,
        kubernetes_version_prefix=str(cfg.cluster.version),
        pools=pools,
        nfs_size_gib=nfs,
        planned_max_nodes=sum(p.max_nodes for p in pools),
    )


def load_stack_file(stack: str, root: Path) -> Any:
    """The lead's validated loader; a seam so tests can hand in a small config object."""
    from infra.layout_fit import load_plannable_stack_file

    return load_plannable_stack_file(stack, root)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="pre-flight checks against the DigitalOcean API (token, limits, region, sizes, versions)",
        description=(
            "Check a stack against the DigitalOcean API before `pulumi up`. The token comes from "
            "DIGITALOCEAN_TOKEN (or DIGITALOCEAN_ACCESS_TOKEN), else from the stack's "
            "digitalocean:token secret through the Pulumi CLI; DIGITALOCEAN_API_URL overrides the API URL."
        ),
    )
    parser.add_argument("stack", help="stack name: reads stacks/Pulumi.<stack>.yaml")
    parser.add_argument(
        "--root", type=Path, default=None, help="project root (default: the project around the current directory)"
    )
    parser.add_argument("--retries", type=non_negative_int, default=0, help="retries for 429/5xx answers (default 0)")
    parser.add_argument(
        "--connect-timeout", type=float_in(preflight.MAX_TIMEOUT_S), metavar="SECONDS",
        help=f"give up connecting to the API after this long (default {preflight.CONNECT_TIMEOUT_S:g}, "
        f"or ${preflight.CONNECT_TIMEOUT_ENV_VAR})",
    )
    parser.add_argument(
        "--read-timeout", type=float_in(preflight.MAX_TIMEOUT_S), metavar="SECONDS",
        help=f"give up on an API answer after this long without data (default {preflight.READ_TIMEOUT_S:g}, "
        f"or ${preflight.READ_TIMEOUT_ENV_VAR})",
    )
    parser.add_argument(
        "--kubeconfig", type=Path, default=None, metavar="FILE",
        help="an existing-cluster stack (cluster.existing): the kubeconfig to check the cluster with (default: $KUBECONFIG); "
        "no DigitalOcean token is needed",
    )
    parser.set_defaults(func=run)


def stack_declares_token(stack: str, root: Path) -> bool:
    """Whether the stack file holds a `digitalocean:token` (only then is the Pulumi CLI asked)."""
    from infra.config import read_stack_file, stack_file

    path = stack_file(stack, root)
    if not path.is_file():
        return False
    values, _secret_keys = read_stack_file(path)
    return preflight.PULUMI_TOKEN_KEY in values


def run(args: argparse.Namespace) -> int:
    root = project_root(args.root)
    cfg = load_stack_file(args.stack, root)  # ConfigError → exit 2 via infra.cli
    if getattr(getattr(cfg, "cluster", None), "existing", None) is not None:
        return run_existing(args, cfg)
    if getattr(args, "kubeconfig", None) is not None:
        raise UserError([Problem("--kubeconfig", f"applies to an existing-cluster stack (cluster.existing) only; {args.stack} creates its DOKS cluster")])
    target = target_from_config(cfg)
    env = os.environ
    found = preflight.find_token(env, args.stack, root, stack_declares_token(args.stack, root))
    api_url = preflight.api_url_from_env(env)
    problem = preflight.api_url_problem(api_url)
    if problem:
        shown = preflight.redact(api_url, [found.token])
        raise UserError([Problem(f"{preflight.API_URL_ENV_VAR} {shown!r}", problem)])
    try:
        connect = args.connect_timeout or preflight.timeout_from_env(env, preflight.CONNECT_TIMEOUT_ENV_VAR, preflight.CONNECT_TIMEOUT_S)
        read = args.read_timeout or preflight.timeout_from_env(env, preflight.READ_TIMEOUT_ENV_VAR, preflight.READ_TIMEOUT_S)
    except ValueError as err:
        raise UserError(str(err)) from None
    client = (
        preflight.make_client(found.token, api_url, retries=args.retries, connect_timeout_s=connect, read_timeout_s=read)
        if found.token
        else None
    )
    with status(f"checking stack {args.stack} against the DigitalOcean API") as update:
        checks = preflight.run_checks(
            target, client, missing_token=found.detail, missing_fix=found.fix, secrets=[found.token],
            progress=lambda name: update(f"checking {name}"),
        )
    source = f", {found.detail}" if found.token else ""
    header = f"infra doctor {args.stack}: region {target.region}, API {api_url}{source}"
    print(preflight.redact(header, [found.token]))
    print(render_checks(checks))
    return preflight.exit_code(checks)


def run_existing(args: argparse.Namespace, cfg: Any) -> int:
    """An existing cluster: its API, through a kubeconfig file, instead of DigitalOcean's."""
    expect = cluster_doctor.expectation_from_config(cfg)
    path, where = cluster_doctor.kubeconfig_path(args.kubeconfig, os.environ)
    access = cluster_doctor.read_kubeconfig(path, where, expect.context)
    api = cluster_doctor.KubeApi(access, connect_timeout_s=args.connect_timeout or cluster_doctor.CONNECT_TIMEOUT_S,
                                 read_timeout_s=args.read_timeout or cluster_doctor.READ_TIMEOUT_S)  # fmt: skip
    try:
        with status(f"checking stack {args.stack} against its cluster's API") as update:
            update(f"asking {access.server}")
            answers = cluster_doctor.ask_cluster(api)
    finally:
        api.close()
    checks = cluster_doctor.cluster_checks(expect, answers)
    print(f"infra doctor {args.stack}: existing cluster, API {access.server}, context {access.context} ({where})")
    print(render_checks(checks))
    return preflight.exit_code(checks)


_MARK = {"pass": ("PASS", "green"), "warn": ("WARN", "yellow"), "fail": ("FAIL", "bold red")}


def render_checks(checks: Sequence[Check], *, terminal: bool | None = None) -> str:
    """One row per check: status, check, detail, and the fix for anything not passing; then the counts."""
    rows = [(Text(*_MARK[c.status]), c.name, c.detail, c.fix if c.status != "pass" else "") for c in checks]
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("pass", "warn", "fail")}
    return (
        tables.render(("STATUS", "CHECK", "DETAIL", "FIX"), rows, terminal=terminal)
        + f"\n\nchecks: {counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail"
    )
