"""Tiny fake plugins for config tests: the names Koordinator's ConfigMaps use, with args shaped like theirs.

No real plugins are installed when these tests run, so registries are built with
``PluginRegistry.from_classes`` over classes made here. Each extension point is a one-line ABC carrying
``extension_point``, which is all the config layer reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from koord_framework.plugin import ExtensionPoint, NoArgs, Plugin, PluginArgs
from koord_framework.registry import PluginRegistry


def _point(name: str) -> type[ExtensionPoint]:
    return type(f"{name}Point", (ExtensionPoint,), {"extension_point": name})


SCHEDULER_POINTS = {
    n: _point(n)
    for n in (
        "PreEnqueue",
        "QueueSort",
        "PreFilter",
        "Filter",
        "PostFilter",
        "PreScore",
        "Score",
        "Reserve",
        "Permit",
        "PreBind",
        "Bind",
        "PostBind",
    )
}
DESCHEDULER_POINTS = {n: _point(n) for n in ("Deschedule", "Balance", "Evict", "Filter")}
QOS_POINT = _point("QoSStrategy")
HOOK_POINT = _point("RuntimeHook")


def make_plugin(
    name: str,
    points: Sequence[str],
    args: type[PluginArgs] = NoArgs,
    table: dict[str, type[ExtensionPoint]] | None = None,
) -> type[Plugin]:
    table = SCHEDULER_POINTS if table is None else table
    bases = tuple(table[p] for p in points)
    return type(f"{name}Plugin", (Plugin, *bases), {"name": name, "Args": args})


Percent = Annotated[int, Field(ge=0, le=100)]


class LoadAwareSchedulingArgs(PluginArgs):
    filter_expired_node_metrics: bool = True
    """Filter out nodes whose NodeMetric is older than nodeMetricExpirationSeconds."""
    node_metric_expiration_seconds: int = Field(default=180, gt=0)
    resource_weights: dict[str, int] = {"cpu": 1, "memory": 1}
    usage_thresholds: dict[str, Percent] = {"cpu": 65, "memory": 95}
    """Percent of allocatable above which a node is filtered out."""
    estimated_scaling_factors: dict[str, Percent] = {"cpu": 85, "memory": 70}


class _Camel(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


class ResourceSpec(_Camel):
    name: str
    weight: int = 1


class ScoringStrategy(_Camel):
    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    resources: list[ResourceSpec] = [ResourceSpec(name="cpu"), ResourceSpec(name="memory")]


class NodeResourcesFitArgs(PluginArgs):
    ignored_resources: list[str] = []
    scoring_strategy: ScoringStrategy = ScoringStrategy()


class ElasticQuotaArgs(PluginArgs):
    quota_group_namespace: str = "koordinator-system"
    enable_runtime_quota: bool = True


class Namespaces(_Camel):
    include: list[str] = []
    exclude: list[str] = []


class MigrationControllerArgs(PluginArgs):
    eviction_policy: Literal["Eviction", "Delete", "SoftEviction"] = "Eviction"
    namespaces: Namespaces | None = None
    evict_qps: str | float = Field(default=10.0, alias="evictQPS")
    evict_burst: int = Field(default=1, ge=1)
    max_migrating_per_node: int = 2
    default_job_mode: str = "ReservationFirst"


class LowNodeLoadArgs(PluginArgs):
    evictable_namespaces: Namespaces | None = None
    use_deviation_thresholds: bool = False
    low_thresholds: dict[str, float] = {}
    high_thresholds: dict[str, float] = {}
    node_fit: bool = True


class NeedsTargetArgs(PluginArgs):
    target: str
    """Required, to test plugins whose args have no complete defaults."""


class SortByAgeArgs(PluginArgs):
    oldest_first: bool = True


class BECPUSuppressArgs(PluginArgs):
    cpu_suppress_threshold_percent: Percent = 65


PrioritySort = make_plugin("PrioritySort", ["QueueSort"])
DefaultBinder = make_plugin("DefaultBinder", ["Bind"])
DefaultPreemption = make_plugin("DefaultPreemption", ["PostFilter"])
NodeResourcesFit = make_plugin(
    "NodeResourcesFit", ["PreFilter", "Filter", "PreScore", "Score"], NodeResourcesFitArgs
)
TaintToleration = make_plugin("TaintToleration", ["Filter", "PreScore", "Score"])
NodeAffinity = make_plugin("NodeAffinity", ["PreFilter", "Filter", "PreScore", "Score"])
NodeName = make_plugin("NodeName", ["Filter"])
NodeUnschedulable = make_plugin("NodeUnschedulable", ["Filter"])
LoadAwareScheduling = make_plugin(
    "LoadAwareScheduling", ["Filter", "Score", "Reserve"], LoadAwareSchedulingArgs
)
Coscheduling = make_plugin(
    "Coscheduling",
    [
        "PreEnqueue",
        "QueueSort",
        "PreFilter",
        "PostFilter",
        "PreScore",
        "Score",
        "Reserve",
        "Permit",
        "PreBind",
        "PostBind",
    ],
)
SchedulingHint = make_plugin("SchedulingHint", ["PreFilter"])
Reservation = make_plugin(
    "Reservation", ["PreFilter", "Filter", "PostFilter", "PreScore", "Score", "Reserve", "PreBind", "Bind"]
)
NodeNUMAResource = make_plugin("NodeNUMAResource", ["PreFilter", "Filter", "Score", "Reserve", "PreBind"])
DeviceShare = make_plugin("DeviceShare", ["PreFilter", "Filter", "Score", "Reserve", "PreBind"])
ElasticQuota = make_plugin("ElasticQuota", ["PreFilter", "PostFilter", "Reserve"], ElasticQuotaArgs)
DefaultPreBind = make_plugin("DefaultPreBind", ["PreBind"])
NeedsTarget = make_plugin("NeedsTarget", ["Filter"], NeedsTargetArgs)
SortByAge = make_plugin("SortByAge", ["QueueSort"], SortByAgeArgs)

SCHEDULER_PLUGINS: list[type[Plugin]] = [
    PrioritySort,
    DefaultBinder,
    DefaultPreemption,
    NodeResourcesFit,
    TaintToleration,
    NodeAffinity,
    NodeName,
    NodeUnschedulable,
    LoadAwareScheduling,
    Coscheduling,
    SchedulingHint,
    Reservation,
    NodeNUMAResource,
    DeviceShare,
    ElasticQuota,
    DefaultPreBind,
    NeedsTarget,
    SortByAge,
]

MigrationController = make_plugin(
    "MigrationController", ["Evict", "Filter"], MigrationControllerArgs, DESCHEDULER_POINTS
)
LowNodeLoad = make_plugin("LowNodeLoad", ["Balance"], LowNodeLoadArgs, DESCHEDULER_POINTS)
RemovePodsViolatingNodeAffinity = make_plugin(
    "RemovePodsViolatingNodeAffinity", ["Deschedule"], table=DESCHEDULER_POINTS
)
DefaultEvictor = make_plugin("DefaultEvictor", ["Evict", "Filter"], table=DESCHEDULER_POINTS)

DESCHEDULER_PLUGINS: list[type[Plugin]] = [
    MigrationController,
    LowNodeLoad,
    RemovePodsViolatingNodeAffinity,
    DefaultEvictor,
]

BECPUSuppress = make_plugin("BECPUSuppress", ["QoSStrategy"], BECPUSuppressArgs, {"QoSStrategy": QOS_POINT})
BEMemoryEvict = make_plugin("BEMemoryEvict", ["QoSStrategy"], table={"QoSStrategy": QOS_POINT})
GroupIdentity = make_plugin("GroupIdentity", ["RuntimeHook"], table={"RuntimeHook": HOOK_POINT})
BatchResource = make_plugin("BatchResource", ["RuntimeHook"], table={"RuntimeHook": HOOK_POINT})


def registries() -> dict[str, PluginRegistry]:
    return {
        "scheduler": PluginRegistry.from_classes("scheduler", SCHEDULER_PLUGINS),
        "descheduler": PluginRegistry.from_classes("descheduler", DESCHEDULER_PLUGINS),
        "qos": PluginRegistry.from_classes("qos", [BECPUSuppress, BEMemoryEvict]),
        "runtimehooks": PluginRegistry.from_classes("runtimehooks", [GroupIdentity, BatchResource]),
    }
