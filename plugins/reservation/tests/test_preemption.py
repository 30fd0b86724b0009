"""Reservations in DefaultPreemption's what-ifs (Koordinator's AddPod/RemovePod, ``preemptibleInRRs``).

An owner pod removed from a node gives its resources back to its reservation, not to the node: a preemptor
that does not match that reservation must not count them as freed, or DefaultPreemption evicts the owner
for nothing (the reservation takes the capacity straight back). A preemptor that matches the reservation
may use them.
"""

from __future__ import annotations

import json
from typing import Any

from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.defaultprebind import DefaultPreBind
from koord_plugin_kubernetes.defaultpreemption import DefaultPreemption
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_kubernetes.queuesort import PrioritySort
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.testing import make_reservation

from koord_framework.errors import NotFoundError
from koord_framework.scheduler.frameworkext import ANNOTATION_RESERVATION_ALLOCATED
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

NOW = "2024-01-01T00:00:00Z"
PLUGINS: list[Any] = [
    PrioritySort,
    Reservation,
    NodeResourcesFit,
    DefaultPreemption,
    DefaultPreBind,
    DefaultBinder,
]


def exists(h: SchedulerHarness, name: str) -> bool:
    try:
        h.cluster.get("Pod", name, "default")
    except NotFoundError:
        return False
    return True


def cluster_with_an_owner() -> SchedulerHarness:
    """n1 (4 cores): reservation r (2 cores, shared) fully used by its owner o1; x (1 core) beside it."""
    h = SchedulerHarness(PLUGINS, now=NOW)
    h.add(
        make_node("n1", cpu="4", memory="8Gi"),
        make_reservation(
            "r", cpu="2", memory="1Gi", owner_labels={"app": "a"}, allocate_once=False, node="n1"
        ),
    )
    h.run_until_idle()
    h.add(make_pod("o1", cpu="2", memory="1Gi", labels={"app": "a"}, priority=0))
    h.add(make_pod("x", cpu="1", memory="1Gi", priority=0))
    h.run_until_idle()
    raw = h.cluster.get("Pod", "o1", "default")["metadata"]["annotations"][ANNOTATION_RESERVATION_ALLOCATED]
    assert json.loads(raw)["name"] == "r"
    assert h.result(make_pod("x")).node == "n1"
    return h


def test_a_preemptor_outside_the_reservation_does_not_evict_its_owner_for_nothing() -> None:
    h = cluster_with_an_owner()
    # Evicting o1 would hand its 2 cores back to r, not to the node: 4 - (r 2 + x 1) < 3 either way.
    h.add(make_pod("hi", cpu="3", memory="1Gi", priority=100))
    h.run_until_idle()
    assert h.result(make_pod("hi")).node is None
    assert exists(h, "o1") and exists(h, "x")


def test_a_preemptor_matching_the_reservation_may_evict_an_owner() -> None:
    h = cluster_with_an_owner()
    # An owner of r gets r's capacity back once o1 is gone: o1 is the victim, x is spared.
    h.add(make_pod("hi", cpu="3", memory="1Gi", labels={"app": "a"}, priority=100))
    h.run_until_idle()
    assert not exists(h, "o1")
    assert exists(h, "x")
    assert h.result(make_pod("hi")).node == "n1"


def test_plain_victims_still_make_room() -> None:
    h = cluster_with_an_owner()
    # 1 core free + x's core = 2: a 2-core preemptor evicts x only, never r's owner.
    h.add(make_pod("hi", cpu="2", memory="1Gi", priority=100))
    h.run_until_idle()
    assert exists(h, "o1") and not exists(h, "x")
    assert h.result(make_pod("hi")).node == "n1"


# --- reservations preempting pods (Koordinator's enablePreemption) -----------------------------------
def full_node(args: dict[str, Any] | None = None) -> SchedulerHarness:
    plugins = [(p, args) if p is Reservation and args else p for p in PLUGINS]
    h = SchedulerHarness(plugins, now=NOW)
    h.add(
        make_node("n1", cpu="4", memory="8Gi"),
        make_pod("low", cpu="3", memory="1Gi", node="n1", phase="Running", priority=0),
        make_reservation("r", cpu="2", memory="1Gi"),
    )
    h.run_until_idle()
    return h


def test_reservations_preempt_only_when_enabled() -> None:
    h = full_node()
    assert exists(h, "low")
    assert (h.cluster.get("Reservation", "r").get("status") or {}).get("phase") in (None, "", "Pending")
    h = full_node({"enablePreemption": True})
    # The reserve pod (priority MaxInt32 by default) evicts the low-priority pod and takes its place.
    assert not exists(h, "low")
    st = h.cluster.get("Reservation", "r")["status"]
    assert (st["phase"], st["nodeName"]) == ("Available", "n1")


def test_a_reservation_with_a_low_priority_label_does_not_preempt() -> None:
    h = SchedulerHarness(
        [(Reservation, {"enablePreemption": True}) if p is Reservation else p for p in PLUGINS], now=NOW
    )
    h.add(
        make_node("n1", cpu="4", memory="8Gi"),
        make_pod("mid", cpu="3", memory="1Gi", node="n1", phase="Running", priority=100),
        make_reservation("r", cpu="2", memory="1Gi", labels={"koordinator.sh/priority": "10"}),
    )
    h.run_until_idle()
    assert exists(h, "mid")


def test_a_preemptor_gets_room_inside_its_restricted_reservation() -> None:
    # Koordinator's preemptibleInRR: evicting an owner of the preemptor's own Restricted reservation frees
    # room inside it (fitsReservation counts the victim out).
    h = SchedulerHarness(PLUGINS, now=NOW)
    h.add(
        make_node("n1", cpu="4", memory="8Gi"),
        make_reservation(
            "r",
            cpu="2",
            memory="1Gi",
            owner_labels={"app": "a"},
            allocate_once=False,
            allocate_policy="Restricted",
            node="n1",
        ),
        make_pod("x", cpu="2", memory="1Gi", node="n1", phase="Running", priority=1000),
    )
    h.run_until_idle()
    h.add(make_pod("o1", cpu="2", memory="1Gi", labels={"app": "a"}, priority=0))
    h.run_until_idle()
    assert h.result(make_pod("o1")).node == "n1"
    # The preemptor must use r (reservation affinity), so only room inside r helps.
    affinity = {"scheduling.koordinator.sh/reservation-affinity": json.dumps({"name": "r"})}
    h.add(make_pod("hi", cpu="2", memory="1Gi", labels={"app": "a"}, annotations=affinity, priority=100))
    h.run_until_idle()
    assert not exists(h, "o1") and exists(h, "x")
    assert h.result(make_pod("hi")).node == "n1"
    raw = h.cluster.get("Pod", "hi", "default")["metadata"]["annotations"][ANNOTATION_RESERVATION_ALLOCATED]
    assert json.loads(raw)["name"] == "r"
