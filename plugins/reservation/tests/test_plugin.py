"""Reservation end to end through the scheduler: scheduled like pods, consumed by owners only, expired,
garbage-collected, rebuilt after a restart; bad input named and contained."""

from __future__ import annotations

import json
from typing import Any

from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.defaultprebind import DefaultPreBind
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.testing import make_reservation

from koord_framework.scheduler.frameworkext import ANNOTATION_RESERVATION_ALLOCATED
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

NOW = "2024-01-01T00:00:00Z"
PLUGINS: list[Any] = [Reservation, NodeResourcesFit, DefaultPreBind, DefaultBinder]


def harness(*objects: dict[str, Any], **kwargs: Any) -> SchedulerHarness:
    h = SchedulerHarness(PLUGINS, now=NOW, **kwargs)
    h.add(*objects)
    return h


def status_of(h: SchedulerHarness, name: str) -> dict[str, Any]:
    return dict(h.cluster.get("Reservation", name).get("status") or {})


def node_requested(h: SchedulerHarness, node: str) -> dict[str, int]:
    for ni in h.scheduler.cache.node_infos():
        if ni.name == node:
            return {k: v for k, v in ni.requested.items() if v}
    raise KeyError(node)


def allocated_to(h: SchedulerHarness, pod: str, namespace: str = "default") -> str | None:
    obj = h.cluster.get("Pod", pod, namespace)
    raw = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_RESERVATION_ALLOCATED)
    return json.loads(raw)["name"] if raw else None


def test_reservation_is_scheduled_then_only_its_owner_uses_the_capacity() -> None:
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"), make_reservation("r1", cpu="3", owner_labels={"app": "a"})
    )
    h.run_until_idle()
    st = status_of(h, "r1")
    assert st["phase"] == "Available" and st["nodeName"] == "n1"
    assert node_requested(h, "n1") == {"cpu": 3000, "memory": 1024**3}
    # A pod that is not an owner does not fit into the 1 core left.
    h.add(make_pod("other", cpu="2", memory="1Gi"))
    h.run_until_idle()
    assert h.result(make_pod("other")).node is None
    assert "Insufficient cpu" in h.result(make_pod("other")).message
    # The owner fits: the reservation gives its 3 cores back to it.
    h.add(make_pod("owner", cpu="2", memory="1Gi", labels={"app": "a"}))
    h.run_until_idle()
    assert h.result(make_pod("owner")).node == "n1"
    assert allocated_to(h, "owner") == "r1"
    st = status_of(h, "r1")
    # allocateOnce (the default): consumed once, then Succeeded, and what it held is freed: the other
    # pod, retried on the Reservation's update, now fits beside the owner.
    assert st["phase"] == "Succeeded"
    assert st["currentOwners"][0]["name"] == "owner"
    assert st["allocated"] == {"cpu": "2", "memory": "1Gi"}
    assert h.result(make_pod("other")).node == "n1"
    assert node_requested(h, "n1") == {"cpu": 4000, "memory": 2 * 1024**3}


def test_shared_reservation_serves_several_owners_and_keeps_its_status() -> None:
    h = harness(
        make_node("n1", cpu="8", memory="16Gi"),
        make_reservation(
            "r1", cpu="4", memory="4Gi", owner_labels={"app": "a"}, allocate_once=False, node="n1"
        ),
    )
    for i in range(3):
        h.add(make_pod(f"a{i}", cpu="1", memory="1Gi", labels={"app": "a"}))
    h.run_until_idle()
    assert [allocated_to(h, f"a{i}") for i in range(3)] == ["r1", "r1", "r1"]
    st = status_of(h, "r1")
    assert st["phase"] == "Available"
    assert sorted(o["name"] for o in st["currentOwners"]) == ["a0", "a1", "a2"]
    assert st["allocated"] == {"cpu": "3", "memory": "3Gi"}
    # The node counts the owners plus the 1 core / 1 GiB the reservation still holds: nothing twice.
    assert node_requested(h, "n1") == {"cpu": 4000, "memory": 4 * 1024**3}
    # An owner leaving gives its share back to the reservation.
    h.cluster.delete("Pod", "a1", "default")
    h.run_until_idle()
    st = status_of(h, "r1")
    assert st["allocated"] == {"cpu": "2", "memory": "2Gi"}
    assert node_requested(h, "n1") == {"cpu": 4000, "memory": 4 * 1024**3}


