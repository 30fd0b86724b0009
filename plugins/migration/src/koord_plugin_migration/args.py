"""``MigrationControllerArgs`` (``descheduler/v1alpha2``) with Koordinator's defaults and validation."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from koord_framework.api.selectors import SelectorError
from koord_framework.config.common import ConfigModel, Duration, LabelSelector
from koord_framework.descheduler.args import (
    Namespaces,
    PriorityThreshold,
    fail,
    priority_threshold_problems,
    selector_problems,
)
from koord_framework.descheduler.selectors import parse_selector
from koord_framework.plugin import PluginArgs
from koord_plugin_migration.util import IntOrStringError, scaled_value

EvictionGate = Literal[
    "MaxUnavailablePerWorkload",
    "MaxMigratingPerWorkload",
    "MaxMigratingPerNode",
    "MaxMigratingPerNamespace",
    "MaxMigratingGlobally",
    "ExpectedReplicas",
    "PVC",
    "BarePods",
    "LocalStorage",
    "SystemCritical",
    "PriorityThreshold",
    "LabelSelector",
    "Namespaces",
    "NodeFit",
]

MODE_RESERVATION_FIRST = "ReservationFirst"
MODE_EVICT_DIRECTLY = "EvictDirectly"


class MigrationObjectLimiter(ConfigModel):
    """At most ``maxMigrating`` migrations of one object (workload or namespace) per ``duration``."""

    duration: Duration = Duration(0)
    """The time window; 0 disables this limiter."""
    max_migrating: int | str | None = None
    """Migrations allowed per window (a number, or a percentage of the workload's replicas); unset or 0:
    ``maxMigratingPerWorkload`` of the workload."""
    burst: int = 0
    """Migrations allowed at once (0 means 1)."""


class ArbitrationArgs(ConfigModel):
    enabled: bool = True
    """Accepted for compatibility; as in Koordinator, arbitration always runs."""
    interval: Duration = Duration(0.5)
    """How often pending PodMigrationJobs are arbitrated."""


LimiterType = Literal["workload", "namespace"]


def _default_object_limiters() -> dict[LimiterType, MigrationObjectLimiter]:
    return {"workload": MigrationObjectLimiter(duration=Duration(300))}


class MigrationControllerArgs(PluginArgs):
    """Evictions become PodMigrationJobs, throttled per node, namespace and workload, and carried out
    through the Eviction API at a bounded rate."""

    dry_run: bool = False
    """Filter and decide, but create no PodMigrationJob (``evict`` still answers yes)."""
    max_concurrent_reconciles: int = 1
    """Accepted for compatibility (jobs are reconciled one at a time here); must be >= 1."""
    evict_failed_bare_pods: bool = False
    """Pods without ownerReferences may be evicted when Failed."""
    evict_all_bare_pods: bool = False
    """Pods without ownerReferences may be evicted."""
    evict_local_storage_pods: bool = False
    """Pods with hostPath/emptyDir volumes may be evicted."""
    evict_system_critical_pods: bool = False
    """Pods with priority >= 2000000000 may be evicted (and the priority threshold is ignored)."""
    ignore_pvc_pods: bool = False
    """Pods with PersistentVolumeClaims are never evicted."""
    priority_threshold: PriorityThreshold | None = None
    """Only pods below this priority may be evicted (the Filter uses ``value``; PreEvictionFilter also
    resolves ``name``)."""
    label_selector: LabelSelector | None = None
    """Only pods matching this selector may be evicted."""
    namespaces: Namespaces | None = None
    """Namespaces whose pods may (include) or may not (exclude) be migrated."""
    node_fit: bool = False
    """PreEvictionFilter: the pod must fit another Ready node (of ``nodeSelector``)."""
    node_selector: str = ""
    """Label-selector string of the nodes nodeFit considers."""
    skip_eviction_gates: list[EvictionGate] = []
    """Gates, filters and throttles to bypass (MaxMigratingPerNode, ExpectedReplicas, NodeFit, ...)."""
    max_migrating_globally: int | None = None
    """Active migrations allowed in the whole cluster; unset or 0: unlimited."""
    max_migrating_per_node: int | None = 2
    """Active migrations allowed per node (other pods of the node with an active job); 0: unlimited."""
    max_migrating_per_namespace: int | None = None
    """Active migrations allowed per namespace; unset or 0: unlimited."""
    max_migrating_per_workload: int | str | None = None
    """Active migrations allowed per workload: a number or a percentage of its replicas (unset: 1, 2 or
    10% by size)."""
    max_unavailable_per_workload: int | str | None = None
    """Unavailable (not ready or migrating) pods allowed per workload, number or percentage."""
    skip_check_expected_replicas: bool | None = None
    """Allow migrating workloads whose replicas equal maxMigrating/maxUnavailable (or are 1)."""
    object_limiters: dict[LimiterType, MigrationObjectLimiter] = Field(
        default_factory=_default_object_limiters
    )
    """Rate limits per object; default: each workload at most maxMigratingPerWorkload per 5 minutes."""
    default_job_mode: str = MODE_RESERVATION_FIRST
    """``ReservationFirst`` (create a Reservation for the pod, evict once the scheduler placed it, follow the
    replacement into it) or ``EvictDirectly``. A job's ``spec.mode`` overrides it."""
    default_job_ttl: Duration = Field(default=Duration(300), alias="defaultJobTTL")
    """A job not finished within this time fails with reason Timeout (deleting its Reservation); also the
    TTL of the Reservation it creates; 0: no limit."""
    scheduler_names: list[str] = ["koord-scheduler"]
    """ReservationFirst migrates only pods of these schedulers."""
    evict_qps: float | str = Field(default=10.0, alias="evictQPS")
    """Evictions per second (a number or a numeric string, as Koordinator's Float64OrString)."""
    evict_burst: int = 1
    """Evictions allowed at once."""
    eviction_policy: Literal["Eviction", "Delete", "SoftEviction"] = "Eviction"
    """How a pod is removed: the Eviction API (PDBs respected), a plain delete, or the soft-eviction
    annotation for an external agent. A pod or job label ``koordinator.sh/evict-policy`` overrides it."""
    default_delete_options: dict[str, Any] | None = None
    """DeleteOptions passed with every eviction."""
    arbitration_args: ArbitrationArgs = ArbitrationArgs()
    """How often pending jobs are arbitrated (``interval``, default 500ms)."""

    @field_validator("object_limiters", "scheduler_names", mode="before")
    @classmethod
    def _empty_is_default(cls, value: Any, info: Any) -> Any:
        # Koordinator defaults an empty map/list, not only a missing one.
        if value in (None, {}, []):
            return _default_object_limiters() if info.field_name == "object_limiters" else ["koord-scheduler"]
        return value

    @model_validator(mode="after")
    def _validate(self) -> MigrationControllerArgs:
        problems: list[tuple[tuple[str | int, ...], str, Any]] = []
        for name in ("max_migrating_globally", "max_migrating_per_namespace", "max_migrating_per_node"):
            value = getattr(self, name)
            if value is not None and value < 0:
                alias = _camel(name)
                problems.append(((alias,), f"{alias} should be greater or equal 0", value))
        for name in ("max_migrating_per_workload", "max_unavailable_per_workload"):
            value = getattr(self, name)
            if value is not None:
                try:
                    scaled_value(value, 100, True)
                except IntOrStringError as err:
                    alias = _camel(name)
                    problems.append(((alias,), f"{alias} is invalid, err: {err}", value))
        if self.evict_qps_value <= 0:
            problems.append((("evictQPS",), "evictQPS must be greater than 0", self.evict_qps))
        if self.evict_burst <= 0:
            problems.append((("evictBurst",), "evictBurst must be greater than 0", self.evict_burst))
        problems += selector_problems(self.label_selector, ("labelSelector",))
        ns = self.namespaces
        if ns is not None and ns.include and ns.exclude:
            problems.append((("namespaces",), "only one of Include/Exclude namespaces can be set", None))
        if self.max_concurrent_reconciles < 1:
            problems.append(
                (
                    ("maxConcurrentReconciles",),
                    "maxConcurrentReconciles should be greater than or equal to 1",
                    self.max_concurrent_reconciles,
                )
            )
        if self.default_job_mode not in (MODE_RESERVATION_FIRST, MODE_EVICT_DIRECTLY):
            problems.append(
                (
                    ("defaultJobMode",),
                    f"defaultJobMode must be {MODE_RESERVATION_FIRST} or {MODE_EVICT_DIRECTLY}",
                    self.default_job_mode,
                )
            )
        if self.default_job_ttl < 0:
            problems.append(
                (("defaultJobTTL",), "defaultJobTTL should be positive or zero", str(self.default_job_ttl))
            )
        try:
            parse_selector(self.node_selector)
        except SelectorError as err:
            problems.append((("nodeSelector",), str(err), self.node_selector))
        problems += priority_threshold_problems(self.priority_threshold)
        fail("MigrationControllerArgs", problems)
        return self

    @property
    def evict_qps_value(self) -> float:
        """``Float64OrString.FloatValue``: a string that does not parse counts as 0."""
        if isinstance(self.evict_qps, str):
            try:
                return float(self.evict_qps)
            except ValueError:
                return 0.0
        return float(self.evict_qps)

    def skips(self, gate: str) -> bool:
        return gate in self.skip_eviction_gates


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)
