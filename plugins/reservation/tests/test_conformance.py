"""Platform conformance on random clusters with Available and Pending reservations and their owners.

The kit's generic clusters hold no Reservations, which would leave the plugin idle; these do (see
``koord_plugin_reservation.testing.random_reservation_cluster``), so the vectorised Filter and Score are
held to the per-node forms on pods that match reservations, pods pinned to one by name, and pods that
ignore reservations.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

import pytest
from koord_plugin_kubernetes.noderesources import NodeResourcesFit
from koord_plugin_reservation import Reservation
from koord_plugin_reservation.testing import random_reservation_cluster

from koord_framework.testing.conformance import SchedulerPluginConformance
from koord_framework.testing.scheduler import SchedulerHarness

NOW = "2024-01-01T00:00:00Z"


class TestConformance(SchedulerPluginConformance):
    plugin_class = Reservation
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {},
        {"gcDurationSeconds": 3600, "gcIntervalSeconds": 30, "resyncIntervalSeconds": 10},
        {"ignoredResources": ["example.com/gpu"], "ignoredResourceGroups": ["vendor.io"]},
        {"disableGarbageCollection": True, "controllerWorkers": 4, "minCandidateNodesPercentage": 20},
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "ReservationArgs"},
        {"enablePreemption": True, "preAllocationConfig": {"enableClusterMode": True}},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"enablePreemption": "sometimes"},
        {"preAllocationConfig": {"clusterMode": True}},
        {"ignoredResources": ["cpu"]},
        {"ignoredResources": ["hugepages-2Mi"]},
        {"ignoredResourceGroups": ["kubernetes.io"]},
        {"ignoredResourceGroups": ["a/b"]},
        {"minCandidateNodesPercentage": 101},
        {"gcDurationSeconds": -1},
        {"controllerWorkers": 0},
        {"unknownField": 1},
    ]
    extra_plugins: ClassVar[list[Any]] = [NodeResourcesFit]

    def make_harness(self) -> Any:
        return SchedulerHarness([Reservation, NodeResourcesFit], now=NOW)

    def make_objects(self, rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        # Pods pinned by name to a reservation PreFilter may reject outright; the kit scores every pod.
        return random_reservation_cluster(rng, with_affinity=False)


@pytest.mark.parametrize("seed", range(12))
def test_vector_forms_agree_while_reservations_are_consumed(seed: int) -> None:
    """Between scheduling cycles (reservations scheduled, owners consuming them) the vectorised forms keep
    agreeing with the per-node ones, and normalized scores stay in range."""
    h = SchedulerHarness([Reservation, NodeResourcesFit], now=NOW)
    objects, pending = random_reservation_cluster(random.Random(seed), with_affinity=seed % 2 == 0)
    h.add(*objects)
    h.run_until_idle()
    for pod in pending:
        h.check_vector_forms(pod, Reservation.name)
        if "scheduling.koordinator.sh/reservation-affinity" not in (pod["metadata"].get("annotations") or {}):
            for node, score in h.normalized_scores(pod).items():
                assert 0 <= score <= 100, (node, score)
        h.schedule_one(pod)