def test_expiry_frees_capacity_and_gc_deletes_later() -> None:
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        make_reservation("r1", cpu="3", owner_labels={"app": "a"}, ttl="10m"),
    )
    h.run_until_idle()
    assert status_of(h, "r1")["phase"] == "Available"
    h.clock.advance(601)
    h.add(make_pod("other", cpu="2", memory="1Gi"))
    h.run_until_idle()
    st = status_of(h, "r1")
    assert st["phase"] == "Failed"
    assert [(c["type"], c["status"], c["reason"]) for c in st["conditions"] if c["type"] == "Ready"] == [
        ("Ready", "False", "Expired")
    ]
    assert h.result(make_pod("other")).node == "n1"
    h.clock.advance(24 * 3600 + 120)
    plugin = h.plugin("Reservation")
    assert isinstance(plugin, Reservation)
    plugin.controller.sync_all()
    assert h.cluster.try_get("Reservation", "r1") is None


def test_restart_rebuilds_the_state_from_the_objects() -> None:
    h = harness(
        make_node("n1", cpu="8", memory="16Gi"),
        make_reservation("r1", cpu="4", memory="4Gi", owner_labels={"app": "a"}, allocate_once=False),
    )
    h.add(make_pod("a0", cpu="1", memory="1Gi", labels={"app": "a"}))
    h.run_until_idle()
    before = node_requested(h, "n1")
    # A new scheduler on the same cluster: nothing carried over but the objects.
    again = SchedulerHarness(PLUGINS, cluster=h.cluster)
    assert node_requested(again, "n1") == before == {"cpu": 4000, "memory": 4 * 1024**3}
    again.add(make_pod("a1", cpu="3", memory="3Gi", labels={"app": "a"}))
    again.add(make_pod("x", cpu="5", memory="1Gi"))
    again.run_until_idle()
    assert allocated_to(again, "a1") == "r1"
    assert again.result(make_pod("x")).node is None  # 4 of the 8 cores are the owners' and r1's


def test_reservation_affinity_by_name_and_reservation_ignored() -> None:
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        make_node("n2", cpu="4", memory="8Gi"),
        make_reservation("ra", cpu="3", owner_labels={"app": "a"}, node="n1", allocate_once=False),
        make_reservation("rb", cpu="3", owner_labels={"app": "a"}, node="n2", allocate_once=False),
    )
    affinity = {"scheduling.koordinator.sh/reservation-affinity": json.dumps({"name": "rb"})}
    h.add(make_pod("pinned", cpu="1", memory="1Gi", labels={"app": "a"}, annotations=affinity))
    h.run_until_idle()
    assert h.result(make_pod("pinned")).node == "n2"
    assert allocated_to(h, "pinned") == "rb"
    missing = {"scheduling.koordinator.sh/reservation-affinity": json.dumps({"name": "nope"})}
    h.add(make_pod("lost", cpu="1", memory="1Gi", labels={"app": "a"}, annotations=missing))
    h.run_until_idle()
    assert "no reservations match reservation affinity" in h.result(make_pod("lost")).message
    h.add(
        make_pod(
            "ignorer", cpu="3", memory="1Gi", labels={"scheduling.koordinator.sh/reservation-ignored": "true"}
        )
    )
    h.run_until_idle()
    assert h.result(make_pod("ignorer")).node in ("n1", "n2")
    assert allocated_to(h, "ignorer") is None


def test_restricted_reservation_holds_the_pod_to_its_size() -> None:
    h = harness(
        make_node("n1", cpu="16", memory="32Gi"),
        make_reservation("r", cpu="2", owner_labels={"app": "a"}, node="n1", allocate_policy="Restricted"),
    )
    # Without affinity the pod may still run on the node's own free capacity, outside the reservation.
    h.add(make_pod("big", cpu="4", memory="1Gi", labels={"app": "a"}))
    h.run_until_idle()
    assert h.result(make_pod("big")).node == "n1"
    assert allocated_to(h, "big") is None
    # Required to come from the reservation, it cannot: the reason names the amounts.
    affinity = {"scheduling.koordinator.sh/reservation-affinity": json.dumps({"name": "r"})}
    h.add(make_pod("bound-to-r", cpu="4", memory="1Gi", labels={"app": "a"}, annotations=affinity))
    h.run_until_idle()
    result = h.result(make_pod("bound-to-r"))
    assert result.node is None
    assert "Reservation(s) Insufficient cpu, requested: 4000, used: 0, capacity: 2000" in result.message


def test_order_label_picks_the_node_of_the_preferred_reservation() -> None:
    h = harness(
        make_node("n1", cpu="8", memory="8Gi"),
        make_node("n2", cpu="8", memory="8Gi"),
        make_reservation("r1", cpu="2", owner_labels={"app": "a"}, node="n1"),
        make_reservation(
            "r2",
            cpu="2",
            owner_labels={"app": "a"},
            node="n2",
            labels={"scheduling.koordinator.sh/reservation-order": "1"},
        ),
    )
    h.add(make_pod("p", cpu="1", memory="1Gi", labels={"app": "a"}))
    h.run_until_idle()
    assert h.result(make_pod("p")).node == "n2"
    assert allocated_to(h, "p") == "r2"


