"""Writing the zones' batch resources into the NodeResourceTopology (``prepareForNodeResourceTopology``
and ``UpdateNRTZoneListIfNeeded`` of Koordinator).

Each zone gets ``kubernetes.io/batch-cpu`` and ``kubernetes.io/batch-memory`` entries whose capacity,
allocatable and available are the zone's value; an entry is changed only when it moved by more than
``resourceDiffThreshold`` (or is new), batch-cpu is amplified by the node's cpu-normalization ratio when it
is above 1, and a zone the calculation did not cover has its batch entries set to zero.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any, Final

from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY, format_resource

__all__ = ["NRT_RESOURCES", "NRTSyncTimes", "update_zone_list"]

NRT_RESOURCES: Final = frozenset({BATCH_CPU, BATCH_MEMORY})
"""The zone resources this plugin owns (``updateNRTResourceSet``)."""
FIELDS: Final = ("capacity", "allocatable", "available")


def _milli(value: Any, where: str) -> int:
    try:
        return Quantity.parse(value if value is not None else 0).milli_value()
    except QuantityError as exc:
        raise ValueError(f"{where}: {exc}") from exc


def _text(name: str, milli: int) -> str:
    """The quantity text of a milli value: a whole number as the resource prints it, else ``<n>m``."""
    if milli % 1000 == 0:
        return format_resource(name, milli // 1000)
    return f"{milli}m"


def _diff(old: int, new: int, threshold: float) -> bool:
    """``IsQuantityDiff`` on milli values."""
    return abs(new - old) > old * threshold


def update_zone_list(
    zones: list[dict[str, Any]],
    zone_resources: Mapping[str, Mapping[str, int]],
    threshold: float,
    cpu_normalization_ratio: float,
    owner: str,
) -> bool:
    """Update ``zones`` (the NRT's, a copy) in place; whether anything changed.

    ``zone_resources`` maps zone name -> resource name -> value (batch-cpu in milli-cores as the node
    status carries it, batch-memory in bytes).
    """
    changed = False
    for i, zone in enumerate(zones):
        name = str(zone.get("name") or "")
        resources: list[dict[str, Any]] = zone.setdefault("resources", [])
        wanted = zone_resources.get(name)
        if wanted is None:  # a zone the calculation did not see: its batch entries drop to zero
            for info in resources:
                if info.get("name") not in NRT_RESOURCES:
                    continue
                where = f"{owner}: zones[{i}] {info.get('name')}"
                if all(_milli(info.get(f), f"{where}.{f}") == 0 for f in FIELDS):
                    continue
                changed = True
                for f in FIELDS:
                    info[f] = "0"
            continue
        for res_name, value in wanted.items():
            milli = value * 1000
            if res_name == BATCH_CPU and cpu_normalization_ratio > 1.0:
                milli = int(milli * cpu_normalization_ratio)  # MultiplyMilliQuant
            text = _text(res_name, milli)
            existing = next((r for r in resources if r.get("name") == res_name), None)
            if existing is None:
                changed = True
                resources.append({"name": res_name, **dict.fromkeys(FIELDS, text)})
                resources.sort(key=lambda r: str(r.get("name") or ""))
                continue
            for f in FIELDS:
                if _diff(_milli(existing.get(f), f"{owner}: zones[{i}] {res_name}.{f}"), milli, threshold):
                    changed = True
                    existing[f] = text
    return changed


def zones_copy(nrt: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``nrt`` whose zones may be changed (the rest shared with the cache's object)."""
    return {**nrt, "zones": copy.deepcopy(list(nrt.get("zones") or ()))}


class NRTSyncTimes:
    """When each node's NRT was last synced (``nrtSyncContext``)."""

    def __init__(self) -> None:
        self._times: dict[str, float] = {}
        self._lock = threading.Lock()

    def get(self, node: str) -> float | None:
        with self._lock:
            return self._times.get(node)

    def store(self, node: str, now: float) -> None:
        with self._lock:
            self._times[node] = now

    def delete(self, node: str) -> None:
        with self._lock:
            self._times.pop(node, None)
