"""``koord profile``: validate a configuration file, print the JSON Schema, show a plugin's default args.

- ``koord profile validate FILE [--component C] [-v]``: exit 0 when valid; 1 with every problem and its
  YAML path on stderr.
- ``koord profile schema [--component C]``: JSON Schema with the args of the installed plugins; without
  ``--component``, one schema for all three kinds.
- ``koord profile defaults NAME [--component C]``: the plugin's args with their defaults, as YAML.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from koord_framework.config.defaults import plugin_defaults
from koord_framework.config.loader import (
    COMPONENTS,
    Component,
    LoadedConfig,
    LoadedDeschedulerConfig,
    LoadedKoordletConfig,
    LoadedSchedulerConfig,
    load_file,
)
from koord_framework.config.schema import combined_schema, component_schema
from koord_framework.errors import KoordError
from koord_framework.registry import GROUPS, PluginRegistry

GROUPS_OF: dict[Component, tuple[str, ...]] = {
    "scheduler": ("scheduler",),
    "descheduler": ("descheduler",),
    "koordlet": ("qos", "runtimehooks"),
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="validate profiles, print their JSON Schema, show plugin defaults",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=lambda _args: _usage(parser))
    sub = parser.add_subparsers(dest="profile_command", metavar="SUBCOMMAND")
    component = {"choices": COMPONENTS, "help": "the configuration kind (default: detected from kind)"}

    validate = sub.add_parser("validate", help="check a configuration file (bare or in a ConfigMap)")
    validate.add_argument("file", metavar="FILE")
    validate.add_argument("--component", **component)  # type: ignore[arg-type]
    validate.add_argument(
        "-v", "--verbose", action="store_true", help="print every profile's effective plugins"
    )
    validate.set_defaults(func=run_validate)

    schema = sub.add_parser("schema", help="JSON Schema of the configuration, with installed plugins' args")
    schema.add_argument("--component", choices=COMPONENTS, help="one kind only (default: all three)")
    schema.set_defaults(func=run_schema)

    defaults = sub.add_parser("defaults", help="a plugin's args with their defaults, as YAML")
    defaults.add_argument("name", metavar="NAME", help="plugin name, e.g. LoadAwareScheduling")
    defaults.add_argument("--component", choices=COMPONENTS, help="where to look (default: every group)")
    defaults.set_defaults(func=run_defaults)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


# --- validate -----------------------------------------------------------------------------------------


def run_validate(args: argparse.Namespace) -> int:
    loaded = load_file(args.file, component=args.component)
    print("\n".join(summary(loaded, verbose=args.verbose)))
    return 0


def summary(loaded: LoadedConfig, *, verbose: bool = False) -> list[str]:
    """Human lines describing a valid configuration."""
    lines = [f"{loaded.source}: valid {loaded.config.KIND}"]
    lines += [f"  note: {note}" for note in getattr(loaded, "notes", ())]
    if isinstance(loaded, LoadedSchedulerConfig):
        for prof in loaded.profiles:
            lines.append(f"  profile {prof.scheduler_name}: {len(prof.plugins.needed)} plugins")
            if prof.plugins.skipped_defaults:
                lines.append(f"    default plugins not installed: {', '.join(prof.plugins.skipped_defaults)}")
            if verbose:
                for point, names in prof.plugins.points.items():
                    shown = [f"{n}({prof.weight(n)})" if point == "score" else n for n in names]
                    lines.append(f"    {point}: {', '.join(shown) or '-'}")
    elif isinstance(loaded, LoadedDeschedulerConfig):
        for dprof in loaded.profiles:
            lines.append(f"  profile {dprof.name}: {len(dprof.plugins.needed)} plugins")
            if dprof.plugins.skipped_defaults:
                lines.append(
                    f"    default plugins not installed: {', '.join(dprof.plugins.skipped_defaults)}"
                )
            if verbose:
                lines += [f"    {p}: {', '.join(n) or '-'}" for p, n in dprof.plugins.points.items()]
    elif isinstance(loaded, LoadedKoordletConfig):
        qos = [p.name for p in loaded.qos_strategies]
        hooks = [p.name for p in loaded.runtime_hooks]
        lines.append(f"  qos strategies: {', '.join(qos) or '-'}")
        policy = loaded.config.runtime_hooks.failure_policy
        lines.append(f"  runtime hooks: {', '.join(hooks) or '-'} (failurePolicy {policy})")
    return lines


# --- schema -------------------------------------------------------------------------------------------


def run_schema(args: argparse.Namespace) -> int:
    discover = PluginRegistry.discover
    schema = component_schema(args.component, discover) if args.component else combined_schema(discover)
    print(json.dumps(schema, indent=2, ensure_ascii=False))
    return 0


# --- defaults -----------------------------------------------------------------------------------------


def run_defaults(args: argparse.Namespace) -> int:
    groups = GROUPS_OF[args.component] if args.component else tuple(GROUPS)
    found: list[tuple[str, PluginRegistry]] = []
    installed: list[str] = []
    for group in groups:
        registry = PluginRegistry.discover(group)
        installed += registry.names()
        if args.name in registry:
            found.append((group, registry))
    if not found:
        where = f"the {args.component} groups" if args.component else "any group"
        listing = ", ".join(sorted(set(installed))) or "(none)"
        raise KoordError(f'plugin "{args.name}" is not installed in {where}; installed: {listing}')
    if len(found) > 1:
        raise KoordError(
            f'plugin "{args.name}" is installed in several groups ({", ".join(g for g, _ in found)}); '
            "pass --component"
        )
    group, registry = found[0]
    cls = registry.get(args.name)
    dist, version = registry.distribution(args.name)
    result = plugin_defaults(cls)
    print(f"# {args.name} ({group} plugin from {dist} {version}".rstrip() + "): args with their defaults")
    if result.required:
        print(f"# required, no default: {', '.join(result.required)}")
    print(_yaml(result.args), end="")
    return 0


def _yaml(data: Any) -> str:
    if not data:
        return "{}\n"
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
