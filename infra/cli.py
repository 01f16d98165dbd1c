"""`infra`: the toolkit's command line (plan, diff, layout, doctor, catalog, bench, tune, new-env).

Each subcommand lives in `infra/commands/<name>.py` and exposes `register(subparsers)`, which adds
its parser and sets `func(args) -> int`. User mistakes raise `UserError` and are printed as one
clear message with exit code 2; no traceback. An `OSError` that reaches `main` is, in practice, a
path the user gave that cannot be read or written, so it is reported the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Iterator

from infra.commands.files import os_error_line
from infra.errors import UserError

# CPython collects generation 0 every 700 net allocations. A command imports and builds a few
# hundred thousand objects that live until it exits (the Pulumi SDK's and pydantic's classes, the
# rendered objects), and each collection of an older generation walks them again: a quarter of the
# CPU of `infra plan prod` (benchmarks/README.md). Collecting every 50,000 allocations keeps cycles
# bounded (peak memory does not move) at a fraction of the cost.
GC_GEN0_THRESHOLD = 50_000

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


def command_name(module_name: str) -> str:
    """The command a subcommand module registers: `infra.commands.new_env` → `new-env`."""
    return module_name.rsplit(".", 1)[-1].replace("_", "-")


def modules_for(argv: list[str] | None) -> list[str]:
    """The subcommand modules `argv` needs: only the named command's when it comes first (`infra
    plan prod` need not import the bench, tune or doctor machinery — a tenth of a second of a plan),
    else all of them (`infra --help`, a typo: argparse lists every command)."""
    first = argv[0] if argv else None
    named = [m for m in COMMAND_MODULES if command_name(m) == first]
    return named or list(COMMAND_MODULES)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The `infra` parser with the subcommands `argv` needs (every one when `argv` is None)."""
    parser = argparse.ArgumentParser(
        prog="infra",
        description="Inference platform toolkit: offline plans, diffs, layout planning, pre-flight checks.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in modules_for(argv):
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


@contextlib.contextmanager
def command_collections(*, owns_process: bool) -> Iterator[None]:
    """The garbage collector at GC_GEN0_THRESHOLD while a command runs. Afterwards, a caller that
    goes on (tests call `main` in-process) gets its thresholds back; a process about to end freezes
    its heap instead: nothing the command allocated needs collecting any more, and frozen objects
    are skipped by the collections the interpreter runs at shutdown, which otherwise walk the whole
    heap once more (a quarter of the CPU of `infra plan prod`, benchmarks/README.md). Atexit
    handlers and stream flushes run as usual."""
    before = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        if owns_process:
            gc.freeze()
        else:
            gc.set_threshold(*before)


def main(argv: list[str] | None = None) -> int:
    """The `infra` command. Without `argv` it is the process's entry point (the console script,
    `python -m infra.cli`), and the process ends right after it."""
    with command_collections(owns_process=argv is None):
        return run_command(sys.argv[1:] if argv is None else argv)


def run_command(argv: list[str]) -> int:
    """Parse `argv`, run the command, and turn a user mistake into one line and exit code 2."""
    try:
        parser = build_parser(argv)  # imports the command, which may load a user-given catalog
    except UserError as err:
        print(f"error: {err.render()}", file=sys.stderr)
        return 2
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
