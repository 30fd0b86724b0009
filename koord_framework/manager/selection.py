"""Koordinator's ``--controllers`` and ``--noderesource-plugins`` lists: which controllers and which
node-resource calculators koord-manager runs.

    --controllers=*                   every controller (the default)
    --controllers=nodeslo,nodemetric  only these
    --noderesource-plugins=*,-MidResource   every calculator but MidResource

A name enables, ``-name`` disables, ``*`` enables whatever is not named; the first entry naming an item
decides (``isControllerEnabled`` / ``isPluginEnabled``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from koord_framework.errors import KoordError

__all__ = [
    "CONTROLLERS",
    "KOORDINATOR_CALCULATORS",
    "KOORDINATOR_CONTROLLERS",
    "enabled",
    "parse_selection",
]

CONTROLLERS: Final = ("nodemetric", "noderesource", "nodeslo")
"""The controllers koord-manager runs here (the ``sloconfig`` one always runs: the others read it)."""
KOORDINATOR_CONTROLLERS: Final = (*CONTROLLERS, "quotaprofile", "colocationprofile")
"""Koordinator's controller names at a7a1b76b; ``quotaprofile`` comes with koord-plugin-elasticquota
(``koord.manager.controllers``), ``colocationprofile`` is not implemented here."""
KOORDINATOR_CALCULATORS: Final = (
    "CPUNormalization",
    "ResourceAmplification",
    "MidResource",
    "BatchResource",
    "GPUDeviceResource",
    "RDMADeviceResource",
)
"""Koordinator's node-resource plugins in its run order (``plugins_profile.go``), all enabled by
default; calculators installed here run in this order, others after them by name."""


def enabled(name: str, selection: Sequence[str]) -> bool:
    """Koordinator's ``isPluginEnabled``: the first entry naming ``name`` decides, else ``*``."""
    star = False
    for item in selection:
        if item == name:
            return True
        if item == "-" + name:
            return False
        if item == "*":
            star = True
    return star


def parse_selection(text: str, flag: str, known: Iterable[str], installed: Iterable[str]) -> list[str]:
    """The comma-separated list; a name neither installed nor one of Koordinator's is an error naming it
    (Koordinator ignores unknown names; a typo here would silently disable everything)."""
    items = [p.strip() for p in text.split(",") if p.strip()]
    allowed = set(known) | set(installed)
    for item in items:
        name = item[1:] if item.startswith("-") else item
        if name != "*" and name not in allowed:
            raise KoordError(f"{flag}: unknown name {name!r} (known: {', '.join(sorted(allowed))})")
    return items
