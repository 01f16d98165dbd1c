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
from pathlib import Path

from infra.errors import Problem, UserError

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


def os_error_line(err: OSError, named: Path | str | None = None) -> str:
    """`PATH: REASON` from an OSError, without Python's `[Errno N]` noise; just `REASON` when the
    path is `named`, which the caller's message already names."""
    reason = err.strerror or str(err)
    if err.filename and (named is None or str(err.filename) != str(named)):
        return f"{err.filename}: {reason}"
    return reason


def _unwritable(path: Path, *, directory: bool) -> str | None:
    """Why `path` cannot be written, or None. A directory that does not exist yet is judged by its
    nearest existing ancestor, since the command creates the missing levels (`mkdir -p`); a file's
    directory must already exist, as with a shell redirection, so a typo does not litter the disk."""
    path = path.absolute()
    if path.exists():
        if directory and not path.is_dir():
            return "it is a file, not a directory"
        if not directory and path.is_dir():
            return "it is a directory"
        if not os.access(path, os.W_OK | (os.X_OK if directory else 0)):
            return "permission denied"
        return None
    if not directory and not path.parent.exists():
        return f"directory {path.parent} does not exist"
    for ancestor in path.parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                return f"{ancestor} is a file, not a directory"
            if not os.access(ancestor, os.W_OK | os.X_OK):
                return f"permission denied in {ancestor}"
            return None
    return None


def check_output_file(path: Path, flag: str) -> None:
    """Refuse an unwritable output file before the work starts: finding out after a full plan or
    render wastes the run, and an OSError at that point used to end in a traceback."""
    reason = _unwritable(path, directory=False)
    if reason:
        raise UserError([Problem(f"{flag} {path}", f"cannot write there: {reason} (need a file path in an existing, writable directory)")])


def check_output_dir(path: Path, flag: str) -> None:
    """Refuse an output directory that cannot be created or written, before the work starts."""
    reason = _unwritable(path, directory=True)
    if reason:
        raise UserError([Problem(f"{flag} {path}", f"cannot write there: {reason} (need a writable directory, or one that can be created)")])


def write_failed(err: OSError, flag: str, path: Path | str) -> UserError:
    """The error for an OSError while writing an output the user named with `flag`: the pre-flight
    check cannot foresee everything (a full disk, a directory made read-only meanwhile)."""
    return UserError([Problem(f"{flag} {path}", f"cannot write: {os_error_line(err, path)}")])


if __name__ == "__main__":
    sys.exit(main())
