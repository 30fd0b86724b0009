"""What every plugin distribution's README must hold, checked mechanically.

``check_plugin_readme(plugin_dir)`` reads the distribution (``pyproject.toml`` entry points → plugin classes,
``src/`` → registered metrics, ``examples/profile.yaml``) and its ``README.md`` and returns every way the
README falls short. A plugin's own test suite can call it; the platform's test suite calls it for every
distribution under ``plugins/``.

The README, in this order (other sections may sit in between):

1. ``# Title`` and a summary paragraph;
2. ``## Maturity``: **alpha**, **beta** or **stable**, and why;
3. ``## Extension points``: a table naming every extension point every plugin class implements;
4. ``## Args``: an ``<!-- args-table:<ArgsModel> -->`` region per plugin class that has args, up to date;
5. ``## Example profile``: mentions ``examples/profile.yaml`` and shows it in an ``<!-- include: -->`` region;
   the profile exists, validates and names every plugin of the distribution;
6. ``## Metrics``: every metric registered under ``src/`` is named; every metric named is registered by the
   plugin or by the framework;
7. ``## Differences from Koordinator`` (optional);
8. ``## Testing``: how to run the tests (``pytest``).
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path

import koord_framework
from koord_framework.docs.args_table import args_rows, check_readme, find_regions
from koord_framework.docs.metric_names import RegisteredMetric, exposed_names, registered_metrics
from koord_framework.errors import KoordError, Problem
from koord_framework.plugin import Plugin, PluginArgs
from koord_framework.registry import GROUPS, PluginRegistry

__all__ = [
    "EXAMPLE_PROFILE",
    "OPTIONAL_SECTIONS",
    "SECTIONS",
    "PluginDistribution",
    "Section",
    "check_plugin_readme",
    "own_args_models",
    "parse_sections",
]

SECTIONS: tuple[str, ...] = (
    "Maturity",
    "Extension points",
    "Args",
    "Example profile",
    "Metrics",
    "Differences from Koordinator",
    "Testing",
)
"""The level-2 sections of a plugin README, in the order they must appear."""
OPTIONAL_SECTIONS = frozenset({"Differences from Koordinator"})
EXAMPLE_PROFILE = "examples/profile.yaml"
MATURITY = re.compile(r"\*\*(alpha|beta|stable)\*\*")
_METRIC_MENTION = re.compile(r"`(koord[a-z0-9_]*)(?:\{[^`]*\})?`")
"""A metric named in backticks (optionally with labels): every metric of the platform starts ``koord``."""
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Section:
    level: int
    title: str
    line: int
    """1-based line of the heading."""
    start: int
    """Offset of the heading line in the text."""
    end: int
    """Offset where the section (with its subsections) ends."""

    def body(self, text: str) -> str:
        return text[self.start : self.end]


def parse_sections(text: str) -> list[Section]:
    """Headings outside code fences, each with the extent of its section."""
    heads: list[tuple[int, str, int, int]] = []
    offset = 0
    fenced = False
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            m = _HEADING.match(line)
            if m:
                heads.append((len(m.group(1)), m.group(2), number, offset))
        offset += len(line)
    out = []
    for i, (level, title, number, start) in enumerate(heads):
        end = next((h[3] for h in heads[i + 1 :] if h[0] <= level), len(text))
        out.append(Section(level, title, number, start, end))
    return out


@dataclass(frozen=True)
class PluginDistribution:
    """A plugin distribution's directory, read from its ``pyproject.toml``."""

    root: Path
    name: str
    entry_points: tuple[EntryPoint, ...]
    """The entry points in the platform's plugin groups (other groups, e.g. estimators, are left out)."""

    @classmethod
    def read(cls, root: str | Path) -> PluginDistribution:
        root = Path(root)
        with (root / "pyproject.toml").open("rb") as fh:
            project = tomllib.load(fh).get("project", {})
        groups = set(GROUPS.values())
        eps = [
            EntryPoint(name, value, group)
            for group, entries in (project.get("entry-points") or {}).items()
            if group in groups
            for name, value in entries.items()
        ]
        return cls(root, str(project.get("name", root.name)), tuple(eps))

    def plugin_classes(self) -> list[type[Plugin]]:
        return [ep.load() for ep in self.entry_points]


