"""Every plugin of the distribution against the platform's scheduler contracts (the framework's conformance
kit): entry point, args accepted and refused as kube-scheduler's validation does, and, for Filter and Score
plugins, per-node and vectorised forms agreeing with scores in range on seeded random clusters."""

from __future__ import annotations

from typing import Any, ClassVar

from koord_plugin_kubernetes.defaultbinder import DefaultBinder
from koord_plugin_kubernetes.defaultprebind import DefaultPreBind
from koord_plugin_kubernetes.defaultpreemption import DefaultPreemption
from koord_plugin_kubernetes.interpodaffinity import InterPodAffinity
from koord_plugin_kubernetes.nodeaffinity import NodeAffinity
from koord_plugin_kubernetes.nodename import NodeName
from koord_plugin_kubernetes.nodeports import NodePorts
from koord_plugin_kubernetes.noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit
from koord_plugin_kubernetes.nodeunschedulable import NodeUnschedulable
from koord_plugin_kubernetes.podtopologyspread import PodTopologySpread
from koord_plugin_kubernetes.queuesort import PrioritySort
from koord_plugin_kubernetes.schedulinggates import SchedulingGates
from koord_plugin_kubernetes.schedulinghint import SchedulingHint
from koord_plugin_kubernetes.tainttoleration import TaintToleration

from koord_framework.testing.conformance import SchedulerPluginConformance


class TestPrioritySort(SchedulerPluginConformance):
    plugin_class = PrioritySort


class TestSchedulingGates(SchedulerPluginConformance):
    plugin_class = SchedulingGates


class TestNodeName(SchedulerPluginConformance):
    plugin_class = NodeName


class TestNodeUnschedulable(SchedulerPluginConformance):
    plugin_class = NodeUnschedulable


class TestNodePorts(SchedulerPluginConformance):
    plugin_class = NodePorts


class TestTaintToleration(SchedulerPluginConformance):
    plugin_class = TaintToleration


ADDED_AFFINITY: dict[str, Any] = {
    "addedAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 5,
                "preference": {
                    "matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}
                    ]
                },
            }
        ]
    }
}


class TestNodeAffinity(SchedulerPluginConformance):
    plugin_class = NodeAffinity
    harness_args: ClassVar[dict[str, Any] | None] = ADDED_AFFINITY
    valid_args: ClassVar[list[dict[str, Any]]] = [{}, ADDED_AFFINITY]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Bad"}]}]
                }
            }
        }
    ]


class TestNodeResourcesFit(SchedulerPluginConformance):
    plugin_class = NodeResourcesFit
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"scoringStrategy": {"type": "MostAllocated"}},
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                },
            }
        },
        {"ignoredResources": ["example.com/foo"], "ignoredResourceGroups": ["example.com"]},
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"scoringStrategy": {"type": "Fastest"}},
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
        {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
        {"ignoredResourceGroups": ["example.com/foo"]},
    ]


class TestNodeResourcesFitMostAllocated(TestNodeResourcesFit):
    harness_args: ClassVar[dict[str, Any] | None] = {"scoringStrategy": {"type": "MostAllocated"}}


class TestNodeResourcesFitRequestedToCapacityRatio(TestNodeResourcesFit):
    harness_args: ClassVar[dict[str, Any] | None] = {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "requestedToCapacityRatio": {
                "shape": [
                    {"utilization": 0, "score": 10},
                    {"utilization": 60, "score": 3},
                    {"utilization": 100, "score": 0},
                ]
            },
        }
    }


class TestNodeResourcesBalancedAllocation(SchedulerPluginConformance):
    plugin_class = NodeResourcesBalancedAllocation
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"resources": [{"name": "cpu", "weight": 2}]},
        {"resources": [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 1}]},
    ]


class TestPodTopologySpread(SchedulerPluginConformance):
    plugin_class = PodTopologySpread
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                }
            ],
        },
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"defaultingType": "Sometimes"},
        {
            "defaultingType": "System",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
            ],
        },
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
            ],
        },
    ]


class TestInterPodAffinity(SchedulerPluginConformance):
    plugin_class = InterPodAffinity
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"hardPodAffinityWeight": 100, "ignorePreferredTermsOfExistingPods": True}
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"hardPodAffinityWeight": 101},
        {"hardPodAffinityWeight": -1},
    ]


class TestDefaultPreemption(SchedulerPluginConformance):
    plugin_class = DefaultPreemption
    valid_args: ClassVar[list[dict[str, Any]]] = [
        {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}
    ]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"minCandidateNodesPercentage": 101},
        {"minCandidateNodesAbsolute": -1},
        {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
    ]


class TestDefaultBinder(SchedulerPluginConformance):
    plugin_class = DefaultBinder


class TestDefaultPreBind(SchedulerPluginConformance):
    plugin_class = DefaultPreBind


class TestSchedulingHint(SchedulerPluginConformance):
    plugin_class = SchedulingHint
    valid_args: ClassVar[list[dict[str, Any]]] = [{"maxHintNodes": 1}]
    invalid_args: ClassVar[list[dict[str, Any]]] = [{"maxHintNodes": 0}, {"maxHintNodes": -5}]
