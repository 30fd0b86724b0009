"""Platform conformance: entry point, args (Koordinator's defaults valid, bad values refused, schema), and the
behavioural checks on random clusters whose pending pods are gang members (PodGroups and annotation gangs)."""

from __future__ import annotations

import random
from typing import Any, ClassVar

from koord_plugin_coscheduling import Coscheduling
from koord_plugin_coscheduling.testing import Fit, member, pod_group

from koord_framework.testing import random_cluster
from koord_framework.testing.conformance import SchedulerPluginConformance


class TestConformance(SchedulerPluginConformance):
    plugin_class = Coscheduling
    extra_plugins: ClassVar[list[Any]] = [Fit]
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {},
        {"defaultTimeout": "5m0s", "controllerWorkers": 1, "skipCheckScheduleCycle": False},
        {"defaultTimeout": "30s", "defaultMatchPolicy": "only-waiting", "controllerWorkers": 4},
        {
            "defaultMatchPolicy": "waiting-and-running",
            "enablePreemption": False,
            "awareNetworkTopology": False,
        },
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "CoschedulingArgs", "defaultTimeout": "0s"},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"defaultTimeout": "-1s"},
        {"defaultTimeout": "soon"},
        {"controllerWorkers": 0},
        {"defaultMatchPolicy": "any"},
        {"enablePreemption": True},
        {"awareNetworkTopology": True},
    ]

    def make_objects(self, rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        objects, pending = random_cluster(rng)
        gangs: list[dict[str, Any]] = []
        for g in range(rng.randint(1, 3)):
            size = rng.randint(1, 4)
            objects.append(pod_group(f"gang-{g}", rng.randint(1, size)))
            gangs += [
                member(f"gang-{g}-{k}", f"gang-{g}", cpu=rng.choice(["100m", "1"])) for k in range(size)
            ]
        # The members exist in the cluster (the gang cache counts them) and are asked about as pending pods.
        return [*objects, *gangs], [*pending, *gangs]
