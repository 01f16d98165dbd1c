"""`infra`: the toolkit's command line (plan, diff, layout, doctor, catalog, bench, tune, new-env).

Each subcommand lives in `infra/commands/<name>.py` and exposes `register(subparsers)`, which adds
its parser and sets `func(args) -> int`. User mistakes raise `UserError` and are printed as one
clear message with exit code 2; no traceback. An `OSError` that reaches `main` is, in practice, a
path the user gave that cannot be read or written, so it is reported the same way.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from infra.commands.files import os_error_line
from infra.errors import UserError

# Subcommand modules, in the order `infra --help` lists them.
COMMAND_MODULES = [
    "infra.commands.plan",
    "infra.commands.diff",
    "infra.commands.layout",
    "infra.commands.new_env",
    "infra.commands.doctor",
    "infra.commands.catalog",
    "infra.commands.bench",
    "infra.commands.tune",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infra",
        description="Inference platform toolkit: offline plans, diffs, layout planning, pre-flight checks.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"error: {err.render()}", file=sys.stderr)
        return 2
    except OSError as err:  # last resort: commands should have named the flag already
        print(f"error: {os_error_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
