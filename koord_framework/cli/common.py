"""Plumbing the manifest-driven commands (``koord simulate``, ``koord deschedule``) share, so they take the
same options the same way: a repeatable ``--cluster``; a profile that defaults to Koordinator's, shipped with
the framework and fitted to the installed plugins (``koord_framework.config.shipped``); a ``--now`` in
RFC 3339 that defaults to the newest NodeMetric of the manifests; bad input reported as
``koord <command>: error: ...`` with exit status 2; and the same JSON and table output."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Final, Literal

from koord_framework.cluster.clock import parse_time

__all__ = [
    "EXIT_BAD_INPUT",
    "UsageError",
    "add_manifest_command",
    "bad_input",
    "cut",
    "klog_level",
    "newest_metric_time",
    "parse_now",
    "print_json",
    "setup_logging",
    "shipped_config",
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
    configs: bool = False,
) -> argparse.ArgumentParser:
    """``koord <name>`` over a cluster described by manifests: a required, repeatable ``--cluster`` and a
    ``--config`` profile (``configs``: one or more, required); the command adds its own options to the parser
    returned."""
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
    if configs:
        parser.add_argument("--config", action="append", required=True, metavar="FILE", help=config_help)
    else:
        parser.add_argument("--config", metavar="FILE", help=config_help)
    return parser


def add_clock_options(parser: argparse.ArgumentParser) -> None:
    """``--seed`` and ``--now`` of the commands that run the scheduler on a virtual clock."""
    parser.add_argument("--seed", type=int, default=0, help="seed of the tie-breaking among equal nodes")
    parser.add_argument(
        "--now",
        metavar="RFC3339",
        help="where the virtual clock starts (default: the newest NodeMetric updateTime, else now)",
    )


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


def shipped_config(component: Literal["scheduler", "descheduler"], command: str) -> Any:
    """Koordinator's profile of ``component``, fitted to the installed plugins and loaded; what was left out
    is said on stderr. Raises ``ValidationError`` as a ``--config`` file would."""
    from koord_framework.config.loader import load_text
    from koord_framework.config.shipped import shipped_profile

    profile = shipped_profile(component)
    note = profile.note(command)
    if note:
        print(note, file=sys.stderr)
    return load_text(profile.text, profile.source, component=component)


def klog_level(verbosity: int) -> int:
    """klog's ``--v`` as a logging level. klog logs errors, warnings and ``V(0)`` info always, and ``V(n)``
    detail only at ``--v`` >= n; Koordinator logs routine detail at 4-5 and its charts run at 4. So 0-3 are
    INFO and 4 and above DEBUG (Python has no finer levels worth mapping)."""
    import logging

    return logging.DEBUG if verbosity >= 4 else logging.INFO


def setup_logging(verbosity: int) -> None:
    """Log to stderr at the level ``--v`` names (the commands' shared format)."""
    import logging

    logging.basicConfig(
        level=klog_level(verbosity),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def newest_metric_time(paths: list[str]) -> float | None:
    """The newest NodeMetric ``status.updateTime`` of the manifests, where a virtual clock starts by default:
    example metrics recorded long ago are then as fresh as when they were taken, not silently expired.

    Raises ``UsageError`` for a ``--cluster`` that holds nothing (an empty file, a folder without
    manifests): running on it would report "0 scheduled" as if that were an answer."""
    from koord_framework.cluster.manifests import MANIFEST_SUFFIXES, load_documents

    newest = None
    for path in paths:
        docs = load_documents([path])
        if not docs:
            what = (
                f"no manifests ({', '.join('*' + s for s in MANIFEST_SUFFIXES)}) in this folder"
                if Path(path).is_dir()
                else "no objects in this file"
            )
            raise UsageError(f"--cluster {path}: {what}")
        for doc in docs:
            if doc.obj.get("kind") != "NodeMetric":
                continue
            t = parse_time((doc.obj.get("status") or {}).get("updateTime"))
            if t is not None and (newest is None or t > newest):
                newest = t
    return newest


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns, an ellipsis marking the cut."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