def _section_problems(text: str, sections: Sequence[Section]) -> tuple[dict[str, Section], list[Problem]]:
    problems: list[Problem] = []
    first = next((i for i, line in enumerate(text.splitlines()) if line.strip()), None)
    if first is None or not text.splitlines()[first].startswith("# "):
        problems.append(Problem("title", "the README must start with a `# Title` line"))
    h2 = [s for s in sections if s.level == 2]
    intro_end = h2[0].start if h2 else len(text)
    intro = text[:intro_end].splitlines()[(first or 0) + 1 :]
    prose = [
        line
        for line in intro
        if line.strip()
        and not line.lstrip().startswith(("|", "#", "<!--", "```", "    "))
        and not _FENCE.match(line)
    ]
    if not prose:
        problems.append(Problem("title", "a summary paragraph must follow the title"))
    found: dict[str, Section] = {}
    for s in h2:
        for name in SECTIONS:
            if name not in found and (s.title == name or s.title.startswith(name + " ")):
                found[name] = s
    for name in SECTIONS:
        if name not in found and name not in OPTIONAL_SECTIONS:
            problems.append(Problem("sections", f"missing `## {name}`"))
    order = [name for name in SECTIONS if name in found]
    by_line = sorted(order, key=lambda n: found[n].line)
    if by_line != order:
        problems.append(
            Problem(
                "sections", f"sections must come in the order {', '.join(order)}; found {', '.join(by_line)}"
            )
        )
    return found, problems


def _metric_problems(
    body: str, dist: PluginDistribution, framework_metrics: Sequence[RegisteredMetric]
) -> list[Problem]:
    problems: list[Problem] = []
    own, unresolved = registered_metrics([dist.root / "src"]) if (dist.root / "src").is_dir() else ([], [])
    for u in unresolved:
        problems.append(
            Problem(
                "Metrics",
                f"{u.file}:{u.line}: the name of this {u.kind} is not a constant the scan can read",
            )
        )
    for metric in own:
        if metric.name not in body:
            problems.append(
                Problem("Metrics", f"`{metric.name}` ({metric.kind}, {metric.file.name}) is not described")
            )
    known = {n for m in (*own, *framework_metrics) for n in exposed_names(m)}
    for mention in sorted(set(_METRIC_MENTION.findall(body))):
        if mention not in known:
            problems.append(
                Problem("Metrics", f"`{mention}` is registered neither by the plugin nor by the framework")
            )
    return problems


def _example_problems(body: str, text: str, section: Section, dist: PluginDistribution) -> list[Problem]:
    from koord_framework.config.loader import load_file

    problems: list[Problem] = []
    profile = dist.root / EXAMPLE_PROFILE
    if not profile.is_file():
        return [Problem("Example profile", f"{EXAMPLE_PROFILE} does not exist")]
    if EXAMPLE_PROFILE not in body:
        problems.append(Problem("Example profile", f"does not point to `{EXAMPLE_PROFILE}`"))
    regions, _ = find_regions(text)
    if not any(
        r.kind == "include" and r.target == EXAMPLE_PROFILE and section.start <= r.start < section.end
        for r in regions
    ):
        problems.append(
            Problem(
                "Example profile",
                f"does not show it: add <!-- include:{EXAMPLE_PROFILE} --> <!-- /include -->",
            )
        )
    content = profile.read_text(encoding="utf-8")
    for ep in dist.entry_points:
        if not re.search(rf"\b{re.escape(ep.name)}\b", content):
            problems.append(Problem("Example profile", f"{EXAMPLE_PROFILE} does not use {ep.name}"))
    if all(ep.group in (GROUPS["noderesource"], GROUPS["webhooks"]) for ep in dist.entry_points):
        # koord-manager's calculators and webhooks have no profile: their settings are slo-controller-config.
        return problems + _slo_config_problems(profile)
    try:
        load_file(profile, registries=_with_own_plugins(dist))
    except KoordError as exc:
        problems.append(Problem("Example profile", f"{EXAMPLE_PROFILE} does not validate: {exc}"))
    return problems


def _slo_config_problems(profile: Path) -> list[Problem]:
    import yaml

    from koord_framework.manager.sloconfig import CONFIG_MAP_NAME, SLOConfig

    doc = yaml.safe_load(profile.read_text(encoding="utf-8")) or {}
    if doc.get("kind") != "ConfigMap" or (doc.get("metadata") or {}).get("name") != CONFIG_MAP_NAME:
        return [Problem("Example profile", f"{EXAMPLE_PROFILE} must be the {CONFIG_MAP_NAME} ConfigMap")]
    return [Problem("Example profile", str(p)) for p in SLOConfig().update(doc.get("data") or {})]


