"""``koord plugins list [--json]``: every installed plugin of every group, with where it comes from;
``koord plugins new NAME``: a new distribution from the template; ``koord plugins docs PATH [--check]``: the
generated regions (args tables, included examples) of plugin READMEs."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koord_framework.errors import PluginError
from koord_framework.registry import GROUPS, PluginInfo, PluginRegistry

TABLE_WIDTH = 100


@dataclass(frozen=True)
class _Row:
    name: str
    component: str
    points: list[str]
    distribution: str
    version: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "component": self.component,
            "group": GROUPS[self.component],
            "extensionPoints": self.points,
            "distribution": self.distribution,
            "version": self.version,
        }


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "plugins", help="list installed plugins, render a new one, keep READMEs in step", description=__doc__
    )
    sub = parser.add_subparsers(dest="plugins_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda _args: _usage(parser))
    lister = sub.add_parser(
        "list", help="every installed plugin: name, group, extension points, distribution"
    )
    lister.add_argument("--json", action="store_true", help="print JSON instead of a table")
    lister.set_defaults(func=run_list)
    new = sub.add_parser(
        "new",
        help="render a new plugin distribution from the framework's template",
        description="Render a ready-to-install plugin distribution (pyproject, class, args, README, tests).",
    )
    new.add_argument("name", help="the plugin's name, CamelCase (e.g. NodeLabelPreference)")
    new.add_argument(
        "--dest",
        metavar="DIR",
        help="directory to create the distribution in, as DIR/<name> (default: ./koord-plugin-<name>)",
    )
    new.set_defaults(func=run_new)
    docs = sub.add_parser(
        "docs",
        help="regenerate (or, with --check, verify) the generated regions of plugin READMEs",
        description=(
            "Regenerate every <!-- args-table:Model --> and <!-- include:file --> region of each README "
            "(or of DIR/README.md). Args models are found among the installed plugins by class name, or "
            "given as module:Class. With --check nothing is written and the exit code is 1 when a region "
            "is out of date."
        ),
    )
    docs.add_argument("paths", nargs="+", metavar="PATH", help="a README.md, or a plugin directory")
    docs.add_argument("--check", action="store_true", help="write nothing; exit 1 if anything is stale")
    docs.set_defaults(func=run_docs)


def run_new(args: argparse.Namespace) -> int:
    from koord_framework.templates import render_plugin

    try:
        if args.dest:
            target = render_plugin(args.name, Path(args.dest))
        else:
            from koord_framework.templates import slug_of

            target = render_plugin(args.name, Path("."), directory=f"koord-plugin-{slug_of(args.name)}")
    except (ValueError, FileExistsError) as exc:
        print(f"koord: error: {exc}", file=sys.stderr)
        return 2
    print(f"created {target}")
    print(f"next: pip install -e {target} && pytest {target}")
    return 0


def run_docs(args: argparse.Namespace) -> int:
    from koord_framework.docs.args_table import check_readme, installed_args_models, update_readme
    from koord_framework.docs.plugin_readme import own_args_models
    from koord_framework.errors import ValidationError

    installed = installed_args_models()
    failed = False
    for raw in args.paths:
        path = Path(raw)
        readme = path / "README.md" if path.is_dir() else path
        models = {**installed, **own_args_models(readme.parent)}
        if args.check:
            result = check_readme(readme, known=models)
            print(str(result), file=sys.stdout if result.ok else sys.stderr)
            if not result.ok:
                print(f"  fix: koord plugins docs {raw}", file=sys.stderr)
            failed = failed or not result.ok
            continue
        try:
            changed = update_readme(readme, models)
        except ValidationError as exc:
            print(str(exc), file=sys.stderr)
            failed = True
            continue
        labels = ", ".join(r.label for r in changed)
        print(f"{readme}: updated {labels}" if changed else f"{readme}: up to date")
    return 1 if failed else 0


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _collect() -> tuple[list[_Row], list[str]]:
    rows: list[_Row] = []
    errors: list[str] = []
    for component in GROUPS:
        try:
            registry = PluginRegistry.discover(component)
        except PluginError as exc:
            errors.append(str(exc))
            continue
        try:
            infos: list[PluginInfo] = registry.describe()
        except PluginError:
            infos = _describe_each(registry, errors)
        rows += [_Row(i.name, component, i.extension_points, i.distribution, i.version) for i in infos]
    return rows, errors


def _describe_each(registry: PluginRegistry, errors: list[str]) -> list[PluginInfo]:
    """``describe()`` stops at the first plugin that fails to import; list the others and name the broken."""
    infos = []
    for name in registry.names():
        dist, version = registry.distribution(name)
        try:
            cls = registry.get(name)
        except PluginError as exc:
            errors.append(str(exc))
            continue
        infos.append(PluginInfo(name, registry.group, cls.extension_points(), dist, version, cls.__module__))
    return infos


def _table(rows: list[_Row]) -> str:
    headers = ("NAME", "GROUP", "EXTENSION POINTS", "DISTRIBUTION", "VERSION")
    # Names and distributions are what a user types next (in a profile, to pip): never cut; the extension
    # points wrap into the width left.
    name_w = max([len(headers[0]), *(len(r.name) for r in rows)])
    group_w = max([len(headers[1]), *(len(r.component) for r in rows)])
    dist_w = max([len(headers[3]), *(len(r.distribution) for r in rows)])
    ver_w = min(max([len(headers[4]), *(len(r.version) for r in rows)]), 10)
    points_w = max(TABLE_WIDTH - name_w - group_w - dist_w - ver_w - 8, 16)
    widths = (name_w, group_w, points_w, dist_w, ver_w)

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    out = [line(headers)]
    for r in rows:
        points = textwrap.wrap(", ".join(r.points) or "-", points_w) or ["-"]
        cells = [
            r.name,
            r.component,
            points[0],
            r.distribution,
            _clip(r.version, ver_w),
        ]
        out.append(line(tuple(cells)))
        out += [line(("", "", more, "", "")) for more in points[1:]]
    return "\n".join(out)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def run_list(args: argparse.Namespace) -> int:
    rows, errors = _collect()
    if args.json:
        print(json.dumps({"plugins": [r.as_dict() for r in rows], "errors": errors}, indent=2))
    else:
        print(_table(rows) if rows else "no plugins installed")
        for err in errors:
            print(f"koord: error: {err}", file=sys.stderr)
    return 1 if errors else 0
