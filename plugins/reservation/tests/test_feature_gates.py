"""koord-scheduler's gate ``SkipReservationFitsNode`` (Koordinator's ``enableSkipReservationFitsNode``): with
at most one reservation matched on the node, the Reservation Filter leaves the node-level fit to
NodeResourcesFit instead of computing it a second time."""

from __future__ import annotations

from typing import Any

from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.defaultprebind import DefaultPreBind
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.testing import make_reservation

from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

NOW = "2024-01-01T00:00:00Z"
PLUGINS: list[Any] = [Reservation, NodeResourcesFit, DefaultPreBind, DefaultBinder]


def outcome(gates: str) -> tuple[str | None, str, bool]:
    h = SchedulerHarness(PLUGINS, now=NOW, feature_gates=gates)
    h.add(make_node("n1", cpu="4", memory="8Gi"), make_reservation("r1", cpu="3", owner_labels={"app": "a"}))
    h.run_until_idle()
    plugin = h.plugin("Reservation")
    assert isinstance(plugin, Reservation)
    # The owner asks for more than the node has, its reservation given back included.
    h.add(make_pod("owner", cpu="6", memory="1Gi", labels={"app": "a"}))
    h.run_until_idle()
    result = h.result(make_pod("owner"))
    return result.node, result.message, plugin.skip_fits_node


def test_gate_off_reservation_reports_the_node_shortage() -> None:
    node, message, skipped = outcome("")
    assert node is None and not skipped
    assert "Insufficient cpu by node" in message


def test_gate_on_leaves_the_node_fit_to_node_resources_fit() -> None:
    node, message, skipped = outcome("SkipReservationFitsNode=true")
    assert node is None and skipped  # NodeResourcesFit still refuses the node
    assert "by node" not in message
    assert "Insufficient cpu" in message


def test_gate_on_still_places_a_pod_that_fits() -> None:
    h = SchedulerHarness(PLUGINS, now=NOW, feature_gates="SkipReservationFitsNode=true")
    h.add(make_node("n1", cpu="4", memory="8Gi"), make_reservation("r1", cpu="3", owner_labels={"app": "a"}))
    h.run_until_idle()
    h.add(make_pod("owner", cpu="2", memory="1Gi", labels={"app": "a"}))
    h.run_until_idle()
    assert h.result(make_pod("owner")).node == "n1"
