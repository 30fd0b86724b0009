"""Plumbing the manifest-driven commands (``koord simulate``, ``koord deschedule``) share, so they take the
same options the same way: a repeatable ``--cluster``, a profile that defaults to the one shipped in
``configs/``, a ``--now`` in RFC 3339, bad input reported as ``koord <command>: error: ...`` with exit
status 2, and the same JSON and table output."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Final

from koord_framework.cluster.clock import parse_time

__all__ = [
    "EXIT_BAD_INPUT",
    "UsageError",
    "add_manifest_command",
    "bad_input",
    "config_path",
    "cut",
    "parse_now",
    "print_json",
]

EXIT_BAD_INPUT: Final = 2


class UsageError(ValueError):
    """An option the command cannot use; the message names the option."""


def add_manifest_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    summary: str,
    description: str | None,
    config_help: str,
) -> argparse.ArgumentParser:
    """``koord <name>`` over a cluster described by manifests: a required, repeatable ``--cluster`` and a
    ``--config`` profile; the command adds its own options to the parser returned."""
    parser = subparsers.add_parser(
        name,
        help=summary,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--cluster",
        action="append",
        required=True,
        metavar="PATH",
        help="manifest file or folder (repeatable)",
    )
    parser.add_argument("--config", metavar="FILE", help=config_help)
    return parser


def bad_input(command: str, message: str) -> int:
    """Report bad input of ``koord <command>`` on stderr; returns the exit status."""
    print(f"koord {command}: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def parse_now(value: str | None) -> float | None:
    """``--now`` as seconds since the epoch; ``None`` when not given (the command picks its default)."""
    try:
        return parse_time(value) if value else None
    except ValueError as exc:
        raise UsageError(f"--now {value!r}: not an RFC 3339 time ({exc})") from exc


def config_path(given: str | None, default: Path, *, option: str = "--config") -> Path:
    """The file an option names, else ``default`` relative to the working directory, else to the source
    tree this package runs from (so the shipped profiles work from anywhere in a checkout)."""
    if given:
        return Path(given)
    if default.is_file():
        return default
    in_tree = Path(__file__).resolve().parents[2] / default
    if in_tree.is_file():
        return in_tree
    raise UsageError(f"no {option} given and {default} was not found")


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns, an ellipsis marking the cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
