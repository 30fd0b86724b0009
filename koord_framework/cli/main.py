"""``koord``: one entry point, one module per subcommand, imported only when its command runs.

``COMMANDS`` maps each subcommand to the module that registers it and the one-line summary ``koord --help``
shows. The module exposes ``register(subparsers) -> None``, which adds its subcommand(s) and sets ``func``
(``(argparse.Namespace) -> int``) as the parser default. Adding a command is adding a module and **one
line** to ``COMMANDS``. Only the module of the command being run is imported (``koord --help`` lists the
summaries without importing any), so a command's heavy imports cost nothing to the others. Installed
distributions add commands through the ``koord.cli.commands`` entry-point group (the entry point's name is
the command's name), loaded the same way.

Exit codes: 0 ok; 1 the run found a problem (a profile failed validation, a plugin failed to load);
2 bad usage or bad input (argparse errors, a file that cannot be read, an unknown plugin name).
A ``KoordError`` prints as clean lines on stderr; anything else is a bug and keeps its traceback. A reader
that closes the pipe early (``koord plugins list | head``) ends the command quietly with status 0.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Any, NamedTuple

from koord_framework import __version__
from koord_framework.errors import KoordError, ValidationError

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2


class Command(NamedTuple):
    module: str
    """The module whose ``register(subparsers)`` adds the command."""
    summary: str
    """What ``koord --help`` says of it (the module's parser repeats it as its ``help``)."""


COMMANDS: dict[str, Command] = {
    "plugins": Command(
        "koord_framework.cli.plugins", "list installed plugins, render a new one, keep READMEs in step"
    ),
    "profile": Command(
        "koord_framework.cli.profile", "validate profiles, print their JSON Schema, show plugin defaults"
    ),
    "simulate": Command(
        "koord_framework.cli.simulate", "schedule the pending pods of a cluster described by manifests"
    ),
    "compare": Command(
        "koord_framework.cli.compare", "run scheduler configurations on the same snapshot and compare them"
    ),
    "deschedule": Command(
        "koord_framework.cli.deschedule", "run descheduling cycles on a cluster described by manifests"
    ),
    "explain": Command(
        "koord_framework.cli.explain", "explain one pod's scheduling, what plugins see on a node, a quota"
    ),
    "koordlet": Command(
        "koord_framework.cli.koordlet",
        "run the node agent (QoS strategies, metrics, NodeMetric report) for one node",
    ),
    "scheduler": Command(
        "koord_framework.cli.serve", "run koord-scheduler against a Kubernetes API server (leader-elected)"
    ),
    "descheduler": Command(
        "koord_framework.cli.serve", "run koord-descheduler against a Kubernetes API server (leader-elected)"
    ),
    "device-daemon": Command(
        "koord_framework.cli.devicedaemon",
        "discover GPUs/RDMA NICs and write the node's Device object (koord-device-daemon)",
    ),
    "manager": Command(
        "koord_framework.cli.manager",
        "run koord-manager: SLO controllers (NodeSLO, NodeMetric, node resources) and webhooks",
    ),
    "runtime-proxy": Command(
        "koord_framework.cli.runtimeproxy",
        "CRI proxy in front of containerd calling the koordlet's runtime hooks (koord-runtime-proxy)",
    ),
    "snapshot": Command(
        "koord_framework.cli.snapshot", "dump a live cluster into manifests every --cluster command reads"
    ),
    "completion": Command("koord_framework.cli.completion", "print a bash or zsh completion script"),
}
"""Subcommand -> (registering module, summary), in the order ``koord --help`` lists them."""
COMMAND_MODULES: list[str] = list(dict.fromkeys(c.module for c in COMMANDS.values()))
"""The registering modules, each once (what ``build_parser(full=True)`` imports)."""
PLUGIN_COMMANDS_GROUP = "koord.cli.commands"
"""Entry-point group of ``register(subparsers)`` functions that plugin distributions contribute."""


def _chosen(argv: Sequence[str] | None) -> str | None:
    """The subcommand ``argv`` runs: its first word that is not an option (``koord`` has no option taking a
    value before the subcommand)."""
    for word in sys.argv[1:] if argv is None else argv:
        if not word.startswith("-"):
            return word
    return None


def _plugin_commands() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in sorted(entry_points(group=PLUGIN_COMMANDS_GROUP), key=lambda e: e.name)}


def build_parser(argv: Sequence[str] | None = None, *, full: bool = True) -> argparse.ArgumentParser:
    """The ``koord`` parser. ``full`` registers every command for real (tests, completion scripts); else only
    the command ``argv`` runs is imported and the others are summary-only placeholders."""
    parser = argparse.ArgumentParser(
        prog="koord",
        description="Koordinator's QoS-aware co-location scheduling, as a plugin platform.",
    )
    parser.add_argument("--version", action="version", version=f"koord {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = None if full else _chosen(argv)
    if chosen in COMMANDS:  # first: its module may register sibling commands (scheduler, descheduler)
        importlib.import_module(COMMANDS[chosen].module).register(subparsers)
    for name, command in COMMANDS.items():
        if name in subparsers.choices:
            continue
        if full:
            importlib.import_module(command.module).register(subparsers)
        else:
            subparsers.add_parser(name, help=command.summary, add_help=False)
    # Installed distributions may add subcommands (``koord quota`` comes with the ElasticQuota plugin).
    for name, ep in _plugin_commands().items():
        if name in subparsers.choices:
            continue
        if full or name == chosen:
            ep.load()(subparsers)
        else:
            dist = ep.dist.name if ep.dist is not None else "a plugin"
            subparsers.add_parser(name, help=f"(from {dist})", add_help=False)
    _plain_help(parser)
    return parser


_LITERAL = re.compile(r"``([^`]+)``")


def _plain(text: str) -> str:
    """Docstrings double as help texts: their reST literals (````koord plugins list````) read as plain."""
    return _LITERAL.sub(r"\1", text)


class _PlainText(argparse.HelpFormatter):
    """Mixed into a parser's own formatter class: descriptions, epilogs and option help without reST."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return super()._fill_text(_plain(text), width, indent)

    def _expand_help(self, action: argparse.Action) -> str:
        return _plain(super()._expand_help(action))


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` and every subcommand parser under it the plain-text variant of its formatter."""
    cls = parser.formatter_class
    if isinstance(cls, type) and not issubclass(cls, _PlainText):
        plain: Any = type(f"Plain{cls.__name__}", (_PlainText, cls), {})
        parser.formatter_class = plain
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _plain_help(sub)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _pipe_closed()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser(argv, full=False)
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


def _pipe_closed() -> int:
    """The reader went away (``| head``): stop quietly, as Unix tools do. Python would report the failed
    flush of ``sys.stdout`` at exit, so stdout is pointed at ``/dev/null`` first."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's capture)
        pass
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