def test_template_node_name_pins_the_reservation() -> None:
    h = harness(
        make_node("n1", cpu="8", memory="8Gi"),
        make_node("n2", cpu="8", memory="8Gi"),
        make_reservation("r", cpu="1", template_node="n2"),
    )
    h.run_until_idle()
    assert status_of(h, "r")["nodeName"] == "n2"


def test_unschedulable_reservation_stays_pending_with_a_reason() -> None:
    h = harness(make_node("n1", cpu="2", memory="8Gi"), make_reservation("huge", cpu="64"))
    h.run_until_idle()
    assert status_of(h, "huge").get("phase") in (None, "", "Pending")
    uid = h.cluster.get("Reservation", "huge")["metadata"]["uid"]
    outcome = h.scheduler.outcomes[uid]
    assert outcome.status == "Unschedulable" and "Insufficient cpu" in outcome.message


def test_default_and_restricted_policies_do_not_share_a_node() -> None:
    h = harness(
        make_node("n1", cpu="8", memory="8Gi"),
        make_reservation("restricted", cpu="1", node="n1", allocate_policy="Restricted"),
        make_reservation("plain", cpu="1", template_node="n1"),
    )
    h.run_until_idle()
    uid = h.cluster.get("Reservation", "plain")["metadata"]["uid"]
    assert "reservation allocate policy conflict" in h.scheduler.outcomes[uid].message


# --- bad input ------------------------------------------------------------------------------------------
def test_invalid_reservation_is_named_and_the_rest_still_schedules() -> None:
    bad_selector = make_reservation(
        "bad", owners=[{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}]
    )
    no_owner = make_reservation("lonely", owners=[])
    no_ttl = make_reservation("forever", ttl=None)
    h = harness(
        make_node("n1", cpu="4", memory="8Gi"),
        bad_selector,
        no_owner,
        no_ttl,
        make_reservation("good", cpu="1"),
    )
    h.add(make_pod("p", cpu="1", memory="1Gi"))
    h.run_until_idle()
    assert status_of(h, "good")["phase"] == "Available"
    assert h.result(make_pod("p")).node == "n1"
    plugin = h.plugin("Reservation")
    assert isinstance(plugin, Reservation)
    errors = {name: str(e) for name, e in plugin.cache.errors.items()}
    assert "spec.owners[0].labelSelector" in errors["bad"] and "reservation bad" in errors["bad"]
    assert "spec.owners" in errors["lonely"]
    assert "spec.ttl" in errors["forever"]
    events = [e for e in h.cluster.events if e.reason == "InvalidReservation"]
    assert {e.name for e in events} >= {"bad", "lonely", "forever"}


def test_malformed_reservation_affinity_fails_only_that_pod() -> None:
    h = harness(make_node("n1", cpu="4", memory="8Gi"), make_reservation("r", cpu="1", node="n1"))
    broken = {"scheduling.koordinator.sh/reservation-affinity": "{not json"}
    h.add(make_pod("broken", cpu="1", memory="1Gi", annotations=broken))
    h.add(make_pod("fine", cpu="1", memory="1Gi"))
    h.run_until_idle()
    message = h.result(make_pod("broken")).message
    assert "pod default/broken" in message
    assert "metadata.annotations[scheduling.koordinator.sh/reservation-affinity]" in message
    assert h.result(make_pod("fine")).node == "n1"


def test_invalid_template_is_rejected_with_its_field() -> None:
    bad = make_reservation("bad-template")
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    h = harness(make_node("n1", cpu="4", memory="8Gi"), bad)
    h.run_until_idle()
    plugin = h.plugin("Reservation")
    assert isinstance(plugin, Reservation)
    assert "spec.template.spec.containers[0].resources.requests" in str(plugin.cache.errors["bad-template"])


def test_unschedulable_reservation_gets_scheduled_false_and_an_event() -> None:
    # Koordinator's reservation failure handler: a FailedScheduling event about the Reservation and
    # SetReservationUnschedulable on its status (the migration controller reads it).
    h = harness(make_node("n1", cpu="2", memory="8Gi"), make_reservation("huge", cpu="64"))
    h.run_until_idle()
    [cond] = [c for c in status_of(h, "huge").get("conditions") or () if c["type"] == "Scheduled"]
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert cond["lastProbeTime"] and cond["lastTransitionTime"]
    [event] = [e for e in h.cluster.event_store.list("default") if e["reason"] == "FailedScheduling"]
    assert event["involvedObject"]["kind"] == "Reservation"
    assert event["involvedObject"]["name"] == "huge"
    assert event["message"] == cond["message"]
    assert status_of(h, "huge").get("phase") in (None, "", "Pending")
