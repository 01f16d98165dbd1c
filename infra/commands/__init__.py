"""Subcommands of the `infra` CLI; each module exposes register(subparsers)."""
