"""Templates for new plugins. ``render_plugin`` writes a ready distribution that passes its own tests.

Placeholders: ``__PluginName__`` (the plugin's name, e.g. ``NodeLabelPreference``), ``__module__`` (import
package, ``koord_plugin_<slug>``), ``__dist__`` (distribution, ``koord-plugin-<slug>``), ``__slug__``,
``__framework_version__`` (the lower bound on koord-framework).
"""

from __future__ import annotations

import re
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from koord_framework import __version__

_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def slug_of(name: str) -> str:
    """``NodeLabelPreference`` -> ``nodelabelpreference`` (distribution and package suffix)."""
    return name.lower()


def render_plugin(name: str, dest: Path, kind: str = "scheduler", *, directory: str | None = None) -> Path:
    """Render the ``kind`` template for plugin ``name`` into ``dest/<directory>`` (default ``dest/<slug>``,
    the layout of the project's ``plugins/``); returns that directory.

    Refuses to overwrite an existing directory, so a typo never clobbers a plugin.
    """
    if not _NAME.match(name):
        raise ValueError(f"plugin name {name!r} must be CamelCase letters and digits, starting upper-case")
    if kind != "scheduler":
        raise ValueError(f"no template for {kind!r}; available: scheduler")
    slug = slug_of(name)
    target = Path(dest) / (directory or slug)
    if target.exists():
        raise FileExistsError(f"{target} already exists")
    major_minor = ".".join(__version__.split(".")[:2]) if __version__[0].isdigit() else "0.1"
    values = {
        "__PluginName__": name,
        "__module__": f"koord_plugin_{slug}",
        "__dist__": f"koord-plugin-{slug}",
        "__slug__": slug,
        "__framework_version__": major_minor,
    }
    _copy(files(__package__).joinpath(f"{kind}_plugin"), target, values)
    # Fill the README's generated regions (args table, example profile) from the rendered code, so a new
    # plugin starts with a README that passes the platform's README rules.
    from koord_framework.docs.args_table import update_readme
    from koord_framework.docs.plugin_readme import own_args_models

    update_readme(target / "README.md", own_args_models(target))
    return target


def _subst(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def _copy(src: Traversable, dst: Path, values: dict[str, str]) -> None:
    dst.mkdir(parents=True, exist_ok=False)
    for item in src.iterdir():
        if item.name in ("__pycache__",) or item.name.endswith(".pyc"):
            continue
        name = _subst(item.name.removesuffix(".tmpl"), values)
        if item.is_dir():
            _copy(item, dst / name, values)
        else:
            (dst / name).write_text(_subst(item.read_text(), values))