def _with_own_plugins(dist: PluginDistribution) -> Callable[[str], PluginRegistry]:
    """Registries of the installed plugins plus the distribution's own, so its example validates before
    it is installed (and exactly as installed once it is)."""
    own = list(zip(dist.entry_points, dist.plugin_classes(), strict=True))
    cache: dict[str, PluginRegistry] = {}

    def registry(group: str) -> PluginRegistry:
        if group not in cache:
            base = PluginRegistry.discover(group)
            ep_group = GROUPS.get(group, group)
            extra = [cls for ep, cls in own if ep.group == ep_group and ep.name not in base]
            cache[group] = base.with_classes(extra) if extra else base
        return cache[group]

    return registry


def own_args_models(root: Path) -> dict[str, type[PluginArgs]]:
    """The args models of the distribution at ``root`` (its pyproject's entry points), when importable, so
    a plugin's README can be regenerated before the plugin is installed."""
    if not (root / "pyproject.toml").is_file():
        return {}
    # A distribution that is not installed yet (just rendered from the template, say) imports from its
    # src/ directory for the duration of the look-up.
    src = str((root / "src").resolve())
    added = (root / "src").is_dir() and src not in sys.path
    if added:
        sys.path.insert(0, src)
    try:
        classes = PluginDistribution.read(root).plugin_classes()
    except (ImportError, AttributeError, OSError, ValueError):
        return {}
    finally:
        if added:
            sys.path.remove(src)
    return {cls.Args.__name__: cls.Args for cls in classes}


def check_plugin_readme(
    plugin_dir: str | Path, *, framework_metrics: Sequence[RegisteredMetric] | None = None
) -> list[Problem]:
    """Every way ``plugin_dir/README.md`` falls short of the rules in the module docstring (empty: none).

    ``framework_metrics`` are the metrics the framework registers (default: scanned from the installed
    ``koord_framework``); pass them when checking many plugins to scan once.
    """
    dist = PluginDistribution.read(plugin_dir)
    readme = dist.root / "README.md"
    if not readme.is_file():
        return [Problem("README.md", "does not exist")]
    text = readme.read_text(encoding="utf-8")
    sections = parse_sections(text)
    found, problems = _section_problems(text, sections)
    classes = dist.plugin_classes()
    if not classes:
        problems.append(Problem("pyproject.toml", "registers no plugin in the platform's entry-point groups"))

    if "Maturity" in found:
        body = found["Maturity"].body(text)
        if not MATURITY.search(body):
            problems.append(Problem("Maturity", "must say **alpha**, **beta** or **stable**"))
        elif len(MATURITY.sub("", body).split()) < 8:
            problems.append(Problem("Maturity", "must say why, in a sentence"))

    if "Extension points" in found:
        body = found["Extension points"].body(text)
        if not any(line.lstrip().startswith("|") for line in body.splitlines()):
            problems.append(Problem("Extension points", "needs a table: point | what it does"))
        for cls in classes:
            for point in cls.extension_points():
                if not re.search(rf"\b{re.escape(point)}\b", body):
                    problems.append(
                        Problem("Extension points", f"{cls.name} implements {point}, not described")
                    )

    models = {cls.Args.__name__: cls.Args for cls in classes if args_rows(cls.Args)}
    readme_check = check_readme(readme, models)
    problems += [Problem("generated regions", m) for m in readme_check.messages()]
    if "Args" in found:
        section = found["Args"]
        regions, _ = find_regions(text)
        for name in models:
            placed = [r for r in regions if r.kind == "args-table" and r.target == name]
            if placed and not any(section.start <= r.start < section.end for r in placed):
                problems.append(Problem("Args", f"the args-table:{name} region belongs in `## Args`"))

    if "Example profile" in found:
        section = found["Example profile"]
        problems += _example_problems(section.body(text), text, section, dist)

    if "Metrics" in found:
        if framework_metrics is None:
            framework_metrics, _ = registered_metrics([Path(koord_framework.__file__).parent])
        problems += _metric_problems(found["Metrics"].body(text), dist, framework_metrics)

    if "Testing" in found and "pytest" not in found["Testing"].body(text):
        problems.append(Problem("Testing", "must say how to run the tests (a `pytest` command)"))
    return problems
