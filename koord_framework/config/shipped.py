"""The default profiles koord ships (Koordinator's own ConfigMaps), fitted to the plugins installed.

``koord simulate`` and ``koord deschedule`` without ``--config`` use Koordinator's shipped
``koord-scheduler-config`` / ``koord-descheduler-config``, which the framework carries as package data
(``koord_framework/profiles/``, the files of ``configs/`` in a checkout). A pip install holds only the plugin
distributions the user chose, so the profile is fitted first: every plugin that is not installed is left
out of the plugin sets and ``pluginConfig``, and reported, so that ``koord-framework`` with
``koord-plugin-loadaware`` schedules with LoadAwareScheduling and the Kubernetes core plugins (docs/adr/0007).

The catalog (``koord_framework/catalog.json``, written by ``tools/plugin_catalog.py`` from the plugins'
entry points) names the distribution of every plugin the project has, so a profile naming one that is not
installed can say what to install.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml

from koord_framework.registry import GROUPS, PluginRegistry

__all__ = ["SHIPPED", "ShippedProfile", "distribution_of", "shipped_profile"]

Shipped = Literal["scheduler", "descheduler"]
SHIPPED: dict[Shipped, tuple[str, str]] = {
    "scheduler": ("koord-scheduler.yaml", "koord-scheduler-config"),
    "descheduler": ("koord-descheduler.yaml", "koord-descheduler-config"),
}
"""Component -> (file under ``koord_framework/profiles``, key of the ConfigMap's ``data``)."""


@cache
def _catalog() -> dict[str, dict[str, str]]:
    text = resources.files("koord_framework").joinpath("catalog.json").read_text(encoding="utf-8")
    table: dict[str, dict[str, str]] = json.loads(text)
    return table


def distribution_of(group: str, name: str) -> str | None:
    """The distribution that provides plugin ``name`` of ``group`` (short or entry-point name), if known."""
    return _catalog().get(GROUPS.get(group, group), {}).get(name)


@dataclass(frozen=True)
class ShippedProfile:
    component: Shipped
    text: str
    """The configuration (a ConfigMap), fitted to the installed plugins."""
    source: str
    """How errors and reports name it."""
    left_out: tuple[str, ...]
    """Plugins of Koordinator's profile that are not installed and were left out."""

    def note(self, command: str) -> str | None:
        """A line for stderr when the profile is not Koordinator's whole one, else None."""
        if not self.left_out:
            return None
        hints = sorted({d for d in (distribution_of(self.component, n) for n in self.left_out) if d})
        more = f" (pip install {' '.join(hints)})" if hints else ""
        return (
            f"koord {command}: no --config: {self.source} without {', '.join(self.left_out)},"
            f" not installed{more}"
        )


def shipped_profile(component: Shipped, registry: PluginRegistry | None = None) -> ShippedProfile:
    """Koordinator's profile of ``component`` with the plugins ``registry`` (default: the installed ones)
    lacks left out."""
    filename, key = SHIPPED[component]
    source = f"koord_framework/profiles/{filename}"
    text = resources.files("koord_framework").joinpath("profiles", filename).read_text(encoding="utf-8")
    installed = set((registry or PluginRegistry.discover(component)).names())
    configmap = yaml.safe_load(text)
    config = yaml.safe_load(configmap["data"][key])
    missing: list[str] = []
    for profile in config.get("profiles") or []:
        _fit_profile(profile, installed, missing)
    if not missing:
        return ShippedProfile(component, text, source, ())
    configmap["data"][key] = yaml.safe_dump(config, sort_keys=False)
    fitted = yaml.safe_dump(configmap, sort_keys=False)
    return ShippedProfile(component, fitted, source, tuple(dict.fromkeys(missing)))


def _fit_profile(profile: dict[str, Any], installed: set[str], missing: list[str]) -> None:
    def keep(entry: Any) -> bool:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or name == "*" or name in installed:
            return True
        missing.append(name)
        return False

    for point in (profile.get("plugins") or {}).values():
        if isinstance(point, dict) and isinstance(point.get("enabled"), list):
            point["enabled"] = [e for e in point["enabled"] if keep(e)]
    if isinstance(profile.get("pluginConfig"), list):
        profile["pluginConfig"] = [e for e in profile["pluginConfig"] if keep(e)]
