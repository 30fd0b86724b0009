"""``koord``: one entry point, one module per subcommand.

Each module in ``COMMAND_MODULES`` exposes ``register(subparsers) -> None``, which adds its subcommand and
sets ``func`` (``(argparse.Namespace) -> int``) as the parser default. Adding a command is adding a module
and one line here.

Exit codes: 0 ok; 1 the run found a problem (a profile failed validation, a plugin failed to load);
2 bad usage or bad input (argparse errors, a file that cannot be read, an unknown plugin name).
A ``KoordError`` prints as clean lines on stderr; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from koord_framework import __version__
from koord_framework.errors import KoordError, ValidationError

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2

COMMAND_MODULES: list[str] = [
    "koord_framework.cli.plugins",
    "koord_framework.cli.profile",
    "koord_framework.cli.simulate",
    "koord_framework.cli.deschedule",
    "koord_framework.cli.koordlet",
    "koord_framework.cli.serve",
    "koord_framework.cli.devicedaemon",
    "koord_framework.cli.manager",
    "koord_framework.cli.runtimeproxy",
]
"""Modules that register a subcommand, in the order ``koord --help`` lists them."""
PLUGIN_COMMANDS_GROUP = "koord.cli.commands"
"""Entry-point group of ``register(subparsers)`` functions that plugin distributions contribute."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="koord",
        description="Koordinator's QoS-aware co-location scheduling, as a plugin platform.",
    )
    parser.add_argument("--version", action="version", version=f"koord {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    # Installed distributions may add subcommands (``koord quota`` comes with the ElasticQuota plugin).
    for ep in sorted(entry_points(group=PLUGIN_COMMANDS_GROUP), key=lambda e: e.name):
        ep.load()(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # argparse exits 2 on bad usage and 0 after --help / --version
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = func(args)
    except ValidationError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_PROBLEM
    except KoordError as exc:
        print(f"koord: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
