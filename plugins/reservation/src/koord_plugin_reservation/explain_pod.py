"""Reservation's section of ``koord explain pod`` (a ``PodExplainer``, entry point ``koord.explain.pod``):
the reservation the pod would use, or why each candidate was not used.

A candidate is a reservation whose owners match the pod. Each gets one verdict:

* ``nominated``: the pod takes it (what Reserve wrote in ``reservation-allocated``, else the nominee on the
  chosen node);
* ``unmatched``: its owners match but it is not for this pod, with Koordinator's reason
  (``checkReservationMatchedOrIgnored``: ``didn't match the requested reservation name``, ``is not exact
  matched``, ``is unschedulable``, ``had untolerated taint {key: value}``, ``didn't match affinity
  rules``);
* ``rejected``: it matched but its node was rejected (the plugin and reason of the rejection: Reservation's
  own filter reasons, such as ``Insufficient cpu`` or ``reservation has allocateOnce enabled and has
  already been allocated``, or another plugin's);
* ``matched``: usable, but the pod goes to another node, or another reservation on the chosen node was
  preferred (lowest ``reservation-order``, then the highest reservation score);
* ``unavailable``: not Available (pending, not scheduled yet, or finished): not a candidate yet.

A reserve pod (a Reservation being scheduled) uses no reservation; its section says so.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from koord_framework.api.objects import PodInfo
from koord_framework.explain.hooks import ExplainSection, PodCycle, PodExplainer
from koord_framework.scheduler.frameworkext import (
    ANNOTATION_RESERVATION_ALLOCATED,
    ANNOTATION_RESERVATION_NAME,
    nominated_reservation,
)
from koord_plugin_reservation.model import ReservationError, parse_reservation
from koord_plugin_reservation.plugin import ERR_REASON_RESERVATION_AFFINITY, pod_state

if TYPE_CHECKING:
    from koord_plugin_reservation.plugin import PodState, Reservation

__all__ = ["ReservationPodExplainer"]

TITLE = "Reservation"


class ReservationPodExplainer(PodExplainer):
    """``koord explain pod``: which reservation the pod would use, and why the other candidates not."""

    def explain_pod(self, plugin: Any, cycle: PodCycle) -> ExplainSection | None:
        ps = pod_state(cycle.state)
        if ps is None:
            return None  # the plugin did not see the pod (its PreFilter did not run)
        if ps.reserve_pod:
            name = cycle.pod.annotations.get(ANNOTATION_RESERVATION_NAME, "")
            line = f"reserve pod of Reservation {name}: it is scheduled like a pod and uses no reservation"
            return ExplainSection(TITLE, [line], {"reservePod": True, "reservation": name, "candidates": []})
        taken = _taken(cycle)
        rows = _candidates(ps, cycle, taken) + _unavailable(plugin, cycle.pod, ps)
        if not rows and not ps.has_affinity:
            return None  # no reservation has anything to do with this pod
        lines = []
        if taken:
            lines.append(f"uses reservation {taken} on node {cycle.node}")
        elif ps.ignored:
            lines.append("ignores reservations (reservation-ignored): their reserved resources count as free")
        elif ps.has_affinity and not ps.nodes:
            lines.append(f"requires a reservation (reservation-affinity): {ERR_REASON_RESERVATION_AFFINITY}")
        else:
            lines.append("uses no reservation")
        lines += [f"{r['name']} on {r['node'] or '-'}: {r['verdict']}: {r['reason']}" for r in rows]
        data = {
            "reservePod": False,
            "reservation": taken or None,
            "node": cycle.node,
            "ignored": ps.ignored,
            "affinity": ps.has_affinity,
            "candidates": rows,
        }
        return ExplainSection(TITLE, lines, data)


def _taken(cycle: PodCycle) -> str:
    """The reservation the pod takes: what Reserve wrote, else the nominee on the chosen node."""
    text = cycle.annotations.get(ANNOTATION_RESERVATION_ALLOCATED, "")
    if text:
        try:
            name = json.loads(text).get("name")
        except (ValueError, AttributeError):
            name = None
        if isinstance(name, str) and name:
            return name
    if cycle.node is None:
        return ""
    r = nominated_reservation(cycle.state, cycle.node)
    return r.name if r is not None else ""


def _candidates(ps: PodState, cycle: PodCycle, taken: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for node, ns in sorted(ps.nodes.items()):
        for r in sorted(ns.matched, key=lambda r: r.name):
            if r.name == taken and node == cycle.node:
                verdict, reason = "nominated", "the pod takes it"
            elif node in cycle.rejected:
                verdict, reason = "rejected", f"node rejected by {cycle.rejected[node]}"
            elif cycle.node is None:
                verdict, reason = "matched", "usable, but the pod was not scheduled"
            elif node != cycle.node:
                verdict, reason = "matched", f"usable, but the pod goes to node {cycle.node}"
            else:
                verdict, reason = "matched", "another reservation on the node was preferred"
            rows.append({"name": r.name, "node": node, "verdict": verdict, "reason": reason})
    for node, diag in sorted(ps.diagnosis.items()):
        for name, why in sorted(diag.rejected.items()):
            rows.append({"name": name, "node": node, "verdict": "unmatched", "reason": why})
    return rows


def _unavailable(plugin: Reservation, pod: PodInfo, ps: PodState) -> list[dict[str, Any]]:
    """Reservations whose owners match the pod but that are not Available (not candidates yet)."""
    seen = {r.name for ns in ps.nodes.values() for r in ns.matched}
    seen |= {name for diag in ps.diagnosis.values() for name in diag.rejected}
    rows = []
    objs, _ = plugin.handle.cluster.list("Reservation")
    for obj in sorted(objs, key=lambda o: str((o.get("metadata") or {}).get("name", ""))):
        try:
            r = parse_reservation(obj, strict=False)
        except ReservationError:
            continue  # the controller reports it; it is no candidate either way
        if r.name in seen or r.is_available or not any(m.matches(pod) for m in r.owners):
            continue
        phase = r.phase or "Pending"
        reason = (
            f"is {phase}, not scheduled yet: only an Available reservation is a candidate"
            if r.is_pending
            else f"is {phase}: only an Available reservation is a candidate"
        )
        rows.append({"name": r.name, "node": r.node_name, "verdict": "unavailable", "reason": reason})
    return rows
