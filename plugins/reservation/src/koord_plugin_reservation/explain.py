"""Reservation's section of ``koord explain node``: each Available (or assumed) reservation on the node,
what it reserves, what its owners already took, what is left, its allocate policy and its owners."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koord_framework.api.resources import format_resource_list
from koord_framework.explain.hooks import ExplainSection

if TYPE_CHECKING:
    from koord_plugin_reservation.plugin import Reservation

TITLE = "Reservation"


def _res(values: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in format_resource_list(values).items()) or "-"


def explain_node(plugin: Reservation, node_name: str) -> ExplainSection:
    entries = plugin.cache.on_node(node_name)
    if not entries:
        return ExplainSection(TITLE, ["no reservation on this node"], {"reservations": []})
    lines: list[str] = []
    rows: list[dict[str, Any]] = []
    for entry in entries:
        info = plugin.cache.info(entry.pod.uid)
        if info is None:
            continue
        allocatable = dict(info.allocatable)
        allocated = dict(info.allocated)
        free = {k: max(v - allocated.get(k, 0), 0) for k, v in allocatable.items()}
        owners = sorted(plugin.cache.owners_of(info.uid))
        rows.append(
            {
                "name": info.name,
                "phase": info.phase or ("Assumed" if entry.assumed_node else ""),
                "allocatable": format_resource_list(allocatable),
                "allocated": format_resource_list(allocated),
                "free": format_resource_list(free),
                "allocateOnce": info.allocate_once,
                "allocatePolicy": info.allocate_policy,
                "unschedulable": info.unschedulable,
                "owners": owners,
            }
        )
        policy = info.allocate_policy or "Default"
        once = ", allocateOnce" if info.allocate_once else ""
        lines.append(
            f"{info.name} ({rows[-1]['phase'] or '-'}; policy {policy}{once}"
            f"{', unschedulable' if info.unschedulable else ''}): reserves {_res(allocatable)},"
            f" taken {_res(allocated)}, free {_res(free)}"
        )
        if owners:
            lines.append(f"  owners: {', '.join(owners)}")
    return ExplainSection(TITLE, lines, {"reservations": rows})
