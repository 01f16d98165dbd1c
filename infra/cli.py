"""`infra`: the toolkit's command line (plan, diff, layout, doctor, catalog, bench, tune, new-env).

Each subcommand lives in `infra/commands/<name>.py` and exposes `register(subparsers)`, which adds
its parser and sets `func(args) -> int`. User mistakes raise `UserError` and are printed as one
clear message with exit code 2; no traceback. An `OSError` that reaches `main` is, in practice, a
path the user gave that cannot be read or written, so it is reported the same way.
"""

from __future__ import annotations

import argparse
import importlib
import os
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
    "infra.commands.charts",
    "infra.commands.bench",
    "infra.commands.tune",
    "infra.commands.rollout",
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


def _innermost_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command the arguments chose: `infra tune ingest` for `tune ingest ...`."""
    while True:
        chosen = None
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(args, action.dest, None) or "")
        if chosen is None:
            return parser
        parser = chosen


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Like `parser.parse_args`, but an unknown option is reported with the usage of the subcommand
    it was given to (`infra layout --bogus` shows `infra layout`'s usage, not the list of commands)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        _innermost_parser(parser, args).error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _stdout_closed() -> int:
    """`infra layout --json | head -1`: the reader left. Like other Unix tools, stop quietly; point
    stdout at /dev/null so the interpreter's final flush does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
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
